package bridge_test

import (
	"bufio"
	"crypto/tls"
	"encoding/base64"
	"fmt"
	"net"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"

	"github.com/directbridge/directbridge/bridge"
	"github.com/directbridge/directbridge/internal/cluster"
	"github.com/directbridge/directbridge/upstream/directapi"
)

// directedReplicas starts two replicas with the director on, and waits
// until each knows the other's link address.
func directedReplicas(t *testing.T, mod ...func(*bridge.Config)) [2]*replica {
	t.Helper()
	_, rs := twoReplicas(t, time.Hour, append([]func(*bridge.Config){func(c *bridge.Config) {
		c.JournalKey = directapi.Secret(strings.Repeat("cd", 32))
		c.MetricsAddr = "127.0.0.1:0"
		c.PeerAddr = "127.0.0.1:0"
	}}, mod...)...)
	// The second replica announced its address when it joined: well
	// before the next heartbeat, the first sends it its users.
	time.Sleep(cluster.HeartbeatInterval / 4)
	return rs
}

// directedCount is a replica's count of logins it handed to a home
// where (local or remote).
func directedCount(t *testing.T, r *replica, where string) int {
	t.Helper()
	_, scrape := httpGet(t, "http://"+r.b.Addr(bridge.MetricsListener)+"/metrics")
	m := regexp.MustCompile(`directbridge_imap_directed_logins_total\{home="` + where + `"\} (\d+)`).FindStringSubmatch(scrape)
	if m == nil {
		t.Fatalf("no directed_logins_total{home=%q} in the metrics", where)
	}
	var n int
	fmt.Sscan(m[1], &n)
	return n
}

// homeOf logs alice in once through rs[0] and returns the indexes of
// her home and of the other replica.
func homeOf(t *testing.T, rs [2]*replica) (home, other int) {
	t.Helper()
	c := dialReplica(t, rs[0], nil)
	c.Logout().Wait()
	if directedCount(t, rs[0], "local") == 1 {
		return 0, 1
	}
	if directedCount(t, rs[0], "remote") != 1 {
		t.Fatal("the login through replica 0 was handed nowhere")
	}
	return 1, 0
}

// TestDirectorServesAUserOnOneReplica: alice's connections to either
// replica are served by one, her home; the other only relays bytes, and
// makes no provider call for her sessions. A change through one
// connection reaches the other's IDLE at once (same mirror).
func TestDirectorServesAUserOnOneReplica(t *testing.T) {
	rs := directedReplicas(t)
	home, other := homeOf(t, rs)
	relayed := directedCount(t, rs[other], "remote")
	s := newSeen()
	viaOther := dialReplica(t, rs[other], s.handler())
	viaHome := dialReplica(t, rs[home], nil)
	if n := directedCount(t, rs[other], "remote") - relayed; n != 1 {
		t.Fatalf("the other replica relayed %d logins, want 1", n)
	}
	callsBefore := rs[other].calls.Load()
	d, err := viaOther.Select("INBOX", nil).Wait()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := viaHome.Select("INBOX", nil).Wait(); err != nil {
		t.Fatal(err)
	}
	idle, err := viaOther.Idle()
	if err != nil {
		t.Fatal(err)
	}
	raw := "From: bob@direct.example\r\nTo: alice@direct.example\r\nSubject: directed\r\nMessage-ID: <dir-1@direct.example>\r\n\r\n" +
		strings.Repeat("a line of the discharge summary\r\n", 300)
	app := viaHome.Append("INBOX", int64(len(raw)), nil)
	app.Write([]byte(raw))
	app.Close()
	ad, err := app.Wait()
	if err != nil {
		t.Fatal(err)
	}
	s.wait(t, 3*time.Second, "EXISTS through the relaying replica", func(s *seen) bool { return s.exists == d.NumMessages+1 })
	if err := idle.Close(); err != nil {
		t.Fatal(err)
	}
	if err := idle.Wait(); err != nil {
		t.Fatal(err)
	}
	body := &imap.FetchItemBodySection{Peek: true}
	msgs, err := viaOther.Fetch(imap.UIDSetNum(ad.UID), &imap.FetchOptions{BodySection: []*imap.FetchItemBodySection{body}}).Collect()
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 1 || string(msgs[0].FindBodySection(body)) != raw {
		t.Fatalf("fetched %d messages through the relay; want the bytes appended", len(msgs))
	}
	if err := viaOther.Store(imap.UIDSetNum(ad.UID), &imap.StoreFlags{Op: imap.StoreFlagsAdd, Flags: []imap.Flag{imap.FlagFlagged}}, nil).Close(); err != nil {
		t.Fatal(err)
	}
	if n := rs[other].calls.Load() - callsBefore; n != 0 {
		t.Errorf("the relaying replica made %d provider calls for alice's sessions, want 0", n)
	}
	if err := viaOther.Logout().Wait(); err != nil {
		t.Errorf("LOGOUT through the relay: %v", err)
	}
}

