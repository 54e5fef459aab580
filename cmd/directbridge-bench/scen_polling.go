package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"

	"github.com/emersion/go-imap/v2"
)

// Issue 22's polling rows: new mail to IDLE clients of 8, 1,000 and 5,000
// users, and a fetchmail-style session that marks read messages read.

// idleRun is what newMailLatency measured.
type idleRun struct {
	lats     []time.Duration
	timeouts int
	connect  time.Duration
	calls    int    // REST requests while the samples ran
	ops      string // the same per operation
	window   time.Duration
	interval string // directbridge_poll_interval_seconds at the end
}

// newMailLatency connects users IDLE clients (16 at a time), then sends
// samples messages to them (round-robin over the users in random order,
// each user's one after the other, each after a random wait of up to
// gap) by the provider's Send straight to the sandbox (as mail from
// outside arrives), and measures from Send's answer to the EXISTS the
// client read. env is the bridge's.
func newMailLatency(ctx context.Context, b *bench, name string, users, samples int, gap time.Duration, env []string) (idleRun, error) {
	var run idleRun
	rcpts := accounts(name, users)
	sender := account{user: "sender@direct.example", pass: benchPassword}
	sb, err := b.startSandbox(ctx, name+"-sandbox", append(rcpts, sender))
	if err != nil {
		return run, err
	}
	defer sb.stop()
	br, err := b.startBridge(ctx, name+"-bridge", bridgeSpec{apiURL: sb.url, env: env})
	if err != nil {
		return run, err
	}
	defer br.stop()

	xs, connect, err := connectIdlers(ctx, br.imapAddr, rcpts)
	run.connect = connect
	defer closeIdlers(xs)
	if err != nil {
		return run, err
	}
	b.logf("%s: %d idle users connected in %s", name, users, run.connect.Round(time.Second))
	// The logins' and SELECTs' calls are behind; polls run at their pace.
	time.Sleep(5 * time.Second)

	m0, err := br.scrape(ctx)
	if err != nil {
		return run, err
	}
	r := newREST(sb.url)
	// A message a sampled user waits for longer than this counts as lost.
	limit := 3*time.Minute + gap
	// Samples go round-robin to users picked at random; each user waits
	// for its messages one after the other, each sent after a random
	// wait of up to gap.
	rng := rand.New(rand.NewPCG(uint64(users), 22))
	picked := rng.Perm(users)
	perUser := map[int]int{}
	for k := range samples {
		perUser[picked[k%users]]++
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	var sendErr error
	tm := time.Now()
	for i, count := range perUser {
		seed := uint64(i)
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, 23))
			for k := range count {
				select {
				case <-time.After(time.Duration(rng.Int64N(int64(gap) + 1))):
				case <-ctx.Done():
					return
				}
				if err := r.send(ctx, sender, rcpts[i].user, "New result "+strconv.Itoa(k), "A new laboratory result is available."); err != nil {
					mu.Lock()
					sendErr = err
					mu.Unlock()
					return
				}
				accepted := time.Now()
				seen, err := xs[i].waitNew(ctx, limit)
				mu.Lock()
				if err != nil {
					run.timeouts++
					run.lats = append(run.lats, limit)
				} else {
					run.lats = append(run.lats, max(0, seen.Sub(accepted)))
				}
				mu.Unlock()
				if err != nil {
					return
				}
			}
		}()
	}
	wg.Wait()
	run.window = time.Since(tm)
	if sendErr != nil {
		return run, sendErr
	}
	m1, err := br.scrape(ctx)
	if err != nil {
		return run, err
	}
	run.calls, run.ops = restDelta(m0, m1), opsText(m0, m1)
	if v, ok := m1.sums["directbridge_poll_interval_seconds"]; ok {
		run.interval = fmt.Sprintf("%.1f s", v)
	}
	return run, nil
}

