package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"
	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"

	"github.com/directbridge/directbridge/restclient"
	"github.com/directbridge/directbridge/upstream/directapi"
)

// The replicas scenario (issue 21): two bridge processes on one
// PostgreSQL state store behind HAProxy (deploy/haproxy.cfg), one sandbox
// process as the provider, all on this machine. The replicas listen on
// 127.0.0.2 and 127.0.0.3 and the balancer on 127.0.0.1, on the same
// ports; the replicas take PROXY headers from 127.0.0.1, so the bench
// reaches a replica directly from 127.0.0.5.

// replicaSet is the sandbox, two replicas and the balancer.
type replicaSet struct {
	b       *bench
	name    string
	url     string // PostgreSQL
	sandbox *sandboxProc
	env     []string
	ports   [3]string // IMAP, SMTP, metrics, on every host
	reps    [2]*bridgeProc
	lb      *proc
	lbPorts [4]string // IMAP, IMAPS, SMTP, SMTPS
	// peerPort is where each replica gives the others the messages it
	// holds (DIRECTBRIDGE_PEER_ADDR), on its own host.
	peerPort string
}

var replicaHosts = [2]string{"127.0.0.2", "127.0.0.3"}

// freeSharedPort is a port free on 127.0.0.1 and both replica hosts.
func freeSharedPort() (string, error) {
	for range 50 {
		a, err := freeAddr()
		if err != nil {
			return "", err
		}
		_, port, _ := net.SplitHostPort(a)
		ok := true
		for _, h := range replicaHosts {
			l, err := net.Listen("tcp", net.JoinHostPort(h, port))
			if err != nil {
				ok = false
				break
			}
			l.Close()
		}
		if ok {
			return port, nil
		}
	}
	return "", errors.New("no port free on 127.0.0.1-3")
}

// startReplicaSet starts the sandbox (with accts), the two replicas on
// the database url (env added to theirs) and the balancer.
func (b *bench) startReplicaSet(ctx context.Context, name, url string, accts []account, env []string) (*replicaSet, error) {
	hap, err := exec.LookPath("haproxy")
	if err != nil {
		return nil, errors.New("haproxy is not installed (apt-get install haproxy)")
	}
	rs := &replicaSet{b: b, name: name, url: url}
	for i := range rs.ports {
		if rs.ports[i], err = freeSharedPort(); err != nil {
			return nil, err
		}
	}
	for i := range rs.lbPorts {
		if i == 0 || i == 2 {
			rs.lbPorts[i] = rs.ports[i/2]
			continue
		}
		if rs.lbPorts[i], err = freeSharedPort(); err != nil {
			return nil, err
		}
	}
	if rs.peerPort, err = freeSharedPort(); err != nil {
		return nil, err
	}
	if rs.sandbox, err = b.startSandbox(ctx, name+"-sandbox", accts); err != nil {
		return nil, err
	}
	key := make([]byte, 32)
	rand.Read(key)
	rs.env = append([]string{"DIRECTBRIDGE_STATE_URL=" + url, "DIRECTBRIDGE_JOURNAL_KEY=" + hex.EncodeToString(key),
		"DIRECTBRIDGE_PROXY_PROTOCOL_FROM=127.0.0.1"}, env...)
	for i := range rs.reps {
		if err := rs.startReplica(ctx, i); err != nil {
			rs.stop()
			return nil, err
		}
	}
	cfg := filepath.Join(b.root, "deploy", "haproxy.cfg")
	// leastconn: the bench's clients all come from 127.0.0.1, which the
	// default (source) would send to one replica.
	rs.lb, err = b.startProgram(name+"-haproxy", []string{"LB_BALANCE=leastconn", "LB_BIND=127.0.0.1", "LB_REPLICA1=" + replicaHosts[0], "LB_REPLICA2=" + replicaHosts[1],
		"LB_IMAP_PORT=" + rs.lbPorts[0], "LB_IMAPS_PORT=" + rs.lbPorts[1], "LB_SMTP_PORT=" + rs.lbPorts[2], "LB_SMTPS_PORT=" + rs.lbPorts[3],
		"LB_CHECK_PORT=" + rs.ports[2]}, hap, "-f", cfg, "-db")
	if err != nil {
		rs.stop()
		return nil, err
	}
	if err := waitListening(ctx, rs.lb, rs.lbIMAP(), "* OK", 30*time.Second); err != nil {
		rs.stop()
		return nil, err
	}
	return rs, nil
}

func (rs *replicaSet) lbIMAP() string { return "127.0.0.1:" + rs.lbPorts[0] }
func (rs *replicaSet) lbSMTP() string { return "127.0.0.1:" + rs.lbPorts[2] }

