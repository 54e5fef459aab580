package imapbackend_test

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"

	"github.com/directbridge/directbridge/sandbox"
)

// watcher is a connection that counts the unsolicited responses it gets:
// EXPUNGE, EXISTS and FETCH (flags by UID, when the FETCH carries a UID,
// else by sequence number).
type watcher struct {
	*imapclient.Client
	mu       sync.Mutex
	expunges []uint32
	exists   []uint32
	flags    [][]imap.Flag // FLAGS responses
	fetches  []*imapclient.FetchMessageBuffer
}

func (e *env) watch(user, pw string) *watcher {
	e.t.Helper()
	w := &watcher{}
	c, err := imapclient.DialInsecure(e.addr, &imapclient.Options{UnilateralDataHandler: &imapclient.UnilateralDataHandler{
		Expunge: func(seq uint32) {
			w.mu.Lock()
			w.expunges = append(w.expunges, seq)
			w.mu.Unlock()
		},
		Mailbox: func(d *imapclient.UnilateralDataMailbox) {
			w.mu.Lock()
			if d.NumMessages != nil {
				w.exists = append(w.exists, *d.NumMessages)
			}
			if d.Flags != nil {
				w.flags = append(w.flags, d.Flags)
			}
			w.mu.Unlock()
		},
		Fetch: func(msg *imapclient.FetchMessageData) {
			buf, err := msg.Collect()
			if err == nil {
				w.mu.Lock()
				w.fetches = append(w.fetches, buf)
				w.mu.Unlock()
			}
		},
	}})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { c.Close() })
	if err := c.Login(user, pw).Wait(); err != nil {
		e.t.Fatal(err)
	}
	w.Client = c
	return w
}

// take returns and forgets what the watcher got so far.
func (w *watcher) take() (expunges, exists []uint32, fetches []*imapclient.FetchMessageBuffer) {
	w.mu.Lock()
	defer w.mu.Unlock()
	expunges, exists, fetches = w.expunges, w.exists, w.fetches
	w.expunges, w.exists, w.fetches = nil, nil, nil
	return
}

// settle waits a moment for unsolicited FETCH responses, which imapclient
// hands to the handler on a goroutine of its own, so they may land after
// the command that brought them completed.
func (w *watcher) settle(fetches int) {
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) {
		w.mu.Lock()
		n := len(w.fetches)
		w.mu.Unlock()
		if n >= fetches {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond) // and for any unexpected extra one
}

// mustSelectFolder selects a folder or fails the test.
func mustSelectFolder(t *testing.T, c *imapclient.Client, name string) *imap.SelectData {
	t.Helper()
	d, err := c.Select(name, nil).Wait()
	if err != nil {
		t.Fatalf("SELECT %s: %v", name, err)
	}
	return d
}

// flagsByUID fetches the flags of messages by UID (UID FETCH ... (FLAGS)),
// sorted and without \Recent, which is the session's own (RFC 3501
// §2.3.2) and checked in compliance_test.go.
func flagsByUID(t *testing.T, c *imapclient.Client, uids ...imap.UID) map[imap.UID][]imap.Flag {
	t.Helper()
	msgs, err := c.Fetch(imap.UIDSetNum(uids...), &imap.FetchOptions{UID: true, Flags: true}).Collect()
	if err != nil {
		t.Fatalf("UID FETCH FLAGS: %v", err)
	}
	out := map[imap.UID][]imap.Flag{}
	for _, m := range msgs {
		out[m.UID] = sortedFlags(m.Flags...)
	}
	return out
}

// storeFlags runs STORE and returns the FETCH answers by UID (or by
// sequence number for a plain STORE, as UID 0 entries keyed by seq).
func storeFlags(t *testing.T, c *imapclient.Client, set imap.NumSet, op imap.StoreFlagsOp, silent bool, flags ...imap.Flag) []*imapclient.FetchMessageBuffer {
	t.Helper()
	msgs, err := c.Store(set, &imap.StoreFlags{Op: op, Silent: silent, Flags: flags}, nil).Collect()
	if err != nil {
		t.Fatalf("STORE %v: %v", flags, err)
	}
	return msgs
}

