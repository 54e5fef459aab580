package imapbackend_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"

	"github.com/directbridge/directbridge/sandbox"
)

func TestLoginAndSelect(t *testing.T) {
	e := newEnv(t, options{})
	e.deliver(alice, "INBOX", testMessage("one"))
	e.deliver(alice, "INBOX", testMessage("two"))

	c := e.dial()
	if err := c.Login(alice, "wrong").Wait(); err == nil {
		t.Fatal("wrong password accepted")
	} else if ie, ok := err.(*imap.Error); !ok || ie.Code != imap.ResponseCodeAuthenticationFailed {
		t.Fatalf("wrong password: %v; want NO [AUTHENTICATIONFAILED]", err)
	}
	c = e.login(alice, alicePW)
	data, err := c.Select("inbox", nil).Wait()
	if err != nil {
		t.Fatal(err)
	}
	if data.NumMessages != 2 || data.UIDValidity == 0 || data.UIDNext != 3 {
		t.Fatalf("SELECT: %+v", data)
	}
	// A second connection shares the check and the mirror.
	calls := e.sandbox.Calls("GetMessageCount")
	c2 := e.login(alice, alicePW)
	if _, err := c2.Select("INBOX", nil).Wait(); err != nil {
		t.Fatal(err)
	}
	if n := e.sandbox.Calls("GetMessageCount"); n != calls {
		t.Fatalf("second login cost %d credential checks", n-calls)
	}
}

func TestNamespace(t *testing.T) {
	e := newEnv(t, options{})
	c := e.login(alice, alicePW)
	ns, err := c.Namespace().Wait()
	if err != nil {
		t.Fatal(err)
	}
	if len(ns.Personal) != 1 || ns.Personal[0].Prefix != "INBOX." || ns.Personal[0].Delim != '.' {
		t.Fatalf("NAMESPACE: %+v", ns)
	}
}