// startReplica starts replica i and waits for its /readyz.
func (rs *replicaSet) startReplica(ctx context.Context, i int) error {
	br, err := rs.b.startBridge(ctx, fmt.Sprintf("%s-replica%d-%d", rs.name, i+1, time.Now().UnixNano()%1e6),
		bridgeSpec{apiURL: rs.sandbox.url, env: append(slices.Clip(rs.env), "DIRECTBRIDGE_PEER_ADDR="+net.JoinHostPort(replicaHosts[i], rs.peerPort)),
			host: replicaHosts[i], ports: rs.ports})
	if err != nil {
		return err
	}
	rs.reps[i] = br
	ready := "http://" + net.JoinHostPort(replicaHosts[i], rs.ports[2]) + "/readyz"
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if resp, err := http.Get(ready); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("replica %d not ready within 60 s (log %s)", i+1, br.log)
		}
	}
}

// direct is replica i's IMAP address, reached from 127.0.0.5.
func (rs *replicaSet) direct(i int) string { return net.JoinHostPort(replicaHosts[i], rs.ports[0]) }

func (rs *replicaSet) stop() {
	if rs.lb != nil {
		rs.lb.cmd.Process.Kill()
		<-rs.lb.done
	}
	for _, r := range rs.reps {
		if r != nil {
			r.stop()
		}
	}
	if rs.sandbox != nil {
		rs.sandbox.stop()
	}
}

// calls is the provider calls both replicas made so far (their metrics).
func (rs *replicaSet) calls(ctx context.Context) (float64, error) {
	total := 0.0
	for _, r := range rs.reps {
		if r == nil {
			continue
		}
		select {
		case <-r.done:
			continue
		default:
		}
		m, err := r.scrape(ctx)
		if err != nil {
			return 0, err
		}
		total += m.sums[metricREST]
	}
	return total, nil
}

// dialInbox is dialFrom with INBOX selected.
func dialInbox(addr string, a account, h *imapclient.UnilateralDataHandler) (*imapclient.Client, error) {
	c, err := dialFrom(addr, a, h)
	if err != nil {
		return nil, err
	}
	if _, err := c.Select("INBOX", nil).Wait(); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// dialFrom logs a in at addr (plain IMAP) from 127.0.0.5: a replica takes
// connections from 127.0.0.1 only with a PROXY header.
func dialFrom(addr string, a account, h *imapclient.UnilateralDataHandler) (*imapclient.Client, error) {
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 5)}, Timeout: 10 * time.Second}
	conn, err := d.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	c := imapclient.New(conn, &imapclient.Options{UnilateralDataHandler: h})
	if err := c.Login(a.user, a.pass).Wait(); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

func runReplicas(ctx context.Context, b *bench, out *outcome) error {
	if b.o.quick {
		out.notes = append(out.notes, "Not run (-quick).")
		for i := range out.rows {
			out.rows[i].measured = "not run"
		}
		return nil
	}
	pg, err := b.startPostgres(ctx)
	if err != nil {
		out.notes = append(out.notes, "Not run: "+err.Error())
		for i := range out.rows {
			out.rows[i].measured = "not run (no PostgreSQL)"
		}
		return nil
	}
	defer pg.stop()
	if _, err := exec.LookPath("haproxy"); err != nil {
		out.notes = append(out.notes, "Not run: haproxy is not installed.")
		for i := range out.rows {
			out.rows[i].measured = "not run (no haproxy)"
		}
		return nil
	}
	parts := []struct {
		name string
		run  func(context.Context, *bench, *pgServer, *outcome) error
	}{
		{"idle", replicasIdle}, {"calls", replicasCalls}, {"kill", replicasKill}, {"copy", replicasCopy}, {"imaptest", replicasImaptest},
	}
	for _, p := range parts {
		if !slices.Contains(strings.Split(b.o.replicaParts, ","), p.name) {
			continue
		}
		if err := p.run(ctx, b, pg, out); err != nil {
			return err
		}
	}
	for i := range out.rows {
		if out.rows[i].measured == "" {
			out.rows[i].measured = "not run (-replicas-parts)"
		}
	}
	return nil
}

