package imapbackend_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"

	"github.com/directbridge/directbridge/sandbox"
)

// The search fixture: four messages with distinct senders, dates, sizes,
// encodings and flags.
//
//  1. plain text from Bob, read and \Flagged, Date 2-Jan-2026 23:30 -0500
//     (3-Jan in UTC: SENTON must use the date as written)
//  2. fsMultipart: encoded-word subject, Cc carol, quoted-printable text,
//     PDF attachment; keyword $Important
//  3. from "Zoë" (ISO-8859-1 encoded word) at hospital.example, Bcc dave,
//     X-Priority, base64 UTF-8 body, larger than 3000 bytes; \Answered
//     \Draft; sent 15-Mar-2024
//  4. no Date header; \Deleted
var fsSearchMsgs = []string{
	fsCRLF(`From: bob@direct.example
To: alice@direct.example
Subject: Lab results
Date: Mon, 02 Jan 2026 23:30:00 -0500
Message-ID: <plain@direct.example>
Content-Type: text/plain; charset=us-ascii

The glucose value is normal.
`),
	fsMultipart,
	fsCRLF(`From: =?iso-8859-1?q?Dr=2E_Zo=EB_Quinn?= <zoe@hospital.example>
To: Alice <alice@direct.example>
Bcc: dave@direct.example
Subject: Referral
X-Priority: 1
Date: Fri, 15 Mar 2024 08:00:00 +0000
Message-ID: <ref@hospital.example>
MIME-Version: 1.0
Content-Type: text/plain; charset=utf-8
Content-Transfer-Encoding: base64

`) + fsCRLF(fsWrap76(base64.StdEncoding.EncodeToString([]byte("Patient referral for cardiology, see the notes. Ärztin: Zoë\n"+strings.Repeat("padding line of the referral letter\n", 100))))),
	fsCRLF(`From: bob@direct.example
To: alice@direct.example
Subject: No date
Message-ID: <nodate@direct.example>

short
`),
}

// fsSearchEnv delivers the fixture and returns the env and the UIDs.
func fsSearchEnv(t *testing.T, o options) (*env, []int64) {
	t.Helper()
	e := newEnv(t, o)
	var uids []int64
	for _, m := range fsSearchMsgs {
		uids = append(uids, e.deliver(alice, "INBOX", m))
	}
	if err := e.client.MarkMessagesAsReadByUIDs(context.Background(), auth(alice), "INBOX", uids[:1]); err != nil {
		t.Fatal(err)
	}
	fsKeepFlags(t, e, "INBOX", map[uint32][]string{
		uint32(uids[0]): {`\Flagged`},
		uint32(uids[1]): {"$Important"},
		uint32(uids[2]): {`\Answered`, `\Draft`},
		uint32(uids[3]): {`\Deleted`},
	})
	return e, uids
}

// fsSearchResult reads the numbers of a SEARCH or ESEARCH ALL answer.
func fsSearchResult(t *testing.T, untagged []string) []int {
	t.Helper()
	var out []int
	for _, l := range untagged {
		if rest, ok := strings.CutPrefix(l, "* SEARCH"); ok {
			for _, f := range strings.Fields(rest) {
				n, err := strconv.Atoi(f)
				if err != nil {
					t.Fatalf("SEARCH answer %q", l)
				}
				out = append(out, n)
			}
		}
	}
	return out
}

// fsFetchUIDs reads the UIDs of FETCH answers.
func fsFetchUIDs(untagged []string) []int {
	var out []int
	for _, l := range untagged {
		if i := strings.Index(l, "UID "); i >= 0 && strings.Contains(l, " FETCH ") {
			f := strings.FieldsFunc(l[i+4:], func(r rune) bool { return r == ' ' || r == ')' })
			if n, err := strconv.Atoi(f[0]); err == nil {
				out = append(out, n)
			}
		}
	}
	return out
}

