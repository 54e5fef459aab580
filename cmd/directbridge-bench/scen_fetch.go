package main

import (
	"context"
	"fmt"
	"time"

	"github.com/emersion/go-imap/v2/imapclient"
)

// seededBridge starts a sandbox process with one mailbox holding n messages
// in INBOX, optionally a delaying proxy, and a bridge pointed at it.
type seededBridge struct {
	sb    *sandboxProc
	proxy *delayProxy
	br    *bridgeProc
	acct  account
	seed  time.Duration
}

func (s *seededBridge) stop() {
	if s.br != nil {
		s.br.stop()
	}
	s.proxy.close()
	if s.sb != nil {
		s.sb.stop()
	}
}

func (b *bench) seededBridge(ctx context.Context, name string, n int, latency time.Duration, env ...string) (*seededBridge, error) {
	s := &seededBridge{acct: account{user: "reader@direct.example", pass: benchPassword}}
	var err error
	if s.sb, err = b.startSandbox(ctx, name+"-sandbox", []account{s.acct}); err != nil {
		return s, err
	}
	t := time.Now()
	b.logf("%s: seeding %d messages", name, n)
	if err := newREST(s.sb.url).seed(ctx, b.corpus, s.acct, "INBOX", 0, n); err != nil {
		return s, err
	}
	s.seed = time.Since(t)
	api := s.sb.url
	if latency > 0 {
		if s.proxy, err = startDelayProxy(s.sb.url, latency); err != nil {
			return s, err
		}
		api = s.proxy.url
	}
	s.br, err = b.startBridge(ctx, name+"-bridge", bridgeSpec{apiURL: api, env: env})
	return s, err
}

func runOneByOne(ctx context.Context, b *bench, out *outcome) error {
	n := b.o.oneByOneMsgs
	s, err := b.seededBridge(ctx, "onebyone", n, 0)
	defer s.stop()
	if err != nil {
		return err
	}
	out.notes = append(out.notes, fmt.Sprintf("%d messages seeded into INBOX of a sandbox process by SaveRawMessages (%s); the bridge runs as another process pointed at it (DIRECTBRIDGE_API_URL), default settings but DIRECTBRIDGE_API_RATE_LIMIT=unlimited (as on its embedded sandbox), no added latency.", n, secs(s.seed)))
	m0, err := s.br.scrape(ctx)
	if err != nil {
		return err
	}
	f, d, err := timedSession(s.br.imapAddr, s.acct, oneByOne)
	if err != nil {
		return fmt.Errorf("bridge: %w", err)
	}
	m1, err := s.br.scrape(ctx)
	if err != nil {
		return err
	}
	calls := restDelta(m0, m1)
	limit := (n+49)/50 + 2
	out.notes = append(out.notes, fmt.Sprintf("Client (go-imap v2): LOGIN, SELECT INBOX, `UID FETCH 1:* (UID FLAGS RFC822.SIZE)`, then `UID FETCH n (BODY.PEEK[])` for each UID in order, one command at a time; timed from connect to the last body (%d bodies, %.1f MB).", f.msgs, float64(f.bytes)/1e6))
	out.notes = append(out.notes, fmt.Sprintf("Bridge: %s, %d REST calls (%s); target for %d messages: ceil(n/50)+2 = %d calls.", secs(d), calls, opsText(m0, m1), n, limit))

	measured := fmt.Sprintf("%s, %d REST calls", secs(d), calls)
	met := "n/a"
	if dv, note := b.dovecotFor(ctx, "onebyone", s.acct, n); dv == nil {
		out.notes = append(out.notes, "Dovecot: "+note)
		measured += " (no Dovecot: " + note + ")"
		met = yesNo(calls <= limit) + " (calls only)"
	} else {
		defer dv.stop()
		fd, dd, err := timedSession(dv.addr, s.acct, oneByOne)
		if err != nil {
			return fmt.Errorf("dovecot: %w", err)
		}
		ratio := d.Seconds() / dd.Seconds()
		out.notes = append(out.notes, fmt.Sprintf("Dovecot %s (private instance, maildir, filled with the same %d messages by IMAP APPEND): %s for the same client steps (%d bodies, %.1f MB).", dv.version, n, secs(dd), fd.msgs, float64(fd.bytes)/1e6))
		measured = fmt.Sprintf("%.1fx (bridge %s, Dovecot %s), %d calls", ratio, secs(d), secs(dd), calls)
		met = yesNo(ratio <= 1.5 && calls <= limit)
	}
	out.rows[0].measured, out.rows[0].met = measured, met
	return nil
}

