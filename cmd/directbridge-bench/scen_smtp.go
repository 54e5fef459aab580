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

// smtpText is a plain-text body of about size bytes.
func smtpText(size int) string {
	var b strings.Builder
	b.Grow(size + 64)
	for i := 0; b.Len() < size; i++ {
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
	m, err := measureSMTP(ctx, b, "smtp", b.o.smtpClients, 10*1024, b.o.smtpMsgs)
	if err != nil {
		return err
	}
	out.notes = append(out.notes,
		"A sandbox process with two mailboxes; a bridge process against it, default settings, no added latency. Each message: 10 KB of plain text, one recipient in the sandbox.",
		fmt.Sprintf("Direct: %d goroutines call the provider's Send (REST) on a sandbox of their own, as fresh as the bridge's, %d messages in all: %s, %.1f messages/s.", m.clients, m.n, secs(m.dDirect), m.rateDirect()),
		fmt.Sprintf("Through the bridge: %d go-smtp clients, each on its own connection, authenticated once (AUTH PLAIN), then MAIL, RCPT, DATA per message, %d messages in all: %s, %.1f messages/s; %d REST calls (%s).", m.clients, m.n, secs(m.dSMTP), m.rateSMTP(), m.calls, m.ops),
		"One message each way per client is sent first, untimed, to warm connections and the bridge's credential check.")
	out.rows[0].measured = fmt.Sprintf("%.2fx (bridge %.1f msg/s, direct %.1f msg/s)", m.ratio(), m.rateSMTP(), m.rateDirect())
	out.rows[0].met = yesNo(m.ratio() >= 0.8)
	return nil
}

// smtpRun is one measureSMTP.
type smtpRun struct {
	clients, size, n int
	dDirect, dSMTP   time.Duration
	calls            int
	ops              string
}

func (m smtpRun) rateDirect() float64 { return float64(m.n) / m.dDirect.Seconds() }
func (m smtpRun) rateSMTP() float64   { return float64(m.n) / m.dSMTP.Seconds() }
func (m smtpRun) ratio() float64      { return m.rateSMTP() / m.rateDirect() }

// runSMTPSizes measures SMTP against direct Send at 1, 4 and 16 clients,
// with 10 KB and 1 MB messages (issue 22), each on a fresh sandbox and
// bridge.
func runSMTPSizes(ctx context.Context, b *bench, out *outcome) error {
	row := 0
	for _, size := range []int{10 * 1024, 1 << 20} {
		for _, k := range []int{1, 4, 16} {
			n := b.o.smtpMsgs
			if size > 100*1024 {
				n = max(k, b.o.smtpMsgs/10)
			}
			m, err := measureSMTP(ctx, b, fmt.Sprintf("smtp%d-%d", k, size), k, size, n)
			if err != nil {
				out.rows[row].measured, out.rows[row].met = "failed: "+oneLine(err.Error()), "no"
				if ctx.Err() != nil {
					return err
				}
			} else {
				out.rows[row].measured = fmt.Sprintf("%.2fx (bridge %.1f msg/s, direct %.1f msg/s, %d messages)", m.ratio(), m.rateSMTP(), m.rateDirect(), m.n)
				out.rows[row].met = yesNo(m.ratio() >= 0.85)
			}
			row++
		}
	}
	out.notes = append(out.notes, fmt.Sprintf("Each row: a sandbox process and a bridge process against it (default settings, no added latency); plain-text messages of the size named, one recipient. Direct: that many goroutines call Send (REST) on another sandbox process, as fresh (a sandbox slows as its database grows); through the bridge: that many go-smtp clients, each on its own connection, authenticated once, MAIL, RCPT, DATA per message. %d messages of 10 KB, %d of 1 MB (at least one per client) each way; one per client each way first, untimed.", b.o.smtpMsgs, max(1, b.o.smtpMsgs/10)))
	return nil
}

// measureSMTP sends n messages of size bytes through k SMTP clients and
// by k direct Send callers, on a sandbox and bridge of their own.
func measureSMTP(ctx context.Context, b *bench, name string, k, size, n int) (smtpRun, error) {
	m := smtpRun{clients: k, size: size, n: n}
	sender := account{user: "sender@direct.example", pass: benchPassword}
	rcpt := account{user: "rcpt@direct.example", pass: benchPassword}
	sb, err := b.startSandbox(ctx, name+"-sandbox", []account{sender, rcpt})
	if err != nil {
		return m, err
	}
	defer sb.stop()
	br, err := b.startBridge(ctx, name+"-bridge", bridgeSpec{apiURL: sb.url})
	if err != nil {
		return m, err
	}
	defer br.stop()
	// Direct Send gets a sandbox of its own, as fresh as the bridge's: the
	// sandbox slows as its database grows (every send stores two
	// messages), and the side measured second on a shared one would pay
	// for the first side's messages.
	sbDirect, err := b.startSandbox(ctx, name+"-direct-sandbox", []account{sender, rcpt})
	if err != nil {
		return m, err
	}
	defer sbDirect.stop()
	r := newREST(sbDirect.url)
	text := smtpText(size)
	clients := make([]*smtp.Client, k)
	for i := range clients {
		c, err := smtp.Dial(br.smtpAddr)
		if err != nil {
			return m, fmt.Errorf("smtp dial: %w", err)
		}
		defer c.Close()
		if err := c.Hello("bench.localhost"); err != nil {
			return m, err
		}
		if err := c.Auth(sasl.NewPlainClient("", sender.user, sender.pass)); err != nil {
			return m, fmt.Errorf("smtp auth: %w", err)
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
		return m, fmt.Errorf("direct warm-up: %w", err)
	}
	if _, err := parallel(k, k, viaSMTP); err != nil {
		return m, fmt.Errorf("smtp warm-up: %w", err)
	}
	dDirect, err := parallel(k, n, direct)
	if err != nil {
		return m, fmt.Errorf("direct Send: %w", err)
	}
	m0, err := br.scrape(ctx)
	if err != nil {
		return m, err
	}
	dSMTP, err := parallel(k, n, viaSMTP)
	if err != nil {
		return m, fmt.Errorf("through the bridge: %w", err)
	}
	m1, err := br.scrape(ctx)
	if err != nil {
		return m, err
	}
	for _, c := range clients {
		c.Quit()
	}
	m.dDirect, m.dSMTP = dDirect, dSMTP
	m.calls, m.ops = restDelta(m0, m1), opsText(m0, m1)
	return m, nil
}