// Every search key, each with a case that matches and one that does not,
// as a client writes them on the wire.
func TestSearchKeys(t *testing.T) {
	e, u := fsSearchEnv(t, options{})
	fc := fsDial(t, e, alice, alicePW)
	fc.ok("SELECT INBOX")

	// INTERNALDATE is when the sandbox received the mail: today, UTC.
	var day time.Time
	for _, l := range fc.ok("FETCH 1 INTERNALDATE") {
		if i := strings.Index(l, `INTERNALDATE "`); i >= 0 {
			ts, err := time.Parse("_2-Jan-2006 15:04:05 -0700", l[i+14:i+14+26])
			if err != nil {
				t.Fatal(err)
			}
			day = ts
		}
	}
	if day.IsZero() || day.Location() != time.UTC && day.Format("-0700") != "+0000" {
		t.Fatalf("INTERNALDATE %v; want UTC", day)
	}
	d := func(offset int) string { return day.AddDate(0, 0, offset).Format("2-Jan-2006") }
	all := []int{1, 2, 3, 4}
	uid := func(i ...int) []int {
		var out []int
		for _, x := range i {
			out = append(out, int(u[x-1]))
		}
		return out
	}

	for _, tc := range []struct {
		keys string
		want []int // sequence numbers
	}{
		{"ALL", all},
		{"1:2", []int{1, 2}},
		{"*", []int{4}},
		{"3:*", []int{3, 4}},
		{"9:*", []int{4}}, // RFC 9051 §9 seq-range: unordered
		{"UID " + strconv.Itoa(int(u[1])) + "," + strconv.Itoa(int(u[3])), []int{2, 4}},
		{"UID *", []int{4}},
		{"UID 100:200", nil},
		{"SEEN", []int{1}},
		{"UNSEEN", []int{2, 3, 4}},
		{"FLAGGED", []int{1}},
		{"UNFLAGGED", []int{2, 3, 4}},
		{"ANSWERED", []int{3}},
		{"UNANSWERED", []int{1, 2, 4}},
		{"DRAFT", []int{3}},
		{"UNDRAFT", []int{1, 2, 4}},
		{"DELETED", []int{4}},
		{"UNDELETED", []int{1, 2, 3}},
		{"KEYWORD $Important", []int{2}},
		{"KEYWORD $IMPORTANT", []int{2}},
		{"UNKEYWORD $important", []int{1, 3, 4}},
		{"KEYWORD $Other", nil},
		// This session is the first to see the messages, so they are
		// \Recent in it (RFC 3501 §2.3.2); NEW is RECENT UNSEEN.
		{"RECENT", all},
		{"NEW", []int{2, 3, 4}},
		{"OLD", nil},
		{"FROM bob", []int{1, 2, 4}},
		{"FROM HOSPITAL.example", []int{3}},
		{`FROM "Bob Example"`, []int{2}},
		{"FROM carol", nil},
		{"TO alice", all},
		{"TO nobody", nil},
		{"CC carol", []int{2}},
		{`CC ""`, []int{2}},
		{"BCC dave", []int{3}},
		{"BCC bob", nil},
		{`SUBJECT "lab RESULTS"`, []int{1, 2}},
		{"SUBJECT referral", []int{3}},
		{"SUBJECT cardiology", nil},
		{"HEADER X-Priority 1", []int{3}},
		{`HEADER x-priority ""`, []int{3}},
		{`HEADER X-Missing ""`, nil},
		{"HEADER Message-ID multi@", []int{2}},
		{"HEADER Message-ID nothing", nil},
		{"SENTON 2-Jan-2026", []int{1, 2}},
		{"SENTON 3-Jan-2026", nil},
		{"SENTSINCE 1-Jan-2025", []int{1, 2}},
		{"SENTSINCE 3-Jan-2026", nil},
		{"SENTBEFORE 1-Jan-2025", []int{3}},
		{"SENTBEFORE 15-Mar-2024", nil},
		{"SENTBEFORE 16-Mar-2024", []int{3}},
		{"SENTBEFORE 1-Jan-2030", []int{1, 2, 3}},
		{"NOT SENTBEFORE 1-Jan-2030", []int{4}},
		{"SINCE " + d(0), all},
		{"SINCE " + d(1), nil},
		{"BEFORE " + d(1), all},
		{"BEFORE " + d(0), nil},
		{"ON " + d(0), all},
		{"ON " + d(-1), nil},
		{"LARGER 3000", []int{3}},
		{"LARGER 100000", nil},
		{"SMALLER 3000", []int{1, 2, 4}},
		{"SMALLER 10", nil},
		{"LARGER 150 SMALLER 3000", []int{1, 2}},
		{"LARGER 150 SMALLER 1000", []int{1}},
		{"BODY glucose", []int{1, 2}},
		{"BODY glucose=5.4", []int{2}}, // quoted-printable decoded
		{"BODY glucose=3D5.4", nil},
		{"BODY CARDIOLOGY", []int{3}}, // base64 decoded
		{`BODY "lab results"`, nil},   // only in the header
		{"BODY report.pdf", nil},      // only in a MIME header
		{`BODY "%PDF"`, nil},          // not text
		{"BODY short", []int{4}},
		{`TEXT "lab results"`, []int{1, 2}},
		{"TEXT report.pdf", []int{2}},
		{"TEXT zoe@hospital", []int{3}},
		{"TEXT cardiology", []int{3}},
		{"TEXT nowhere", nil},
		{`BODY ""`, all},
		{"NOT SEEN", []int{2, 3, 4}},
		{"NOT NOT SEEN", []int{1}},
		{"OR SEEN DELETED", []int{1, 4}},
		{"OR SUBJECT referral BODY glucose", []int{1, 2, 3}},
		{"NOT OR SUBJECT referral BODY glucose", []int{4}},
		{"(UNSEEN BODY glucose)", []int{2}},
		{"UNSEEN OR BODY cardiology FROM carol", []int{3}},
		{"2:4 NOT DELETED OR KEYWORD $Important ANSWERED", []int{2, 3}},
	} {
		got := fsSearchResult(t, fc.ok("SEARCH %s", tc.keys))
		if !slices.Equal(got, tc.want) {
			t.Errorf("SEARCH %s = %v; want %v", tc.keys, got, tc.want)
		}
		got = fsSearchResult(t, fc.ok("UID SEARCH %s", tc.keys))
		if want := uid(tc.want...); !slices.Equal(got, want) {
			t.Errorf("UID SEARCH %s = %v; want %v", tc.keys, got, want)
		}
	}

	// Non-ASCII strings: imapclient sends CHARSET UTF-8. Matching decodes
	// encoded words in any charset and ignores case beyond ASCII.
	c := e.login(alice, alicePW)
	fsSelect(t, c, "INBOX")
	for _, tc := range []struct {
		crit imap.SearchCriteria
		want []imap.UID
	}{
		{imap.SearchCriteria{Header: []imap.SearchCriteriaHeaderField{{Key: "From", Value: "ZOË"}}}, []imap.UID{imap.UID(u[2])}},
		{imap.SearchCriteria{Header: []imap.SearchCriteriaHeaderField{{Key: "Subject", Value: "café"}}}, []imap.UID{imap.UID(u[1])}},
		{imap.SearchCriteria{Body: []string{"NAÏVE"}}, []imap.UID{imap.UID(u[1])}},
		{imap.SearchCriteria{Body: []string{"ärztin"}}, []imap.UID{imap.UID(u[2])}},
		{imap.SearchCriteria{Text: []string{"Café"}}, []imap.UID{imap.UID(u[1])}},
		{imap.SearchCriteria{Text: []string{"Zoë"}}, []imap.UID{imap.UID(u[2])}},
		{imap.SearchCriteria{Body: []string{"Ünknown"}}, nil},
	} {
		data, err := c.UIDSearch(&tc.crit, nil).Wait()
		if err != nil {
			t.Fatalf("%+v: %v", tc.crit, err)
		}
		if got := data.AllUIDs(); !slices.Equal(got, tc.want) {
			t.Errorf("UID SEARCH %+v = %v; want %v", tc.crit, got, tc.want)
		}
	}
}

