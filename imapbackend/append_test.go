package imapbackend_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"

	"github.com/directbridge/directbridge/imapbackend"
	"github.com/directbridge/directbridge/internal/limits"
	"github.com/directbridge/directbridge/internal/mailstore"
	"github.com/directbridge/directbridge/internal/state"
	"github.com/directbridge/directbridge/sandbox"
	"github.com/directbridge/directbridge/upstream/directapi"
)

// appendMsg runs APPEND.
func appendMsg(c *imapclient.Client, folder, raw string, flags ...imap.Flag) (*imap.AppendData, error) {
	cmd := c.Append(folder, int64(len(raw)), &imap.AppendOptions{Flags: flags, Time: time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)})
	if _, err := cmd.Write([]byte(raw)); err != nil {
		return nil, err
	}
	if err := cmd.Close(); err != nil {
		return nil, err
	}
	return cmd.Wait()
}

// TestAppend: APPEND to a folder the connection has not selected saves
// the message with one provider call and finds its UID with one more
// (a light refresh, internal/mailstore/arrivals.go), so the answer carries
// APPENDUID (RFC 4315 §3); SELECT then shows it with the flags asked for:
// \Seen at the provider (which saves unread, so it is marked read with
// the settle timer), the rest kept by the bridge.
func TestAppend(t *testing.T) {
	e := newEnv(t, options{})
	e.deliver(alice, "INBOX", testMessage("before"))
	c := e.login(alice, alicePW)
	if _, err := c.Status("INBOX", &imap.StatusOptions{NumMessages: true}).Wait(); err != nil {
		t.Fatal(err)
	}

	e.sandbox.ResetCalls()
	data, err := appendMsg(c, "inbox", testMessage("appended"), `\seen`, `\FLAGGED`, "$Label")
	if err != nil {
		t.Fatal(err)
	}
	// The save, the UIDs, and the new message's metadata that confirms
	// which UID is the one saved (mailstore.confirmOrder).
	if got := e.sandbox.CallCounts(); len(got) != 3 || got["SaveRawMessages"] != 1 || got["GetUIDs"] != 1 || got["SearchMessagesMetadataByReceivedDate"] != 1 {
		t.Errorf("APPEND cost %v; want one SaveRawMessages, one GetUIDs and one SearchMessagesMetadataByReceivedDate", got)
	}
	if data == nil || data.UID == 0 {
		t.Fatalf("APPEND answered %+v; want APPENDUID", data)
	}
	d := mustSelectFolder(t, c, "INBOX")
	if d.NumMessages != 2 || d.UIDValidity != data.UIDValidity || d.UIDNext != data.UID+1 {
		t.Fatalf("SELECT after APPEND: %+v; APPENDUID %+v", d, data)
	}
	if ids := e.msgIDs(alice, "INBOX", []imap.UID{data.UID}); ids[data.UID] != "<appended@direct.example>" {
		t.Fatalf("UID %d names %v at the provider", data.UID, ids)
	}
	e.waitUnread(alice, "INBOX", 1)
	if got, want := flagsByUID(t, c, data.UID)[data.UID], sortedFlags(`\Seen`, `\Flagged`, "$Label"); !slices.Equal(got, want) {
		t.Fatalf("flags of the appended message: %v; want %v", got, want)
	}
}

// waitUnread waits up to two seconds for the provider's unread count of
// folder to be want: \Seen of appended messages goes out with a timer.
func (e *env) waitUnread(user, folder string, want int) {
	e.t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	n := e.unread(user, folder)
	for n != want && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
		n = e.unread(user, folder)
	}
	if n != want {
		e.t.Errorf("unread count of %s at the provider: %d; want %d", folder, n, want)
	}
}

