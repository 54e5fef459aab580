package imapbackend_test

// REST cost per client action, counted at the sandbox (deterministic): the
// targets of the mailstore issue.

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"

	"github.com/directbridge/directbridge/internal/mailstore"
	"github.com/directbridge/directbridge/upstream/directapi"
)

// fill saves n small messages into folder at the provider in one call.
func fill(t testing.TB, e *env, folder string, n int) {
	t.Helper()
	var batch []directapi.RawMessage
	for i := range n {
		batch = append(batch, directapi.NewRawMessage([]byte(testMessage(fmt.Sprintf("cost%05d", i)))))
	}
	if err := e.client.SaveRawMessages(context.Background(), auth(alice), folder, batch); err != nil {
		t.Fatal(err)
	}
}

// TestSequentialFetchReadsAhead: a client that fetches one body per
// command in UID order (JavaMail, mbsync, fetchmail, offlineimap) costs
// at most ceil(N/50)+2 GetRawMessagesByUIDs calls for N messages, and
// every body is still the right one.
func TestSequentialFetchReadsAhead(t *testing.T) {
	const n = 230
	e := newEnv(t, options{})
	fill(t, e, "INBOX", n)
	c := e.login(alice, alicePW)
	if _, err := c.Select("INBOX", nil).Wait(); err != nil {
		t.Fatal(err)
	}
	var all imap.SeqSet
	all.AddRange(1, n)
	listing, err := c.Fetch(all, &imap.FetchOptions{UID: true}).Collect()
	if err != nil || len(listing) != n {
		t.Fatalf("listing: %d messages, %v", len(listing), err)
	}
	e.sandbox.ResetCalls()
	body := &imap.FetchItemBodySection{Peek: true}
	for i, m := range listing {
		got, err := c.Fetch(imap.UIDSetNum(m.UID), &imap.FetchOptions{UID: true, BodySection: []*imap.FetchItemBodySection{body}}).Collect()
		if err != nil || len(got) != 1 {
			t.Fatalf("fetch of UID %d: %d answers, %v", m.UID, len(got), err)
		}
		if want := fmt.Sprintf("Subject: cost%05d", i); !containsLine(got[0].FindBodySection(body), want) {
			t.Fatalf("UID %d: body lacks %q", m.UID, want)
		}
	}
	calls := e.sandbox.Calls("GetRawMessagesByUIDs")
	t.Logf("%d one-message fetches cost %d GetRawMessagesByUIDs calls (%v)", n, calls, e.sandbox.CallCounts())
	if limit := (n+49)/50 + 2; calls > limit {
		t.Errorf("%d GetRawMessagesByUIDs calls for %d one-message fetches; want at most %d", calls, n, limit)
	}
	if total := e.sandbox.TotalCalls(); total > calls+2 {
		t.Errorf("%d REST calls in all (%v); want little beyond the raw fetches", total, e.sandbox.CallCounts())
	}
}

func containsLine(b []byte, line string) bool {
	for _, l := range splitLines(string(b)) {
		if l == line {
			return true
		}
	}
	return false
}

func splitLines(s string) []string {
	var out []string
	start := 0
	for i := 0; i < len(s); i++ {
		if s[i] == '\n' {
			end := i
			if end > start && s[end-1] == '\r' {
				end--
			}
			out = append(out, s[start:end])
			start = i + 1
		}
	}
	return append(out, s[start:])
}

