package imapbackend_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"

	"github.com/directbridge/directbridge/internal/mailstore"
	"github.com/directbridge/directbridge/sandbox"
)

// createFolder makes a folder at the provider directly.
func (e *env) createFolder(user, name string) {
	e.t.Helper()
	if err := e.client.CreateFolder(context.Background(), auth(user), name); err != nil {
		e.t.Fatal(err)
	}
}

// msgIDs returns the Message-IDs of messages at the provider by UID.
func (e *env) msgIDs(user, folder string, uids []imap.UID) map[imap.UID]string {
	e.t.Helper()
	var ids []int64
	for _, u := range uids {
		ids = append(ids, int64(u))
	}
	ds, err := e.client.GetMessagesByUIDs(context.Background(), auth(user), folder, ids)
	if err != nil {
		e.t.Fatal(err)
	}
	out := map[imap.UID]string{}
	for _, d := range ds {
		out[imap.UID(d.UID)] = d.MsgID
	}
	return out
}

func uidsOf(t *testing.T, set imap.NumSet) []imap.UID {
	t.Helper()
	us, ok := set.(imap.UIDSet)
	if !ok {
		t.Fatalf("not a UID set: %v", set)
	}
	out, ok := us.Nums()
	if !ok {
		t.Fatalf("dynamic UID set %v", us)
	}
	return out
}

// TestCopy: COPY answers COPYUID naming the right new messages (checked
// at the provider by Message-ID and through UID FETCH in the destination),
// and the kept flags and \Seen travel to them.
func TestCopy(t *testing.T) {
	e := newEnv(t, options{})
	e.createFolder(alice, "INBOX.Archive")
	e.deliver(alice, "INBOX.Archive", testMessage("already-there"))
	u1 := imap.UID(e.deliver(alice, "INBOX", testMessage("one")))
	u2 := imap.UID(e.deliver(alice, "INBOX", testMessage("two")))
	e.deliver(alice, "INBOX", testMessage("three"))
	c := e.login(alice, alicePW)
	mustSelectFolder(t, c, "INBOX")
	storeFlags(t, c, imap.UIDSetNum(u1, u2), imap.StoreFlagsAdd, true, `\Flagged`, "$Work")
	storeFlags(t, c, imap.UIDSetNum(u2), imap.StoreFlagsAdd, true, `\Seen`)

	data, err := c.Copy(imap.UIDSetNum(u1, u2), "inbox.Archive").Wait()
	if err != nil {
		t.Fatal(err)
	}
	if data.UIDValidity == 0 {
		t.Fatal("no COPYUID")
	}
	src, dst := uidsOf(t, data.SourceUIDs), uidsOf(t, data.DestUIDs)
	if !slices.Equal(src, []imap.UID{u1, u2}) || len(dst) != 2 {
		t.Fatalf("COPYUID %v %v", src, dst)
	}
	ids := e.msgIDs(alice, "INBOX.Archive", dst)
	if ids[dst[0]] != "<one@direct.example>" || ids[dst[1]] != "<two@direct.example>" {
		t.Fatalf("COPYUID names %v at the provider", ids)
	}
	if n := e.count(alice, "INBOX"); n != 3 {
		t.Errorf("source has %d messages after COPY; want 3", n)
	}

	d := mustSelectFolder(t, c, "INBOX.Archive")
	if d.UIDValidity != data.UIDValidity || d.NumMessages != 3 {
		t.Fatalf("SELECT after COPY: %+v; COPYUID validity %d", d, data.UIDValidity)
	}
	flags := flagsByUID(t, c, dst...)
	if want := sortedFlags(`\Flagged`, "$Work"); !slices.Equal(flags[dst[0]], want) {
		t.Errorf("copy of one: %v; want %v", flags[dst[0]], want)
	}
	if want := sortedFlags(`\Flagged`, `\Seen`, "$Work"); !slices.Equal(flags[dst[1]], want) {
		t.Errorf("copy of two: %v; want %v", flags[dst[1]], want)
	}
}

// TestCopyToSelectedFolder: a connection that has the destination
// selected sees the copies as EXISTS at its next command, with their flags.
func TestCopyToSelectedFolder(t *testing.T) {
	e := newEnv(t, options{})
	e.createFolder(alice, "INBOX.Archive")
	e.deliver(alice, "INBOX", testMessage("one"))
	c := e.login(alice, alicePW)
	mustSelectFolder(t, c, "INBOX")
	storeFlags(t, c, imap.SeqSetNum(1), imap.StoreFlagsAdd, true, "$Work")
	w := e.watch(alice, alicePW)
	mustSelectFolder(t, w.Client, "INBOX.Archive")

	data, err := c.Copy(imap.SeqSetNum(1), "INBOX.Archive").Wait()
	if err != nil || data.UIDValidity == 0 {
		t.Fatalf("COPY: %+v %v", data, err)
	}
	if err := w.Noop().Wait(); err != nil {
		t.Fatal(err)
	}
	if _, exists, _ := w.take(); !slices.Equal(exists, []uint32{1}) {
		t.Fatalf("EXISTS on the destination: %v; want [1]", exists)
	}
	dst := uidsOf(t, data.DestUIDs)
	if got := flagsByUID(t, w.Client, dst...)[dst[0]]; !slices.Equal(got, []imap.Flag{"$Work"}) {
		t.Fatalf("flags of the copy seen by the watcher: %v", got)
	}
}

