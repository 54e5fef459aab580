package imapbackend_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"
)

// remoteListener is a loopback listener that reports a non-loopback
// address, so the server treats it as reachable from the network; no
// traffic leaves the machine.
type remoteListener struct{ net.Listener }

func (remoteListener) Addr() net.Addr { return &net.TCPAddr{IP: net.IPv4(192, 0, 2, 10), Port: 143} }

// TestNoCleartextLoginOffLoopback: on a non-loopback listener, LOGIN is
// refused before STARTTLS (LOGINDISABLED, RFC 9051 §6.2.3) and works after.
func TestNoCleartextLoginOffLoopback(t *testing.T) {
	e := newEnv(t, options{})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go e.server.ServePlain(remoteListener{l})

	c, err := imapclient.DialInsecure(l.Addr().String(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	caps, err := c.Capability().Wait()
	if err != nil {
		t.Fatal(err)
	}
	if !caps.Has(imap.CapLoginDisabled) || !caps.Has(imap.CapStartTLS) {
		t.Fatalf("capabilities in clear text: %v; want LOGINDISABLED and STARTTLS", caps)
	}
	if err := c.Login(alice, alicePW).Wait(); err == nil {
		t.Fatal("LOGIN in clear text accepted on a non-loopback listener")
	}

	tc, err := imapclient.DialStartTLS(l.Addr().String(), &imapclient.Options{TLSConfig: e.tlsConf})
	if err != nil {
		t.Fatal(err)
	}
	defer tc.Close()
	if err := tc.Login(alice, alicePW).Wait(); err != nil {
		t.Fatalf("LOGIN after STARTTLS: %v", err)
	}
}

// TestShutdownSaysBye: a shutdown tells every connected client BYE before
// the connection closes.
func TestShutdownSaysBye(t *testing.T) {
	e := newEnv(t, options{})
	conn, err := net.Dial("tcp", e.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	r := bufio.NewReader(conn)
	r.ReadString('\n') // greeting
	fmt.Fprintf(conn, "a LOGIN %s %s\r\n", alice, alicePW)
	for {
		l, err := r.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(l, "a ") {
			break
		}
	}
	e.server.Shutdown(context.Background())
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	l, err := r.ReadString('\n')
	if err != nil || !strings.HasPrefix(l, "* BYE") {
		t.Fatalf("after shutdown: %q, %v; want * BYE", l, err)
	}
}

// TestUIDBeyond32Bits: IMAP UIDs are 32 bits (RFC 9051 §2.3.1.1). A folder
// whose provider UIDs go beyond is refused with NO [LIMIT], never served
// with truncated UIDs that would name other messages; other folders work.
func TestUIDBeyond32Bits(t *testing.T) {
	e := newEnv(t, options{})
	ctx := context.Background()
	if err := e.sandbox.SetNextUID(ctx, alice, "INBOX.Drafts", 1<<32+5); err != nil {
		t.Fatal(err)
	}
	e.deliver(alice, "INBOX.Drafts", testMessage("huge-uid"))
	e.deliver(alice, "INBOX", testMessage("normal"))
	c := e.login(alice, alicePW)
	_, err := c.Select("INBOX.Drafts", nil).Wait()
	if ie, ok := err.(*imap.Error); !ok || ie.Code != imap.ResponseCodeLimit {
		t.Fatalf("SELECT of a folder with a UID beyond 32 bits: %v; want NO [LIMIT]", err)
	}
	if d, err := c.Select("INBOX", nil).Wait(); err != nil || d.NumMessages != 1 {
		t.Fatalf("SELECT INBOX after that: %+v, %v", d, err)
	}
}
