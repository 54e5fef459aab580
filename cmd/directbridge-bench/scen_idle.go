package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"
)

// existsSeen is an EXISTS count and when the client read it.
type existsSeen struct {
	n  uint32
	at time.Time
}

// idler is a client that SELECTed INBOX and sits in IDLE.
type idler struct {
	c      *imapclient.Client
	idle   *imapclient.IdleCommand
	exists chan existsSeen
	count  uint32
}

func startIdler(addr string, a account) (*idler, error) {
	x := &idler{exists: make(chan existsSeen, 64)}
	h := &imapclient.UnilateralDataHandler{Mailbox: func(d *imapclient.UnilateralDataMailbox) {
		if d.NumMessages != nil {
			select {
			case x.exists <- existsSeen{*d.NumMessages, time.Now()}:
			default:
			}
		}
	}}
	c, err := dialIMAP(addr, a, h)
	if err != nil {
		return nil, err
	}
	x.c = c
	sel, err := c.Select("INBOX", nil).Wait()
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("select: %w", err)
	}
	x.count = sel.NumMessages
	if x.idle, err = c.Idle(); err != nil {
		c.Close()
		return nil, fmt.Errorf("idle: %w", err)
	}
	return x, nil
}

// close ends IDLE and logs out (quick: true just drops the connection).
func (x *idler) close(quick bool) {
	if !quick {
		x.idle.Close()
		x.idle.Wait()
		x.c.Logout().Wait()
	}
	x.c.Close()
}

// waitNew waits for an EXISTS above the last count seen.
func (x *idler) waitNew(ctx context.Context, limit time.Duration) (time.Time, error) {
	t := time.NewTimer(limit)
	defer t.Stop()
	for {
		select {
		case e := <-x.exists:
			if e.n > x.count {
				x.count = e.n
				return e.at, nil
			}
		case <-t.C:
			return time.Time{}, fmt.Errorf("no EXISTS within %s", limit)
		case <-ctx.Done():
			return time.Time{}, ctx.Err()
		case <-x.c.Closed():
			return time.Time{}, fmt.Errorf("connection closed by the bridge")
		}
	}
}

