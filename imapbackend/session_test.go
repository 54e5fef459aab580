package imapbackend_test

import (
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"
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