// TestSequentialAppendsCost: a client filing a hundred messages one APPEND
// after another into a folder (Thunderbird copying to Sent, an EHR filing
// documents) costs one SaveRawMessages, one GetUIDs and one
// SearchMessagesMetadataByReceivedDate each (APPENDUID, confirmed by the
// new message's size and Message-ID: a count of new UIDs can be fooled by
// a delivery and a removal at the same moment), and the \Seen asked for
// is sent in one SetRead for many: at most 3 calls per message and 20
// more. Every message then shows, with its flags.
func TestSequentialAppendsCost(t *testing.T) {
	const n = 100
	e := newEnv(t, options{})
	c := e.login(alice, alicePW)
	if err := c.Create("INBOX.Filed", nil).Wait(); err != nil {
		t.Fatal(err)
	}
	e.sandbox.ResetCalls()
	for i := range n {
		if _, err := appendMsg(c, "INBOX.Filed", testMessage(fmt.Sprintf("filed%03d", i)), `\Seen`, "$Filed"); err != nil {
			t.Fatal(err)
		}
	}
	d := mustSelectFolder(t, c, "INBOX.Filed")
	calls := e.sandbox.TotalCalls()
	t.Logf("%d APPENDs and a SELECT cost %d calls: %v", n, calls, e.sandbox.CallCounts())
	if calls > 3*n+20 {
		t.Errorf("%d calls for %d APPENDs; want at most %d", calls, n, 3*n+20)
	}
	if d.NumMessages != n {
		t.Fatalf("SELECT shows %d messages; want %d", d.NumMessages, n)
	}
	var all imap.SeqSet
	all.AddRange(1, n)
	msgs, err := c.Fetch(all, &imap.FetchOptions{Flags: true, Envelope: true}).Collect()
	if err != nil || len(msgs) != n {
		t.Fatalf("FETCH: %d, %v", len(msgs), err)
	}
	for i, m := range msgs {
		if want := fmt.Sprintf("filed%03d", i); m.Envelope == nil || m.Envelope.Subject != want {
			t.Fatalf("message %d: envelope %+v; want subject %s", i+1, m.Envelope, want)
		}
		if fl := slices.DeleteFunc(m.Flags, func(f imap.Flag) bool { return f == `\Recent` }); !slices.Equal(fl, []imap.Flag{"$Filed", imap.FlagSeen}) {
			t.Fatalf("message %d: flags %v; want [$Filed \\Seen]", i+1, m.Flags)
		}
	}
	e.waitUnread(alice, "INBOX.Filed", 0)
	if k := e.sandbox.Calls("MarkMessagesAsReadByUIDs"); k > 5 {
		t.Errorf("%d MarkMessagesAsReadByUIDs for %d APPENDs; want them batched", k, n)
	}
}

// TestNewMailMetadataCost: the ENVELOPE of a message that arrives after
// a folder was listed is loaded for the new message only, never by
// listing the folder's metadata again.
func TestNewMailMetadataCost(t *testing.T) {
	e := newEnv(t, options{pollInterval: 20 * time.Millisecond})
	fill(t, e, "INBOX", 500)
	c := e.watch(alice, alicePW)
	mustSelectFolder(t, c.Client, "INBOX")
	var all imap.SeqSet
	all.AddRange(1, 500)
	if _, err := c.Fetch(all, &imap.FetchOptions{UID: true, Envelope: true}).Collect(); err != nil {
		t.Fatal(err)
	}
	e.deliver(alice, "INBOX", testMessage("late arrival"))
	// The poller finds it (the poll is not what is counted).
	for deadline := time.Now().Add(5 * time.Second); ; {
		if err := c.Noop().Wait(); err != nil {
			t.Fatal(err)
		}
		if _, exists, _ := c.take(); slices.Contains(exists, 501) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no EXISTS for the new message")
		}
		time.Sleep(10 * time.Millisecond)
	}
	e.sandbox.ResetCalls()
	msgs, err := c.Fetch(imap.SeqSetNum(501), &imap.FetchOptions{UID: true, Envelope: true}).Collect()
	if err != nil || len(msgs) != 1 || msgs[0].Envelope.Subject != "late arrival" {
		t.Fatalf("FETCH of the new message: %+v, %v", msgs, err)
	}
	calls := e.sandbox.CallCounts()
	delete(calls, "GetUIDs") // the poller's, meanwhile
	delete(calls, "GetUnreadMessageCount")
	if n := calls["GetMessageMetaData"]; n != 0 {
		t.Errorf("the folder's metadata was listed again (%v)", e.sandbox.CallCounts())
	}
	if n := calls["SearchMessagesMetadataByReceivedDate"]; n != 1 || len(calls) != 1 {
		t.Errorf("ENVELOPE of one new message cost %v; want one SearchMessagesMetadataByReceivedDate", calls)
	}
}