// replicasIdle: a change through replica A seen by an IDLE client on
// replica B (row 0), with B's provider calls meanwhile. Polls are a minute
// apart: only the replicas' messages can bring the change.
func replicasIdle(ctx context.Context, b *bench, pg *pgServer, out *outcome) error {
	url, err := pg.database(ctx)
	if err != nil {
		return err
	}
	u := account{user: "idle@direct.example", pass: benchPassword}
	// The director off: with it, both clients of the one user would be
	// served by her home, and the change would not travel between
	// replicas at all. This measures what it does when it must (a user
	// whose sessions a membership change left on two replicas, or a
	// cluster run with DIRECTBRIDGE_DIRECTOR=false).
	rs, err := b.startReplicaSet(ctx, "replicas-idle", url, []account{u}, []string{"DIRECTBRIDGE_POLL_INTERVAL=60s", "DIRECTBRIDGE_DIRECTOR=false"})
	if err != nil {
		return err
	}
	defer rs.stop()
	exists := make(chan time.Time, 64)
	h := &imapclient.UnilateralDataHandler{Mailbox: func(d *imapclient.UnilateralDataMailbox) {
		if d.NumMessages != nil {
			select {
			case exists <- time.Now():
			default:
			}
		}
	}}
	watcher, err := dialInbox(rs.direct(1), u, h)
	if err != nil {
		return err
	}
	defer watcher.Close()
	idle, err := watcher.Idle()
	if err != nil {
		return err
	}
	writer, err := dialInbox(rs.direct(0), u, nil)
	if err != nil {
		return err
	}
	defer writer.Close()
	// The replica that joined last catches up once, a heartbeat after it
	// started (a refresh of what its sessions hold): not a change's cost.
	time.Sleep(3 * time.Second)
	m0, err := rs.reps[1].scrape(ctx)
	if err != nil {
		return err
	}
	const samples = 40
	var lat []time.Duration
	for i := range samples {
		time.Sleep(time.Duration(50+mrand.IntN(250)) * time.Millisecond)
		raw := b.corpus.message(i, "sender@direct.example", u.user)
		cmd := writer.Append("INBOX", int64(len(raw)), nil)
		cmd.Write(raw)
		cmd.Close()
		if _, err := cmd.Wait(); err != nil {
			return fmt.Errorf("append through A: %w", err)
		}
		done := time.Now()
		select {
		case at := <-exists:
			lat = append(lat, max(at.Sub(done), 0))
		case <-time.After(10 * time.Second):
			return fmt.Errorf("sample %d: no EXISTS on replica B within 10 s", i)
		}
	}
	m1, err := rs.reps[1].scrape(ctx)
	if err != nil {
		return err
	}
	idle.Close()
	idle.Wait()
	calls := restDelta(m0, m1)
	p95 := percentile(lat, 0.95)
	out.rows[0].measured = fmt.Sprintf("p95 %d ms (median %d ms, %d samples); replica B's provider calls meanwhile: %d",
		p95.Milliseconds(), percentile(lat, 0.5).Milliseconds(), len(lat), calls)
	out.rows[0].met = yesNo(p95 <= time.Second && calls == 0)
	out.notes = append(out.notes, "Row 1: one user, an IDLE client on replica B; another client APPENDs through replica A, one message every 50-300 ms; latency from A's OK to B's EXISTS. Polls at 60 s, so only the replicas' messages (LISTEN/NOTIFY) can bring the change; B's provider calls read from its /metrics before and after. The director is off in this part (DIRECTBRIDGE_DIRECTOR=false): with it, both clients would be served by the user's home and the change would not cross replicas.")
	return nil
}

