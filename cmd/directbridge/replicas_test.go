package main

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"
	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"

	"github.com/directbridge/directbridge/internal/pgtest"
	"github.com/directbridge/directbridge/restclient"
	"github.com/directbridge/directbridge/upstream/directapi"
)

// requireHAProxyEnv, when set (as .ci/run sets it after installing
// haproxy), makes a missing haproxy a failure rather than a skip.
const requireHAProxyEnv = "DIRECTBRIDGE_REQUIRE_HAPROXY"

// haproxyBin finds HAProxy, or skips the test with one line saying how
// to run it.
func haproxyBin(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("haproxy")
	if err == nil {
		return p
	}
	if os.Getenv(requireHAProxyEnv) != "" {
		t.Fatalf("haproxy not found and %s is set", requireHAProxyEnv)
	}
	t.Skip("haproxy not installed: apt-get install haproxy to run the multi-replica test")
	return ""
}

// cluster is a sandbox process, PostgreSQL, two bridge processes on
// 127.0.0.2 and 127.0.0.3 and HAProxy on 127.0.0.1 with
// deploy/haproxy.cfg, every one listening on the same ports.
type replicaCluster struct {
	t                                *testing.T
	sandboxURL                       string
	imapPort, imapsPort, smtpPort    string
	smtpsPort, metricsPort, peerPort string
	env                              []string // shared by the replicas
	procs                            [2]*exec.Cmd
	hosts                            [2]string
}

// freePort is a port free a moment ago on 127.0.0.1, 127.0.0.2 and
// 127.0.0.3.
func freePort(t *testing.T) string {
	t.Helper()
	for range 50 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		_, port, _ := net.SplitHostPort(l.Addr().String())
		ok := true
		for _, h := range []string{"127.0.0.2", "127.0.0.3"} {
			l2, err := net.Listen("tcp", net.JoinHostPort(h, port))
			if err != nil {
				ok = false
				break
			}
			l2.Close()
		}
		l.Close()
		if ok {
			return port
		}
	}
	t.Fatal("no port free on the three loopback addresses")
	return ""
}

func startCluster(t *testing.T) *replicaCluster {
	t.Helper()
	hap := haproxyBin(t)
	url := pgtest.Database(t)
	sbURL, _ := startSandbox(t, binPath, t.TempDir())
	key := make([]byte, 32)
	rand.Read(key)
	c := &replicaCluster{t: t, sandboxURL: sbURL, hosts: [2]string{"127.0.0.2", "127.0.0.3"}}
	c.imapPort, c.imapsPort, c.smtpPort, c.smtpsPort, c.metricsPort = freePort(t), freePort(t), freePort(t), freePort(t), freePort(t)
	c.peerPort = freePort(t)
	c.env = []string{"DIRECTBRIDGE_API_URL=" + sbURL, "DIRECTBRIDGE_API_RATE_LIMIT=unlimited",
		"DIRECTBRIDGE_STATE_URL=" + url, "DIRECTBRIDGE_JOURNAL_KEY=" + hex.EncodeToString(key),
		"DIRECTBRIDGE_PROXY_PROTOCOL_FROM=127.0.0.1", "DIRECTBRIDGE_ADMIN_SOCKET=off",
		"DIRECTBRIDGE_POLL_INTERVAL=1s", "DIRECTBRIDGE_SMTP_UNDECIDED_HOLD=5s", "DIRECTBRIDGE_IMAP_ATTEMPT_HOLD=5s"}
	for i := range c.procs {
		c.start(i)
	}
	lb := exec.Command(hap, "-f", "../../deploy/haproxy.cfg", "-db")
	// leastconn: the test's clients all come from 127.0.0.1, which the
	// default (source) would send to one replica.
	lb.Env = append(os.Environ(), "LB_BALANCE=leastconn", "LB_BIND=127.0.0.1", "LB_REPLICA1=127.0.0.2", "LB_REPLICA2=127.0.0.3",
		"LB_IMAP_PORT="+c.imapPort, "LB_IMAPS_PORT="+c.imapsPort, "LB_SMTP_PORT="+c.smtpPort,
		"LB_SMTPS_PORT="+c.smtpsPort, "LB_CHECK_PORT="+c.metricsPort)
	var lbOut strings.Builder
	lb.Stdout, lb.Stderr = &lbOut, &lbOut
	if err := lb.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		lb.Process.Kill()
		lb.Wait()
		if t.Failed() {
			t.Logf("haproxy:\n%s", lbOut.String())
		}
	})
	waitListening(t, "127.0.0.1:"+c.imapPort, "the balancer")
	return c
}