// sortedFlags sorts flags and drops \Recent, the session's own flag (RFC
// 3501 §2.3.2), which compliance_test.go checks; the other tests are about
// the flags a message keeps.
func sortedFlags(fl ...imap.Flag) []imap.Flag {
	out := slices.DeleteFunc(slices.Clone(fl), func(f imap.Flag) bool { return f == `\Recent` })
	slices.Sort(out)
	return out
}

func imapCode(err error) imap.ResponseCode {
	var ie *imap.Error
	if errors.As(err, &ie) {
		return ie.Code
	}
	return ""
}

func imapType(err error) imap.StatusResponseType {
	var ie *imap.Error
	if errors.As(err, &ie) {
		return ie.Type
	}
	return ""
}

func (e *env) unread(user, folder string) int {
	e.t.Helper()
	n, err := e.client.GetUnreadMessageCount(context.Background(), auth(user), folder)
	if err != nil {
		e.t.Fatal(err)
	}
	return n
}

func (e *env) count(user, folder string) int {
	e.t.Helper()
	n, err := e.client.GetMessageCount(context.Background(), auth(user), folder)
	if err != nil {
		e.t.Fatal(err)
	}
	return n
}

// TestStoreFlags: flags come back in canonical case whatever case the
// client wrote, \Seen is the provider's read state, +FLAGS, -FLAGS and
// FLAGS do what RFC 9051 §6.4.6 says, .SILENT answers nothing, \Recent is
// ignored, and an unknown system flag is refused.
func TestStoreFlags(t *testing.T) {
	e := newEnv(t, options{})
	u1 := imap.UID(e.deliver(alice, "INBOX", testMessage("one")))
	u2 := imap.UID(e.deliver(alice, "INBOX", testMessage("two")))
	c := e.login(alice, alicePW)
	mustSelectFolder(t, c, "INBOX")

	got := storeFlags(t, c, imap.SeqSetNum(1), imap.StoreFlagsAdd, false, `\flagged`, "$Label1", `\RECENT`)
	if len(got) != 1 || got[0].SeqNum != 1 || !slices.Equal(sortedFlags(got[0].Flags...), sortedFlags(`\Flagged`, "$Label1")) {
		t.Fatalf("STORE +FLAGS answer: %+v", got)
	}
	got = storeFlags(t, c, imap.UIDSetNum(u2), imap.StoreFlagsSet, false, `\seen`, `\answered`, "$forwarded")
	if len(got) != 1 || got[0].UID != u2 || !slices.Equal(sortedFlags(got[0].Flags...), sortedFlags(`\Seen`, `\Answered`, "$Forwarded")) {
		t.Fatalf("UID STORE FLAGS answer: %+v", got)
	}
	if n := e.unread(alice, "INBOX"); n != 1 {
		t.Fatalf("provider unread count %d after storing \\Seen; want 1", n)
	}
	// Keywords compare case-insensitively.
	got = storeFlags(t, c, imap.SeqSetNum(1), imap.StoreFlagsDel, false, "$LABEL1")
	if len(got) != 1 || !slices.Equal(sortedFlags(got[0].Flags...), []imap.Flag{`\Flagged`}) {
		t.Fatalf("STORE -FLAGS answer: %+v", got)
	}
	if got := storeFlags(t, c, imap.SeqSetNum(1, 2), imap.StoreFlagsAdd, true, `\Draft`); len(got) != 0 {
		t.Fatalf("STORE +FLAGS.SILENT answered %d FETCH responses", len(got))
	}
	storeFlags(t, c, imap.UIDSetNum(u2), imap.StoreFlagsDel, true, `\Seen`)
	if n := e.unread(alice, "INBOX"); n != 2 {
		t.Fatalf("provider unread count %d after -FLAGS \\Seen; want 2", n)
	}
	flags := flagsByUID(t, c, u1, u2)
	if want := sortedFlags(`\Flagged`, `\Draft`); !slices.Equal(flags[u1], want) {
		t.Errorf("flags of %d: %v; want %v", u1, flags[u1], want)
	}
	if want := sortedFlags(`\Answered`, `\Draft`, "$Forwarded"); !slices.Equal(flags[u2], want) {
		t.Errorf("flags of %d: %v; want %v", u2, flags[u2], want)
	}

	_, err := c.Store(imap.SeqSetNum(1), &imap.StoreFlags{Op: imap.StoreFlagsAdd, Flags: []imap.Flag{`\Bogus`}}, nil).Collect()
	if imapType(err) != imap.StatusResponseTypeBad {
		t.Errorf("STORE \\Bogus: %v; want BAD", err)
	}
}