// replicasCalls: provider calls for the same client load on one replica
// and on two (row 1): users IDLE on INBOX through the balancer, mail
// delivered at the provider, each client fetching what arrives.
func replicasCalls(ctx context.Context, b *bench, pg *pgServer, out *outcome) error {
	users := accounts("load", 12)
	measure := func(two bool) (float64, int, error) {
		url, err := pg.database(ctx)
		if err != nil {
			return 0, 0, err
		}
		rs, err := b.startReplicaSet(ctx, fmt.Sprintf("replicas-calls-%v", two), url, users, nil)
		if err != nil {
			return 0, 0, err
		}
		defer rs.stop()
		if !two {
			rs.reps[1].stop() // the balancer takes it out: one replica serves all
			time.Sleep(3 * time.Second)
		}
		var wg sync.WaitGroup
		var mu sync.Mutex
		got := 0
		stop := make(chan struct{})
		errs := make(chan error, len(users))
		for _, u := range users {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs <- loadClient(rs.lbIMAP(), u, stop, func() { mu.Lock(); got++; mu.Unlock() })
			}()
		}
		time.Sleep(3 * time.Second) // every client in IDLE, the joining catch-up done
		c0, err := rs.calls(ctx)
		if err != nil {
			return 0, 0, err
		}
		api := newREST(rs.sandbox.url)
		end := time.Now().Add(20 * time.Second)
		for i := 0; time.Now().Before(end); i++ {
			u := users[i%len(users)]
			if err := api.saveRaw(ctx, u, "INBOX", [][]byte{b.corpus.message(i, "sender@direct.example", u.user)}); err != nil {
				return 0, 0, err
			}
			time.Sleep(250 * time.Millisecond)
		}
		time.Sleep(6 * time.Second) // the last polls find the last mail
		c1, err := rs.calls(ctx)
		close(stop)
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				return 0, 0, err
			}
		}
		return c1 - c0, got, err
	}
	one, gotOne, err := measure(false)
	if err != nil {
		return err
	}
	two, gotTwo, err := measure(true)
	if err != nil {
		return err
	}
	ratio := two / math.Max(one, 1)
	out.rows[1].measured = fmt.Sprintf("%.2fx (%.0f calls with two replicas, %.0f with one; messages fetched %d and %d)", ratio, two, one, gotTwo, gotOne)
	out.rows[1].met = yesNo(ratio <= 1.1)
	out.notes = append(out.notes, fmt.Sprintf("Row 2: %d users, each one client through the balancer, IDLE on INBOX; for 20 s a message every 250 ms delivered at the provider to the next user, and each client fetching ENVELOPE and BODY[] of what arrives (default poll interval). Provider calls summed from the replicas' /metrics over the 26 s; one replica: the same setup with the second replica stopped (the balancer sends every client to the first). Each user has one client here; a user's several clients are served by one replica whichever the balancer picks (the director, DIRECTBRIDGE_DIRECTOR), so their count does not change this figure.", len(users)))
	return nil
}

// loadClient sits in IDLE on INBOX and fetches every message that
// arrives, until stop.
func loadClient(addr string, u account, stop chan struct{}, fetched func()) error {
	news := make(chan uint32, 16)
	h := &imapclient.UnilateralDataHandler{Mailbox: func(d *imapclient.UnilateralDataMailbox) {
		if d.NumMessages != nil {
			select {
			case news <- *d.NumMessages:
			default:
			}
		}
	}}
	c, err := dialIMAP(addr, u, h)
	if err != nil {
		return err
	}
	defer c.Close()
	sel, err := c.Select("INBOX", nil).Wait()
	if err != nil {
		return err
	}
	seen := sel.NumMessages
	for {
		idle, err := c.Idle()
		if err != nil {
			return err
		}
		var n uint32
		select {
		case <-stop:
			idle.Close()
			idle.Wait()
			return nil
		case n = <-news:
		}
		if err := idle.Close(); err != nil {
			return err
		}
		if err := idle.Wait(); err != nil {
			return err
		}
		if n > seen {
			var set imap.SeqSet
			set.AddRange(seen+1, n)
			if _, err := drainFetch(c.Fetch(set, &imap.FetchOptions{Envelope: true, BodySection: []*imap.FetchItemBodySection{{}}})); err != nil {
				return err
			}
			for range n - seen {
				fetched()
			}
			seen = n
		}
	}
}

// killOutcome is what the clients of the kill part were told.
type killOutcome struct {
	mu                     sync.Mutex
	appended, copied, sent []string
	undecided              []string
	broken                 int
	recovered              []time.Duration
}

func (k *killOutcome) add(list *[]string, id string) {
	k.mu.Lock()
	*list = append(*list, id)
	k.mu.Unlock()
}