// TestCopyCOPYUIDByContent: COPYUID is answered when the copies are found
// by their sources' size and Message-ID (a Message-ID is not needed;
// messages that look the same are paired in the provider's order and keep
// their own flags, as imaptest's copy expects), also when another message
// arrives in the destination at the same moment: the copy is told from it
// by its content, so COPYUID names the copy and not the newcomer.
func TestCopyCOPYUIDByContent(t *testing.T) {
	e := newEnv(t, options{})
	e.createFolder(alice, "INBOX.Archive")
	noID := "From: bob@direct.example\r\nTo: alice@direct.example\r\nSubject: no id\r\n\r\nbody\r\n"
	e.deliver(alice, "INBOX", noID)
	e.deliver(alice, "INBOX", testMessage("twin"))
	e.deliver(alice, "INBOX", testMessage("twin"))
	c := e.login(alice, alicePW)
	mustSelectFolder(t, c, "INBOX")
	storeFlags(t, c, imap.SeqSetNum(3), imap.StoreFlagsAdd, true, imap.FlagFlagged)

	data, err := c.Copy(imap.SeqSetNum(1), "INBOX.Archive").Wait()
	if err != nil {
		t.Fatal(err)
	}
	if data.UIDValidity == 0 || data.SourceUIDs.String() != "1" || data.DestUIDs.String() != "1" {
		t.Errorf("COPY of a message without Message-ID answered %+v; want COPYUID", data)
	}
	data, err = c.Copy(imap.SeqSetNum(2, 3), "INBOX.Archive").Wait()
	if err != nil {
		t.Fatal(err)
	}
	if data.SourceUIDs.String() != "2:3" || data.DestUIDs.String() != "2:3" {
		t.Errorf("COPY of twins answered %+v; want COPYUID", data)
	}
	mustSelectFolder(t, c, "INBOX.Archive")
	if got := flagsByUID(t, c, 2, 3); len(got[2]) != 0 || !slices.Equal(got[3], []imap.Flag{imap.FlagFlagged}) {
		t.Errorf("flags of the twins' copies: %v", got)
	}

	// A message delivered to the destination while the copy runs: two new
	// UIDs for one message copied; COPYUID names the copy.
	mustSelectFolder(t, c, "INBOX")
	e.sandbox.InjectFault("CopyMessagesByUIDs", sandbox.Fault{Latency: 300 * time.Millisecond, Times: 1})
	delivered := make(chan struct{})
	go func() {
		defer close(delivered)
		time.Sleep(100 * time.Millisecond)
		if _, err := e.sandbox.Deliver(context.Background(), alice, "INBOX.Archive", []byte(testMessage("meanwhile"))); err != nil {
			t.Error(err)
		}
	}()
	data, err = c.Copy(imap.SeqSetNum(1), "INBOX.Archive").Wait()
	<-delivered
	if err != nil {
		t.Fatal(err)
	}
	if n := e.count(alice, "INBOX.Archive"); n != 5 {
		t.Fatalf("destination has %d messages; want 5", n)
	}
	if data.UIDValidity == 0 || data.DestUIDs == nil {
		t.Fatalf("COPY with a delivery at the same moment: no COPYUID (%+v)", data)
	}
	dst := uidsOf(t, data.DestUIDs)
	mustSelectFolder(t, c, "INBOX.Archive")
	msgs, err := c.Fetch(imap.UIDSetNum(dst...), &imap.FetchOptions{UID: true, Envelope: true}).Collect()
	if err != nil || len(msgs) != 1 || msgs[0].Envelope.Subject != "no id" {
		t.Fatalf("COPYUID names %v: %+v %v; want the copy of %q", dst, msgs, err, "no id")
	}
}

// TestCopyTryCreate: a missing destination is NO [TRYCREATE] (RFC 9051
// §6.4.7), for COPY and MOVE, and nothing changes.
func TestCopyTryCreate(t *testing.T) {
	e := newEnv(t, options{})
	e.deliver(alice, "INBOX", testMessage("one"))
	c := e.login(alice, alicePW)
	mustSelectFolder(t, c, "INBOX")
	if _, err := c.Copy(imap.SeqSetNum(1), "INBOX.Nowhere").Wait(); imapCode(err) != imap.ResponseCodeTryCreate {
		t.Errorf("COPY to a missing folder: %v; want NO [TRYCREATE]", err)
	}
	if _, err := c.Move(imap.SeqSetNum(1), "INBOX.Nowhere").Wait(); imapCode(err) != imap.ResponseCodeTryCreate {
		t.Errorf("MOVE to a missing folder: %v; want NO [TRYCREATE]", err)
	}
	if n := e.count(alice, "INBOX"); n != 1 {
		t.Errorf("INBOX has %d messages; want 1", n)
	}
}

