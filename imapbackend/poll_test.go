package imapbackend_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"

	"github.com/directbridge/directbridge/imapbackend"
	"github.com/directbridge/directbridge/internal/mailstore"
	"github.com/directbridge/directbridge/upstream"
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

// TestIdlePollCostsOneCall: under a provider budget, a poll of an idle
// folder that finds nothing costs one call (what was received since the
// last look), and new mail it finds reaches the IDLE client within a
// poll interval and a refresh. Issue 22: at 100 requests a second, a
// thousand idle users otherwise wait twice as long for their mail.
func TestIdlePollCostsOneCall(t *testing.T) {
	interval := 100 * time.Millisecond
	// A budget of 4 requests a second: polls of one folder come every
	// 255 ms (1/(4·0.98)), full refreshes every 25 s (2/(4·0.02)).
	e := newEnv(t, options{pollInterval: interval, engine: func(c *mailstore.Config) { c.Budget = upstream.NewBudget(4) }})
	e.deliver(alice, "INBOX", testMessage("first"))
	x := e.startIdler(t)
	x.startIdle(t)

	e.sandbox.ResetCalls()
	time.Sleep(3 * time.Second)
	calls := e.sandbox.CallCounts()
	peeks := calls["SearchMessagesMetadataByReceivedDate"]
	if peeks < 6 || peeks > 13 || e.sandbox.TotalCalls() != peeks {
		t.Errorf("3 s of idling cost %v; want about 11 polls of one SearchMessagesMetadataByReceivedDate each, nothing else", calls)
	}

	e.sandbox.ResetCalls()
	e.deliver(alice, "INBOX", testMessage("second"))
	x.awaitExists(t, 2, 3*time.Second)
	// The peek that found it showed it, from the metadata it answered
	// with: no listing.
	calls = e.sandbox.CallCounts()
	if calls["SearchMessagesMetadataByReceivedDate"] < 1 || e.sandbox.TotalCalls() != calls["SearchMessagesMetadataByReceivedDate"] {
		t.Errorf("new mail cost %v; want peeks alone", calls)
	}
	x.stopIdle(t)
	// Shown unread, described from that metadata at no cost.
	e.sandbox.ResetCalls()
	msgs, err := x.c.Fetch(imap.SeqSetNum(2), &imap.FetchOptions{UID: true, Flags: true, Envelope: true}).Collect()
	if err != nil || len(msgs) != 1 || msgs[0].Envelope == nil || msgs[0].Envelope.Subject != "second" || slices.Contains(msgs[0].Flags, imap.FlagSeen) || msgs[0].UID != 2 {
		t.Fatalf("FETCH 2 (UID FLAGS ENVELOPE): %+v, %v; want UID 2, unread, Subject second", msgs, err)
	}
	if n := e.sandbox.TotalCalls(); n != 0 {
		t.Errorf("FETCH of the new message cost %v; want nothing", e.sandbox.CallCounts())
	}
}

// TestPeekHoleRefreshesInFull: new mail a peek finds after a hole (a
// message delivered and removed at the provider between two polls, or a
// copy a search cannot date) is not placed from the peek's answer, whose
// UIDs then do not run on from UIDNEXT: a full refresh lists the folder at
// once, and the IDLE client sees the one message that is there, with no
// EXISTS for the one that is gone.
func TestPeekHoleRefreshesInFull(t *testing.T) {
	interval := 500 * time.Millisecond
	// Polls every 0.5 s; full refreshes every 25 s: within the test,
	// only a peek's own decision lists the folder.
	e := newEnv(t, options{pollInterval: interval, engine: func(c *mailstore.Config) { c.Budget = upstream.NewBudget(4) }})
	e.deliver(alice, "INBOX", testMessage("first"))
	x := e.startIdler(t)
	x.startIdle(t)
	// Right after a peek, so that the next one sees both changes.
	e.sandbox.ResetCalls()
	for deadline := time.Now().Add(3 * time.Second); e.sandbox.Calls("SearchMessagesMetadataByReceivedDate") == 0; time.Sleep(2 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no peek within 3 s")
		}
	}
	gone := e.deliver(alice, "INBOX", testMessage("gone"))
	kept := e.deliver(alice, "INBOX", testMessage("kept"))
	if err := e.client.DeleteMessagesByUIDs(context.Background(), auth(alice), "INBOX", []int64{gone}, true); err != nil {
		t.Fatal(err)
	}
	e.sandbox.ResetCalls()
	x.awaitExists(t, 2, 3*time.Second)
	x.stopIdle(t)
	x.mu.Lock()
	if len(x.exists) != 1 || x.expunges != 0 {
		t.Errorf("EXISTS %v, %d EXPUNGE; want one EXISTS 2 and no EXPUNGE", x.exists, x.expunges)
	}
	x.mu.Unlock()
	if n := e.sandbox.Calls("GetUIDs"); n != 1 {
		t.Errorf("the hole cost %d GetUIDs (%v); want one listing", n, e.sandbox.CallCounts())
	}
	msgs, err := x.c.Fetch(imap.SeqSetNum(2), &imap.FetchOptions{UID: true, Envelope: true}).Collect()
	if err != nil || len(msgs) != 1 || msgs[0].UID != imap.UID(kept) || msgs[0].Envelope == nil || msgs[0].Envelope.Subject != "kept" {
		t.Fatalf("FETCH 2: %+v, %v; want UID %d, Subject kept", msgs, err, kept)
	}
}