// replicasKill: IMAP and SMTP clients through the balancer, one replica
// killed (SIGKILL) mid-traffic (rows 3-5).
func replicasKill(ctx context.Context, b *bench, pg *pgServer, out *outcome) error {
	url, err := pg.database(ctx)
	if err != nil {
		return err
	}
	u := account{user: "kill@direct.example", pass: benchPassword}
	peer := account{user: "peer@direct.example", pass: benchPassword}
	rs, err := b.startReplicaSet(ctx, "replicas-kill", url, []account{u, peer},
		[]string{"DIRECTBRIDGE_IMAP_ATTEMPT_HOLD=5s", "DIRECTBRIDGE_SMTP_UNDECIDED_HOLD=5s", "DIRECTBRIDGE_POLL_INTERVAL=1s"})
	if err != nil {
		return err
	}
	defer rs.stop()
	const imapClients, smtpClients = 4, 2
	setup, err := dialIMAP(rs.lbIMAP(), u, nil)
	if err != nil {
		return err
	}
	for g := range imapClients {
		if err := setup.Create(fmt.Sprintf("Kept%d", g), nil).Wait(); err != nil {
			return err
		}
	}
	setup.Logout().Wait()
	setup.Close()

	var k killOutcome
	stopAt := time.Now().Add(8 * time.Second)
	var wg sync.WaitGroup
	for g := range imapClients {
		wg.Add(1)
		go func() { defer wg.Done(); killIMAPWorker(rs.lbIMAP(), u, g, stopAt, &k) }()
	}
	for g := range smtpClients {
		wg.Add(1)
		go func() { defer wg.Done(); killSMTPWorker(rs.lbSMTP(), u, peer, g, stopAt, &k) }()
	}
	time.Sleep(3 * time.Second)
	rs.reps[0].cmd.Process.Kill()
	<-rs.reps[0].done
	wg.Wait()

	// What the provider holds, per Message-ID.
	rc, err := restclient.New(restclient.Options{BaseURL: rs.sandbox.url})
	if err != nil {
		return err
	}
	auth := directapi.Authentication{Username: u.user, Password: directapi.Secret(u.pass)}
	count := func(folder string) (map[string]int, error) {
		got, err := rc.GetMessageMetaData(ctx, auth, folder)
		if err != nil {
			return nil, err
		}
		n := map[string]int{}
		for _, m := range got {
			n[strings.Trim(m.MsgID, "<>")]++
		}
		return n, nil
	}
	inbox, err := count("INBOX")
	if err != nil {
		return err
	}
	sent, err := count("INBOX.Sent")
	if err != nil {
		return err
	}
	kept := map[string]int{}
	for g := range imapClients {
		n, err := count(fmt.Sprintf("INBOX.Kept%d", g))
		if err != nil {
			return err
		}
		for id, c := range n {
			kept[id] += c
		}
	}
	tally := func(told []string, have map[string]int) (lost, twice int) {
		for _, id := range told {
			if have[id] == 0 {
				lost++
			}
		}
		for id, n := range have {
			if n > 1 && strings.HasPrefix(id, "kill-") {
				twice++
			}
		}
		return
	}
	lostA, twiceA := tally(k.appended, inbox)
	lostS, twiceS := tally(k.sent, sent)
	lostC, twiceC := tally(k.copied, kept)
	out.rows[3].measured = fmt.Sprintf("lost %d, sent twice %d, copied twice %d (of %d APPENDs, %d sends, %d COPYs told done; appended twice %d; still undecided after 20 s of retries: %d; connections broken by the kill: %d)",
		lostA+lostS+lostC, twiceS, twiceC, len(k.appended), len(k.sent), len(k.copied), twiceA, len(k.undecided), k.broken)
	out.rows[3].met = yesNo(lostA+lostS+lostC == 0 && twiceS == 0 && twiceC == 0 && twiceA == 0 && k.broken > 0)
	worst := time.Duration(0)
	for _, d := range k.recovered {
		worst = max(worst, d)
	}
	out.rows[4].measured = fmt.Sprintf("at most %d ms after the reconnect began (%d clients reconnected)", worst.Milliseconds(), len(k.recovered))
	out.rows[4].met = yesNo(len(k.recovered) > 0 && worst <= 5*time.Second)

	// The killed replica back: every folder alike through both.
	if err := rs.startReplica(ctx, 0); err != nil {
		return err
	}
	folders := []string{"INBOX", "Sent"}
	for g := range imapClients {
		folders = append(folders, fmt.Sprintf("Kept%d", g))
	}
	var views [2][]string
	for i := range rs.reps {
		c, err := dialFrom(rs.direct(i), u, nil)
		if err != nil {
			return err
		}
		for _, f := range folders {
			d, err := c.Select(f, nil).Wait()
			if err != nil {
				c.Close()
				return err
			}
			uids, err := c.UIDSearch(&imap.SearchCriteria{}, nil).Wait()
			if err != nil {
				c.Close()
				return err
			}
			views[i] = append(views[i], fmt.Sprintf("%s %d %v", f, d.UIDValidity, uids.AllUIDs()))
		}
		c.Logout().Wait()
		c.Close()
	}
	differ := 0
	for i := range views[0] {
		if views[0][i] != views[1][i] {
			differ++
		}
	}
	out.rows[5].measured = fmt.Sprintf("identical in %d of %d folders (UIDVALIDITY and every UID, after the kill, the killed replica restarted)", len(folders)-differ, len(folders))
	out.rows[5].met = yesNo(differ == 0)
	out.notes = append(out.notes, fmt.Sprintf("Rows 4-6: %d IMAP clients (APPEND, then COPY to a folder of their own) and %d SMTP clients through the balancer for 8 s; replica 1 SIGKILLed at 3 s. A client whose connection breaks reconnects through the balancer and retries what was not answered, with the same bytes. Counted at the provider (sandbox REST) by Message-ID. Holds of 5 s (DIRECTBRIDGE_IMAP_ATTEMPT_HOLD, DIRECTBRIDGE_SMTP_UNDECIDED_HOLD) so that changes in doubt are decided within the clients' 20 s of retries.", imapClients, smtpClients))
	return nil
}