// TestMove: MOVE answers COPYUID, takes the kept flags along, and each
// EXPUNGE reaches the acting connection once and another connection on
// the folder once.
func TestMove(t *testing.T) {
	e := newEnv(t, options{})
	e.createFolder(alice, "INBOX.Archive")
	e.deliver(alice, "INBOX", testMessage("one"))
	u2 := imap.UID(e.deliver(alice, "INBOX", testMessage("two")))
	u3 := imap.UID(e.deliver(alice, "INBOX", testMessage("three")))
	c := e.watch(alice, alicePW)
	other := e.watch(alice, alicePW)
	mustSelectFolder(t, c.Client, "INBOX")
	mustSelectFolder(t, other.Client, "INBOX")
	storeFlags(t, c.Client, imap.SeqSetNum(2, 3), imap.StoreFlagsAdd, true, "$Keep", `\Answered`)
	if err := other.Noop().Wait(); err != nil {
		t.Fatal(err)
	}
	other.settle(2)
	other.take()

	data, err := c.Move(imap.SeqSetNum(2, 3), "INBOX.Archive").Wait()
	if err != nil {
		t.Fatal(err)
	}
	if data.UIDValidity == 0 {
		t.Fatal("MOVE without COPYUID")
	}
	if src := uidsOf(t, data.SourceUIDs); !slices.Equal(src, []imap.UID{u2, u3}) {
		t.Fatalf("COPYUID source %v", src)
	}
	dst := uidsOf(t, data.DestUIDs)
	if ids := e.msgIDs(alice, "INBOX.Archive", dst); ids[dst[0]] != "<two@direct.example>" || ids[dst[1]] != "<three@direct.example>" {
		t.Fatalf("COPYUID names %v at the provider", ids)
	}
	if err := c.Noop().Wait(); err != nil {
		t.Fatal(err)
	}
	if exp, _, _ := c.take(); !slices.Equal(exp, []uint32{3, 2}) {
		t.Errorf("acting connection got EXPUNGE %v; want [3 2], once each", exp)
	}
	if err := other.Noop().Wait(); err != nil {
		t.Fatal(err)
	}
	if exp, _, _ := other.take(); !slices.Equal(exp, []uint32{3, 2}) {
		t.Errorf("other connection got EXPUNGE %v; want [3 2]", exp)
	}
	if n := e.count(alice, "INBOX"); n != 1 {
		t.Errorf("INBOX has %d messages after MOVE; want 1", n)
	}

	d := mustSelectFolder(t, c.Client, "INBOX.Archive")
	if d.UIDValidity != data.UIDValidity || d.NumMessages != 2 {
		t.Fatalf("SELECT after MOVE: %+v", d)
	}
	flags := flagsByUID(t, c.Client, dst...)
	for _, u := range dst {
		if want := sortedFlags(`\Answered`, "$Keep"); !slices.Equal(flags[u], want) {
			t.Errorf("moved %d: %v; want %v", u, flags[u], want)
		}
	}
}