// Each stage fetches only what the remaining candidates need.
func TestSearchCallCounts(t *testing.T) {
	e, u := fsSearchEnv(t, options{})
	fc := fsDial(t, e, alice, alicePW)
	fc.ok("SELECT INBOX")
	e.sandbox.ResetCalls()

	fc.ok("UID SEARCH 1:* UID 1:* SEEN UNFLAGGED NOT KEYWORD $x OR ANSWERED NOT DRAFT")
	if n := e.sandbox.TotalCalls(); n != 0 {
		t.Fatalf("flag search calls %v; want none", e.sandbox.CallCounts())
	}
	fc.ok("UID SEARCH SUBJECT referral SENTSINCE 1-Jan-2020 LARGER 10 SINCE 1-Jan-2020")
	// One metadata call: a listing, or by UID for the few messages the
	// unread list at SELECT did not bring.
	if e.sandbox.Calls("GetMessageMetaData")+e.sandbox.Calls("GetMessagesByUIDs") != 1 || e.sandbox.TotalCalls() != 1 {
		t.Fatalf("header search calls %v; want one metadata call", e.sandbox.CallCounts())
	}
	fc.ok("UID SEARCH FROM bob")
	if e.sandbox.TotalCalls() != 1 {
		t.Fatalf("second header search calls %v", e.sandbox.CallCounts())
	}

	// Cheap keys first: only unread messages are downloaded for BODY.
	got := fsSearchResult(t, fc.ok("UID SEARCH UNSEEN BODY glucose"))
	if !slices.Equal(got, []int{int(u[1])}) {
		t.Fatalf("UNSEEN BODY glucose = %v", got)
	}
	reqs := e.sandbox.Requests("GetRawMessagesByUIDs")
	if e.sandbox.Calls("GetRawMessagesByUIDs") != 1 || len(reqs) != 1 {
		t.Fatalf("BODY search calls %v; want one GetRawMessagesByUIDs", e.sandbox.CallCounts())
	}
	var body struct{ UIDs []int64 }
	if err := json.Unmarshal(reqs[0], &body); err != nil {
		t.Fatal(err)
	}
	slices.Sort(body.UIDs)
	if !slices.Equal(body.UIDs, u[1:]) {
		t.Errorf("downloaded %v; want the unread %v", body.UIDs, u[1:])
	}
	// A header match decides OR without a download; cached bytes serve the rest.
	e.sandbox.ResetCalls()
	fc.ok("UID SEARCH OR FROM bob BODY cardiology")
	fc.ok("UID SEARCH UNSEEN TEXT referral")
	if e.sandbox.TotalCalls() != 0 {
		t.Errorf("calls %v; want none", e.sandbox.CallCounts())
	}
	e.sandbox.ResetCalls()
	fc.ok("UID SEARCH SEEN BODY glucose")
	if e.sandbox.Calls("GetRawMessagesByUIDs") != 1 {
		t.Errorf("calls %v; want one GetRawMessagesByUIDs for the read message", e.sandbox.CallCounts())
	}
}