func runSync10k(ctx context.Context, b *bench, out *outcome) error {
	n, lat := b.o.sync10kMsgs, b.o.sync10kLatency
	s, err := b.seededBridge(ctx, "sync10k", n, lat)
	defer s.stop()
	if err != nil {
		return err
	}
	d, calls, ops, h, g, err := timeFirstSync(ctx, s, b.o.syncBodies, 0)
	if err != nil {
		return err
	}
	out.notes = append(out.notes,
		fmt.Sprintf("%d messages seeded by SaveRawMessages into a sandbox process (%s); a reverse proxy in the benchmark holds every REST request %s before passing it to the sandbox; the bridge (its own process, default settings but DIRECTBRIDGE_API_RATE_LIMIT=unlimited, as on its embedded sandbox) talks to the proxy.", n, secs(s.seed), lat),
		fmt.Sprintf("Client (go-imap v2), timed from connect: LOGIN, SELECT INBOX, `UID FETCH 1:* (UID FLAGS INTERNALDATE RFC822.SIZE ENVELOPE BODYSTRUCTURE)` (%d answers), then one `UID FETCH` of the newest %d UIDs `(BODY.PEEK[])` (%d bodies, %.1f MB).", h.msgs, b.o.syncBodies, g.msgs, float64(g.bytes)/1e6),
		fmt.Sprintf("%s, %d REST calls (%s).", secs(d), calls, ops))
	out.rows[0].measured = fmt.Sprintf("%s (%d messages, %d bodies, %s added latency), %d REST calls", secs(d), n, g.msgs, lat, calls)
	out.rows[0].met = yesNo(d <= 3*time.Second)
	return nil
}

func runSync50k(ctx context.Context, b *bench, out *outcome) error {
	n := b.o.sync50kMsgs
	s, err := b.seededBridge(ctx, "sync50k", n, 0)
	defer s.stop()
	if err != nil {
		return err
	}
	rss0, _, _ := memStatus(s.br.pid())
	d, calls, ops, h, g, err := timeFirstSync(ctx, s, b.o.syncBodies, 0)
	prefix := ""
	var env []string // the settings the measured bridge ran with
	if err != nil {
		if ctx.Err() != nil {
			return err
		}
		// A provider request over DIRECTBRIDGE_API_TIMEOUT fails the sync;
		// record that, then measure once more with a longer time limit on
		// a fresh bridge (new state directory, same sandbox) so that there
		// is a figure to compare.
		prefix = fmt.Sprintf("failed at default settings after %s (%s); with DIRECTBRIDGE_API_TIMEOUT=10m: ", secs(d), oneLine(err.Error()))
		out.notes = append(out.notes, fmt.Sprintf("At default settings the first sync failed after %s: %s (the bridge's REST requests: %s). Measured again below on a fresh bridge with DIRECTBRIDGE_API_TIMEOUT=10m.", secs(d), oneLine(err.Error()), ops))
		s.br.stop()
		env = []string{"DIRECTBRIDGE_API_TIMEOUT=10m"}
		if s.br, err = b.startBridge(ctx, "sync50k-bridge-longer-timeout", bridgeSpec{apiURL: s.sb.url, env: env}); err != nil {
			return err
		}
		rss0, _, _ = memStatus(s.br.pid())
		if d, calls, ops, h, g, err = timeFirstSync(ctx, s, b.o.syncBodies, 10*time.Minute); err != nil {
			return fmt.Errorf("also with DIRECTBRIDGE_API_TIMEOUT=10m: %w", err)
		}
	}
	time.Sleep(2 * time.Second)
	rss, hwm, err := memStatus(s.br.pid())
	if err != nil {
		return err
	}
	sbRSS, sbHWM, _ := memStatus(s.sb.pid())
	out.notes = append(out.notes,
		fmt.Sprintf("%d messages seeded by SaveRawMessages into a sandbox process (%s); the bridge runs as its own process against it, default settings but DIRECTBRIDGE_API_RATE_LIMIT=unlimited (as on its embedded sandbox), no added latency.", n, secs(s.seed)),
		fmt.Sprintf("Same client steps as scenario 3 (%d summaries, %d bodies, %.1f MB of bodies): %s, %d REST calls (%s).", h.msgs, g.msgs, float64(g.bytes)/1e6, secs(d), calls, ops),
		fmt.Sprintf("Bridge memory from /proc/<pid>/status, 2 s after the sync with the client logged out: VmRSS %s (before the sync %s), peak VmHWM %s. The sandbox process, not counted: VmRSS %s, VmHWM %s.", mib(rss), mib(rss0), mib(hwm), mib(sbRSS), mib(sbHWM)))
	out.rows[0].measured = prefix + fmt.Sprintf("%s; %s (peak %s) (%d messages)", secs(d), mib(rss), mib(hwm), n)
	out.rows[0].met = yesNo(d <= 20*time.Second && rss <= 300e6)
	s.br.stop()
	return thunderbird50k(ctx, b, s, env, out)
}

