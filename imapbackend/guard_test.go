package imapbackend_test

import (
	"bufio"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"

	"github.com/directbridge/directbridge/imapbackend"
	"github.com/directbridge/directbridge/internal/limits"
	"github.com/directbridge/directbridge/internal/login"
)

// dialFrom connects from the loopback source address src (127.0.0.x: a
// different client address on the same host).
func (e *env) dialFrom(src string) *imapclient.Client {
	e.t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 5 * time.Second}
	conn, err := d.Dial("tcp", e.addr)
	if err != nil {
		e.t.Fatal(err)
	}
	c := imapclient.New(conn, nil)
	e.t.Cleanup(func() { c.Close() })
	return c
}

// TestLoginGuessingSlowed: wrong passwords from one address are delayed
// and then refused with NO [UNAVAILABLE], even a right one from there, and
// without asking the provider; the real user logs in at once from
// another address, with no delay.
func TestLoginGuessingSlowed(t *testing.T) {
	guard := login.NewGuard(login.GuardConfig{FreeFailures: 2, RefuseAfter: 5, MaxDelay: 300 * time.Millisecond})
	e := newEnv(t, options{cfg: func(c *imapbackend.Config) { c.Guard = guard }})
	start := time.Now()
	for i := 0; i < 5; i++ {
		c := e.dialFrom("127.0.0.1")
		if err := c.Login(alice, "wrong").Wait(); err == nil {
			t.Fatal("a wrong password was taken")
		}
		c.Close()
	}
	if took := time.Since(start); took < 600*time.Millisecond {
		t.Errorf("5 wrong passwords took %v; want the 4th and 5th delayed (>= 0.3 s each)", took)
	}
	checks := e.sandbox.Calls("GetMessageCount")
	c := e.dialFrom("127.0.0.1")
	err := c.Login(alice, alicePW).Wait()
	var ie *imap.Error
	if !errors.As(err, &ie) || ie.Code != imap.ResponseCodeUnavailable {
		t.Fatalf("the 6th attempt from the guessing address: %v; want NO [UNAVAILABLE]", err)
	}
	if n := e.sandbox.Calls("GetMessageCount"); n != checks {
		t.Errorf("a refused attempt reached the provider (%d calls)", n-checks)
	}
	began := time.Now()
	c = e.dialFrom("127.0.0.2")
	if err := c.Login(alice, alicePW).Wait(); err != nil {
		t.Fatalf("the real user from another address: %v", err)
	}
	if took := time.Since(began); took > 250*time.Millisecond {
		t.Errorf("the real user's login took %v; want no delay", took)
	}
}

// TestStrangersCannotStarveUsers: 600 connections from one address that
// never log in take neither the listener nor the real user's login from
// another address, which succeeds within 5 s; those over the per-address
// limit are told BYE at once. A stranger is disconnected after the
// pre-authentication time, although go-imap sets a read timeout of
// minutes.
func TestStrangersCannotStarveUsers(t *testing.T) {
	e := newEnv(t, options{cfg: func(c *imapbackend.Config) {
		c.Connections = limits.Limits{PreAuthTime: 2 * time.Second}
	}})
	var strangers []net.Conn
	t.Cleanup(func() {
		for _, c := range strangers {
			c.Close()
		}
	})
	for i := 0; i < 600; i++ {
		c, err := net.Dial("tcp", e.addr)
		if err != nil {
			t.Fatalf("stranger %d: %v", i, err)
		}
		strangers = append(strangers, c)
	}
	began := time.Now()
	c := e.dialFrom("127.0.0.2")
	if err := c.Login(alice, alicePW).Wait(); err != nil {
		t.Fatalf("the real user: %v", err)
	}
	if took := time.Since(began); took > 5*time.Second {
		t.Fatalf("the real user's login took %v beside 600 strangers", took)
	}
	// The last stranger was over the limit: BYE at once.
	last := strangers[len(strangers)-1]
	last.SetReadDeadline(time.Now().Add(5 * time.Second))
	line, _ := bufio.NewReader(last).ReadString('\n')
	if !strings.HasPrefix(line, "* BYE") {
		t.Errorf("a stranger over the limit got %q; want BYE", line)
	}
	// The first one was let in, greeted, and is let go after the
	// pre-authentication time.
	first := strangers[0]
	first.SetReadDeadline(time.Now().Add(10 * time.Second))
	r := bufio.NewReader(first)
	if greeting, _ := r.ReadString('\n'); !strings.HasPrefix(greeting, "* OK") {
		t.Fatalf("a stranger within the limit got %q; want the greeting", greeting)
	}
	start := time.Now()
	if _, err := io.Copy(io.Discard, r); err != nil && !errors.Is(err, io.EOF) && time.Since(start) > 9*time.Second {
		t.Fatalf("a silent stranger was not disconnected: %v", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("a silent stranger stayed %v; want about the 2 s pre-authentication time", took)
	}
}