// start runs replica i and waits until it is ready (/readyz).
func (c *replicaCluster) start(i int) {
	t := c.t
	h := c.hosts[i]
	cmd := exec.Command(binPath, "serve")
	cmd.Env = cleanEnv(append(slices.Clone(c.env), "DIRECTBRIDGE_DATA_DIR="+t.TempDir(),
		"DIRECTBRIDGE_IMAP_ADDR="+h+":"+c.imapPort, "DIRECTBRIDGE_IMAPS_ADDR="+h+":"+c.imapsPort,
		"DIRECTBRIDGE_SMTP_ADDR="+h+":"+c.smtpPort, "DIRECTBRIDGE_SMTPS_ADDR="+h+":"+c.smtpsPort,
		"DIRECTBRIDGE_METRICS_ADDR="+h+":"+c.metricsPort,
		// The replicas take messages from each other's memory, and from
		// the provider when the holder was just killed.
		"DIRECTBRIDGE_PEER_ADDR="+h+":"+c.peerPort)...)
	logs := &syncBuf{}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c.procs[i] = cmd
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		if t.Failed() {
			t.Logf("replica %d:\n%s", i+1, logs.String())
		}
	})
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		resp, err := http.Get("http://" + h + ":" + c.metricsPort + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("replica %d not ready within 30 s:\n%s", i+1, logs.String())
		}
	}
}

// syncBuf is a log buffer written by a process's two pipes.
type syncBuf struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func waitListening(t *testing.T, addr, what string) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s does not listen on %s", what, addr)
		}
	}
}

const demoPassword = "sandbox-demo"

// imapLogin logs alice in at addr (the balancer or one replica). It
// connects from 127.0.0.5: the replicas take connections from 127.0.0.1,
// the balancer's address, with a PROXY header only.
func imapLogin(addr string) (*imapclient.Client, error) {
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 5)}, Timeout: 10 * time.Second}
	conn, err := d.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	c, err := imapclient.NewStartTLS(conn, &imapclient.Options{TLSConfig: &tls.Config{InsecureSkipVerify: true}})
	if err != nil {
		conn.Close()
		return nil, err
	}
	if err := c.Login("alice@direct.example", demoPassword).Wait(); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// outcome is what the clients were told, per Message-ID.
type outcome struct {
	mu        sync.Mutex
	appended  []string // APPEND answered OK
	copied    []string // the COPY of it answered OK
	sent      []string // 250
	undecided []string // still "try later" at the end: the client may not count on them
	broken    int      // connections that broke under a client
	recovered []time.Duration
}

func (o *outcome) add(list *[]string, id string) {
	o.mu.Lock()
	*list = append(*list, id)
	o.mu.Unlock()
}

// unavailable reports an IMAP NO [UNAVAILABLE] or an SMTP 4xx: try later.
func unavailable(err error) bool {
	var ie *imap.Error
	if errors.As(err, &ie) {
		return ie.Code == imap.ResponseCodeUnavailable
	}
	var se *smtp.SMTPError
	return errors.As(err, &se) && se.Code/100 == 4
}