// TestMoveReadOnly: a folder opened with EXAMINE refuses MOVE.
func TestMoveReadOnly(t *testing.T) {
	e := newEnv(t, options{})
	e.createFolder(alice, "INBOX.Archive")
	e.deliver(alice, "INBOX", testMessage("one"))
	c := e.login(alice, alicePW)
	if _, err := c.Select("INBOX", &imap.SelectOptions{ReadOnly: true}).Wait(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Move(imap.SeqSetNum(1), "INBOX.Archive").Wait(); imapType(err) != imap.StatusResponseTypeNo {
		t.Fatalf("MOVE in EXAMINE: %v; want NO", err)
	}
	if n := e.count(alice, "INBOX"); n != 1 {
		t.Fatalf("INBOX has %d messages; want 1", n)
	}
}

// TestCopyIntoSameFolder: COPY into the selected folder itself works, the
// connection sees the copy at once, with the original's keywords; so does
// MOVE, which leaves the copy alone.
func TestCopyIntoSameFolder(t *testing.T) {
	e := newEnv(t, options{})
	u := imap.UID(e.deliver(alice, "INBOX", testMessage("one")))
	c := e.watch(alice, alicePW)
	mustSelectFolder(t, c.Client, "INBOX")
	storeFlags(t, c.Client, imap.UIDSetNum(u), imap.StoreFlagsAdd, true, "$Work")
	data, err := c.Copy(imap.UIDSetNum(u), "INBOX").Wait()
	if err != nil {
		t.Fatal(err)
	}
	if _, exists, _ := c.take(); !slices.Equal(exists, []uint32{2}) {
		t.Fatalf("EXISTS after COPY: %v; want [2]", exists)
	}
	dst := uidsOf(t, data.DestUIDs)
	if len(dst) != 1 || dst[0] <= u {
		t.Fatalf("COPYUID %+v", data)
	}
	if got := flagsByUID(t, c.Client, dst[0])[dst[0]]; !slices.Equal(got, []imap.Flag{"$Work"}) {
		t.Fatalf("flags of the copy: %v", got)
	}
	// MOVE into the folder itself gives the message a new UID (as
	// imaptest's move expects), keywords and all.
	md, err := c.Move(imap.UIDSetNum(u), "inbox").Wait()
	if err != nil {
		t.Fatalf("MOVE into the same folder: %v", err)
	}
	moved := uidsOf(t, md.DestUIDs)
	if len(moved) != 1 || moved[0] <= dst[0] {
		t.Fatalf("MOVE into the same folder: COPYUID %+v", md)
	}
	if got := flagsByUID(t, c.Client, u, moved[0]); len(got) != 1 || !slices.Equal(got[moved[0]], []imap.Flag{"$Work"}) {
		t.Fatalf("flags after MOVE into the same folder: %v", got)
	}
	if n := e.count(alice, "INBOX"); n != 2 {
		t.Fatalf("INBOX has %d messages after MOVE into itself; want 2", n)
	}
}

// TestCopyAfterProviderRemoval: a source message removed at the provider
// since the last refresh makes the provider refuse the request; the
// bridge copies the rest, and COPYUID names only those.
func TestCopyAfterProviderRemoval(t *testing.T) {
	e := newEnv(t, options{})
	e.createFolder(alice, "INBOX.Archive")
	u1 := e.deliver(alice, "INBOX", testMessage("one"))
	u2 := imap.UID(e.deliver(alice, "INBOX", testMessage("two")))
	c := e.login(alice, alicePW)
	mustSelectFolder(t, c, "INBOX")
	if err := e.client.DeleteMessagesByUIDs(context.Background(), auth(alice), "INBOX", []int64{u1}, true); err != nil {
		t.Fatal(err)
	}
	data, err := c.Copy(imap.SeqSetNum(1, 2), "INBOX.Archive").Wait()
	if err != nil {
		t.Fatal(err)
	}
	if src := uidsOf(t, data.SourceUIDs); !slices.Equal(src, []imap.UID{u2}) {
		t.Fatalf("COPYUID source %v; want [%d]", src, u2)
	}
	if n := e.count(alice, "INBOX.Archive"); n != 1 {
		t.Fatalf("destination has %d messages; want 1", n)
	}
}

// TestCopyMoveAnswerLost: when the provider copies or moves the messages
// but its answer is lost, the bridge finds them at the destination and
// answers OK (a NO would make the client copy them again: two copies).
func TestCopyMoveAnswerLost(t *testing.T) {
	e := newEnv(t, options{})
	for _, s := range []string{"one", "two", "three"} {
		e.deliver(alice, "INBOX", testMessage("lost "+s))
	}
	c := e.login(alice, alicePW)
	if err := c.Create("INBOX.Dest", nil).Wait(); err != nil {
		t.Fatal(err)
	}
	mustSelectFolder(t, c, "INBOX")

	e.sandbox.InjectFault("CopyMessagesByUIDs", sandbox.Fault{After: true, Reset: true, Times: 1})
	if _, err := c.Copy(imap.SeqSetNum(1, 2), "INBOX.Dest").Wait(); err != nil {
		t.Fatalf("COPY whose answer was lost after the provider copied: %v", err)
	}
	e.sandbox.InjectFault("MoveMessagesByUIDs", sandbox.Fault{After: true, Reset: true, Times: 1})
	if _, err := c.Move(imap.SeqSetNum(3), "INBOX.Dest").Wait(); err != nil {
		t.Fatalf("MOVE whose answer was lost after the provider moved: %v", err)
	}
	st, err := c.Status("INBOX.Dest", &imap.StatusOptions{NumMessages: true}).Wait()
	if err != nil || st.NumMessages == nil || *st.NumMessages != 3 {
		t.Fatalf("INBOX.Dest: %+v, %v; want 3 messages", st, err)
	}
	// Not done at all: NO, and nothing copied.
	e.sandbox.InjectFault("CopyMessagesByUIDs", sandbox.Fault{Reset: true, Times: 1})
	if _, err := c.Copy(imap.SeqSetNum(1), "INBOX.Dest").Wait(); err == nil {
		t.Fatal("COPY the provider never made answered OK")
	}
	st, err = c.Status("INBOX.Dest", &imap.StatusOptions{NumMessages: true}).Wait()
	if err != nil || *st.NumMessages != 3 {
		t.Fatalf("INBOX.Dest after a failed COPY: %+v, %v", st, err)
	}
}

// TestCopyLateProcessing: a COPY the provider carries out after the
// bridge stopped waiting is answered NO [UNAVAILABLE]; the client's retry
// is answered NO [UNAVAILABLE] while the copies may still come, and OK
// with COPYUID and the sources' flags once they are there: one copy of
// each message, not two.
func TestCopyLateProcessing(t *testing.T) {
	e := newEnv(t, options{requestTimeout: 300 * time.Millisecond, engine: func(c *mailstore.Config) {
		c.CallTimeout = 300 * time.Millisecond
		c.AttemptHold = 1500 * time.Millisecond
	}})
	for _, s := range []string{"one", "two"} {
		e.deliver(alice, "INBOX", testMessage("late "+s))
	}
	c := e.login(alice, alicePW)
	if err := c.Create("INBOX.Dest", nil).Wait(); err != nil {
		t.Fatal(err)
	}
	mustSelectFolder(t, c, "INBOX")
	storeFlags(t, c, imap.SeqSetNum(2), imap.StoreFlagsAdd, true, imap.FlagFlagged)
	wantUnknown := func(what string, err error) {
		t.Helper()
		var ie *imap.Error
		if !errors.As(err, &ie) || ie.Code != imap.ResponseCodeUnavailable || !strings.Contains(ie.Text, "may still carry it out") {
			t.Fatalf("%s: %v; want NO [UNAVAILABLE] saying the outcome is not known", what, err)
		}
	}
	e.sandbox.InjectFault("CopyMessagesByUIDs", sandbox.Fault{Latency: 800 * time.Millisecond, Late: true, Times: 1})
	_, err := c.Copy(imap.SeqSetNum(1, 2), "INBOX.Dest").Wait()
	wantUnknown("COPY whose answer came too late", err)
	_, err = c.Copy(imap.SeqSetNum(1, 2), "INBOX.Dest").Wait()
	wantUnknown("its retry before the provider acted", err)
	time.Sleep(time.Second) // the provider has copied them now
	data, err := c.Copy(imap.SeqSetNum(1, 2), "INBOX.Dest").Wait()
	if err != nil || data == nil || data.DestUIDs.String() != "1:2" {
		t.Fatalf("retry once the copies are there: %+v, %v; want OK with COPYUID 1:2", data, err)
	}
	if n := e.count(alice, "INBOX.Dest"); n != 2 {
		t.Fatalf("INBOX.Dest holds %d messages; want each copy once", n)
	}
	mustSelectFolder(t, c, "INBOX.Dest")
	if got := flagsByUID(t, c, 1, 2); slices.Contains(got[1], imap.FlagFlagged) || !slices.Contains(got[2], imap.FlagFlagged) {
		t.Errorf("flags of the copies: %v; want \\Flagged on the second only", got)
	}
}

// TestMoveLateProcessingKeepsFlags: a MOVE the provider carries out
// after the bridge stopped waiting is answered NO (the outcome unknown);
// once the provider has moved the messages they show in the destination
// with the flags the bridge kept for them (written down before the
// call, held through AttemptHold for a late copy), not without them.
func TestMoveLateProcessingKeepsFlags(t *testing.T) {
	e := newEnv(t, options{pollInterval: 100 * time.Millisecond, requestTimeout: 300 * time.Millisecond, engine: func(c *mailstore.Config) {
		c.CallTimeout = 300 * time.Millisecond
		c.AttemptHold = 5 * time.Second
	}})
	e.deliver(alice, "INBOX", testMessage("late move"))
	c := e.login(alice, alicePW)
	if err := c.Create("INBOX.Dest", nil).Wait(); err != nil {
		t.Fatal(err)
	}
	watcher := e.login(alice, alicePW)
	mustSelectFolder(t, watcher, "INBOX.Dest")
	mustSelectFolder(t, c, "INBOX")
	// Metadata loaded, as a client listing the folder does before moving.
	if _, err := c.Fetch(imap.SeqSetNum(1), &imap.FetchOptions{Envelope: true, RFC822Size: true}).Collect(); err != nil {
		t.Fatal(err)
	}
	storeFlags(t, c, imap.SeqSetNum(1), imap.StoreFlagsAdd, true, imap.FlagFlagged, "$Urgent")
	e.sandbox.InjectFault("MoveMessagesByUIDs", sandbox.Fault{Latency: 800 * time.Millisecond, Late: true, Times: 1})
	if _, err := c.Move(imap.SeqSetNum(1), "INBOX.Dest").Wait(); err == nil {
		t.Fatal("MOVE whose answer never came answered OK")
	}
	time.Sleep(time.Second) // the provider has moved it now
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if err := watcher.Noop().Wait(); err != nil {
			t.Fatal(err)
		}
		got := flagsByUID(t, watcher, 1)
		if fl, ok := got[1]; ok && slices.Contains(fl, imap.FlagFlagged) && slices.Contains(fl, imap.Flag("$Urgent")) {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("the late-moved message shows %v (present %v); want \\Flagged and $Urgent", fl, ok)
		}
	}
	if n := e.count(alice, "INBOX"); n != 0 {
		t.Errorf("INBOX holds %d messages after the late move; want 0", n)
	}
}