func TestIdlePushesNewMail(t *testing.T) {
	e := newEnv(t, options{pollInterval: 100 * time.Millisecond})
	got := make(chan uint32, 4)
	c, err := imapclient.DialInsecure(e.addr, &imapclient.Options{UnilateralDataHandler: &imapclient.UnilateralDataHandler{
		Mailbox: func(d *imapclient.UnilateralDataMailbox) {
			if d.NumMessages != nil {
				got <- *d.NumMessages
			}
		},
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Login(alice, alicePW).Wait(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Select("INBOX", nil).Wait(); err != nil {
		t.Fatal(err)
	}
	idle, err := c.Idle()
	if err != nil {
		t.Fatal(err)
	}
	e.deliver(alice, "INBOX", testMessage("pushed"))
	select {
	case n := <-got:
		if n != 1 {
			t.Fatalf("EXISTS %d; want 1", n)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no EXISTS during IDLE")
	}
	idle.Close()
	idle.Wait()
}

func TestTLSAndSTARTTLS(t *testing.T) {
	e := newEnv(t, options{})
	for name, dial := range map[string]func() (*imapclient.Client, error){
		"implicit TLS": func() (*imapclient.Client, error) {
			return imapclient.DialTLS(e.tlsAddr, &imapclient.Options{TLSConfig: e.tlsConf})
		},
		"STARTTLS": func() (*imapclient.Client, error) {
			return imapclient.DialStartTLS(e.addr, &imapclient.Options{TLSConfig: e.tlsConf})
		},
	} {
		c, err := dial()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if err := c.Login(alice, alicePW).Wait(); err != nil {
			t.Fatalf("%s login: %v", name, err)
		}
		if _, err := c.Select("INBOX", nil).Wait(); err != nil {
			t.Fatalf("%s select: %v", name, err)
		}
		c.Close()
	}
}

// TestProviderFaults: a provider that is down, slow to fail or answering
// garbage gives a clear NO [UNAVAILABLE], and the session goes on once
// the provider is back.
func TestProviderFaults(t *testing.T) {
	e := newEnv(t, options{})
	e.deliver(alice, "INBOX", testMessage("one"))
	c := e.login(alice, alicePW)
	for _, f := range []sandbox.Fault{{Status: 503}, {Status: 500}, {Malformed: true}, {Reset: true}} {
		e.sandbox.InjectFault("GetUIDs", f)
		_, err := c.Select("INBOX", nil).Wait()
		ie, ok := err.(*imap.Error)
		if !ok || ie.Type != imap.StatusResponseTypeNo || ie.Code != imap.ResponseCodeUnavailable {
			t.Errorf("fault %+v: SELECT gave %v; want NO [UNAVAILABLE]", f, err)
		}
		e.sandbox.ClearFaults()
	}
	data, err := c.Select("INBOX", nil).Wait()
	if err != nil || data.NumMessages != 1 {
		t.Fatalf("after the provider is back: %+v, %v", data, err)
	}
	// Login while the provider is down is UNAVAILABLE, not a false "wrong password".
	e.sandbox.InjectFault("GetMessageCount", sandbox.Fault{Status: 503})
	c2 := e.dial()
	err = c2.Login(bob, bobPW).Wait()
	if ie, ok := err.(*imap.Error); !ok || ie.Code != imap.ResponseCodeUnavailable {
		t.Fatalf("login with provider down: %v; want NO [UNAVAILABLE]", err)
	}
}

// TestRestartKeepsUIDValidity: a new bridge on the same state directory
// announces the same UIDVALIDITY and UIDNEXT.
func TestRestartKeepsUIDValidity(t *testing.T) {
	state, mail := t.TempDir(), t.TempDir()
	e := newEnv(t, options{stateDir: state, sandboxDir: mail})
	e.deliver(alice, "INBOX", testMessage("one"))
	first, err := e.login(alice, alicePW).Select("INBOX", nil).Wait()
	if err != nil {
		t.Fatal(err)
	}
	e.server.Shutdown(context.Background())

	e2 := newEnv(t, options{stateDir: state, sandboxDir: mail})
	again, err := e2.login(alice, alicePW).Select("INBOX", nil).Wait()
	if err != nil {
		t.Fatal(err)
	}
	if again.UIDValidity != first.UIDValidity || again.UIDNext != first.UIDNext || again.NumMessages != 1 {
		t.Fatalf("after restart %+v; before %+v", again, first)
	}
}

// TestShutdownSaysUnavailable: a shutdown ends every IMAP connection, a
// selected one and one not yet logged in, with BYE [UNAVAILABLE] (RFC
// 5530 §3), which tells the client to reconnect later rather than report
// an error.
func TestShutdownSaysUnavailable(t *testing.T) {
	e := newEnv(t, options{})
	e.deliver(alice, "INBOX", testMessage("one"))
	in := e.rawLogin(t, "selected", alice, alicePW)
	if _, tagged := in.do("SELECT INBOX"); !strings.HasPrefix(tagged, "OK") {
		t.Fatalf("SELECT: %s", tagged)
	}
	out, _ := e.rawDial(t, "stranger")
	e.server.Shutdown(context.Background())
	for _, c := range []*imapConn{in, out} {
		line, err := c.readResponseErr()
		if err != nil || !strings.HasPrefix(line, "* BYE [UNAVAILABLE] ") {
			t.Errorf("%s: after the shutdown read %q, %v; want * BYE [UNAVAILABLE]", c.name, line, err)
		}
	}
}

// TestLoginRefusedWithoutStateStore: while the state store does not
// answer, LOGIN is refused with NO [UNAVAILABLE] saying so, rather than
// letting in a session that could only fail or guess.
func TestLoginRefusedWithoutStateStore(t *testing.T) {
	e := newEnv(t, options{})
	c := e.rawLogin(t, "before", alice, alicePW) // the store answers: in
	c.do("LOGOUT")
	e.store.Close()
	ic, _ := e.rawDial(t, "after")
	_, tagged := ic.do(fmt.Sprintf("LOGIN %q %q", alice, alicePW))
	if !strings.HasPrefix(tagged, "NO [UNAVAILABLE]") || !strings.Contains(tagged, "state store") {
		t.Fatalf("LOGIN with the state store closed: %s; want NO [UNAVAILABLE] naming the state store", tagged)
	}
}