// TestAppendToSelectedFolder: the connection that has the folder selected
// learns of the appended message at once (EXISTS).
func TestAppendToSelectedFolder(t *testing.T) {
	e := newEnv(t, options{})
	c := e.watch(alice, alicePW)
	mustSelectFolder(t, c.Client, "INBOX")
	data, err := appendMsg(c.Client, "INBOX", testMessage("here"), `\Draft`)
	if err != nil || data.UID == 0 {
		t.Fatalf("APPEND: %+v %v", data, err)
	}
	if _, exists, _ := c.take(); !slices.Equal(exists, []uint32{1}) {
		t.Fatalf("EXISTS after APPEND: %v; want [1]", exists)
	}
	if got := flagsByUID(t, c.Client, data.UID)[data.UID]; !slices.Equal(got, []imap.Flag{`\Draft`}) {
		t.Fatalf("flags %v; want [\\Draft]", got)
	}
}

// TestAppendErrors: a missing folder is NO [TRYCREATE]; a message over
// the APPENDLIMIT is NO [TOOBIG]; nothing is saved.
func TestAppendErrors(t *testing.T) {
	e := newEnv(t, options{cfg: func(c *imapbackend.Config) { c.AppendLimit = 5000 }})
	c := e.login(alice, alicePW)
	if _, err := appendMsg(c, "INBOX.Missing", testMessage("x")); imapCode(err) != imap.ResponseCodeTryCreate {
		t.Errorf("APPEND to a missing folder: %v; want NO [TRYCREATE]", err)
	}
	big := testMessage("big") + strings.Repeat("x", 6000) + "\r\n"
	if _, err := appendMsg(c, "INBOX", big); imapCode(err) != imap.ResponseCodeTooBig {
		t.Errorf("APPEND over the limit: %v; want NO [TOOBIG]", err)
	}
	if n := e.count(alice, "INBOX"); n != 0 {
		t.Errorf("INBOX has %d messages; want 0", n)
	}
}