// TestReplicasSurviveKill: IMAP and SMTP clients work through HAProxy
// with two replicas on one PostgreSQL; one replica is killed (SIGKILL)
// mid-traffic. Every message a client was told is stored is there once,
// every message told sent was sent once, every COPY told done made one
// copy; the killed replica's clients work again through the balancer
// within 5 s of their reconnect; and once the killed replica is back,
// both replicas show every folder with the same UIDVALIDITY and UIDs.
func TestReplicasSurviveKill(t *testing.T) {
	c := startCluster(t)
	lbIMAP, lbSMTP := "127.0.0.1:"+c.imapPort, "127.0.0.1:"+c.smtpPort
	setup, err := imapLogin(lbIMAP)
	if err != nil {
		t.Fatal(err)
	}
	const imapClients, smtpClients = 4, 2
	for g := range imapClients {
		if err := setup.Create(fmt.Sprintf("Kept%d", g), nil).Wait(); err != nil {
			t.Fatal(err)
		}
	}
	setup.Logout().Wait()

	var o outcome
	stopAt := time.Now().Add(8 * time.Second)
	var wg sync.WaitGroup
	for g := range imapClients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			imapWorker(t, lbIMAP, g, stopAt, &o)
		}()
	}
	for g := range smtpClients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			smtpWorker(t, lbSMTP, g, stopAt, &o)
		}()
	}
	time.Sleep(3 * time.Second)
	c.procs[0].Process.Kill() // mid-traffic, no warning
	c.procs[0].Wait()
	wg.Wait()

	t.Logf("clients were told: %d APPENDs stored, %d COPYs done, %d messages sent, %d undecided; %d connections broke, reconnects took %v",
		len(o.appended), len(o.copied), len(o.sent), len(o.undecided), o.broken, o.recovered)
	if o.broken == 0 {
		t.Fatal("no client connection broke: the kill was not mid-traffic")
	}
	if len(o.appended) == 0 || len(o.sent) == 0 || len(o.copied) == 0 {
		t.Fatal("the clients did no work")
	}
	// With holds of 5 s, an APPEND or COPY in doubt at the kill is
	// decided (found, or done again) well within a client's 20 s of
	// retries: the killed replica is dead to the others at once. A send
	// the kill cut short before it reached the provider stays 451 longer
	// (the SMTP journal's rule waits for the send timeout, 2 minutes,
	// since it does not know the replica died): it may be undecided here,
	// and is checked to be at the provider at most once below.
	for _, id := range o.undecided {
		if !strings.HasPrefix(id, "kill-smtp-") {
			t.Errorf("still answered try-later after 20 s of retries: %s", id)
		}
	}
	for _, d := range o.recovered {
		if d > 5*time.Second {
			t.Errorf("a client of the killed replica worked again %v after its reconnect began, want <= 5 s", d)
		}
	}

	// What the provider holds: each told-done message once.
	rc, err := restclient.New(restclient.Options{BaseURL: c.sandboxURL})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	auth := directapi.Authentication{Username: "alice@direct.example", Password: demoPassword}
	count := func(folder string) map[string]int {
		got, err := rc.GetMessageMetaData(ctx, auth, folder)
		if err != nil {
			t.Fatal(err)
		}
		n := map[string]int{}
		for _, m := range got {
			n[strings.Trim(m.MsgID, "<>")]++
		}
		return n
	}
	inbox, sent := count("INBOX"), count("INBOX.Sent")
	kept := map[string]int{}
	for g := range imapClients {
		for id, n := range count(fmt.Sprintf("INBOX.Kept%d", g)) {
			kept[id] += n
		}
	}
	undecided := map[string]bool{}
	for _, id := range o.undecided {
		undecided[id] = true
	}
	check := func(what string, told []string, have map[string]int) {
		for _, id := range told {
			if have[id] != 1 {
				t.Errorf("%s %s: %d at the provider, want 1", what, id, have[id])
			}
		}
		for id, n := range have {
			if n > 1 {
				t.Errorf("%s %s: %d at the provider (twice)", what, id, n)
			}
			if strings.HasPrefix(id, "kill-") && !slices.Contains(told, id) && !undecided[id] && n > 0 && what != "copied" {
				// A change answered with an error the client could not
				// read (its connection broke) and not retried to the
				// end may be there: it was not told either way.
				_ = n
			}
		}
	}
	check("appended", o.appended, inbox)
	check("copied", o.copied, kept)
	check("sent", o.sent, sent)

	// The killed replica back: both number every folder alike.
	c.start(0)
	// IMAP names (the bridge's flat layout: the provider's INBOX.Sent is Sent).
	folders := []string{"INBOX", "Sent"}
	for g := range imapClients {
		folders = append(folders, fmt.Sprintf("Kept%d", g))
	}
	var views [2]map[string]string
	for i, h := range c.hosts {
		cl, err := imapLogin(h + ":" + c.imapPort)
		if err != nil {
			t.Fatal(err)
		}
		views[i] = map[string]string{}
		for _, f := range folders {
			d, err := cl.Select(f, nil).Wait()
			if err != nil {
				t.Fatal(err)
			}
			uids, err := cl.UIDSearch(&imap.SearchCriteria{}, nil).Wait()
			if err != nil {
				t.Fatal(err)
			}
			views[i][f] = fmt.Sprintf("UIDVALIDITY %d UIDs %v", d.UIDValidity, uids.AllUIDs())
		}
		cl.Logout().Wait()
	}
	for _, f := range folders {
		if views[0][f] != views[1][f] {
			t.Errorf("%s through replica 1: %s; through replica 2: %s", f, views[0][f], views[1][f])
		}
	}
}