// ESEARCH (RFC 4731): MIN, MAX, COUNT and ALL for sequence numbers and UIDs.
func TestSearchESearch(t *testing.T) {
	e, u := fsSearchEnv(t, options{})
	c := e.login(alice, alicePW)
	fsSelect(t, c, "INBOX")
	unseen := &imap.SearchCriteria{NotFlag: []imap.Flag{imap.FlagSeen}}

	data, err := c.UIDSearch(unseen, &imap.SearchOptions{ReturnMin: true, ReturnMax: true, ReturnCount: true}).Wait()
	if err != nil {
		t.Fatal(err)
	}
	if data.Min != uint32(u[1]) || data.Max != uint32(u[3]) || data.Count != 3 || len(data.AllUIDs()) != 0 {
		t.Errorf("UID ESEARCH MIN MAX COUNT: %+v", data)
	}
	data, err = c.UIDSearch(unseen, &imap.SearchOptions{ReturnAll: true}).Wait()
	if err != nil {
		t.Fatal(err)
	}
	if got := data.AllUIDs(); !slices.Equal(got, []imap.UID{imap.UID(u[1]), imap.UID(u[2]), imap.UID(u[3])}) {
		t.Errorf("UID ESEARCH ALL: %v", got)
	}
	data, err = c.Search(unseen, &imap.SearchOptions{ReturnMin: true, ReturnMax: true, ReturnCount: true, ReturnAll: true}).Wait()
	if err != nil {
		t.Fatal(err)
	}
	if data.Min != 2 || data.Max != 4 || data.Count != 3 || !slices.Equal(data.AllSeqNums(), []uint32{2, 3, 4}) {
		t.Errorf("ESEARCH: %+v %v", data, data.AllSeqNums())
	}
	none := &imap.SearchCriteria{Header: []imap.SearchCriteriaHeaderField{{Key: "Subject", Value: "no such subject"}}}
	data, err = c.Search(none, &imap.SearchOptions{ReturnMin: true, ReturnCount: true, ReturnAll: true}).Wait()
	if err != nil {
		t.Fatal(err)
	}
	if data.Min != 0 || data.Count != 0 || len(data.AllSeqNums()) != 0 {
		t.Errorf("ESEARCH without match: %+v", data)
	}
}

