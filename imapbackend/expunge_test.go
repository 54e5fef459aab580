package imapbackend_test

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"

	"github.com/directbridge/directbridge/imapbackend"
	"github.com/directbridge/directbridge/sandbox"
)

func (e *env) deletedCount(user, folder string) int {
	e.t.Helper()
	n, err := e.client.GetDeletedMessageCount(context.Background(), auth(user), folder)
	if err != nil {
		e.t.Fatal(err)
	}
	return n
}

// TestExpungeToTrash: by default EXPUNGE moves the messages marked
// \Deleted to INBOX.Trash, where they can be recovered; the acting
// connection and another one each get one EXPUNGE per message, highest
// sequence number first.
func TestExpungeToTrash(t *testing.T) {
	e := newEnv(t, options{})
	for _, s := range []string{"one", "two", "three"} {
		e.deliver(alice, "INBOX", testMessage(s))
	}
	c := e.login(alice, alicePW)
	other := e.watch(alice, alicePW)
	mustSelectFolder(t, c, "INBOX")
	mustSelectFolder(t, other.Client, "INBOX")
	storeFlags(t, c, imap.SeqSetNum(1, 3), imap.StoreFlagsAdd, true, `\Deleted`)

	seqs, err := c.Expunge().Collect()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(seqs, []uint32{3, 1}) {
		t.Fatalf("EXPUNGE answered %v; want [3 1]", seqs)
	}
	if err := other.Noop().Wait(); err != nil {
		t.Fatal(err)
	}
	if exp, _, _ := other.take(); !slices.Equal(exp, []uint32{3, 1}) {
		t.Fatalf("other connection got EXPUNGE %v; want [3 1]", exp)
	}
	if n := e.count(alice, "INBOX"); n != 1 {
		t.Errorf("INBOX has %d messages; want 1", n)
	}
	if n := e.count(alice, "INBOX.Trash"); n != 2 {
		t.Errorf("INBOX.Trash has %d messages; want 2 (recoverable)", n)
	}
	if n := e.deletedCount(alice, "INBOX"); n != 2 {
		t.Errorf("deleted count of INBOX %d; want 2", n)
	}
	// The message left is the one not marked, and EXPUNGE again is a no-op.
	if seqs, err := c.Expunge().Collect(); err != nil || len(seqs) != 0 {
		t.Fatalf("second EXPUNGE: %v %v", seqs, err)
	}
	if ids := e.msgIDs(alice, "INBOX", []imap.UID{2}); ids[2] != "<two@direct.example>" {
		t.Fatalf("INBOX keeps %v", ids)
	}
}

// TestExpungeInTrashIsForever: inside INBOX.Trash there is nowhere further
// to go: EXPUNGE removes for good.
func TestExpungeInTrashIsForever(t *testing.T) {
	e := newEnv(t, options{})
	e.deliver(alice, "INBOX.Trash", testMessage("old"))
	c := e.login(alice, alicePW)
	mustSelectFolder(t, c, "inbox.Trash")
	storeFlags(t, c, imap.SeqSetNum(1), imap.StoreFlagsAdd, true, `\Deleted`)
	if seqs, err := c.Expunge().Collect(); err != nil || !slices.Equal(seqs, []uint32{1}) {
		t.Fatalf("EXPUNGE: %v %v", seqs, err)
	}
	if n := e.count(alice, "INBOX.Trash"); n != 0 {
		t.Fatalf("INBOX.Trash has %d messages; want 0", n)
	}
}

// TestExpungeDeleteForever: with Config.DeleteForever, EXPUNGE removes
// for good everywhere.
func TestExpungeDeleteForever(t *testing.T) {
	e := newEnv(t, options{cfg: func(c *imapbackend.Config) { c.DeleteForever = true }})
	e.deliver(alice, "INBOX", testMessage("one"))
	c := e.login(alice, alicePW)
	mustSelectFolder(t, c, "INBOX")
	storeFlags(t, c, imap.SeqSetNum(1), imap.StoreFlagsAdd, true, `\Deleted`)
	if seqs, err := c.Expunge().Collect(); err != nil || !slices.Equal(seqs, []uint32{1}) {
		t.Fatalf("EXPUNGE: %v %v", seqs, err)
	}
	if n := e.count(alice, "INBOX"); n != 0 {
		t.Errorf("INBOX has %d messages; want 0", n)
	}
	if n := e.count(alice, "INBOX.Trash"); n != 0 {
		t.Errorf("INBOX.Trash has %d messages; want 0 (deleted for good)", n)
	}
}