// rawIMAP is a client speaking IMAP by hand, for what imapclient does
// not do: pipelining, literals, exact answers.
type rawIMAP struct {
	t  *testing.T
	c  net.Conn
	br *bufio.Reader
}

func dialRaw(t *testing.T, addr string) *rawIMAP {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	r := &rawIMAP{t: t, c: c, br: bufio.NewReader(c)}
	c.SetDeadline(time.Now().Add(20 * time.Second))
	if g := r.line(); !strings.HasPrefix(g, "* OK [CAPABILITY IMAP4rev1 ") {
		t.Fatalf("greeting %q", g)
	}
	return r
}

func (r *rawIMAP) send(s string) {
	r.t.Helper()
	if _, err := r.c.Write([]byte(s)); err != nil {
		r.t.Fatal(err)
	}
}

func (r *rawIMAP) line() string {
	r.t.Helper()
	l, err := r.br.ReadString('\n')
	if err != nil {
		r.t.Fatalf("reading: %v (after %q)", err, l)
	}
	return strings.TrimRight(l, "\r\n")
}

// until reads lines up to the one starting with prefix, and returns it.
func (r *rawIMAP) until(prefix string) string {
	r.t.Helper()
	for {
		if l := r.line(); strings.HasPrefix(l, prefix) {
			return l
		}
	}
}

// TestDirectorFrontSpeaksIMAP: the part before login, which the front
// answers itself, as go-imap would, through both kinds of hand-off
// (to this replica and to the other): commands pipelined after LOGIN in
// the same packet, literals, AUTHENTICATE PLAIN with and without an
// initial response, a wrong password then a right one, STARTTLS, and an
// unknown command.
func TestDirectorFrontSpeaksIMAP(t *testing.T) {
	rs := directedReplicas(t)
	home, other := homeOf(t, rs)
	for _, via := range []struct {
		name string
		r    *replica
	}{{"home", rs[home]}, {"relayed", rs[other]}} {
		addr := via.r.b.Addr("IMAP (STARTTLS)")
		t.Run(via.name, func(t *testing.T) {
			r := dialRaw(t, addr)
			r.send("a CAPABILITY\r\n")
			if l := r.line(); !strings.HasPrefix(l, "* CAPABILITY IMAP4rev1 SASL-IR LITERAL- STARTTLS AUTH=PLAIN") {
				t.Errorf("CAPABILITY: %q", l)
			}
			r.until("a OK")
			r.send("b LOGIN alice@direct.example wrong\r\n")
			if l := r.line(); !strings.HasPrefix(l, "b NO [AUTHENTICATIONFAILED]") {
				t.Errorf("wrong password: %q", l)
			}
			r.send("c SELECT INBOX\r\n")
			if l := r.line(); !strings.HasPrefix(l, "c BAD [CLIENTBUG]") {
				t.Errorf("SELECT before login: %q", l)
			}
			// A literal, then SELECT and LOGOUT in the same packet as
			// the password.
			r.send("d LOGIN {20}\r\n")
			if l := r.line(); !strings.HasPrefix(l, "+") {
				t.Fatalf("literal: %q", l)
			}
			r.send("alice@direct.example \"pw-alice\"\r\ne SELECT INBOX\r\nf LOGOUT\r\n")
			if l := r.line(); !strings.HasPrefix(l, "d OK [CAPABILITY IMAP4rev1 ") || !strings.Contains(l, "IDLE") || !strings.HasSuffix(l, "Logged in") {
				t.Errorf("LOGIN: %q", l)
			}
			if l := r.until("e "); !strings.HasPrefix(l, "e OK [READ-WRITE]") {
				t.Errorf("SELECT pipelined after LOGIN: %q", l)
			}
			r.until("* BYE")
			r.until("f OK")

			plain := base64.StdEncoding.EncodeToString([]byte("\x00alice@direct.example\x00pw-alice"))
			r = dialRaw(t, addr)
			r.send("a AUTHENTICATE PLAIN " + plain + "\r\nb NOOP\r\n")
			if l := r.line(); !strings.HasPrefix(l, "a OK [CAPABILITY ") {
				t.Errorf("AUTHENTICATE with an initial response: %q", l)
			}
			r.until("b OK")
			r = dialRaw(t, addr)
			r.send("a AUTHENTICATE PLAIN\r\n")
			if l := r.line(); l != "+ " {
				t.Fatalf("continuation: %q", l)
			}
			r.send(plain + "\r\n")
			if l := r.line(); !strings.HasPrefix(l, "a OK [CAPABILITY ") {
				t.Errorf("AUTHENTICATE after a continuation: %q", l)
			}

			r = dialRaw(t, addr)
			r.send("a STARTTLS\r\n")
			if l := r.line(); l != "a OK Begin TLS negotiation now" {
				t.Fatalf("STARTTLS: %q", l)
			}
			tc := tls.Client(r.c, &tls.Config{InsecureSkipVerify: true})
			r.c, r.br = tc, bufio.NewReader(tc)
			r.send("b CAPABILITY\r\n")
			if l := r.line(); strings.Contains(l, "STARTTLS") || !strings.Contains(l, "AUTH=PLAIN") {
				t.Errorf("CAPABILITY after STARTTLS: %q", l)
			}
			r.until("b OK")
			r.send("c LOGIN alice@direct.example pw-alice\r\nd NAMESPACE\r\n")
			if l := r.line(); !strings.HasPrefix(l, "c OK [CAPABILITY ") {
				t.Errorf("LOGIN over TLS: %q", l)
			}
			r.until("d OK")

			r = dialRaw(t, addr)
			r.send("a XYZZY\r\n")
			if l := r.line(); l != "a BAD Unknown command" {
				t.Errorf("unknown command: %q", l)
			}
			if l := r.line(); !strings.HasPrefix(l, "* BYE") {
				t.Errorf("after an unknown command: %q", l)
			}
		})
	}
}

