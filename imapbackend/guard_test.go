package imapbackend_test

import (
	"errors"
	"net"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"

	"github.com/directbridge/directbridge/authguard"
	"github.com/directbridge/directbridge/imapbackend"
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
	guard := authguard.New(authguard.Config{FreeFailures: 2, RefuseAfter: 5, MaxDelay: 300 * time.Millisecond})
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