// SEARCHRES (RFC 5182): RETURN (SAVE) keeps the result for "$".
func TestSearchRes(t *testing.T) {
	e, u := fsSearchEnv(t, options{})
	fc := fsDial(t, e, alice, alicePW)
	fc.ok("SELECT INBOX")
	fetchSaved := func() []int { return fsFetchUIDs(fc.ok("UID FETCH $ (UID)")) }

	if got := fetchSaved(); len(got) != 0 {
		t.Errorf("$ before any SAVE: %v", got)
	}
	fc.ok("UID SEARCH RETURN (SAVE) UNSEEN")
	if got, want := fetchSaved(), []int{int(u[1]), int(u[2]), int(u[3])}; !slices.Equal(got, want) {
		t.Errorf("$ after UNSEEN: %v; want %v", got, want)
	}
	// "$" inside a search, and a seq-number SEARCH saves UIDs too.
	fc.ok("SEARCH RETURN (SAVE) $ SUBJECT referral")
	if got := fetchSaved(); !slices.Equal(got, []int{int(u[2])}) {
		t.Errorf("$ after $ SUBJECT referral: %v", got)
	}
	fc.ok("SEARCH RETURN (SAVE) UID 1:*")
	if got := fsFetchUIDs(fc.ok("FETCH $ (UID)")); len(got) != 4 {
		t.Errorf("FETCH $ after saving all: %v", got)
	}
	// With MIN and/or MAX alone only those are saved (RFC 5182 §2.4).
	fc.ok("UID SEARCH RETURN (SAVE MIN) UNSEEN")
	if got := fetchSaved(); !slices.Equal(got, []int{int(u[1])}) {
		t.Errorf("$ after SAVE MIN: %v", got)
	}
	fc.ok("UID SEARCH RETURN (SAVE MIN MAX) UNSEEN")
	if got := fetchSaved(); !slices.Equal(got, []int{int(u[1]), int(u[3])}) {
		t.Errorf("$ after SAVE MIN MAX: %v", got)
	}
	fc.ok("UID SEARCH RETURN (SAVE MAX COUNT) UNSEEN")
	if got := fetchSaved(); len(got) != 3 {
		t.Errorf("$ after SAVE MAX COUNT: %v; want all three", got)
	}
	// A failed SEARCH ... SAVE empties "$".
	e.sandbox.InjectFault("GetRawMessagesByUIDs", sandbox.Fault{Status: 503})
	if _, st := fc.run("UID SEARCH RETURN (SAVE) BODY glucose"); !strings.HasPrefix(st, "NO [UNAVAILABLE]") {
		t.Errorf("SEARCH with the provider down: %s", st)
	}
	e.sandbox.ClearFaults()
	if got := fetchSaved(); len(got) != 0 {
		t.Errorf("$ after a failed SAVE: %v", got)
	}
	fc.ok("UID SEARCH FROM bob")
}

// SEARCH works under EXAMINE and changes nothing.
func TestSearchReadOnly(t *testing.T) {
	e, _ := fsSearchEnv(t, options{})
	fc := fsDial(t, e, alice, alicePW)
	fc.ok("EXAMINE INBOX")
	if got := fsSearchResult(t, fc.ok("SEARCH UNSEEN TEXT glucose")); !slices.Equal(got, []int{2}) {
		t.Errorf("SEARCH under EXAMINE: %v", got)
	}
	if n, _ := e.client.GetUnreadMessageCount(context.Background(), auth(alice), "INBOX"); n != 3 {
		t.Errorf("%d unread after searching", n)
	}
}