func runIdle(ctx context.Context, b *bench, out *outcome) error {
	k, total := b.o.idleUsers, b.o.idleSamples
	rcpts := accounts("idle", k)
	sender := account{user: "sender@direct.example", pass: benchPassword}
	sb, err := b.startSandbox(ctx, "idle-sandbox", append(rcpts, sender))
	if err != nil {
		return err
	}
	defer sb.stop()
	var env []string
	poll := 30 * time.Second
	pollText := "the bridge's default poll interval"
	if b.o.idlePoll != "" {
		env = append(env, "DIRECTBRIDGE_POLL_INTERVAL="+b.o.idlePoll)
		if d, err := time.ParseDuration(b.o.idlePoll); err == nil {
			poll = d
		}
		pollText = "DIRECTBRIDGE_POLL_INTERVAL=" + b.o.idlePoll
	}
	br, err := b.startBridge(ctx, "idle-bridge", bridgeSpec{apiURL: sb.url, env: env})
	if err != nil {
		return err
	}
	defer br.stop()
	r := newREST(sb.url)
	limit := 3*poll + 30*time.Second

	var mu sync.Mutex
	var lats []time.Duration
	var timeouts int
	var firstErr error
	var wg sync.WaitGroup
	t0 := time.Now()
	for i, a := range rcpts {
		share := total / k
		if i < total%k {
			share++
		}
		wg.Add(1)
		go func(i int, a account, share int) {
			defer wg.Done()
			fail := func(err error) {
				mu.Lock()
				if firstErr == nil {
					firstErr = fmt.Errorf("%s: %w", a.user, err)
				}
				mu.Unlock()
			}
			x, err := startIdler(br.imapAddr, a)
			if err != nil {
				fail(err)
				return
			}
			defer x.close(false)
			rng := rand.New(rand.NewPCG(uint64(i), 99))
			for s := 0; s < share; s++ {
				select {
				case <-time.After(time.Duration(rng.Int64N(int64(b.o.idleGap) + 1))):
				case <-ctx.Done():
					return
				}
				if err := r.send(ctx, sender, a.user, "New result "+strconv.Itoa(s), "A new laboratory result is available."); err != nil {
					fail(err)
					return
				}
				accepted := time.Now()
				seen, err := x.waitNew(ctx, limit)
				mu.Lock()
				if err != nil {
					timeouts++
					lats = append(lats, limit)
				} else {
					lats = append(lats, max(0, seen.Sub(accepted)))
				}
				mu.Unlock()
				if err != nil && ctx.Err() != nil {
					return
				}
			}
		}(i, a, share)
	}
	wg.Wait()
	if firstErr != nil {
		return firstErr
	}
	p50, p95, mx := percentile(lats, 0.5), percentile(lats, 0.95), percentile(lats, 1)
	out.notes = append(out.notes,
		fmt.Sprintf("%d users, each with one go-imap client that SELECTed INBOX and sits in IDLE, on a bridge process (%s, otherwise default settings) against a sandbox process (DIRECTBRIDGE_API_RATE_LIMIT=unlimited, as on the embedded sandbox), no added latency.", k, pollText),
		fmt.Sprintf("%d messages in all, each sent to one of them by the provider's Send (REST, straight to the sandbox, as mail from outside arrives) after a random wait of 0-%s; latency = from Send's answer to the EXISTS the client read. %d samples in %s.", total, b.o.idleGap, len(lats), time.Since(t0).Round(time.Second)),
		fmt.Sprintf("p50 %s, p95 %s, max %s; %d samples saw no EXISTS within %s (counted as %s).", secs(p50), secs(p95), secs(mx), timeouts, limit, limit))
	m := secs(p95)
	if timeouts > 0 {
		m += fmt.Sprintf(" (%d of %d never arrived)", timeouts, len(lats))
	}
	out.rows[0].measured = m + fmt.Sprintf(" (%d samples; %s)", len(lats), pollText)
	out.rows[0].met = yesNo(p95 <= 10*time.Second && timeouts == 0)
	return nil
}