// login logs alice in by hand and reads the answer.
func (r *rawIMAP) login(tag string) string {
	r.t.Helper()
	r.send(tag + " LOGIN alice@direct.example pw-alice\r\n")
	return r.until(tag + " ")
}

// TestDirectorRelaysTheHomesRefusal: a home that refuses the session
// (here: the user has no connection slot left there) answers with BYE,
// which reaches the client as the NO of its LOGIN; the client stays
// connected, not logged in, as with any refused LOGIN.
func TestDirectorRelaysTheHomesRefusal(t *testing.T) {
	rs := directedReplicas(t, func(c *bridge.Config) { c.IMAPMaxConns = 1 })
	home, other := homeOf(t, rs)
	first := dialRaw(t, rs[home].b.Addr("IMAP (STARTTLS)"))
	if l := first.login("a"); !strings.HasPrefix(l, "a OK") {
		t.Fatalf("first login: %q", l)
	}
	second := dialRaw(t, rs[other].b.Addr("IMAP (STARTTLS)"))
	if l := second.login("a"); l != "a NO [LIMIT] Too many connections for this user" {
		t.Errorf("login over the limit, relayed: %q", l)
	}
	second.send("b NOOP\r\n")
	if l := second.line(); l != "b OK NOOP completed" {
		t.Errorf("after the refusal: %q", l)
	}
	first.send("z LOGOUT\r\n")
	first.until("z OK")
	time.Sleep(100 * time.Millisecond) // the home closes the session
	if l := second.login("c"); !strings.HasPrefix(l, "c OK") {
		t.Errorf("login once the slot is free: %q", l)
	}
}

// TestDirectorDrains: a replica that shuts down says BYE [UNAVAILABLE]
// to the clients it relays, after the answer to the command under way;
// a home that shuts down says it through the relaying replica.
func TestDirectorDrains(t *testing.T) {
	for _, stopping := range []string{"relaying", "home"} {
		t.Run(stopping, func(t *testing.T) {
			rs := directedReplicas(t)
			home, other := homeOf(t, rs)
			c := dialRaw(t, rs[other].b.Addr("IMAP (STARTTLS)"))
			if l := c.login("a"); !strings.HasPrefix(l, "a OK") {
				t.Fatalf("login: %q", l)
			}
			c.send("b SELECT INBOX\r\nc IDLE\r\n")
			c.until("b OK")
			c.until("+")
			stop := rs[other].stop
			if stopping == "home" {
				stop = rs[home].stop
			}
			go stop()
			if l := c.until("* BYE"); !strings.HasPrefix(l, "* BYE [UNAVAILABLE]") {
				t.Errorf("BYE: %q", l)
			}
		})
	}
}