// TestAppendSentNoDuplicate: a client that appends its copy of a message
// the bridge just sent to INBOX.Sent, where the provider filed one
// already, gets the APPENDUID of the provider's copy, with the flags it
// asked for, and no second copy is saved. Another message appended to
// INBOX.Sent is saved as usual.
func TestAppendSentNoDuplicate(t *testing.T) {
	e := newEnv(t, options{})
	store := e.store
	ctx := context.Background()
	smtpID, err := e.client.Send(ctx, auth(alice), directapi.Message{
		Sender: alice, Subject: "sent", Body: "hello",
		Recipients: []directapi.Recipient{{Email: bob, Type: directapi.TO}},
	})
	if err != nil {
		t.Fatal(err)
	}
	clientID := "<client-1@direct.example>"
	if err := store.RecordSent(ctx, state.SentRecord{Username: alice, SmtpID: smtpID, MessageID: clientID, SentAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	pids, err := e.client.GetUIDs(ctx, auth(alice), "INBOX.Sent")
	if err != nil || len(pids) != 1 {
		t.Fatalf("provider's Sent: %v %v", pids, err)
	}

	c := e.login(alice, alicePW)
	raw := "From: alice@direct.example\r\nTo: bob@direct.example\r\nSubject: sent\r\nMessage-ID: " + clientID +
		"\r\nDate: Mon, 02 Jan 2026 15:04:05 +0000\r\n\r\nhello\r\n"
	data, err := appendMsg(c, "INBOX.Sent", raw, `\Seen`, "$Sent")
	if err != nil {
		t.Fatal(err)
	}
	if data.UID != imap.UID(pids[0]) || data.UIDValidity == 0 {
		t.Fatalf("APPENDUID %+v; want the provider's copy %d", data, pids[0])
	}
	if n := e.count(alice, "INBOX.Sent"); n != 1 {
		t.Fatalf("INBOX.Sent has %d messages; want 1 (no duplicate)", n)
	}
	if n := e.unread(alice, "INBOX.Sent"); n != 0 {
		t.Errorf("the provider's copy is unread; \\Seen was asked for")
	}
	d := mustSelectFolder(t, c, "INBOX.Sent")
	if d.UIDValidity != data.UIDValidity {
		t.Fatalf("UIDVALIDITY %d; APPENDUID said %d", d.UIDValidity, data.UIDValidity)
	}
	if got, want := flagsByUID(t, c, data.UID)[data.UID], sortedFlags(`\Seen`, "$Sent"); !slices.Equal(got, want) {
		t.Fatalf("flags of the provider's copy: %v; want %v", got, want)
	}

	// Not sent by the bridge: saved.
	other, err := appendMsg(c, "INBOX.Sent", testMessage("filed-by-hand"))
	if err != nil {
		t.Fatal(err)
	}
	if n := e.count(alice, "INBOX.Sent"); n != 2 || other.UID == data.UID {
		t.Fatalf("INBOX.Sent has %d messages, APPENDUID %+v; want 2 and a new UID", n, other)
	}
}

// TestAppendWithOtherMailArriving: when mail the bridge has not seen yet
// arrived in the folder before an APPEND, the refresh that finds the
// appended message finds both; the appended one is told apart by its
// bytes, and only it gets the flags asked for and the APPENDUID.
func TestAppendWithOtherMailArriving(t *testing.T) {
	e := newEnv(t, options{})
	c := e.login(alice, alicePW)
	if _, err := c.Status("INBOX", &imap.StatusOptions{NumMessages: true}).Wait(); err != nil {
		t.Fatal(err)
	}
	theirs := imap.UID(e.deliver(alice, "INBOX", testMessage("theirs")))
	data, err := appendMsg(c, "INBOX", testMessage("mine"), "$Mine", `\Seen`)
	if err != nil {
		t.Fatal(err)
	}
	if data == nil || data.UID == 0 || data.UID == theirs {
		t.Fatalf("APPENDUID %+v; the other message is UID %d", data, theirs)
	}
	mustSelectFolder(t, c, "INBOX")
	msgs, err := c.Fetch(imap.SeqSet{{Start: 1, Stop: 2}}, &imap.FetchOptions{Flags: true, Envelope: true}).Collect()
	if err != nil || len(msgs) != 2 {
		t.Fatalf("FETCH: %d, %v", len(msgs), err)
	}
	for _, m := range msgs {
		mine := m.Envelope.Subject == "mine"
		if got := slices.Contains(m.Flags, "$Mine") && slices.Contains(m.Flags, imap.FlagSeen); got != mine {
			t.Errorf("%q: flags %v", m.Envelope.Subject, m.Flags)
		}
	}
}

// TestFetchAppendedAfterOtherSessionExpunged: a message saved through the
// bridge and expunged by another session can still be fetched whole by a
// session not told yet (RFC 2180 §4.1), as Dovecot allows: its bytes were
// kept when it was saved; no NO [EXPUNGEISSUED] (imaptest's stress counts
// those as errors).
func TestFetchAppendedAfterOtherSessionExpunged(t *testing.T) {
	e := newEnv(t, options{})
	a := e.login(alice, alicePW)
	b := e.login(alice, alicePW)
	mustSelectFolder(t, a, "INBOX")
	if _, err := appendMsg(a, "INBOX", testMessage("short-lived"), `\Deleted`); err != nil {
		t.Fatal(err)
	}
	mustSelectFolder(t, b, "INBOX")
	if _, err := a.Expunge().Collect(); err != nil {
		t.Fatal(err)
	}
	body := &imap.FetchItemBodySection{Peek: true}
	msgs, err := b.Fetch(imap.SeqSetNum(1), &imap.FetchOptions{UID: true, Flags: true, InternalDate: true, RFC822Size: true,
		Envelope: true, BodySection: []*imap.FetchItemBodySection{body}}).Collect()
	if err != nil || len(msgs) != 1 {
		t.Fatalf("FETCH of the expunged message: %d answers, %v", len(msgs), err)
	}
	m := msgs[0]
	if m.Envelope == nil || m.Envelope.Subject != "short-lived" || m.InternalDate.IsZero() ||
		m.RFC822Size != int64(len(testMessage("short-lived"))) || string(m.FindBodySection(body)) != testMessage("short-lived") {
		t.Fatalf("answer %+v", m)
	}
}

// TestConcurrentAppendsSameMessageID: connections appending at once, as
// imaptest's stress does, messages that share a Message-ID but differ in
// body and flags: each message gets its own flags, its bytes are kept
// (a FETCH of every body costs no download), and a session not yet told
// of an expunge by another still fetches the expunged messages whole.
func TestConcurrentAppendsSameMessageID(t *testing.T) {
	const conns, each = 4, 5
	e := newEnv(t, options{})
	reader := e.login(alice, alicePW)
	mustSelectFolder(t, reader, "INBOX")
	raw := func(c, i int) string {
		return "From: bob@direct.example\r\nSubject: same\r\nMessage-ID: <same@direct.example>\r\n\r\nbody " +
			strconv.Itoa(c) + "-" + strconv.Itoa(i) + "\r\n"
	}
	errs := make(chan error, conns)
	for c := range conns {
		cl := e.login(alice, alicePW)
		go func() {
			for i := range each {
				if _, err := appendMsg(cl, "INBOX", raw(c, i), imap.Flag(fmt.Sprintf("$c%di%d", c, i)), imap.FlagDeleted); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range conns {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if err := reader.Noop().Wait(); err != nil {
		t.Fatal(err)
	}
	expunger := e.login(alice, alicePW)
	mustSelectFolder(t, expunger, "INBOX")
	if _, err := expunger.Expunge().Collect(); err != nil {
		t.Fatal(err)
	}
	e.sandbox.ResetCalls()
	body := &imap.FetchItemBodySection{Peek: true}
	msgs, err := reader.Fetch(imap.SeqSet{{Start: 1, Stop: 0}}, &imap.FetchOptions{Flags: true,
		BodySection: []*imap.FetchItemBodySection{body}}).Collect()
	if err != nil || len(msgs) != conns*each {
		t.Fatalf("FETCH after another session's EXPUNGE: %d messages, %v", len(msgs), err)
	}
	for _, m := range msgs {
		b := string(m.FindBodySection(body))
		var c, i int
		if _, err := fmt.Sscanf(b[strings.Index(b, "body "):], "body %d-%d", &c, &i); err != nil {
			t.Fatalf("body %q: %v", b, err)
		}
		if want := imap.Flag(fmt.Sprintf("$c%di%d", c, i)); !slices.Contains(m.Flags, want) {
			t.Errorf("message %d-%d: flags %v, want %s", c, i, m.Flags, want)
		}
	}
	if n := e.sandbox.Calls("GetRawMessagesByUIDs"); n != 0 {
		t.Errorf("%d downloads of bodies saved through the bridge; want 0", n)
	}
}

// TestAppendAnswerLost: when the provider stores an APPEND's message but
// its answer is lost, the bridge finds the message in the folder and
// answers OK (a NO would make the client append it again: two copies);
// when the provider did not store it, the answer is NO and nothing is
// there.
func TestAppendAnswerLost(t *testing.T) {
	e := newEnv(t, options{})
	c := e.login(alice, alicePW)
	mustSelectFolder(t, c, "INBOX")

	e.sandbox.InjectFault("SaveRawMessages", sandbox.Fault{After: true, Reset: true, Times: 1})
	data, err := appendMsg(c, "INBOX", testMessage("lost answer"), imap.FlagFlagged)
	if err != nil {
		t.Fatalf("APPEND whose answer was lost after the provider stored it: %v", err)
	}
	if data == nil || data.UID == 0 {
		t.Fatalf("APPEND: no APPENDUID (%+v)", data)
	}
	if got := flagsByUID(t, c, data.UID)[data.UID]; !slices.Contains(got, imap.FlagFlagged) {
		t.Errorf("flags %v; want \\Flagged", got)
	}

	e.sandbox.InjectFault("SaveRawMessages", sandbox.Fault{Reset: true, Times: 1})
	if _, err := appendMsg(c, "INBOX", testMessage("never stored"), imap.FlagFlagged); err == nil {
		t.Fatal("APPEND the provider never stored answered OK")
	}
	msgs, err := c.Fetch(imap.SeqSet{{Start: 1, Stop: 0}}, &imap.FetchOptions{Envelope: true}).Collect()
	if err != nil {
		t.Fatal(err)
	}
	var subjects []string
	for _, m := range msgs {
		subjects = append(subjects, m.Envelope.Subject)
	}
	if !slices.Equal(subjects, []string{"lost answer"}) {
		t.Errorf("INBOX holds %q; want the stored message once", subjects)
	}
}

// TestAppendLateProcessing: an APPEND whose request the provider carries
// out after the bridge stopped waiting (late processing) is answered
// NO [UNAVAILABLE]; the client's retry is answered NO [UNAVAILABLE] while
// the outcome is open, and OK with the provider's copy (and the flags it
// asks) once the message shows: one copy, not two. An APPEND the
// provider dropped is saved by the retry once the hold has passed.
func TestAppendLateProcessing(t *testing.T) {
	const hold = 1500 * time.Millisecond
	e := newEnv(t, options{requestTimeout: 300 * time.Millisecond, engine: func(c *mailstore.Config) {
		c.CallTimeout = 300 * time.Millisecond
		c.AttemptHold = hold
	}})
	c := e.login(alice, alicePW)
	mustSelectFolder(t, c, "INBOX")
	wantUnknown := func(what string, err error) {
		t.Helper()
		var ie *imap.Error
		if !errors.As(err, &ie) || ie.Code != imap.ResponseCodeUnavailable || !strings.Contains(ie.Text, "may still carry it out") {
			t.Fatalf("%s: %v; want NO [UNAVAILABLE] saying the outcome is not known", what, err)
		}
	}

	// Carried out 800 ms after it was asked, long after the bridge gave up.
	e.sandbox.InjectFault("SaveRawMessages", sandbox.Fault{Latency: 800 * time.Millisecond, Late: true, Times: 1})
	_, err := appendMsg(c, "INBOX", testMessage("late"), imap.FlagFlagged)
	wantUnknown("APPEND whose answer came too late", err)
	_, err = appendMsg(c, "INBOX", testMessage("late"), imap.FlagFlagged)
	wantUnknown("its retry before the provider acted", err)
	time.Sleep(time.Second) // the provider has stored it now
	other := e.login(alice, alicePW)
	data, err := appendMsg(other, "INBOX", testMessage("late"), imap.FlagFlagged)
	if err != nil || data == nil || data.UID == 0 {
		t.Fatalf("retry once the message is there: %+v, %v; want OK with its APPENDUID", data, err)
	}
	if n := e.count(alice, "INBOX"); n != 1 {
		t.Fatalf("INBOX holds %d messages; want the late one once", n)
	}
	mustSelectFolder(t, other, "INBOX")
	if got := flagsByUID(t, other, data.UID)[data.UID]; !slices.Contains(got, imap.FlagFlagged) {
		t.Errorf("flags of the late message: %v; want \\Flagged from the retry", got)
	}

	// Dropped by the provider (the connection closed without an answer
	// and without the save): the retry waits out the hold, then saves.
	e.sandbox.InjectFault("SaveRawMessages", sandbox.Fault{Reset: true, Times: 1})
	_, err = appendMsg(c, "INBOX", testMessage("dropped"))
	wantUnknown("APPEND the provider dropped", err)
	_, err = appendMsg(c, "INBOX", testMessage("dropped"))
	wantUnknown("its retry within the hold", err)
	time.Sleep(hold)
	if _, err := appendMsg(c, "INBOX", testMessage("dropped")); err != nil {
		t.Fatalf("retry after the hold: %v; want it saved", err)
	}
	if n := e.count(alice, "INBOX"); n != 2 {
		t.Fatalf("INBOX holds %d messages; want 2 (late, dropped)", n)
	}
}

// TestAppendInFlightBudget: while one APPEND's literal is arriving, an
// APPEND that would pass the budget of message bytes in flight is
// answered NO [LIMIT] without being saved; once the first is done the
// same APPEND succeeds.
func TestAppendInFlightBudget(t *testing.T) {
	budget := limits.NewBudget(100_000)
	e := newEnv(t, options{cfg: func(c *imapbackend.Config) { c.Messages = budget }})
	a := e.login(alice, alicePW)
	b := e.login(alice, alicePW)

	first := testMessage("first") + strings.Repeat("x", 80_000) + "\r\n"
	cmd := a.Append("INBOX", int64(len(first)), nil)
	if _, err := cmd.Write([]byte(first[:1000])); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for budget.InUse() < int64(len(first)) {
		if time.Now().After(deadline) {
			t.Fatalf("the first APPEND's literal is not counted: %d in use", budget.InUse())
		}
		time.Sleep(10 * time.Millisecond)
	}
	second := testMessage("second") + strings.Repeat("y", 30_000) + "\r\n"
	if _, err := appendMsg(b, "INBOX", second); imapCode(err) != imap.ResponseCodeLimit {
		t.Fatalf("APPEND past the budget: %v; want NO [LIMIT]", err)
	}
	if _, err := cmd.Write([]byte(first[1000:])); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := cmd.Wait(); err != nil {
		t.Fatalf("first APPEND: %v", err)
	}
	if _, err := appendMsg(b, "INBOX", second); err != nil {
		t.Fatalf("APPEND again once the first is done: %v", err)
	}
	if n := e.count(alice, "INBOX"); n != 2 {
		t.Errorf("INBOX has %d messages; want 2", n)
	}
	if budget.InUse() != 0 {
		t.Errorf("%d bytes still counted in flight", budget.InUse())
	}
}

// TestAppendBinaryContent: a part with Content-Transfer-Encoding binary
// (RFC 3516) is kept as base64: BODY[1] carries no raw NUL, BINARY[1]
// and BINARY.SIZE[1] give back the octets appended.
func TestAppendBinaryContent(t *testing.T) {
	e := newEnv(t, options{})
	c := e.login(alice, alicePW)
	payload := "\x00-\xe4\n\r\n\n"
	raw := "From: user@domain.org\r\nMime-Version: 1.0\r\nContent-Type: application/octet-stream\r\n" +
		"Content-Transfer-Encoding: binary\r\n\r\n" + payload
	if _, err := appendMsg(c, "INBOX", raw); err != nil {
		t.Fatal(err)
	}
	mustSelectFolder(t, c, "INBOX")
	body := &imap.FetchItemBodySection{Part: []int{1}, Peek: true}
	bin := &imap.FetchItemBinarySection{Part: []int{1}, Peek: true}
	binSize := &imap.FetchItemBinarySectionSize{Part: []int{1}}
	msgs, err := c.Fetch(imap.SeqSetNum(1), &imap.FetchOptions{
		BodySection: []*imap.FetchItemBodySection{body}, BinarySection: []*imap.FetchItemBinarySection{bin},
		BinarySectionSize: []*imap.FetchItemBinarySectionSize{binSize},
	}).Collect()
	if err != nil || len(msgs) != 1 {
		t.Fatalf("FETCH: %v %v", msgs, err)
	}
	m := msgs[0]
	if b := m.FindBodySection(body); len(b) == 0 || strings.Contains(string(b), "\x00") {
		t.Errorf("BODY[1] = %q; want it transfer-encoded", b)
	}
	if b := m.FindBinarySection(bin); string(b) != payload {
		t.Errorf("BINARY[1] = %q; want %q", b, payload)
	}
	if n, _ := m.FindBinarySectionSize([]int{1}); n != uint32(len(payload)) {
		t.Errorf("BINARY.SIZE[1] = %d; want %d", n, len(payload))
	}
}

// TestAppendSeenMarkingKeepsChanges: the \Seen of appended messages goes
// to the provider later, in one call; a message expunged meanwhile does
// not make the others lose it (the provider refuses a request naming a
// gone UID), and a message the client marked unread meanwhile stays
// unread at the provider.
func TestAppendSeenMarkingKeepsChanges(t *testing.T) {
	e := newEnv(t, options{})
	c := e.login(alice, alicePW)
	wantOK(t, "CREATE", c.Create("INBOX.F", nil).Wait())
	var uids []imap.UID
	for _, s := range []string{"gone", "kept", "unread-again"} {
		data, err := appendMsg(c, "INBOX.F", testMessage(s), `\Seen`)
		if err != nil || data == nil || data.UID == 0 {
			t.Fatalf("APPEND %s: %+v, %v", s, data, err)
		}
		uids = append(uids, data.UID)
	}
	mustSelectFolder(t, c, "INBOX.F")
	storeUIDFlags(t, c, uids[0], imap.StoreFlagsAdd, imap.FlagDeleted)
	if _, err := c.UIDExpunge(imap.UIDSetNum(uids[0])).Collect(); err != nil {
		t.Fatal(err)
	}
	storeUIDFlags(t, c, uids[2], imap.StoreFlagsDel, imap.FlagSeen)
	time.Sleep(600 * time.Millisecond) // past the settle time
	e.waitUnread(alice, "INBOX.F", 1)
	if ids := e.msgIDs(alice, "INBOX.F", []imap.UID{uids[1], uids[2]}); len(ids) != 2 {
		t.Fatalf("messages left: %v", ids)
	}
	if got := flagsByUID(t, c, uids[1], uids[2]); !slices.Contains(got[uids[1]], imap.FlagSeen) || slices.Contains(got[uids[2]], imap.FlagSeen) {
		t.Fatalf("flags %v; want %d \\Seen and %d not", got, uids[1], uids[2])
	}
}

func storeUIDFlags(t *testing.T, c *imapclient.Client, uid imap.UID, op imap.StoreFlagsOp, flags ...imap.Flag) {
	t.Helper()
	if _, err := c.Store(imap.UIDSetNum(uid), &imap.StoreFlags{Op: op, Silent: true, Flags: flags}, nil).Collect(); err != nil {
		t.Fatal(err)
	}
}

// TestConcurrentAppendsPairedBySize: saves made at once may be numbered
// by the provider in either order; when their sizes tell them apart (or
// their bytes are the same), the metadata read that confirms a pairing
// pairs them, without downloading what was just uploaded (imaptest's
// messages have no Message-ID). Each APPENDUID names the message its
// APPEND saved, with its flags.
func TestConcurrentAppendsPairedBySize(t *testing.T) {
	e := newEnv(t, options{})
	raw := func(i int) string {
		if i >= 4 {
			i = 4 // the last two are the same bytes
		}
		return "From: bob@direct.example\r\nSubject: size " + strconv.Itoa(i) + "\r\n\r\n" + strings.Repeat("x", 10+i) + "\r\n"
	}
	// Each save takes long enough for all of them to overlap, and the
	// listing that finds them comes after the provider stored them all
	// (it stores a save at the end of its latency).
	e.sandbox.InjectFault("SaveRawMessages", sandbox.Fault{Latency: 100 * time.Millisecond, Times: 6})
	e.sandbox.InjectFault("GetUIDs", sandbox.Fault{Latency: 60 * time.Millisecond})
	e.sandbox.ResetCalls()
	type result struct {
		i   int
		uid imap.UID
		err error
	}
	results := make(chan result, 6)
	for i := range 6 {
		cl := e.login(alice, alicePW)
		go func() {
			data, err := appendMsg(cl, "INBOX", raw(i), imap.Flag("$n"+strconv.Itoa(i)))
			var uid imap.UID
			if data != nil {
				uid = data.UID
			}
			results <- result{i, uid, err}
		}()
	}
	got := map[imap.UID]int{}
	for range 6 {
		r := <-results
		if r.err != nil {
			t.Fatal(r.err)
		}
		if r.uid == 0 {
			t.Fatalf("APPEND %d: no APPENDUID", r.i)
		}
		got[r.uid] = r.i
	}
	if n := e.sandbox.Calls("GetRawMessagesByUIDs"); n != 0 {
		t.Errorf("%d downloads to pair saves whose sizes differ (%v); want 0", n, e.sandbox.CallCounts())
	}
	c := e.login(alice, alicePW)
	mustSelectFolder(t, c, "INBOX")
	body := &imap.FetchItemBodySection{Peek: true}
	for uid, i := range got {
		msgs, err := c.Fetch(imap.UIDSetNum(uid), &imap.FetchOptions{Flags: true, BodySection: []*imap.FetchItemBodySection{body}}).Collect()
		if err != nil || len(msgs) != 1 {
			t.Fatalf("FETCH UID %d: %v", uid, err)
		}
		if b := string(msgs[0].FindBodySection(body)); b != raw(i) {
			t.Errorf("APPEND %d answered UID %d, which holds %q", i, uid, b)
		}
		if !slices.Contains(msgs[0].Flags, imap.Flag("$n"+strconv.Itoa(i))) && i < 4 {
			t.Errorf("UID %d (APPEND %d) has flags %v", uid, i, msgs[0].Flags)
		}
	}
}

// TestAppendGoneArrivalClaimsNoStranger: an APPEND of a message without
// Message-ID whose message another client removes before the bridge
// found its UID is answered without APPENDUID; a message of the same
// size copied in later is not taken for it (it would get the APPEND's
// flags): without a Message-ID the subject and date must agree too.
func TestAppendGoneArrivalClaimsNoStranger(t *testing.T) {
	e := newEnv(t, options{})
	e.createFolder(alice, "INBOX.Work")
	msg := func(subject string) string {
		return "From: bob@direct.example\r\nSubject: " + subject + "\r\nDate: Mon, 02 Jan 2026 15:04:05 +0000\r\n\r\nsame length body\r\n"
	}
	e.deliver(alice, "INBOX.Work", msg("bbbb")) // the same size as "aaaa"
	c := e.login(alice, alicePW)
	mustSelectFolder(t, c, "INBOX")
	// The bridge lists the folder late; meanwhile another client removes
	// the message just saved.
	e.sandbox.InjectFault("GetUIDs", sandbox.Fault{Latency: 300 * time.Millisecond, Times: 2})
	done := make(chan *imap.AppendData, 1)
	go func() {
		data, err := appendMsg(c, "INBOX", msg("aaaa"), "$Appended")
		if err != nil {
			t.Error(err)
		}
		done <- data
	}()
	deadline := time.Now().Add(3 * time.Second)
	for {
		// (Not GetUIDs: its delay is the bridge's.)
		ds, err := e.client.GetMessageMetaData(context.Background(), auth(alice), "INBOX")
		if err != nil {
			t.Fatal(err)
		}
		if len(ds) == 1 {
			if err := e.client.DeleteMessagesByUIDs(context.Background(), auth(alice), "INBOX", []int64{ds[0].UID}, true); err != nil {
				t.Fatal(err)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the APPEND's message never reached the provider")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if data := <-done; data != nil && data.UID != 0 {
		t.Fatalf("APPEND answered APPENDUID %d for a message another client removed", data.UID)
	}
	e.sandbox.ClearFaults()
	// A message of the same size comes in by COPY.
	other := e.login(alice, alicePW)
	mustSelectFolder(t, other, "INBOX.Work")
	cd, err := other.Copy(imap.SeqSetNum(1), "INBOX").Wait()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Noop().Wait(); err != nil {
		t.Fatal(err)
	}
	msgs, err := c.Fetch(imap.SeqSet{{Start: 1, Stop: 0}}, &imap.FetchOptions{UID: true, Flags: true}).Collect()
	if err != nil || len(msgs) != 1 {
		t.Fatalf("FETCH: %d messages, %v", len(msgs), err)
	}
	if slices.Contains(msgs[0].Flags, imap.Flag("$Appended")) {
		t.Errorf("the copied message (UID %d, COPYUID %v) shows the removed APPEND's flags %v", msgs[0].UID, cd, msgs[0].Flags)
	}
}