func runPolling(ctx context.Context, b *bench, out *outcome) error {
	type idleCase struct {
		row     int
		users   int
		samples int
		gap     time.Duration
		env     []string
		target  time.Duration
		setting string
	}
	cases := []idleCase{
		{0, b.o.idleUsers, b.o.idleSamples, b.o.idleGap, nil, 1500 * time.Millisecond, "default settings, DIRECTBRIDGE_API_RATE_LIMIT=unlimited as on the embedded sandbox"},
		{1, b.o.manyUsers, b.o.pollSamples, b.o.pollGap, []string{"DIRECTBRIDGE_API_RATE_LIMIT=100"}, 10 * time.Second, "DIRECTBRIDGE_API_RATE_LIMIT=100, otherwise default settings"},
		{2, b.o.hugeUsers, b.o.pollSamples, 2 * b.o.pollGap, []string{"DIRECTBRIDGE_API_RATE_LIMIT=100"}, 45 * time.Second, "DIRECTBRIDGE_API_RATE_LIMIT=100, otherwise default settings"},
	}
	for _, c := range cases {
		run, err := newMailLatency(ctx, b, fmt.Sprintf("poll%d", c.users), c.users, c.samples, c.gap, c.env)
		if err != nil {
			out.rows[c.row].measured = "failed: " + oneLine(err.Error())
			out.rows[c.row].met = "no"
			if ctx.Err() != nil {
				return err
			}
			continue
		}
		p50, p95, mx := percentile(run.lats, 0.5), percentile(run.lats, 0.95), percentile(run.lats, 1)
		out.notes = append(out.notes, fmt.Sprintf("Row %d: %d users (a sandbox process; the bridge its own process, %s), each with one go-imap client that SELECTed INBOX and sits in IDLE (connected 16 at a time, in %s); 5 s later they get %d messages by the provider's Send (REST, straight to the sandbox), round-robin over the users in random order, each user's one after the other after a random wait of up to %s. Latency from Send's answer to the EXISTS the client read: p50 %s, p95 %s, max %s; %d never arrived. REST requests in those %s: %d (%.0f/s: %s); poll interval at the end %s.",
			c.row+1, c.users, c.setting, run.connect.Round(time.Second), len(run.lats), c.gap, secs(p50), secs(p95), secs(mx), run.timeouts,
			run.window.Round(time.Second), run.calls, float64(run.calls)/run.window.Seconds(), run.ops, run.interval))
		m := fmt.Sprintf("%s (%d users, %d samples, p50 %s)", secs(p95), c.users, len(run.lats), secs(p50))
		if run.timeouts > 0 {
			m += fmt.Sprintf(", %d never arrived", run.timeouts)
		}
		out.rows[c.row].measured = m
		out.rows[c.row].met = yesNo(p95 <= c.target && run.timeouts == 0)
	}
	return runFetchmail(ctx, b, out, 3)
}