// TestCopyMoveCost: COPY and MOVE into a folder the bridge knows cost at
// most two calls each (the copy or move, and one
// SearchMessagesMetadataByReceivedDate that finds the copies by their
// sources' size and Message-ID for COPYUID), plus one metadata listing of
// the source folder when the bridge never loaded it; and the flags travel.
func TestCopyMoveCost(t *testing.T) {
	e := newEnv(t, options{})
	fill(t, e, "INBOX", 10)
	c := e.login(alice, alicePW)
	if err := c.Create("INBOX.Archive", nil).Wait(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Status("INBOX.Archive", &imap.StatusOptions{NumMessages: true}).Wait(); err != nil {
		t.Fatal(err)
	}
	mustSelectFolder(t, c, "INBOX")
	storeFlags(t, c, imap.SeqSetNum(1, 2), imap.StoreFlagsAdd, true, imap.FlagFlagged, "$Work")
	for _, tc := range []struct {
		name string
		run  func() (*imap.CopyData, error)
	}{
		{"COPY", func() (*imap.CopyData, error) { return c.Copy(imap.SeqSetNum(1, 2, 3), "INBOX.Archive").Wait() }},
		{"MOVE", func() (*imap.CopyData, error) {
			d, err := c.Move(imap.SeqSetNum(1, 2), "INBOX.Archive").Wait()
			if d == nil || err != nil {
				return nil, err
			}
			dest, _ := d.DestUIDs.(imap.UIDSet)
			return &imap.CopyData{UIDValidity: d.UIDValidity, DestUIDs: dest}, nil
		}},
	} {
		e.sandbox.ResetCalls()
		data, err := tc.run()
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		calls := e.sandbox.CallCounts()
		if total := e.sandbox.TotalCalls() - calls["GetMessageMetaData"]; total > 2 || calls["GetMessageMetaData"] > 1 {
			t.Errorf("%s cost %d calls (%v); want at most 2 and the source's metadata once", tc.name, e.sandbox.TotalCalls(), calls)
		}
		if data == nil || len(data.DestUIDs) == 0 {
			t.Fatalf("%s: no COPYUID", tc.name)
		}
	}
	d := mustSelectFolder(t, c, "INBOX.Archive")
	if d.NumMessages != 5 {
		t.Fatalf("Archive has %d messages; want 5", d.NumMessages)
	}
	msgs, err := c.Fetch(imap.SeqSet{{Start: 1, Stop: 5}}, &imap.FetchOptions{Flags: true, Envelope: true}).Collect()
	if err != nil {
		t.Fatal(err)
	}
	flagged := 0
	for _, m := range msgs {
		if slices.Contains(m.Flags, imap.FlagFlagged) && slices.Contains(m.Flags, "$Work") {
			flagged++
		}
	}
	// Messages 1 and 2 were flagged: copied once, moved once.
	if flagged != 4 {
		t.Errorf("%d copies carry \\Flagged $Work; want 4", flagged)
	}
}

// TestSelectAllUnreadCost: SELECT of a folder whose messages are all
// unread (or all read) infers the read state from the counts: no
// GetUnreadMessages, whose answer holds every message whole.
func TestSelectAllUnreadCost(t *testing.T) {
	e := newEnv(t, options{})
	fill(t, e, "INBOX", 300)
	c := e.login(alice, alicePW)
	e.sandbox.ResetCalls()
	d := mustSelectFolder(t, c, "INBOX")
	if d.NumMessages != 300 {
		t.Fatalf("SELECT: %+v", d)
	}
	st, err := c.Status("INBOX", &imap.StatusOptions{NumUnseen: true}).Wait()
	if err != nil || st.NumUnseen == nil || *st.NumUnseen != 300 {
		t.Fatalf("STATUS UNSEEN: %+v, %v; want 300", st, err)
	}
	if n := e.sandbox.Calls("GetUnreadMessages"); n != 0 {
		t.Errorf("SELECT of an all-unread folder cost %v; want no GetUnreadMessages", e.sandbox.CallCounts())
	}
}

// TestReselectAfterEvictionCost: a folder forgotten after MirrorIdle is
// loaded again without GetUnreadMessages when what the bridge knew of the
// read state agrees with the counts (internal/mailstore/readmemo.go), and the read state
// shown is right, for old and new messages alike.
func TestReselectAfterEvictionCost(t *testing.T) {
	e := newEnv(t, options{engine: func(c *mailstore.Config) { c.Idle = 20 * time.Millisecond }})
	fill(t, e, "INBOX", 10)
	c := e.login(alice, alicePW)
	mustSelectFolder(t, c, "INBOX")
	storeFlags(t, c, imap.SeqSetNum(2, 5, 7), imap.StoreFlagsAdd, true, imap.FlagSeen)
	if err := c.Unselect().Wait(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond) // the mirror is forgotten
	e.deliver(alice, "INBOX", testMessage("while away"))
	e.sandbox.ResetCalls()
	d := mustSelectFolder(t, c, "INBOX")
	if d.NumMessages != 11 {
		t.Fatalf("SELECT: %d messages", d.NumMessages)
	}
	if n := e.sandbox.Calls("GetUnreadMessages"); n != 0 {
		t.Errorf("re-SELECT cost %v; want no GetUnreadMessages", e.sandbox.CallCounts())
	}
	var all imap.SeqSet
	all.AddRange(1, 11)
	msgs, err := c.Fetch(all, &imap.FetchOptions{Flags: true}).Collect()
	if err != nil {
		t.Fatal(err)
	}
	for i, m := range msgs {
		want := i == 1 || i == 4 || i == 6
		if got := slices.Contains(m.Flags, imap.FlagSeen); got != want {
			t.Errorf("message %d: \\Seen %v; want %v", i+1, got, want)
		}
	}
	// Read state changed elsewhere meanwhile: the counts disagree with
	// the memo and the provider is asked.
	if err := c.Unselect().Wait(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	uids, _ := e.client.GetUIDs(context.Background(), auth(alice), "INBOX")
	if err := e.client.MarkMessagesAsReadByUIDs(context.Background(), auth(alice), "INBOX", uids[:1]); err != nil {
		t.Fatal(err)
	}
	e.sandbox.ResetCalls()
	mustSelectFolder(t, c, "INBOX")
	if n := e.sandbox.Calls("GetUnreadMessages"); n != 1 {
		t.Errorf("re-SELECT after a change elsewhere cost %v; want one GetUnreadMessages", e.sandbox.CallCounts())
	}
}

// TestAppendToSelectedCost: an APPEND to the folder the connection has
// selected answers EXISTS and APPENDUID for three calls: the save, the
// folder's UIDs (the read state of the other messages did not change),
// and the new message's metadata, which confirms its UID.
func TestAppendToSelectedCost(t *testing.T) {
	e := newEnv(t, options{})
	fill(t, e, "INBOX", 5)
	c := e.watch(alice, alicePW)
	mustSelectFolder(t, c.Client, "INBOX")
	e.sandbox.ResetCalls()
	data, err := appendMsg(c.Client, "INBOX", testMessage("selected"), `\Flagged`)
	if err != nil || data == nil || data.UID == 0 {
		t.Fatalf("APPEND: %+v, %v", data, err)
	}
	if calls := e.sandbox.CallCounts(); e.sandbox.TotalCalls() != 3 || calls["SaveRawMessages"] != 1 || calls["GetUIDs"] != 1 || calls["SearchMessagesMetadataByReceivedDate"] != 1 {
		t.Errorf("APPEND to the selected folder cost %v; want SaveRawMessages, GetUIDs and SearchMessagesMetadataByReceivedDate", calls)
	}
	if _, exists, _ := c.take(); !slices.Contains(exists, 6) {
		t.Fatalf("EXISTS after APPEND: %v; want 6", exists)
	}
	if got := flagsByUID(t, c.Client, data.UID)[data.UID]; !slices.Contains(got, imap.FlagFlagged) {
		t.Fatalf("flags %v; want \\Flagged", got)
	}
	// What the client appended is described from the bytes it sent: its
	// ENVELOPE, INTERNALDATE and size cost nothing.
	e.sandbox.ResetCalls()
	msgs, err := c.Client.Fetch(imap.UIDSetNum(data.UID), &imap.FetchOptions{UID: true, Envelope: true,
		InternalDate: true, RFC822Size: true}).Collect()
	if err != nil || len(msgs) != 1 || msgs[0].Envelope == nil || msgs[0].Envelope.Subject != "selected" ||
		msgs[0].InternalDate.IsZero() || msgs[0].RFC822Size != int64(len(testMessage("selected"))) {
		t.Fatalf("FETCH of the appended message: %+v, %v", msgs, err)
	}
	if n := e.sandbox.TotalCalls(); n != 0 {
		t.Errorf("FETCH ENVELOPE of an appended message cost %v; want nothing", e.sandbox.CallCounts())
	}
}
