package imapbackend_test

import (
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2/imapclient"

	"github.com/directbridge/directbridge/imapbackend"
)

// TestIdleConnectionsShareOnePoller: a hundred connections idling on one
// folder cost one poll per interval, not a hundred, and cost one
// credential check between them.
func TestIdleConnectionsShareOnePoller(t *testing.T) {
	const conns = 100
	interval := 200 * time.Millisecond
	e := newEnv(t, options{pollInterval: interval, cfg: func(c *imapbackend.Config) { c.MaxConnsPerUser = conns }})
	e.deliver(alice, "INBOX", testMessage("first"))

	var mu sync.Mutex
	exists := map[int]uint32{}
	var idles []*imapclient.IdleCommand
	for i := range conns {
		c, err := imapclient.DialInsecure(e.addr, &imapclient.Options{UnilateralDataHandler: &imapclient.UnilateralDataHandler{
			Mailbox: func(d *imapclient.UnilateralDataMailbox) {
				if d.NumMessages != nil {
					mu.Lock()
					exists[i] = *d.NumMessages
					mu.Unlock()
				}
			},
		}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
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
		idles = append(idles, idle)
	}
	if n := e.sandbox.Calls("GetMessageCount"); n != 1 {
		t.Errorf("%d credential checks for %d logins; want 1", n, conns)
	}

	before := e.sandbox.Calls("GetUIDs")
	const periods = 5
	time.Sleep(periods * interval)
	polls := e.sandbox.Calls("GetUIDs") - before
	if polls < periods-2 || polls > periods+1 {
		t.Errorf("%d polls in %d intervals with %d idle connections; want about %d", polls, periods, conns, periods)
	}

	// New mail reaches every idling connection from that one poller.
	e.deliver(alice, "INBOX", testMessage("second"))
	deadline := time.Now().Add(5 * time.Second)
	for {
		mu.Lock()
		n := 0
		for _, v := range exists {
			if v == 2 {
				n++
			}
		}
		mu.Unlock()
		if n == conns {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d connections saw EXISTS 2", n, conns)
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, idle := range idles {
		idle.Close()
	}
}