// TestMoveIntoRecreatedFolder: a folder deleted and created again under
// the same name announces the UIDNEXT its first message gets. The
// provider never reuses a folder name's UIDs, so a UIDNEXT of 1 would
// be followed by a COPYUID above it (imaptest's move script).
func TestMoveIntoRecreatedFolder(t *testing.T) {
	e := newEnv(t, options{})
	c := e.login(alice, alicePW)
	wantOK(t, "CREATE", c.Create("INBOX.Again", nil).Wait())
	for _, s := range []string{"a", "b", "c"} {
		e.deliver(alice, "INBOX.Again", testMessage(s))
	}
	mustSelectFolder(t, c, "INBOX.Again")
	if err := c.Unselect().Wait(); err != nil {
		t.Fatal(err)
	}
	wantOK(t, "DELETE", c.Delete("INBOX.Again").Wait())
	wantOK(t, "CREATE again", c.Create("INBOX.Again", nil).Wait())
	again := mustSelectFolder(t, c, "INBOX.Again")
	if again.UIDNext != 4 {
		t.Fatalf("re-created folder announces UIDNEXT %d; want 4 (UIDs 1-3 were used)", again.UIDNext)
	}
	e.deliver(alice, "INBOX", testMessage("moved"))
	mustSelectFolder(t, c, "INBOX")
	data, err := c.Move(imap.SeqSetNum(1), "INBOX.Again").Wait()
	if err != nil {
		t.Fatal(err)
	}
	if dst := uidsOf(t, data.DestUIDs); len(dst) != 1 || dst[0] != again.UIDNext || data.UIDValidity != again.UIDValidity {
		t.Fatalf("COPYUID %d %v after UIDVALIDITY %d UIDNEXT %d", data.UIDValidity, dst, again.UIDValidity, again.UIDNext)
	}
}