// TestStoreFlagsSurviveRestart: the kept flags live in the state store,
// under the folder's UIDVALIDITY, and come back after the IMAP front
// restarts on the same state and provider.
func TestStoreFlagsSurviveRestart(t *testing.T) {
	stateDir, sandboxDir := t.TempDir(), t.TempDir()
	var uid imap.UID
	var validity uint32
	t.Run("before", func(t *testing.T) {
		e := newEnv(t, options{stateDir: stateDir, sandboxDir: sandboxDir})
		uid = imap.UID(e.deliver(alice, "INBOX", testMessage("kept")))
		c := e.login(alice, alicePW)
		validity = mustSelectFolder(t, c, "INBOX").UIDValidity
		storeFlags(t, c, imap.UIDSetNum(uid), imap.StoreFlagsAdd, true, `\flagged`, "$Work", `\Seen`)
	})
	e := newEnv(t, options{stateDir: stateDir, sandboxDir: sandboxDir})
	c := e.login(alice, alicePW)
	d := mustSelectFolder(t, c, "INBOX")
	if d.UIDValidity != validity {
		t.Fatalf("UIDVALIDITY %d after restart; was %d", d.UIDValidity, validity)
	}
	if !slices.Contains(d.Flags, "$Work") {
		t.Errorf("FLAGS %v after restart lack the keyword in use", d.Flags)
	}
	if got, want := flagsByUID(t, c, uid)[uid], sortedFlags(`\Flagged`, `\Seen`, "$Work"); !slices.Equal(got, want) {
		t.Fatalf("flags after restart %v; want %v", got, want)
	}
}

// TestStoreSeenByOthers: another connection on the folder learns of the
// change as FETCH FLAGS at its next command; the acting connection gets
// its answer once, not again as an unsolicited FETCH.
func TestStoreSeenByOthers(t *testing.T) {
	e := newEnv(t, options{})
	e.deliver(alice, "INBOX", testMessage("one"))
	e.deliver(alice, "INBOX", testMessage("two"))
	c1 := e.watch(alice, alicePW)
	c2 := e.watch(alice, alicePW)
	mustSelectFolder(t, c1.Client, "INBOX")
	mustSelectFolder(t, c2.Client, "INBOX")

	storeFlags(t, c1.Client, imap.SeqSetNum(2), imap.StoreFlagsAdd, false, `\Flagged`, `\Seen`, "$New")
	if err := c1.Noop().Wait(); err != nil {
		t.Fatal(err)
	}
	c1.settle(0)
	if _, _, f := c1.take(); len(f) != 0 {
		t.Errorf("acting connection got %d unsolicited FETCH responses", len(f))
	}
	if err := c2.Noop().Wait(); err != nil {
		t.Fatal(err)
	}
	c2.settle(1)
	_, _, f := c2.take()
	if len(f) != 1 || f[0].SeqNum != 2 || !slices.Equal(sortedFlags(f[0].Flags...), sortedFlags(`\Flagged`, `\Seen`, "$New")) {
		t.Fatalf("other connection got %+v; want one FETCH 2 (FLAGS (\\Flagged \\Seen $New))", f)
	}
	// A keyword new to the folder is announced in FLAGS (RFC 9051 §7.3.5).
	for _, w := range []*watcher{c1, c2} {
		w.mu.Lock()
		fl := w.flags
		w.mu.Unlock()
		if len(fl) != 1 || !slices.Contains(fl[0], "$New") {
			t.Errorf("FLAGS responses %v; want one with $New", fl)
		}
	}
}