// runFetchmail times a fetchmail-style session over read messages at 20
// ms of added provider latency: LOGIN, SELECT INBOX, the UIDs and flags,
// then `UID STORE n +FLAGS (\Seen)` for each message, one at a time, as
// fetchmail marks each message it downloaded; against Dovecot holding
// the same messages, read as well.
func runFetchmail(ctx context.Context, b *bench, out *outcome, row int) error {
	n, lat := b.o.fetchmailMsgs, 20*time.Millisecond
	s, err := b.seededBridge(ctx, "fetchmail", n, lat)
	defer s.stop()
	if err != nil {
		return err
	}
	markAll := func(addr string) error {
		c, err := dialIMAP(addr, s.acct, nil)
		if err != nil {
			return err
		}
		defer func() { c.Logout().Wait() }()
		if _, err := c.Select("INBOX", nil).Wait(); err != nil {
			return err
		}
		return c.Store(imap.UIDSet{imap.UIDRange{Start: 1, Stop: 0}}, &imap.StoreFlags{Op: imap.StoreFlagsAdd, Silent: true, Flags: []imap.Flag{imap.FlagSeen}}, nil).Close()
	}
	if err := markAll(s.br.imapAddr); err != nil {
		return fmt.Errorf("bridge: marking read: %w", err)
	}
	// A new session, as fetchmail's next run: the mirror stays in memory
	// (the bridge keeps a folder a while after its last session).
	m0, err := s.br.scrape(ctx)
	if err != nil {
		return err
	}
	d, stores, err := fetchmailSession(s.br.imapAddr, s.acct)
	if err != nil {
		return fmt.Errorf("bridge: %w", err)
	}
	m1, err := s.br.scrape(ctx)
	if err != nil {
		return err
	}
	calls := restDelta(m0, m1)
	out.notes = append(out.notes, fmt.Sprintf("Row %d: %d messages seeded into a sandbox process, all marked read first (one `STORE 1:* +FLAGS.SILENT (\\Seen)`); a reverse proxy adds %s to every REST request; the bridge (own process, default settings but DIRECTBRIDGE_API_RATE_LIMIT=unlimited). Then one session, timed from connect: LOGIN, SELECT INBOX, `UID FETCH 1:* (UID FLAGS)`, and `UID STORE n +FLAGS (\\Seen)` for each of the %d messages, one command at a time. Bridge: %s, %d REST calls (%s).",
		row+1, n, lat, stores, secs(d), calls, opsText(m0, m1)))
	measured := fmt.Sprintf("%s, %d calls", secs(d), calls)
	met := yesNo(calls <= 10) + " (calls only)"
	if dv, note := b.dovecotFor(ctx, "fetchmail", s.acct, n); dv == nil {
		measured += " (no Dovecot: " + note + ")"
	} else {
		defer dv.stop()
		if err := markAll(dv.addr); err != nil {
			return fmt.Errorf("dovecot: marking read: %w", err)
		}
		dd, _, err := fetchmailSession(dv.addr, s.acct)
		if err != nil {
			return fmt.Errorf("dovecot: %w", err)
		}
		ratio := d.Seconds() / dd.Seconds()
		out.notes = append(out.notes, fmt.Sprintf("Dovecot %s (private instance, maildir, the same %d messages by IMAP APPEND, marked read the same way): %s for the same session.", dv.version, n, secs(dd)))
		measured = fmt.Sprintf("%.2fx (bridge %s, Dovecot %s), %d calls", ratio, secs(d), secs(dd), calls)
		met = yesNo(ratio <= 1.2 && calls <= 10)
	}
	out.rows[row].measured, out.rows[row].met = measured, met
	return nil
}

// fetchmailSession runs the timed session of runFetchmail and returns its
// time and the number of STOREs, each checked to answer \Seen.
func fetchmailSession(addr string, a account) (time.Duration, int, error) {
	t0 := time.Now()
	c, err := dialIMAP(addr, a, nil)
	if err != nil {
		return 0, 0, err
	}
	defer c.Close()
	if _, err := c.Select("INBOX", nil).Wait(); err != nil {
		return 0, 0, err
	}
	msgs, err := c.Fetch(imap.UIDSet{imap.UIDRange{Start: 1, Stop: 0}}, &imap.FetchOptions{UID: true, Flags: true}).Collect()
	if err != nil {
		return 0, 0, err
	}
	for _, m := range msgs {
		got, err := c.Store(imap.UIDSetNum(m.UID), &imap.StoreFlags{Op: imap.StoreFlagsAdd, Flags: []imap.Flag{imap.FlagSeen}}, nil).Collect()
		if err != nil {
			return 0, 0, fmt.Errorf("UID STORE %d: %w", m.UID, err)
		}
		// Dovecot answers a STORE that changed nothing with no FETCH;
		// the bridge with the flags (RFC 9051 §6.4.6 lets either be).
		if len(got) > 1 || len(got) == 1 && !hasFlag(got[0].Flags, imap.FlagSeen) {
			return 0, 0, fmt.Errorf("UID STORE %d answered %d FETCH, not one with \\Seen", m.UID, len(got))
		}
	}
	d := time.Since(t0)
	c.Logout().Wait()
	return d, len(msgs), nil
}

func hasFlag(fl []imap.Flag, f imap.Flag) bool {
	for _, x := range fl {
		if x == f {
			return true
		}
	}
	return false
}