// TestMoveOnKeepsFlagsInTransit: a message moved into a folder shows
// there (a refresh lists it) before its MOVE has written its flags; a
// second connection that moves it on at that moment must carry them, not
// leave them to a message no longer there (the engine's model test found
// a keyword lost along a chain of moves).
func TestMoveOnKeepsFlagsInTransit(t *testing.T) {
	e := newEnv(t, options{pollInterval: 20 * time.Millisecond})
	e.createFolder(alice, "INBOX.Work")
	u := imap.UID(e.deliver(alice, "INBOX", testMessage("travels")))
	first := e.login(alice, alicePW)
	mustSelectFolder(t, first, "INBOX")
	storeFlags(t, first, imap.UIDSetNum(u), imap.StoreFlagsAdd, true, "$Travels", `\Flagged`)
	second := e.watch(alice, alicePW)
	mustSelectFolder(t, second.Client, "INBOX.Work")

	// The first MOVE finds its copy's UID slowly (its metadata search),
	// so the copy is listed in INBOX.Work while its flags are unwritten.
	e.sandbox.InjectFault("SearchMessagesMetadataByReceivedDate", sandbox.Fault{Latency: 400 * time.Millisecond, Times: 1})
	moved := make(chan error, 1)
	go func() {
		_, err := first.Move(imap.UIDSetNum(u), "INBOX.Work").Wait()
		moved <- err
	}()
	deadline := time.Now().Add(5 * time.Second)
	for {
		if err := second.Noop().Wait(); err != nil {
			t.Fatal(err)
		}
		if _, exists, _ := second.take(); len(exists) > 0 && exists[len(exists)-1] > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the moved message never showed in INBOX.Work")
		}
		time.Sleep(10 * time.Millisecond)
	}
	data, err := second.Move(imap.SeqSetNum(1), "INBOX").Wait()
	if err != nil {
		t.Fatal(err)
	}
	if err := <-moved; err != nil {
		t.Fatal(err)
	}
	if data == nil || data.UIDValidity == 0 {
		t.Fatal("no COPYUID for the second MOVE")
	}
	back := uidsOf(t, data.DestUIDs)[0]
	if err := first.Noop().Wait(); err != nil {
		t.Fatal(err)
	}
	msgs, err := first.Fetch(imap.UIDSetNum(back), &imap.FetchOptions{Flags: true, UID: true}).Collect()
	if err != nil || len(msgs) != 1 {
		t.Fatalf("FETCH of UID %d: %v %v", back, msgs, err)
	}
	for _, want := range []imap.Flag{"$Travels", imap.FlagFlagged} {
		if !slices.Contains(msgs[0].Flags, want) {
			t.Errorf("the message moved on shows %v; %s lost in transit", msgs[0].Flags, want)
		}
	}
}