// TestStoreCallCount: flags other than \Seen cost no provider call; \Seen
// costs one call per direction, however many messages.
func TestStoreCallCount(t *testing.T) {
	e := newEnv(t, options{})
	for i := range 50 {
		e.deliver(alice, "INBOX", testMessage("m"+strconv.Itoa(i)))
	}
	c := e.login(alice, alicePW)
	mustSelectFolder(t, c, "INBOX")
	ops := []string{"MarkMessagesAsReadByUIDs", "MarkMessagesAsUnreadByUIDs", "GetUIDs", "GetUnreadMessages", "GetMessageMetaData"}
	calls := func() (n int) {
		for _, op := range ops {
			n += e.sandbox.Calls(op)
		}
		return n
	}
	before := calls()
	storeFlags(t, c, imap.SeqSetNum(1), imap.StoreFlagsAdd, true, `\Flagged`)
	storeFlags(t, c, imap.SeqSet{{Start: 1, Stop: 0}}, imap.StoreFlagsAdd, true, `\Flagged`, "$Work")
	storeFlags(t, c, imap.SeqSet{{Start: 1, Stop: 0}}, imap.StoreFlagsDel, true, "$Work")
	if n := calls() - before; n != 0 {
		t.Errorf("keyword STOREs cost %d provider calls; want 0", n)
	}
	before = e.sandbox.Calls("MarkMessagesAsReadByUIDs")
	storeFlags(t, c, imap.SeqSet{{Start: 1, Stop: 0}}, imap.StoreFlagsSet, true, `\Seen`, `\Flagged`)
	if n := e.sandbox.Calls("MarkMessagesAsReadByUIDs") - before; n != 1 {
		t.Errorf("STORE 1:* FLAGS (\\Seen) cost %d calls; want 1", n)
	}
	if n := e.unread(alice, "INBOX"); n != 0 {
		t.Errorf("unread %d; want 0", n)
	}
}

// TestStoreOfStateShownCostsNothing: a STORE that names \Seen for
// messages the mirror already shows so makes no provider call once the
// mirror's read state is known to be the provider's, as in fetchmail's
// session over messages read before (UID STORE n +FLAGS (\Seen) after
// each download); the answer still carries the flags. A message shown
// unread is still marked, in one call.
func TestStoreOfStateShownCostsNothing(t *testing.T) {
	e := newEnv(t, options{})
	const n = 300
	for i := range n {
		e.deliver(alice, "INBOX", testMessage("m"+strconv.Itoa(i)))
	}
	c := e.login(alice, alicePW)
	mustSelectFolder(t, c, "INBOX")
	storeFlags(t, c, imap.SeqSet{{Start: 1, Stop: n - 1}}, imap.StoreFlagsAdd, true, imap.FlagSeen)
	e.sandbox.ResetCalls()
	for i := 1; i < n; i++ {
		got := storeFlags(t, c, imap.SeqSetNum(uint32(i)), imap.StoreFlagsAdd, false, imap.FlagSeen)
		if len(got) != 1 || !slices.Contains(got[0].Flags, imap.FlagSeen) {
			t.Fatalf("STORE %d +FLAGS (\\Seen) answered %+v; want one FETCH with \\Seen", i, got)
		}
	}
	// One refresh that reads the provider's unread list: the mirror's
	// read state is then the provider's, and no STORE needs a call.
	if calls := e.sandbox.CallCounts(); e.sandbox.TotalCalls() != 3 || calls["GetUnreadMessages"] != 1 {
		t.Errorf("%d STOREs of \\Seen on read messages cost %v; want one refresh with the unread list (3 calls)", n-1, calls)
	}
	// The last one is unread: its STORE is told to the provider.
	storeFlags(t, c, imap.SeqSetNum(n), imap.StoreFlagsAdd, true, imap.FlagSeen)
	if got := e.sandbox.Calls("MarkMessagesAsReadByUIDs"); got != 1 {
		t.Errorf("STORE of \\Seen on the unread message: %d MarkMessagesAsReadByUIDs; want 1", got)
	}
	if u := e.unread(alice, "INBOX"); u != 0 {
		t.Errorf("unread at the provider %d; want 0", u)
	}
	// A copy into the folder makes the mirror's read state a guess
	// again (the copy shows its source's): a STORE that names \Seen
	// then tells the provider, though the message is shown read.
	if _, err := c.Copy(imap.SeqSetNum(1), "INBOX").Wait(); err != nil {
		t.Fatal(err)
	}
	e.sandbox.ResetCalls()
	storeFlags(t, c, imap.SeqSetNum(2), imap.StoreFlagsAdd, true, imap.FlagSeen)
	if got := e.sandbox.Calls("MarkMessagesAsReadByUIDs"); got != 1 {
		t.Errorf("STORE of \\Seen after a COPY into the folder: %d MarkMessagesAsReadByUIDs (%v); want 1", got, e.sandbox.CallCounts())
	}
	// And back: -FLAGS (\Seen) on messages shown read is one call.
	storeFlags(t, c, imap.SeqSet{{Start: 1, Stop: 10}}, imap.StoreFlagsDel, true, imap.FlagSeen)
	if u := e.unread(alice, "INBOX"); u != 10 {
		t.Errorf("unread at the provider %d; want 10", u)
	}
}