// pyDirected is Python's imaplib through a relaying replica: STARTTLS and
// LOGIN on one port, AUTHENTICATE PLAIN on the implicit-TLS one, and the
// commands of a mail client after them.
const pyDirected = `
import imaplib, ssl, sys
host, port, tls_port, user, pw = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
ctx = ssl._create_unverified_context()
m = imaplib.IMAP4(host, port)
m.starttls(ssl_context=ctx)
print("login", m.login(user, pw)[0])
print("caps", m.capability()[1][0].decode())
msg = b"From: bob@direct.example\r\nTo: alice@direct.example\r\nSubject: py directed\r\n\r\nthrough the relay\r\n"
print("append", m.append("INBOX", None, None, msg)[0])
print("select", m.select("INBOX")[0])
typ, data = m.uid("SEARCH", None, "ALL")
last = data[0].split()[-1]
typ, data = m.uid("FETCH", last, "(BODY.PEEK[])")
print("body", data[0][1] == msg)
print("logout", m.logout()[0])
s = imaplib.IMAP4_SSL(host, tls_port, ssl_context=ctx)
print("authenticate", s.authenticate("PLAIN", lambda _: ("\0" + user + "\0" + pw).encode())[0])
print("examine", s.select("INBOX", readonly=True)[0])
print("logout2", s.logout()[0])
`

func TestDirectorWithImaplib(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 is not installed")
	}
	rs := directedReplicas(t)
	_, other := homeOf(t, rs)
	host, port, _ := net.SplitHostPort(rs[other].b.Addr("IMAP (STARTTLS)"))
	_, tlsPort, _ := net.SplitHostPort(rs[other].b.Addr("IMAP (TLS)"))
	before := directedCount(t, rs[other], "remote")
	out, err := exec.Command("python3", "-c", pyDirected, host, port, tlsPort, "alice@direct.example", "pw-alice").CombinedOutput()
	if err != nil {
		t.Fatalf("imaplib: %v\n%s", err, out)
	}
	got := string(out)
	for _, want := range []string{"login OK", "append OK", "select OK", "body True", "logout BYE", "authenticate OK", "examine OK", "logout2 BYE"} {
		if !strings.Contains(got, want+"\n") {
			t.Errorf("imaplib output lacks %q:\n%s", want, got)
		}
	}
	if !strings.Contains(got, "IDLE") || !strings.Contains(got, "UIDPLUS") {
		t.Errorf("CAPABILITY after login answered as before it:\n%s", got)
	}
	if n := directedCount(t, rs[other], "remote") - before; n != 2 {
		t.Errorf("the replica relayed %d logins, want 2", n)
	}
}

// TestRecentOnPostgres: messages a replica's own clients append are
// \Recent to the next session that selects their folder (RFC 3501
// §2.3.2), on a state store in PostgreSQL as on SQLite: the UIDNEXT mark
// the replica itself raised is not taken for another replica's.
func TestRecentOnPostgres(t *testing.T) {
	rs := directedReplicas(t)
	home, other := homeOf(t, rs)
	c := dialRaw(t, rs[home].b.Addr("IMAP (STARTTLS)"))
	if l := c.login("a"); !strings.HasPrefix(l, "a OK") {
		t.Fatalf("login: %q", l)
	}
	c.send("b CREATE Recent\r\n") // the flat layout of a new data directory
	if l := c.until("b "); !strings.HasPrefix(l, "b OK") {
		t.Fatalf("CREATE: %q", l)
	}
	for i, tag := range []string{"c", "d"} {
		msg := fmt.Sprintf("From: bob@direct.example\r\nSubject: recent %d\r\n\r\nbody %d\r\n", i, i)
		c.send(fmt.Sprintf("%s APPEND Recent {%d+}\r\n%s\r\n", tag, len(msg), msg))
		if l := c.until(tag + " "); !strings.HasPrefix(l, tag+" OK") {
			t.Fatalf("APPEND: %q", l)
		}
	}
	e := dialRaw(t, rs[other].b.Addr("IMAP (STARTTLS)"))
	if l := e.login("a"); !strings.HasPrefix(l, "a OK") {
		t.Fatalf("login: %q", l)
	}
	e.send("b EXAMINE Recent\r\n")
	var recent string
	for {
		l := e.line()
		if strings.HasSuffix(l, " RECENT") {
			recent = l
		}
		if strings.HasPrefix(l, "b ") {
			break
		}
	}
	if recent != "* 2 RECENT" {
		t.Errorf("EXAMINE after two APPENDs: %q, want * 2 RECENT", recent)
	}
}