// TestUIDExpunge: UID EXPUNGE removes only the given messages among those
// marked \Deleted (RFC 4315 §2.1).
func TestUIDExpunge(t *testing.T) {
	e := newEnv(t, options{})
	var uids []imap.UID
	for _, s := range []string{"one", "two", "three"} {
		uids = append(uids, imap.UID(e.deliver(alice, "INBOX", testMessage(s))))
	}
	c := e.login(alice, alicePW)
	mustSelectFolder(t, c, "INBOX")
	storeFlags(t, c, imap.SeqSetNum(1, 2, 3), imap.StoreFlagsAdd, true, `\Deleted`)
	seqs, err := c.UIDExpunge(imap.UIDSetNum(uids[1])).Collect()
	if err != nil || !slices.Equal(seqs, []uint32{2}) {
		t.Fatalf("UID EXPUNGE: %v %v", seqs, err)
	}
	if n := e.count(alice, "INBOX"); n != 2 {
		t.Fatalf("INBOX has %d messages; want 2", n)
	}
	flags := flagsByUID(t, c, uids[0], uids[2])
	if len(flags) != 2 || !slices.Equal(flags[uids[0]], []imap.Flag{`\Deleted`}) {
		t.Fatalf("messages left: %v", flags)
	}
}

// TestCloseExpungesSilently: CLOSE removes the messages marked \Deleted
// without EXPUNGE responses (RFC 9051 §6.4.1); after EXAMINE it removes
// nothing and still succeeds, while EXPUNGE is refused.
func TestCloseExpungesSilently(t *testing.T) {
	e := newEnv(t, options{})
	e.deliver(alice, "INBOX", testMessage("one"))
	e.deliver(alice, "INBOX", testMessage("two"))
	c := e.watch(alice, alicePW)
	mustSelectFolder(t, c.Client, "INBOX")
	storeFlags(t, c.Client, imap.SeqSetNum(1), imap.StoreFlagsAdd, true, `\Deleted`)

	if _, err := c.Select("INBOX", &imap.SelectOptions{ReadOnly: true}).Wait(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Expunge().Collect(); imapType(err) != imap.StatusResponseTypeNo {
		t.Errorf("EXPUNGE after EXAMINE: %v; want NO", err)
	}
	if err := c.UnselectAndExpunge().Wait(); err != nil {
		t.Fatalf("CLOSE after EXAMINE: %v", err)
	}
	if n := e.count(alice, "INBOX"); n != 2 {
		t.Fatalf("CLOSE after EXAMINE removed messages: %d left", n)
	}

	mustSelectFolder(t, c.Client, "INBOX")
	if err := c.UnselectAndExpunge().Wait(); err != nil {
		t.Fatalf("CLOSE: %v", err)
	}
	if n := e.count(alice, "INBOX"); n != 1 {
		t.Fatalf("INBOX has %d messages after CLOSE; want 1", n)
	}
	if err := c.Noop().Wait(); err != nil {
		t.Fatal(err)
	}
	if exp, _, _ := c.take(); len(exp) != 0 {
		t.Fatalf("CLOSE sent EXPUNGE %v", exp)
	}
}

// TestExpungeAfterProviderRemoval: a message marked \Deleted that another
// client removed at the provider meanwhile makes the provider refuse the
// whole request; the bridge refreshes and removes the rest, and each
// message is reported expunged once.
func TestExpungeAfterProviderRemoval(t *testing.T) {
	e := newEnv(t, options{})
	u1 := e.deliver(alice, "INBOX", testMessage("one"))
	e.deliver(alice, "INBOX", testMessage("two"))
	e.deliver(alice, "INBOX", testMessage("three"))
	c := e.login(alice, alicePW)
	mustSelectFolder(t, c, "INBOX")
	storeFlags(t, c, imap.SeqSetNum(1, 2), imap.StoreFlagsAdd, true, `\Deleted`)
	if err := e.client.DeleteMessagesByUIDs(context.Background(), auth(alice), "INBOX", []int64{u1}, true); err != nil {
		t.Fatal(err)
	}
	seqs, err := c.Expunge().Collect()
	if err != nil {
		t.Fatal(err)
	}
	// Either "1, 1" (one at a time) or "2, 1" (together, highest first).
	if !slices.Equal(seqs, []uint32{1, 1}) && !slices.Equal(seqs, []uint32{2, 1}) {
		t.Fatalf("EXPUNGE answered %v; want messages 1 and 2 expunged once each", seqs)
	}
	if n := e.count(alice, "INBOX"); n != 1 {
		t.Fatalf("INBOX has %d messages; want 1", n)
	}
}

// TestChangesWhilePolling: changes made through the bridge while the
// folder's poller refreshes it all the time never look like a renumbered
// folder (a refresh that read the provider before a change must not be
// applied after it): UIDVALIDITY stays and no connection is told BYE.
func TestChangesWhilePolling(t *testing.T) {
	e := newEnv(t, options{pollInterval: 40 * time.Millisecond})
	for _, s := range []string{"a", "b", "c", "d"} {
		e.deliver(alice, "INBOX", testMessage(s))
	}
	writer := e.login(alice, alicePW)
	flagger := e.login(alice, alicePW)
	validity := mustSelectFolder(t, writer, "INBOX").UIDValidity
	mustSelectFolder(t, flagger, "INBOX")
	// Widen the window between a refresh reading the UIDs and applying
	// them, where a change made meanwhile would be undone.
	e.sandbox.InjectFault("GetUnreadMessageCount", sandbox.Fault{Latency: 15 * time.Millisecond})

	deadline := time.Now().Add(1500 * time.Millisecond)
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	wg.Add(2)
	go func() {
		defer wg.Done()
		for i := 0; time.Now().Before(deadline); i++ {
			if _, err := appendMsg(writer, "INBOX", testMessage("new"+strconv.Itoa(i))); err != nil {
				errs <- err
				return
			}
			if _, err := writer.Store(imap.SeqSetNum(1), &imap.StoreFlags{Op: imap.StoreFlagsAdd, Silent: true, Flags: []imap.Flag{imap.FlagDeleted}}, nil).Collect(); err != nil {
				errs <- err
				return
			}
			// A pause lets a refresh start between marking and removing.
			time.Sleep(time.Duration(i%4) * 5 * time.Millisecond)
			if _, err := writer.Expunge().Collect(); err != nil {
				errs <- err
				return
			}
		}
	}()
	go func() {
		defer wg.Done()
		for i := 0; time.Now().Before(deadline); i++ {
			op := imap.StoreFlagsAdd
			if i%2 == 1 {
				op = imap.StoreFlagsDel
			}
			if _, err := flagger.Store(imap.SeqSet{{Start: 1, Stop: 0}}, &imap.StoreFlags{Op: op, Silent: true, Flags: []imap.Flag{imap.FlagSeen, "$Busy"}}, nil).Collect(); err != nil {
				errs <- err
				return
			}
		}
	}()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if err := flagger.Noop().Wait(); err != nil {
		t.Fatal(err)
	}
	c := e.login(alice, alicePW)
	d := mustSelectFolder(t, c, "INBOX")
	if d.UIDValidity != validity {
		t.Fatalf("UIDVALIDITY changed from %d to %d", validity, d.UIDValidity)
	}
	if n := e.count(alice, "INBOX"); int(d.NumMessages) != n {
		t.Fatalf("SELECT shows %d messages; the provider has %d", d.NumMessages, n)
	}
}

// TestCopyToTrashThenExpunge: a client that deletes by copying to the
// Trash and expunging the original (Outlook, older clients) leaves one
// copy in the Trash, not two; a message this connection did not copy
// still goes to the Trash, and so does one copied by another connection.
func TestCopyToTrashThenExpunge(t *testing.T) {
	e := newEnv(t, options{})
	for _, s := range []string{"one", "two", "three"} {
		e.deliver(alice, "INBOX", testMessage(s))
	}
	c := e.login(alice, alicePW)
	other := e.login(alice, alicePW)
	mustSelectFolder(t, c, "INBOX")
	mustSelectFolder(t, other, "INBOX")
	if _, err := c.Copy(imap.SeqSetNum(1), "INBOX.Trash").Wait(); err != nil {
		t.Fatal(err)
	}
	if _, err := other.Copy(imap.SeqSetNum(3), "INBOX.Trash").Wait(); err != nil {
		t.Fatal(err)
	}
	storeFlags(t, c, imap.SeqSetNum(1, 2, 3), imap.StoreFlagsAdd, true, `\Deleted`)
	seqs, err := c.Expunge().Collect()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(seqs, []uint32{3, 2, 1}) {
		t.Fatalf("EXPUNGE answered %v; want [3 2 1]", seqs)
	}
	if n := e.count(alice, "INBOX"); n != 0 {
		t.Errorf("INBOX has %d messages; want 0", n)
	}
	// one: the copy only; two: moved; three: copied by the other
	// connection and moved by this one, so twice.
	got := map[string]int{}
	trash := e.count(alice, "INBOX.Trash")
	uids := make([]imap.UID, trash)
	for i := range uids {
		uids[i] = imap.UID(i + 1)
	}
	for _, id := range e.msgIDs(alice, "INBOX.Trash", uids) {
		got[id]++
	}
	if got["<one@direct.example>"] != 1 || got["<two@direct.example>"] != 1 || got["<three@direct.example>"] != 2 || trash != 4 {
		t.Fatalf("Trash holds %v (%d messages); want one once, two once, three twice", got, trash)
	}
}

// TestCopyThenExpungeIsAMove: a client without MOVE moves by COPY, STORE
// \Deleted and EXPUNGE; the messages end in the destination only, none
// in the Trash.
func TestCopyThenExpungeIsAMove(t *testing.T) {
	e := newEnv(t, options{})
	for _, s := range []string{"one", "two", "three"} {
		e.deliver(alice, "INBOX", testMessage(s))
	}
	c := e.login(alice, alicePW)
	if err := c.Create("INBOX.Archive", nil).Wait(); err != nil {
		t.Fatal(err)
	}
	mustSelectFolder(t, c, "INBOX")
	if _, err := c.Copy(imap.SeqSetNum(1, 2, 3), "INBOX.Archive").Wait(); err != nil {
		t.Fatal(err)
	}
	storeFlags(t, c, imap.SeqSetNum(1, 2, 3), imap.StoreFlagsAdd, true, `\Deleted`)
	if _, err := c.Expunge().Collect(); err != nil {
		t.Fatal(err)
	}
	if n := e.count(alice, "INBOX"); n != 0 {
		t.Errorf("INBOX has %d messages; want 0", n)
	}
	if n := e.count(alice, "INBOX.Archive"); n != 3 {
		t.Errorf("INBOX.Archive has %d messages; want 3", n)
	}
	if n := e.count(alice, "INBOX.Trash"); n != 0 {
		t.Errorf("INBOX.Trash has %d messages after COPY + EXPUNGE; want 0 (the move left a copy behind)", n)
	}
}

// TestConcurrentExpungeSharesRemoval: several connections that expunge
// the same messages at once (each sees \Deleted on them, as in imaptest's
// stress) are all answered OK, each with the messages' EXPUNGEs, and the
// provider is asked once: a second DeleteMessagesByUIDs for UIDs being
// removed would be refused whole and cost a listing and a retry. The
// messages reach the Trash once each.
func TestConcurrentExpungeSharesRemoval(t *testing.T) {
	e := newEnv(t, options{})
	const n = 6
	for i := range n {
		e.deliver(alice, "INBOX", testMessage("gone"+strconv.Itoa(i)))
	}
	var conns []*watcher
	for range 4 {
		w := e.watch(alice, alicePW)
		mustSelectFolder(t, w.Client, "INBOX")
		conns = append(conns, w)
	}
	storeFlags(t, conns[0].Client, imap.SeqSetNum(1, 2, 3, 4, 5, 6), imap.StoreFlagsAdd, true, `\Deleted`)
	for _, w := range conns {
		if err := w.Noop().Wait(); err != nil { // every view shows \Deleted
			t.Fatal(err)
		}
		w.take()
	}
	// The removal takes long enough for every EXPUNGE to arrive during it.
	e.sandbox.InjectFault("DeleteMessagesByUIDs", sandbox.Fault{Latency: 150 * time.Millisecond})
	e.sandbox.ResetCalls()
	var wg sync.WaitGroup
	errs := make([]error, len(conns))
	answered := make([][]uint32, len(conns))
	for i, w := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			answered[i], errs[i] = w.Expunge().Collect()
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("EXPUNGE of connection %d: %v", i, err)
		}
		if err := conns[i].Noop().Wait(); err != nil {
			t.Fatal(err)
		}
		// Each connection is told of every message once: in its
		// EXPUNGE's answer or, if another removed them first, right
		// after (RFC 9051 §7.5.1).
		if exp, _, _ := conns[i].take(); len(answered[i])+len(exp) != n {
			t.Errorf("connection %d got %d+%d EXPUNGE responses; want %d", i, len(answered[i]), len(exp), n)
		}
	}
	if calls := e.sandbox.Calls("DeleteMessagesByUIDs"); calls != 1 {
		t.Errorf("%d DeleteMessagesByUIDs calls for one removal expunged by %d connections (%v); want 1", calls, len(conns), e.sandbox.CallCounts())
	}
	if got := e.count(alice, "INBOX"); got != 0 {
		t.Errorf("INBOX keeps %d messages; want 0", got)
	}
	if got := e.count(alice, "INBOX.Trash"); got != n {
		t.Errorf("INBOX.Trash holds %d messages; want %d, each once", got, n)
	}
}