// TestPeekWithTheProviderClockKnown: once an APPEND has taught the bridge
// the provider's clock (mailstore/provclock.go), peeks search the narrow
// window around the last look, and new mail is still found by one call
// and shown within a poll interval.
func TestPeekWithTheProviderClockKnown(t *testing.T) {
	e := newEnv(t, options{pollInterval: 100 * time.Millisecond, engine: func(c *mailstore.Config) { c.Budget = upstream.NewBudget(4) }})
	e.deliver(alice, "INBOX", testMessage("first"))
	x := e.startIdler(t)
	// An APPEND to the selected folder: its UID is confirmed from the
	// new message's metadata, which teaches the clock.
	raw := testMessage("appended")
	cmd := x.c.Append("INBOX", int64(len(raw)), nil)
	cmd.Write([]byte(raw))
	cmd.Close()
	if _, err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	x.startIdle(t)
	time.Sleep(time.Second) // past the APPEND's own refreshes
	e.sandbox.ResetCalls()
	e.deliver(alice, "INBOX", testMessage("second"))
	x.awaitExists(t, 3, 3*time.Second)
	x.stopIdle(t)
	if calls := e.sandbox.CallCounts(); e.sandbox.TotalCalls() != calls["SearchMessagesMetadataByReceivedDate"] {
		t.Errorf("new mail with the clock known cost %v; want peeks alone", calls)
	}
	msgs, err := x.c.Fetch(imap.SeqSetNum(3), &imap.FetchOptions{Envelope: true}).Collect()
	if err != nil || len(msgs) != 1 || msgs[0].Envelope == nil || msgs[0].Envelope.Subject != "second" {
		t.Fatalf("FETCH 3 ENVELOPE: %+v, %v; want Subject second", msgs, err)
	}
}

// idler is a client of alice's that SELECTed INBOX and sits in IDLE,
// keeping the EXISTS and EXPUNGE responses it reads.
type idler struct {
	c    *imapclient.Client
	idle *imapclient.IdleCommand

	mu       sync.Mutex
	exists   []uint32
	expunges int
}

func (e *env) startIdler(t *testing.T) *idler {
	t.Helper()
	x := &idler{}
	c, err := imapclient.DialInsecure(e.addr, &imapclient.Options{UnilateralDataHandler: &imapclient.UnilateralDataHandler{
		Mailbox: func(d *imapclient.UnilateralDataMailbox) {
			if d.NumMessages != nil {
				x.mu.Lock()
				x.exists = append(x.exists, *d.NumMessages)
				x.mu.Unlock()
			}
		},
		Expunge: func(uint32) {
			x.mu.Lock()
			x.expunges++
			x.mu.Unlock()
		},
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	x.c = c
	if err := c.Login(alice, alicePW).Wait(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Select("INBOX", nil).Wait(); err != nil {
		t.Fatal(err)
	}
	return x
}

// startIdle sends IDLE.
func (x *idler) startIdle(t *testing.T) {
	t.Helper()
	idle, err := x.c.Idle()
	if err != nil {
		t.Fatal(err)
	}
	x.idle = idle
}

// stopIdle ends IDLE (DONE) and waits for its answer.
func (x *idler) stopIdle(t *testing.T) {
	t.Helper()
	x.idle.Close()
	if err := x.idle.Wait(); err != nil {
		t.Fatal(err)
	}
}

// awaitExists waits up to limit for an EXISTS of n.
func (x *idler) awaitExists(t *testing.T, n uint32, limit time.Duration) {
	t.Helper()
	for deadline := time.Now().Add(limit); ; time.Sleep(10 * time.Millisecond) {
		x.mu.Lock()
		seen := slices.Contains(x.exists, n)
		got := slices.Clone(x.exists)
		x.mu.Unlock()
		if seen {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("EXISTS %v within %s; want %d", got, limit, n)
		}
	}
}