func runManyIdle(ctx context.Context, b *bench, out *outcome) error {
	n, lat, samples := b.o.manyUsers, b.o.manyLatency, b.o.manySamples
	idlers := accounts("idle", n)
	active := account{user: "active@direct.example", pass: benchPassword}
	sb, err := b.startSandbox(ctx, "manyidle-sandbox", append(idlers, active))
	if err != nil {
		return err
	}
	defer sb.stop()
	if err := newREST(sb.url).seed(ctx, b.corpus, active, "INBOX", 0, samples+20); err != nil {
		return err
	}
	px, err := startDelayProxy(sb.url, lat)
	if err != nil {
		return err
	}
	defer px.close()
	br, err := b.startBridge(ctx, "manyidle-bridge", bridgeSpec{apiURL: px.url, env: []string{"DIRECTBRIDGE_API_RATE_LIMIT=100"}})
	if err != nil {
		return err
	}
	defer br.stop()

	// Connect the idle users, 16 at a time.
	xs, connectTime, err := connectIdlers(ctx, br.imapAddr, idlers)
	defer closeIdlers(xs)
	if err != nil {
		return err
	}
	b.logf("manyidle: %d idle users connected in %s", n, connectTime.Round(time.Second))
	time.Sleep(5 * time.Second)

	m0, err := br.scrape(ctx)
	if err != nil {
		return err
	}
	c, err := dialIMAP(br.imapAddr, active, nil)
	if err != nil {
		return err
	}
	defer func() { c.Logout().Wait() }()
	if _, err := c.Select("INBOX", nil).Wait(); err != nil {
		return fmt.Errorf("active select: %w", err)
	}
	list, err := drainFetch(c.Fetch(imap.UIDSet{imap.UIDRange{Start: 1, Stop: 0}}, &imap.FetchOptions{UID: true}))
	if err != nil {
		return err
	}
	uids := list.uids
	rand.New(rand.NewPCG(5, 5)).Shuffle(len(uids), func(i, j int) { uids[i], uids[j] = uids[j], uids[i] })
	if len(uids) > samples {
		uids = uids[:samples]
	}
	tm := time.Now()
	var lats []time.Duration
	for _, uid := range uids {
		t := time.Now()
		f, err := drainFetch(c.Fetch(imap.UIDSetNum(uid), &imap.FetchOptions{UID: true, BodySection: []*imap.FetchItemBodySection{{}}}))
		if err != nil {
			return fmt.Errorf("active fetch: %w", err)
		}
		if f.msgs != 1 || f.bytes == 0 {
			return fmt.Errorf("active fetch of uid %d: %d messages, %d bytes", uid, f.msgs, f.bytes)
		}
		lats = append(lats, time.Since(t))
		time.Sleep(200 * time.Millisecond)
	}
	window := time.Since(tm)
	m1, err := br.scrape(ctx)
	if err != nil {
		return err
	}
	p50, p99, mx := percentile(lats, 0.5), percentile(lats, 0.99), percentile(lats, 1)
	rt := p99.Seconds() / lat.Seconds()
	out.notes = append(out.notes,
		fmt.Sprintf("A sandbox process with %d idle mailboxes and one active one (%d messages); a reverse proxy adds %s to every REST request; the bridge runs with DIRECTBRIDGE_API_RATE_LIMIT=100, otherwise default settings.", n, samples+20, lat),
		fmt.Sprintf("%d go-imap clients, one per idle user, LOGIN, SELECT INBOX and IDLE (16 connecting at a time: all connected in %s); 5 s later the active user SELECTs INBOX and fetches %d messages in random order, each once, `UID FETCH n (BODY[])` (not PEEK, so the bridge also sets \\Seen, as a mail client reading a message does), one every 200 ms plus the fetch time.", n, connectTime.Round(time.Second), len(lats)),
		fmt.Sprintf("Active user's fetch latency: p50 %s, p99 %s, max %s; p99 = %.1f provider round trips of %s.", secs(p50), secs(p99), secs(mx), rt, lat),
		fmt.Sprintf("REST requests during the %s measuring window: %d (%.0f/s) (%s).", window.Round(time.Second), restDelta(m0, m1), float64(restDelta(m0, m1))/window.Seconds(), opsText(m0, m1)))
	out.rows[0].measured = fmt.Sprintf("%.1f round trips (p99 %s at %s added latency; %d idle users, %d fetches)", rt, secs(p99), lat, n, len(lats))
	out.rows[0].met = yesNo(rt <= 3)
	return nil
}

// connectIdlers starts an idler for each account, 16 connecting at a
// time, and returns them (nil where one failed), how long it took, and an
// error naming how many failed and the first reason. closeIdlers drops
// them all.
func connectIdlers(ctx context.Context, addr string, accts []account) ([]*idler, time.Duration, error) {
	t0 := time.Now()
	xs := make([]*idler, len(accts))
	var failed atomic.Int32
	var firstErr atomic.Pointer[error]
	var next atomic.Int64
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= len(accts) || ctx.Err() != nil {
					return
				}
				x, err := startIdler(addr, accts[i])
				if err != nil {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, &err)
					continue
				}
				xs[i] = x
			}
		}()
	}
	wg.Wait()
	if f := failed.Load(); f > 0 {
		return xs, time.Since(t0), fmt.Errorf("%d of %d idle users could not connect, first: %w", f, len(accts), *firstErr.Load())
	}
	return xs, time.Since(t0), ctx.Err()
}

// closeIdlers drops the connections of xs at once.
func closeIdlers(xs []*idler) {
	var wg sync.WaitGroup
	for _, x := range xs {
		if x != nil {
			wg.Add(1)
			go func() { defer wg.Done(); x.close(true) }()
		}
	}
	wg.Wait()
}
