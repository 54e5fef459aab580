package smtpbackend_test

import (
	"bufio"
	"encoding/base64"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"

	"github.com/directbridge/directbridge/internal/login"
	"github.com/directbridge/directbridge/smtpbackend"
)

// dialFrom connects with STARTTLS from the loopback source address src.
func (h *harness) dialFrom(t *testing.T, src string) *smtp.Client {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 5 * time.Second}
	conn, err := d.Dial("tcp", h.subAddr)
	if err != nil {
		t.Fatal(err)
	}
	c, err := smtp.NewClientStartTLS(conn, clientTLS())
	if err != nil {
		t.Fatalf("STARTTLS: %v", err)
	}
	return withTimeouts(t, c)
}

// TestAuthGuessingSlowed: wrong passwords from one address are delayed,
// then refused with 454 4.7.0 without asking the provider; the real user
// authenticates at once from another address.
func TestAuthGuessingSlowed(t *testing.T) {
	guard := login.NewGuard(login.GuardConfig{FreeFailures: 2, RefuseAfter: 5, MaxDelay: 300 * time.Millisecond})
	h := newHarness(t, func(c *smtpbackend.Config) { c.Guard = guard })
	start := time.Now()
	for i := 0; i < 5; i++ {
		c := h.dialFrom(t, "127.0.0.1")
		if err := c.Auth(sasl.NewPlainClient("", aliceAddr, "wrong")); err == nil {
			t.Fatal("a wrong password was taken")
		}
		c.Close()
	}
	if took := time.Since(start); took < 600*time.Millisecond {
		t.Errorf("5 wrong passwords took %v; want the 4th and 5th delayed", took)
	}
	checks := h.sb.Calls("GetMessageCount")
	c := h.dialFrom(t, "127.0.0.1")
	err := c.Auth(sasl.NewPlainClient("", aliceAddr, passwords[aliceAddr]))
	var se *smtp.SMTPError
	if !errors.As(err, &se) || se.Code != 454 || se.EnhancedCode != (smtp.EnhancedCode{4, 7, 0}) {
		t.Fatalf("the 6th attempt from the guessing address: %v; want 454 4.7.0", err)
	}
	if n := h.sb.Calls("GetMessageCount"); n != checks {
		t.Errorf("a refused attempt reached the provider")
	}
	began := time.Now()
	c = h.dialFrom(t, "127.0.0.2")
	if err := c.Auth(sasl.NewPlainClient("", aliceAddr, passwords[aliceAddr])); err != nil {
		t.Fatalf("the real user from another address: %v", err)
	}
	if took := time.Since(began); took > time.Second {
		t.Errorf("the real user's AUTH took %v; want no delay", took)
	}
}

// TestStalledStrangersCannotStarveUsers: 300 connections from one
// address that send "EHLO " without a line end take neither the listener
// nor the real user's AUTH from another address, which succeeds within
// 5 s; those over the per-address limit get 421 at once.
func TestStalledStrangersCannotStarveUsers(t *testing.T) {
	h := newHarness(t, nil)
	var strangers []net.Conn
	t.Cleanup(func() {
		for _, c := range strangers {
			c.Close()
		}
	})
	for i := 0; i < 300; i++ {
		c, err := net.Dial("tcp", h.subAddr)
		if err != nil {
			t.Fatalf("stranger %d: %v", i, err)
		}
		c.Write([]byte("EHLO "))
		strangers = append(strangers, c)
	}
	began := time.Now()
	c := h.dialFrom(t, "127.0.0.2")
	if err := c.Auth(sasl.NewPlainClient("", aliceAddr, passwords[aliceAddr])); err != nil {
		t.Fatalf("the real user: %v", err)
	}
	if took := time.Since(began); took > 5*time.Second {
		t.Fatalf("the real user's AUTH took %v beside 300 stalled strangers", took)
	}
	last := strangers[len(strangers)-1]
	last.SetReadDeadline(time.Now().Add(5 * time.Second))
	line, _ := bufio.NewReader(last).ReadString('\n')
	if !strings.HasPrefix(line, "421 4.7.0") {
		t.Errorf("a stranger over the limit got %q; want 421 4.7.0", line)
	}
}

// TestBareCRAnswered: a message whose text ends "…hello\r" before the end
// of data makes go-smtp miss that end (it loses a CR after a CR); the
// bridge answers 451 4.4.2 after DataIdle without data (2 s here, 30 s by
// default), not after the five-minute read timeout.
func TestBareCRAnswered(t *testing.T) {
	h := newHarness(t, func(c *smtpbackend.Config) { c.DataIdle = 2 * time.Second })
	c, err := net.Dial("tcp", h.subAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := bufio.NewReader(c)
	line := func(cmd string) string {
		if cmd != "" {
			c.Write([]byte(cmd + "\r\n"))
		}
		for {
			l, err := r.ReadString('\n')
			if err != nil {
				t.Fatalf("after %q: %v", cmd, err)
			}
			if len(l) < 4 || l[3] != '-' {
				return l
			}
		}
	}
	c.SetDeadline(time.Now().Add(30 * time.Second))
	line("")
	line("EHLO client.example")
	plain := base64.StdEncoding.EncodeToString([]byte("\x00" + aliceAddr + "\x00" + passwords[aliceAddr]))
	if got := line("AUTH PLAIN " + plain); !strings.HasPrefix(got, "235") {
		t.Fatalf("AUTH: %q", got)
	}
	line("MAIL FROM:<" + aliceAddr + ">")
	line("RCPT TO:<" + bobAddr + ">")
	if got := line("DATA"); !strings.HasPrefix(got, "354") {
		t.Fatalf("DATA: %q", got)
	}
	began := time.Now()
	c.Write([]byte("From: " + aliceAddr + "\r\nTo: " + bobAddr + "\r\nSubject: cr\r\n\r\nhello\r\r\n.\r\n"))
	got := line("")
	if !strings.HasPrefix(got, "451 4.4.2") {
		t.Fatalf("reply %q; want 451 4.4.2", got)
	}
	if took := time.Since(began); took > 15*time.Second {
		t.Errorf("answered after %v", took)
	}
}