// thunderbird50k is issue 22's first-sync row: Thunderbird's first sync
// of the same folder on a fresh bridge (new state directory, same
// sandbox: nothing of the earlier sync is kept), against a Dovecot that
// has the same messages as maildir files it has never indexed. env are
// the settings the first sync needed (none, or a longer API timeout).
func thunderbird50k(ctx context.Context, b *bench, s *seededBridge, env []string, out *outcome) error {
	var err error
	if s.br, err = b.startBridge(ctx, "sync50k-thunderbird-bridge", bridgeSpec{apiURL: s.sb.url, env: env}); err != nil {
		return err
	}
	m0, err := s.br.scrape(ctx)
	if err != nil {
		return err
	}
	f, d, err := timedSession(s.br.imapAddr, s.acct, thunderbirdSync)
	if err != nil {
		return fmt.Errorf("thunderbird-style sync through the bridge: %w", err)
	}
	m1, err := s.br.scrape(ctx)
	if err != nil {
		return err
	}
	time.Sleep(2 * time.Second)
	rss, hwm, err := memStatus(s.br.pid())
	if err != nil {
		return err
	}
	s.br.stop()
	out.notes = append(out.notes, fmt.Sprintf("Thunderbird-style first sync (issue 22) on a fresh bridge process, same sandbox: SELECT, `UID FETCH 1:* (FLAGS)`, then the header fields Thunderbird asks for, %d UIDs per command: %d messages, %.1f MB of headers, %s, %d REST calls (%s); VmRSS after %s, peak %s.",
		thunderbirdChunk, f.msgs, float64(f.bytes)/1e6, secs(d), restDelta(m0, m1), opsText(m0, m1), mib(rss), mib(hwm)))
	measured := fmt.Sprintf("bridge %s, %s (peak %s)", secs(d), mib(rss), mib(hwm))
	dv, why := b.coldDovecotFor(ctx, "sync50k", s.acct, b.o.sync50kMsgs)
	if dv == nil {
		out.rows[1].measured = measured + "; Dovecot " + why
		out.rows[1].met = "-"
		return nil
	}
	defer dv.stop()
	fd, dd, err := timedSession(dv.addr, s.acct, thunderbirdSync)
	if err != nil {
		return fmt.Errorf("thunderbird-style sync through Dovecot: %w", err)
	}
	out.notes = append(out.notes, fmt.Sprintf("Cold Dovecot %s: the same messages written as maildir files before it first ran (no index, no cache), the same steps: %d messages, %.1f MB of headers, %s.", dv.version, fd.msgs, float64(fd.bytes)/1e6, secs(dd)))
	ratio := d.Seconds() / dd.Seconds()
	out.rows[1].measured = fmt.Sprintf("%.2fx (%s, Dovecot %s); %s (peak %s)", ratio, "bridge "+secs(d), secs(dd), mib(rss), mib(hwm))
	out.rows[1].met = yesNo(ratio <= 1.5 && rss <= 300e6)
	return nil
}

// timeFirstSync runs firstSync on a new connection and counts REST calls.
// After a failed sync, d is the time until the failure and ops the REST
// requests made until then.
// With limit > 0 the connection is closed when the sync takes longer.
func timeFirstSync(ctx context.Context, s *seededBridge, bodies int, limit time.Duration) (d time.Duration, calls int, ops string, h, g fetched, err error) {
	m0, err := s.br.scrape(ctx)
	if err != nil {
		return
	}
	t0 := time.Now()
	c, err := dialIMAP(s.br.imapAddr, s.acct, nil)
	if err != nil {
		return
	}
	if limit > 0 {
		t := time.AfterFunc(limit, func() { c.Close() })
		defer t.Stop()
	}
	h, g, err = firstSync(c, bodies)
	d = time.Since(t0)
	if limit > 0 && d >= limit {
		err = fmt.Errorf("not finished within %s (%w)", limit, err)
	}
	c.Logout().Wait()
	m1, serr := s.br.scrape(ctx)
	if serr == nil {
		calls, ops = restDelta(m0, m1), opsText(m0, m1)
	}
	if err == nil {
		err = serr
	}
	return
}

// timedSession connects to the IMAP server at addr as a, runs steps, and
// logs out; d is from the connect to the end of steps.
func timedSession(addr string, a account, steps func(*imapclient.Client) (fetched, error)) (f fetched, d time.Duration, err error) {
	t0 := time.Now()
	c, err := dialIMAP(addr, a, nil)
	if err != nil {
		return f, 0, err
	}
	f, err = steps(c)
	d = time.Since(t0)
	c.Logout().Wait()
	return f, d, err
}