// killUnavailable reports a try-later answer (IMAP NO [UNAVAILABLE], SMTP 4xx).
func killUnavailable(err error) bool {
	var ie *imap.Error
	if errors.As(err, &ie) {
		return ie.Code == imap.ResponseCodeUnavailable
	}
	var se *smtp.SMTPError
	return errors.As(err, &se) && se.Code/100 == 4
}

func killIMAPWorker(addr string, u account, g int, stopAt time.Time, k *killOutcome) {
	var c *imapclient.Client
	defer func() {
		if c != nil {
			c.Close()
		}
	}()
	var brokeAt time.Time
	do := func(id string, op func(*imapclient.Client) error) bool {
		for giveUp := time.Now().Add(20 * time.Second); time.Now().Before(giveUp); {
			if c == nil {
				var err error
				if c, err = dialIMAP(addr, u, nil); err != nil {
					c = nil
					time.Sleep(100 * time.Millisecond)
					continue
				}
				if _, err := c.Select("INBOX", nil).Wait(); err != nil {
					c.Close()
					c = nil
					continue
				}
				if !brokeAt.IsZero() {
					k.mu.Lock()
					k.recovered = append(k.recovered, time.Since(brokeAt))
					k.mu.Unlock()
					brokeAt = time.Time{}
				}
			}
			err := op(c)
			switch {
			case err == nil:
				return true
			case killUnavailable(err):
				time.Sleep(300 * time.Millisecond)
			default:
				var ie *imap.Error
				if errors.As(err, &ie) {
					return false
				}
				c.Close()
				c = nil
				k.mu.Lock()
				k.broken++
				k.mu.Unlock()
				brokeAt = time.Now()
			}
		}
		k.add(&k.undecided, id)
		return false
	}
	for i := 0; time.Now().Before(stopAt); i++ {
		id := fmt.Sprintf("kill-imap-%d-%d@bench.example", g, i)
		raw := "From: kill@direct.example\r\nTo: peer@direct.example\r\nSubject: kill " + strconv.Itoa(i) +
			"\r\nMessage-ID: <" + id + ">\r\n\r\nclient " + strconv.Itoa(g) + " message " + strconv.Itoa(i) + "\r\n"
		var uid imap.UID
		if !do(id, func(c *imapclient.Client) error {
			cmd := c.Append("INBOX", int64(len(raw)), &imap.AppendOptions{Flags: []imap.Flag{"$Kill"}})
			cmd.Write([]byte(raw))
			cmd.Close()
			d, err := cmd.Wait()
			if err == nil {
				uid = d.UID
			}
			return err
		}) {
			continue
		}
		k.add(&k.appended, id)
		if uid != 0 && do(id, func(c *imapclient.Client) error {
			_, err := c.Copy(imap.UIDSetNum(uid), fmt.Sprintf("Kept%d", g)).Wait()
			return err
		}) {
			k.add(&k.copied, id)
		}
	}
}

func killSMTPWorker(addr string, u, peer account, g int, stopAt time.Time, k *killOutcome) {
	var c *smtp.Client
	defer func() {
		if c != nil {
			c.Close()
		}
	}()
	var brokeAt time.Time
	for i := 0; time.Now().Before(stopAt); i++ {
		id := fmt.Sprintf("kill-smtp-%d-%d@bench.example", g, i)
		raw := "From: " + u.user + "\r\nTo: " + peer.user + "\r\nSubject: kill send " + strconv.Itoa(i) +
			"\r\nMessage-ID: <" + id + ">\r\n\r\nsender " + strconv.Itoa(g) + " message " + strconv.Itoa(i) + "\r\n"
		done := false
		for giveUp := time.Now().Add(30 * time.Second); !done && time.Now().Before(giveUp); {
			if c == nil {
				nc, err := dialSMTP(addr, u)
				if err != nil {
					time.Sleep(100 * time.Millisecond)
					continue
				}
				c = nc
				if !brokeAt.IsZero() {
					k.mu.Lock()
					k.recovered = append(k.recovered, time.Since(brokeAt))
					k.mu.Unlock()
					brokeAt = time.Time{}
				}
			}
			err := c.SendMail(u.user, []string{peer.user}, strings.NewReader(raw))
			switch {
			case err == nil:
				done = true
			case killUnavailable(err):
				c.Reset()
				time.Sleep(300 * time.Millisecond)
			default:
				var se *smtp.SMTPError
				if errors.As(err, &se) {
					k.add(&k.undecided, id)
					return
				}
				c.Close()
				c = nil
				k.mu.Lock()
				k.broken++
				k.mu.Unlock()
				brokeAt = time.Now()
			}
		}
		if done {
			k.add(&k.sent, id)
		} else {
			k.add(&k.undecided, id)
		}
	}
}

