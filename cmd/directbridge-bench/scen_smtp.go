package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"
)

// smtpText is a 10 KB plain-text body.
func smtpText() string {
	var b strings.Builder
	for i := 0; b.Len() < 10*1024; i++ {
		b.WriteString(words[i%len(words)])
		if i%12 == 11 {
			b.WriteString("\r\n")
		} else {
			b.WriteByte(' ')
		}
	}
	return b.String()
}

// parallel runs fn(i) for i in 0..n-1 on k goroutines and returns the time
// and the first error.
func parallel(k, n int, fn func(worker, i int) error) (time.Duration, error) {
	var next atomic.Int64
	var firstErr atomic.Pointer[error]
	var wg sync.WaitGroup
	t0 := time.Now()
	for w := 0; w < k; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n || firstErr.Load() != nil {
					return
				}
				if err := fn(w, i); err != nil {
					firstErr.CompareAndSwap(nil, &err)
					return
				}
			}
		}(w)
	}
	wg.Wait()
	if p := firstErr.Load(); p != nil {
		return time.Since(t0), *p
	}
	return time.Since(t0), nil
}

func runSMTP(ctx context.Context, b *bench, out *outcome) error {
	k, n := b.o.smtpClients, b.o.smtpMsgs
	sender := account{user: "sender@direct.example", pass: benchPassword}
	rcpt := account{user: "rcpt@direct.example", pass: benchPassword}
	sb, err := b.startSandbox(ctx, "smtp-sandbox", []account{sender, rcpt})
	if err != nil {
		return err
	}
	defer sb.stop()
	br, err := b.startBridge(ctx, "smtp-bridge", bridgeSpec{apiURL: sb.url})
	if err != nil {
		return err
	}
	defer br.stop()
	r := newREST(sb.url)
	text := smtpText()

	clients := make([]*smtp.Client, k)
	for i := range clients {
		c, err := smtp.Dial(br.smtpAddr)
		if err != nil {
			return fmt.Errorf("smtp dial: %w", err)
		}
		defer c.Close()
		if err := c.Hello("bench.localhost"); err != nil {
			return err
		}
		if err := c.Auth(sasl.NewPlainClient("", sender.user, sender.pass)); err != nil {
			return fmt.Errorf("smtp auth: %w", err)
		}
		clients[i] = c
	}
	viaSMTP := func(w, i int) error {
		c := clients[w]
		if err := c.Mail(sender.user, nil); err != nil {
			return fmt.Errorf("MAIL: %w", err)
		}
		if err := c.Rcpt(rcpt.user, nil); err != nil {
			return fmt.Errorf("RCPT: %w", err)
		}
		d, err := c.Data()
		if err != nil {
			return fmt.Errorf("DATA: %w", err)
		}
		fmt.Fprintf(d, "From: <%s>\r\nTo: <%s>\r\nSubject: Lab report %d\r\nDate: %s\r\nMessage-ID: <smtp-bench-%d-%d@direct.example>\r\nMIME-Version: 1.0\r\nContent-Type: text/plain; charset=us-ascii\r\n\r\n%s",
			sender.user, rcpt.user, i, time.Now().Format(time.RFC1123Z), time.Now().UnixNano(), i, text)
		if err := d.Close(); err != nil {
			return fmt.Errorf("end of DATA: %w", err)
		}
		return nil
	}
	direct := func(w, i int) error {
		return r.send(ctx, sender, rcpt.user, fmt.Sprintf("Lab report %d", i), text)
	}
	// One of each first, so that connections and the bridge's credential
	// check are warm on both sides.
	if _, err := parallel(k, k, direct); err != nil {
		return fmt.Errorf("direct warm-up: %w", err)
	}
	if _, err := parallel(k, k, viaSMTP); err != nil {
		return fmt.Errorf("smtp warm-up: %w", err)
	}
	dDirect, err := parallel(k, n, direct)
	if err != nil {
		return fmt.Errorf("direct Send: %w", err)
	}
	m0, err := br.scrape(ctx)
	if err != nil {
		return err
	}
	dSMTP, err := parallel(k, n, viaSMTP)
	if err != nil {
		return fmt.Errorf("through the bridge: %w", err)
	}
	m1, err := br.scrape(ctx)
	if err != nil {
		return err
	}
	for _, c := range clients {
		c.Quit()
	}
	rateDirect := float64(n) / dDirect.Seconds()
	rateSMTP := float64(n) / dSMTP.Seconds()
	ratio := rateSMTP / rateDirect
	out.notes = append(out.notes,
		"A sandbox process with two mailboxes; a bridge process against it, default settings, no added latency. Each message: 10 KB of plain text, one recipient in the sandbox.",
		fmt.Sprintf("Direct: %d goroutines call the provider's Send (REST) on the sandbox, %d messages in all: %s, %.1f messages/s.", k, n, secs(dDirect), rateDirect),
		fmt.Sprintf("Through the bridge: %d go-smtp clients, each on its own connection, authenticated once (AUTH PLAIN), then MAIL, RCPT, DATA per message, %d messages in all: %s, %.1f messages/s; %d REST calls (%s).", k, n, secs(dSMTP), rateSMTP, restDelta(m0, m1), opsText(m0, m1)),
		"One message each way per client is sent first, untimed, to warm connections and the bridge's credential check.")
	out.rows[0].measured = fmt.Sprintf("%.2fx (bridge %.1f msg/s, direct %.1f msg/s)", ratio, rateSMTP, rateDirect)
	out.rows[0].met = yesNo(ratio >= 0.8)
	return nil
}