// TestCopyAnswerLostCopyShownMeanwhile: a COPY whose answer is lost
// while the provider has made the copy, and while other mail comes in
// (so the bridge cannot tell the copy is its own: NO [UNAVAILABLE]),
// while a connection watching the destination refreshes it. The copy
// must be shown with the flags written down for it, not without them
// for ever (model seed 785: a refresh showed it while the COPY waited,
// the refresh after the COPY gave up looked for its copies among new
// UIDs only, and a session then copied it onward without its flags).
// Refreshes now hold new UIDs back while a transfer into the folder
// runs (holdBackLocked).
func TestCopyAnswerLostCopyShownMeanwhile(t *testing.T) {
	e := newEnv(t, options{pollInterval: 50 * time.Millisecond})
	e.createFolder(alice, "INBOX.Work")
	e.deliver(alice, "INBOX.Work", testMessage("carried"))
	c := e.login(alice, alicePW)
	mustSelectFolder(t, c, "INBOX.Work")
	storeFlags(t, c, imap.SeqSetNum(1), imap.StoreFlagsAdd, true, "$Carried")
	watcher := e.watch(alice, alicePW)
	mustSelectFolder(t, watcher.Client, "INBOX")

	// The provider copies after 800 ms and drops the connection 150 ms
	// later instead of answering; every answer takes 300 ms, so the
	// watcher's refreshes list the copy before the COPY gives up.
	e.sandbox.SetLatency(300 * time.Millisecond)
	e.sandbox.InjectFault("CopyMessagesByUIDs", sandbox.Fault{Latency: 800 * time.Millisecond, After: true, Reset: true, Times: 1})
	copied := copyAsync(c, imap.SeqSetNum(1), "INBOX")
	// Meanwhile mail comes in, and the watcher refreshes the folder
	// again and again.
	time.Sleep(100 * time.Millisecond)
	e.deliver(alice, "INBOX", testMessage("other mail"))
	copyErr := noopUntil(t, watcher.Client, copied, nil)
	if copyErr == nil {
		t.Skip("the COPY was confirmed (the copy told apart after all); nothing left to recover")
	}
	// The next refreshes give the copy its flags.
	deadline := time.Now().Add(8 * time.Second)
	for {
		msgs := noopFetchAll(t, watcher.Client)
		var seen []string
		for _, m := range msgs {
			if m.Envelope != nil && m.Envelope.Subject == "carried" && slices.Contains(m.Flags, imap.Flag("$Carried")) {
				return
			}
			if m.Envelope != nil {
				seen = append(seen, fmt.Sprintf("%q %v", m.Envelope.Subject, m.Flags))
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the copy made while its COPY's answer was lost never got its flags: %v", seen)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestPairedCopyKeepsTwinsFlags: two COPYs into INBOX at once of two
// copies of one message (the same bytes, so the same Message-ID and
// size), one without flags, one with $Twin. The first COPY pairs its
// copy (COPYUID) but cannot show it yet (mail that came in below it is
// not listed yet); the second cannot tell its copy from the first's,
// answers without COPYUID and leaves its written-down flags to the next
// refresh. That refresh must give $Twin to the second copy, not to the
// first, which its COPY paired and whose flags are its own (model seed
// 817: a keyword moved from one copy to its twin).
func TestPairedCopyKeepsTwinsFlags(t *testing.T) {
	e := newEnv(t, options{pollInterval: time.Hour})
	e.createFolder(alice, "INBOX.Work")
	e.createFolder(alice, "INBOX.Other")
	twin := testMessage("twin")
	e.deliver(alice, "INBOX.Work", twin)
	e.deliver(alice, "INBOX.Other", twin)
	watcher := e.login(alice, alicePW)
	mustSelectFolder(t, watcher, "INBOX")
	a := e.login(alice, alicePW)
	mustSelectFolder(t, a, "INBOX.Work")
	b := e.login(alice, alicePW)
	mustSelectFolder(t, b, "INBOX.Other")
	storeFlags(t, b, imap.SeqSetNum(1), imap.StoreFlagsAdd, true, "$Twin")

	// B's copy is made 500 ms after it is asked; meanwhile mail comes in
	// and A copies the flagless twin.
	e.sandbox.InjectFault("CopyMessagesByUIDs", sandbox.Fault{Latency: 500 * time.Millisecond, Times: 1})
	bDone := copyAsync(b, imap.SeqSetNum(1), "INBOX")
	time.Sleep(100 * time.Millisecond)
	e.deliver(alice, "INBOX", testMessage("came in"))
	aData, err := a.Copy(imap.SeqSetNum(1), "INBOX").Wait()
	if err != nil {
		t.Fatal(err)
	}
	if err := <-bDone; err != nil {
		t.Fatal(err)
	}
	if aData == nil || len(aData.DestUIDs) != 1 {
		t.Skipf("the first COPY did not pair its copy (%v): nothing to guard", aData)
	}
	aUID, _ := aData.DestUIDs.Nums()
	// The next refresh shows every copy.
	deadline := time.Now().Add(5 * time.Second)
	for {
		msgs := noopFetchAll(t, watcher)
		var twins []*imapclient.FetchMessageBuffer
		for _, m := range msgs {
			if m.Envelope != nil && m.Envelope.Subject == "twin" {
				twins = append(twins, m)
			}
		}
		var flagged []imap.UID
		for _, m := range twins {
			if slices.Contains(m.Flags, imap.Flag("$Twin")) {
				flagged = append(flagged, m.UID)
			}
		}
		if slices.Contains(flagged, imap.UID(aUID[0])) {
			t.Fatalf("the copy the first COPY paired (UID %d, from the flagless twin) took the other's $Twin", aUID[0])
		}
		if len(twins) == 2 && len(flagged) == 1 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("copies of the twin: %d, with $Twin: %v; want 2, one", len(twins), flagged)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestHeldBackMailShownAfterCopy: while a COPY into INBOX runs, the
// refreshes of INBOX hold new UIDs back (its copies are shown with their
// flags when it ends); mail delivered meanwhile is among them, and shows,
// unread, once the COPY has ended, without waiting for a poll.
func TestHeldBackMailShownAfterCopy(t *testing.T) {
	e := newEnv(t, options{pollInterval: 50 * time.Millisecond})
	e.createFolder(alice, "INBOX.Work")
	e.deliver(alice, "INBOX.Work", testMessage("to copy"))
	c := e.login(alice, alicePW)
	mustSelectFolder(t, c, "INBOX.Work")
	watcher := e.login(alice, alicePW)
	mustSelectFolder(t, watcher, "INBOX")

	e.sandbox.InjectFault("CopyMessagesByUIDs", sandbox.Fault{Latency: 600 * time.Millisecond, Times: 1})
	copied := copyAsync(c, imap.SeqSetNum(1), "INBOX")
	time.Sleep(100 * time.Millisecond)
	e.deliver(alice, "INBOX", testMessage("came in"))
	listings := e.sandbox.Calls("GetUIDs")
	listedDuring := 0
	copyErr := noopUntil(t, watcher, copied, func() {
		listedDuring = e.sandbox.Calls("GetUIDs") - listings
		time.Sleep(20 * time.Millisecond)
	})
	if copyErr != nil {
		t.Fatal(copyErr)
	}
	if listedDuring < 2 {
		t.Fatalf("INBOX was listed %d times while the COPY ran: nothing was tested", listedDuring)
	}
	msgs := noopFetchAll(t, watcher)
	var seen []string
	for _, m := range msgs {
		seen = append(seen, fmt.Sprintf("%q %v", m.Envelope.Subject, m.Flags))
		if m.Envelope.Subject == "came in" && slices.Contains(m.Flags, imap.FlagSeen) {
			t.Errorf("mail held back for the COPY is shown read: %v", m.Flags)
		}
	}
	if len(msgs) != 2 {
		t.Fatalf("INBOX after the COPY: %v; want the copy and the mail that came in", seen)
	}
}

// copyAsync starts a COPY of set to dest on c; its outcome comes on the
// channel.
func copyAsync(c *imapclient.Client, set imap.NumSet, dest string) <-chan error {
	done := make(chan error, 1)
	go func() {
		_, err := c.Copy(set, dest).Wait()
		done <- err
	}()
	return done
}

// noopUntil has watcher send NOOP after NOOP (and run each, when not nil,
// after every one) until done delivers, and returns what it delivered.
func noopUntil(t *testing.T, watcher *imapclient.Client, done <-chan error, each func()) error {
	t.Helper()
	for {
		select {
		case err := <-done:
			return err
		default:
			if err := watcher.Noop().Wait(); err != nil {
				t.Fatal(err)
			}
			if each != nil {
				each()
			}
		}
	}
}

// noopFetchAll sends NOOP on c, then fetches the UID, flags and envelope
// of every message it shows.
func noopFetchAll(t *testing.T, c *imapclient.Client) []*imapclient.FetchMessageBuffer {
	t.Helper()
	if err := c.Noop().Wait(); err != nil {
		t.Fatal(err)
	}
	msgs, err := c.Fetch(imap.SeqSet{{Start: 1, Stop: 0}}, &imap.FetchOptions{UID: true, Flags: true, Envelope: true}).Collect()
	if err != nil {
		t.Fatal(err)
	}
	return msgs
}