// imapWorker appends messages and copies each to its own folder, through
// the balancer, reconnecting when its connection breaks and retrying
// what was not answered, with the same bytes.
func imapWorker(t *testing.T, addr string, g int, stopAt time.Time, o *outcome) {
	var c *imapclient.Client
	defer func() {
		if c != nil {
			c.Close()
		}
	}()
	var brokeAt time.Time
	// do runs op until it is answered OK (true) or gives up (false),
	// connecting again as needed.
	do := func(id string, op func(*imapclient.Client) error) bool {
		giveUp := time.Now().Add(20 * time.Second)
		for time.Now().Before(giveUp) {
			if c == nil {
				var err error
				if c, err = imapLogin(addr); err != nil {
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
					o.mu.Lock()
					o.recovered = append(o.recovered, time.Since(brokeAt))
					o.mu.Unlock()
					brokeAt = time.Time{}
				}
			}
			err := op(c)
			switch {
			case err == nil:
				return true
			case unavailable(err):
				time.Sleep(300 * time.Millisecond)
			default:
				var ie *imap.Error
				if errors.As(err, &ie) {
					t.Errorf("client %d, %s: %v", g, id, err)
					return false
				}
				c.Close()
				c = nil
				o.mu.Lock()
				o.broken++
				o.mu.Unlock()
				brokeAt = time.Now()
			}
		}
		o.add(&o.undecided, id)
		return false
	}
	for i := 0; time.Now().Before(stopAt); i++ {
		id := fmt.Sprintf("kill-imap-%d-%d@client.example", g, i)
		raw := "From: alice@direct.example\r\nTo: bob@direct.example\r\nSubject: kill test " + strconv.Itoa(i) +
			"\r\nMessage-ID: <" + id + ">\r\n\r\nclient " + strconv.Itoa(g) + " message " + strconv.Itoa(i) + "\r\n"
		var uid imap.UID
		if !do(id, func(c *imapclient.Client) error {
			d, err := appendRaw(c, "INBOX", raw, "$Kill")
			if err == nil {
				uid = d.UID
			}
			return err
		}) {
			continue
		}
		o.add(&o.appended, id)
		if uid == 0 {
			continue
		}
		if do(id, func(c *imapclient.Client) error {
			_, err := c.Copy(imap.UIDSetNum(uid), fmt.Sprintf("Kept%d", g)).Wait()
			return err
		}) {
			o.add(&o.copied, id)
		}
	}
}

// smtpWorker sends messages through the balancer, retrying one that was
// not answered 250 with the same bytes (on the same connection after a
// 4xx, on a new one after a break).
func smtpWorker(t *testing.T, addr string, g int, stopAt time.Time, o *outcome) {
	var c *smtp.Client
	defer func() {
		if c != nil {
			c.Close()
		}
	}()
	var brokeAt time.Time
	for i := 0; time.Now().Before(stopAt); i++ {
		id := fmt.Sprintf("kill-smtp-%d-%d@client.example", g, i)
		raw := "From: alice@direct.example\r\nTo: bob@direct.example\r\nSubject: kill send " + strconv.Itoa(i) +
			"\r\nMessage-ID: <" + id + ">\r\n\r\nsender " + strconv.Itoa(g) + " message " + strconv.Itoa(i) + "\r\n"
		done := false
		for giveUp := time.Now().Add(30 * time.Second); !done && time.Now().Before(giveUp); {
			if c == nil {
				nc, err := smtp.DialStartTLS(addr, &tls.Config{InsecureSkipVerify: true})
				if err == nil {
					err = nc.Auth(sasl.NewPlainClient("", "alice@direct.example", demoPassword))
				}
				if err != nil {
					if nc != nil {
						nc.Close()
					}
					time.Sleep(100 * time.Millisecond)
					continue
				}
				c = nc
				if !brokeAt.IsZero() {
					o.mu.Lock()
					o.recovered = append(o.recovered, time.Since(brokeAt))
					o.mu.Unlock()
					brokeAt = time.Time{}
				}
			}
			err := c.SendMail("alice@direct.example", []string{"bob@direct.example"}, strings.NewReader(raw))
			switch {
			case err == nil:
				done = true
			case unavailable(err):
				c.Reset()
				time.Sleep(300 * time.Millisecond)
			default:
				var se *smtp.SMTPError
				if errors.As(err, &se) {
					t.Errorf("sender %d, %s: %v", g, id, err)
					return
				}
				c.Close()
				c = nil
				o.mu.Lock()
				o.broken++
				o.mu.Unlock()
				brokeAt = time.Now()
			}
		}
		if done {
			o.add(&o.sent, id)
		} else {
			o.add(&o.undecided, id)
		}
	}
}