// replicasCopy: state copied from SQLite to PostgreSQL (row 6): folders
// whose UIDVALIDITY changed, that is clients that would download again.
func replicasCopy(ctx context.Context, b *bench, pg *pgServer, out *outcome) error {
	u := account{user: "moved@direct.example", pass: benchPassword}
	sb, err := b.startSandbox(ctx, "copy-sandbox", []account{u})
	if err != nil {
		return err
	}
	defer sb.stop()
	data := filepath.Join(b.work, "copy-bridge-data")
	folders := []string{"INBOX", "Sent", "Drafts", "Referrals", "Referrals/2026"}
	look := func(name string, env []string) ([]string, error) {
		br, err := b.startBridge(ctx, name, bridgeSpec{apiURL: sb.url, env: append([]string{"DIRECTBRIDGE_DATA_DIR=" + data}, env...)})
		if err != nil {
			return nil, err
		}
		defer br.stop()
		c, err := dialIMAP(br.imapAddr, u, nil)
		if err != nil {
			return nil, err
		}
		defer c.Close()
		var seen []string
		for _, f := range folders {
			if _, err := c.Select(f, nil).Wait(); err != nil {
				if err := c.Create(f, nil).Wait(); err != nil {
					return nil, err
				}
				raw := b.corpus.message(len(f), "sender@direct.example", u.user)
				cmd := c.Append(f, int64(len(raw)), nil)
				cmd.Write(raw)
				cmd.Close()
				if _, err := cmd.Wait(); err != nil {
					return nil, err
				}
			}
			d, err := c.Select(f, nil).Wait()
			if err != nil {
				return nil, err
			}
			seen = append(seen, fmt.Sprintf("%s %d %d", f, d.UIDValidity, d.UIDNext))
		}
		c.Logout().Wait()
		return seen, nil
	}
	before, err := look("copy-bridge-sqlite", nil)
	if err != nil {
		return err
	}
	url, err := pg.database(ctx)
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, b.bin, "state", "copy", "--to", url)
	cmd.Env = append(slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "DIRECTBRIDGE_") }), "DIRECTBRIDGE_DATA_DIR="+data)
	if o, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("state copy: %w\n%s", err, o)
	}
	after, err := look("copy-bridge-postgres", []string{"DIRECTBRIDGE_STATE_URL=" + url})
	if err != nil {
		return err
	}
	resync := 0
	for i := range before {
		if before[i] != after[i] {
			resync++
		}
	}
	out.rows[6].measured = fmt.Sprintf("%d of %d folders changed UIDVALIDITY or UIDNEXT", resync, len(folders))
	out.rows[6].met = yesNo(resync == 0)
	out.notes = append(out.notes, "Row 7: a bridge on SQLite (a separate sandbox process) creates and selects five folders; stopped; `directbridge state copy --to` a fresh PostgreSQL database; started on it with the same data directory: every folder's UIDVALIDITY and UIDNEXT compared.")
	return nil
}