// A SEARCH answer never names a message the connection has not been told
// about yet; the EXISTS comes first.
func TestSearchOnlyKnownMessages(t *testing.T) {
	e := newEnv(t, options{pollInterval: 50 * time.Millisecond})
	e.deliver(alice, "INBOX", testMessage("one"))
	e.deliver(alice, "INBOX", testMessage("two"))
	fc := fsDial(t, e, alice, alicePW)
	fc.ok("SELECT INBOX")

	// Another connection waits in IDLE for the mirror to see new mail.
	exists := make(chan uint32, 4)
	w, err := imapclient.DialInsecure(e.addr, &imapclient.Options{UnilateralDataHandler: &imapclient.UnilateralDataHandler{
		Mailbox: func(d *imapclient.UnilateralDataMailbox) {
			if d.NumMessages != nil {
				exists <- *d.NumMessages
			}
		},
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if err := w.Login(alice, alicePW).Wait(); err != nil {
		t.Fatal(err)
	}
	fsSelect(t, w, "INBOX")
	idle, err := w.Idle()
	if err != nil {
		t.Fatal(err)
	}
	third := e.deliver(alice, "INBOX", testMessage("three"))
	select {
	case <-exists:
	case <-time.After(5 * time.Second):
		t.Fatal("the mirror did not see the new message")
	}
	idle.Close()

	// The EXISTS is written after the SEARCH answer, before the tagged OK.
	untagged := fc.ok("UID SEARCH ALL")
	if got := fsSearchResult(t, untagged); len(got) != 2 || slices.Contains(got, int(third)) {
		t.Errorf("UID SEARCH ALL before EXISTS: %v", got)
	}
	if i := slices.Index(untagged, "* 3 EXISTS"); i < 0 || !strings.HasPrefix(untagged[0], "* SEARCH") {
		t.Errorf("answer and update out of order: %q", untagged)
	}
	if got := fsSearchResult(t, fc.ok("SEARCH ALL")); !slices.Equal(got, []int{1, 2, 3}) {
		t.Errorf("SEARCH ALL after EXISTS: %v", got)
	}
}

// Provider faults during SEARCH are NO [UNAVAILABLE]; the next search works.
func TestSearchProviderFaults(t *testing.T) {
	e, _ := fsSearchEnv(t, options{})
	c := e.login(alice, alicePW)
	fsSelect(t, c, "INBOX")
	for _, tc := range []struct {
		op   string
		crit imap.SearchCriteria
	}{
		{"GetMessageMetaData", imap.SearchCriteria{Header: []imap.SearchCriteriaHeaderField{{Key: "From", Value: "bob"}}}},
		{"GetRawMessagesByUIDs", imap.SearchCriteria{Body: []string{"cardiology"}}},
	} {
		e.sandbox.InjectFault(tc.op, sandbox.Fault{Status: 502})
		if tc.op == "GetMessageMetaData" {
			// Metadata comes by listing or by UID, whichever is cheaper.
			e.sandbox.InjectFault("GetMessagesByUIDs", sandbox.Fault{Status: 502})
		}
		if _, err := c.UIDSearch(&tc.crit, nil).Wait(); fsCode(err) != imap.ResponseCodeUnavailable {
			t.Errorf("%s down: %v", tc.op, err)
		}
		e.sandbox.ClearFaults()
		if data, err := c.UIDSearch(&tc.crit, nil).Wait(); err != nil || len(data.AllUIDs()) == 0 {
			t.Errorf("%s back: %v", tc.op, err)
		}
	}
}

// A message deleted at the provider while the session still shows it is
// left out when its data is needed, not guessed about, and its EXPUNGE
// follows.
func TestSearchExpungedAtProvider(t *testing.T) {
	e, u := fsSearchEnv(t, options{})
	fc := fsDial(t, e, alice, alicePW)
	fc.ok("SELECT INBOX")
	if err := e.client.DeleteMessagesByUIDs(context.Background(), auth(alice), "INBOX", []int64{u[2]}, true); err != nil {
		t.Fatal(err)
	}
	// SEARCH may not carry EXPUNGE (RFC 9051 §7.5.1): numbers stay as the
	// client knows them until the NOOP.
	untagged := fc.ok("SEARCH NOT BODY cardiology")
	if got := fsSearchResult(t, untagged); !slices.Equal(got, []int{1, 2, 4}) || slices.Contains(untagged, "* 3 EXPUNGE") {
		t.Errorf("NOT BODY with a deleted message: %q", untagged)
	}
	if untagged := fc.ok("NOOP"); !slices.Contains(untagged, "* 3 EXPUNGE") {
		t.Errorf("NOOP after: %q", untagged)
	}
	if got := fsSearchResult(t, fc.ok("UID SEARCH ALL")); !slices.Equal(got, []int{int(u[0]), int(u[1]), int(u[3])}) {
		t.Errorf("UID SEARCH ALL after: %v", got)
	}
}