// TestStoreReadOnly: a folder opened with EXAMINE refuses STORE.
func TestStoreReadOnly(t *testing.T) {
	e := newEnv(t, options{})
	e.deliver(alice, "INBOX", testMessage("one"))
	c := e.login(alice, alicePW)
	if _, err := c.Select("INBOX", &imap.SelectOptions{ReadOnly: true}).Wait(); err != nil {
		t.Fatal(err)
	}
	_, err := c.Store(imap.SeqSetNum(1), &imap.StoreFlags{Op: imap.StoreFlagsAdd, Flags: []imap.Flag{`\Flagged`}}, nil).Collect()
	if imapType(err) != imap.StatusResponseTypeNo {
		t.Fatalf("STORE in EXAMINE: %v; want NO", err)
	}
}

// TestMessageCommandsProviderDown: when the provider fails, STORE, COPY,
// MOVE, EXPUNGE and APPEND answer NO [UNAVAILABLE], change nothing the
// client is told of, and work again once the provider is back.
func TestMessageCommandsProviderDown(t *testing.T) {
	e := newEnv(t, options{})
	e.createFolder(alice, "INBOX.Archive")
	e.deliver(alice, "INBOX", testMessage("one"))
	c := e.login(alice, alicePW)
	mustSelectFolder(t, c, "INBOX")
	storeFlags(t, c, imap.SeqSetNum(1), imap.StoreFlagsAdd, true, `\Deleted`)

	for _, op := range []string{"MarkMessagesAsReadByUIDs", "CopyMessagesByUIDs", "MoveMessagesByUIDs", "DeleteMessagesByUIDs", "SaveRawMessages"} {
		e.sandbox.InjectFault(op, sandbox.Fault{Status: 503})
	}
	_, err := c.Store(imap.SeqSetNum(1), &imap.StoreFlags{Op: imap.StoreFlagsAdd, Flags: []imap.Flag{imap.FlagSeen}}, nil).Collect()
	if imapCode(err) != imap.ResponseCodeUnavailable {
		t.Errorf("STORE \\Seen: %v; want NO [UNAVAILABLE]", err)
	}
	if _, err := c.Copy(imap.SeqSetNum(1), "INBOX.Archive").Wait(); imapCode(err) != imap.ResponseCodeUnavailable {
		t.Errorf("COPY: %v; want NO [UNAVAILABLE]", err)
	}
	if _, err := c.Move(imap.SeqSetNum(1), "INBOX.Archive").Wait(); imapCode(err) != imap.ResponseCodeUnavailable {
		t.Errorf("MOVE: %v; want NO [UNAVAILABLE]", err)
	}
	if _, err := c.Expunge().Collect(); imapCode(err) != imap.ResponseCodeUnavailable {
		t.Errorf("EXPUNGE: %v; want NO [UNAVAILABLE]", err)
	}
	if _, err := appendMsg(c, "INBOX", testMessage("two")); imapCode(err) != imap.ResponseCodeUnavailable {
		t.Errorf("APPEND: %v; want NO [UNAVAILABLE]", err)
	}
	if got := flagsByUID(t, c, 1)[1]; !slices.Equal(got, []imap.Flag{`\Deleted`}) {
		t.Errorf("flags after failures: %v; want [\\Deleted]", got)
	}

	e.sandbox.ClearFaults()
	if got := storeFlags(t, c, imap.SeqSetNum(1), imap.StoreFlagsAdd, false, imap.FlagSeen); len(got) != 1 {
		t.Fatalf("STORE after recovery: %+v", got)
	}
	if seqs, err := c.Expunge().Collect(); err != nil || !slices.Equal(seqs, []uint32{1}) {
		t.Fatalf("EXPUNGE after recovery: %v %v", seqs, err)
	}
	if n := e.count(alice, "INBOX.Archive") + e.count(alice, "INBOX"); n != 0 {
		t.Fatalf("%d messages left in INBOX and INBOX.Archive; want 0", n)
	}
}