// replicasImaptest: imaptest stress across two replicas vs one (row 2),
// and one replica on PostgreSQL vs one on SQLite (row 7).
func replicasImaptest(ctx context.Context, b *bench, pg *pgServer, out *outcome) error {
	script, err := filepath.Abs(b.o.imaptest)
	if err == nil {
		_, err = os.Stat(script)
	}
	if b.o.imaptest == "" || err != nil {
		out.rows[2].measured, out.rows[7].measured = "not run (no imaptest)", "not run (no imaptest)"
		return nil
	}
	accts := []account{{user: "it@direct.example", pass: benchPassword}, {user: "it2@direct.example", pass: benchPassword}}
	rounds := max(b.o.imaptestRounds, 1)
	fetchA := func(sum string) (float64, int) {
		r := tableRow(sum, "A logout=0: FETCH/s (Fetc+Fet2)")
		ea, eb := tableRow(sum, "A logout=0: errors"), tableRow(sum, "B default: errors")
		if len(r) == 0 || len(ea) == 0 || len(eb) == 0 {
			return 0, -1
		}
		f, _ := strconv.ParseFloat(r[0], 64)
		x, _ := strconv.Atoi(ea[0])
		y, _ := strconv.Atoi(eb[0])
		return f, x + y
	}
	// interleave runs stress once per round for each of the two setups
	// (true first), and returns stress A's FETCH/s of each and the
	// `Error:` lines of all.
	interleave := func(run func(r int, first bool) (string, error)) (firsts, seconds []float64, errs int, err error) {
		for r := range rounds {
			for _, first := range []bool{true, false} {
				sum, err := run(r, first)
				if err != nil {
					return nil, nil, 0, err
				}
				f, e := fetchA(sum)
				errs += max(e, 0)
				if first {
					firsts = append(firsts, f)
				} else {
					seconds = append(seconds, f)
				}
			}
		}
		return firsts, seconds, errs, nil
	}
	// Two replicas through the balancer vs one (the second stopped, the
	// balancer sending every client to the first).
	two, one, errs, err := interleave(func(r int, both bool) (string, error) {
		url, err := pg.database(ctx)
		if err != nil {
			return "", err
		}
		rs, err := b.startReplicaSet(ctx, fmt.Sprintf("replicas-stress-%d-%v", r, both), url, accts, nil)
		if err != nil {
			return "", err
		}
		defer rs.stop()
		if !both {
			rs.reps[1].stop()
			time.Sleep(3 * time.Second)
		}
		lb := &bridgeProc{imapAddr: rs.lbIMAP()}
		sum, err := b.runImaptestScript(ctx, script, fmt.Sprintf("replicas-stress-%d-%v", r, both), lb, accts, "--no-compliance", "--rounds", "1")
		for i, rep := range rs.reps {
			if m, serr := rep.scrape(ctx); serr == nil {
				b.logf("replicas stress (both %v), replica %d: REST %s; IMAP %s", both, i+1,
					opsText(metricsSnapshot{}, m), cmdsText(metricsSnapshot{}, m))
			}
		}
		return sum, err
	})
	if err != nil {
		return err
	}
	ratio := sum(two) / math.Max(sum(one), 1)
	out.rows[2].measured = fmt.Sprintf("%.2fx (two replicas %s FETCH/s, one %s), %d `Error:` lines", ratio, floats(two), floats(one), errs)
	out.rows[2].met = yesNo(ratio >= 0.9 && errs == 0)

	// One replica on PostgreSQL vs one on SQLite, embedded sandbox, interleaved.
	onSQLite, onPG, errs, err := interleave(func(r int, sqlite bool) (string, error) {
		var env []string
		if !sqlite {
			url, err := pg.database(ctx)
			if err != nil {
				return "", err
			}
			env = append(env, "DIRECTBRIDGE_STATE_URL="+url)
		}
		br, err := b.startBridge(ctx, fmt.Sprintf("store-%d-%v", r, !sqlite), bridgeSpec{embedded: accts, env: env})
		if err != nil {
			return "", err
		}
		defer br.stop()
		return b.runImaptestScript(ctx, script, fmt.Sprintf("store-stress-%d-%v", r, !sqlite), br, accts, "--no-compliance", "--rounds", "1")
	})
	if err != nil {
		return err
	}
	ratio = sum(onPG) / math.Max(sum(onSQLite), 1)
	out.rows[7].measured = fmt.Sprintf("%.2fx (PostgreSQL %s FETCH/s, SQLite %s), %d `Error:` lines", ratio, floats(onPG), floats(onSQLite), errs)
	out.rows[7].met = yesNo(ratio >= 0.8 && errs == 0)
	out.notes = append(out.notes, fmt.Sprintf("Rows 3 and 8: imaptest stress (`run.sh --no-compliance`, stress A and B, 10 clients, %d s each), %d interleaved round(s), FETCH/s of stress A. Row 3: a sandbox process, PostgreSQL, two replicas behind HAProxy (imaptest's clients, all one user, split by `leastconn`; the director serves them on the user's home, the other replica relaying its half) vs the same with the second replica stopped; a fresh database each run. Row 8: one bridge on its embedded sandbox with the state store in PostgreSQL vs in SQLite. PostgreSQL runs on the same 2 cores as everything else.", b.o.imaptestSecs, rounds))
	return nil
}

func sum(xs []float64) float64 {
	t := 0.0
	for _, x := range xs {
		t += x
	}
	return t
}

func floats(xs []float64) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = strconv.FormatFloat(x, 'f', 0, 64)
	}
	return strings.Join(parts, "/")
}

// dialSMTP connects without TLS (AUTH on loopback) and logs in.
func dialSMTP(addr string, u account) (*smtp.Client, error) {
	c, err := smtp.Dial(addr)
	if err != nil {
		return nil, err
	}
	if err := c.Hello("bench.localhost"); err != nil {
		c.Close()
		return nil, err
	}
	if err := c.Auth(sasl.NewPlainClient("", u.user, u.pass)); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}
