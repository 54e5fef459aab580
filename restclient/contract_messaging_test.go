package restclient_test

// Contract tests of the 34 messaging operations (messaging-rest.md,
// "Endpoints"): every restclient method against a real sandbox over real
// HTTP, success and failure paths, and the semantics the document states
// (delivery, INBOX.Sent copies, BCC privacy, Trash, UIDs, folders, status).
//
// The helpers in this file (fake clock, environment, assertions) are shared
// with contract_registration_test.go and faults_test.go.

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/directbridge/directbridge/restclient"
	"github.com/directbridge/directbridge/sandbox"
	"github.com/directbridge/directbridge/upstream/directapi"
)

// ---------------------------------------------------------------------------
// Shared fixtures

const (
	ctDomain   = "direct.example"
	ctAlice    = "alice@direct.example"
	ctBob      = "bob@direct.example"
	ctCarol    = "carol@direct.example"
	ctDave     = "dave@direct.example"
	ctReseller = "reseller"
)

// ctPasswords are the passwords of the seeded accounts.
var ctPasswords = map[string]string{
	ctAlice:    "alice-secret-1",
	ctBob:      "bob-secret-1",
	ctCarol:    "carol-secret-1",
	ctDave:     "dave-secret-1",
	ctReseller: "reseller-secret-1",
}

func ctUsers() []sandbox.Account {
	var out []sandbox.Account
	for _, a := range []string{ctAlice, ctBob, ctCarol, ctDave} {
		out = append(out, sandbox.Account{Name: a, Password: ctPasswords[a]})
	}
	return out
}

func ctResellers() []sandbox.Account {
	return []sandbox.Account{{Name: ctReseller, Password: ctPasswords[ctReseller]}}
}

// ctAuth returns the credentials of a seeded mailbox.
func ctAuth(addr string) directapi.Authentication {
	return directapi.Authentication{Username: addr, Password: directapi.Secret(ctPasswords[addr])}
}

// ctBadAuth returns a known username with a wrong password.
func ctBadAuth(addr string) directapi.Authentication {
	return directapi.Authentication{Username: addr, Password: "wrong-password"}
}

// ctTuser returns T-user credentials: tuser acting for directAddr.
func ctTuser(tuser, directAddr string) directapi.AuthenticationWithTuser {
	return directapi.AuthenticationWithTuser{Username: tuser, Password: directapi.Secret(ctPasswords[tuser]), DirectAddr: directAddr}
}

// ctEpoch is where every fake clock starts: a whole second, so the
// second-granular forms (yyyyMMddHHmmss, csvData) are exact.
var ctEpoch = time.Date(2025, time.March, 10, 12, 0, 0, 0, time.UTC)

// testClock is a fake clock. It serves as the sandbox's Options.Clock
// (through Now) and as a restclient.Clock; Sleep records the duration and
// moves time forward instead of waiting.
type testClock struct {
	mu     sync.Mutex
	now    time.Time
	sleeps []time.Duration
}

var _ restclient.Clock = (*testClock)(nil)

func newTestClock() *testClock { return &testClock{now: ctEpoch} }

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *testClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func (c *testClock) Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sleeps = append(c.sleeps, d)
	if d > 0 {
		c.now = c.now.Add(d)
	}
	return nil
}

func (c *testClock) Sleeps() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.sleeps)
}

// ctConfig is what a test may change before its environment starts.
type ctConfig struct {
	sandbox sandbox.Options
	client  restclient.Options
}

// ctEnv is one sandbox behind a real HTTP server and a client of it.
type ctEnv struct {
	t     *testing.T
	clock *testClock
	srv   *sandbox.Server
	ts    *httptest.Server
	c     *restclient.Client
}

// newCtEnv starts a sandbox with the seeded accounts, whose clock and the
// client's clock are one fake clock; the client is not rate limited.
func newCtEnv(t *testing.T, mods ...func(*ctConfig)) *ctEnv {
	t.Helper()
	clock := newTestClock()
	cfg := ctConfig{
		sandbox: sandbox.Options{Dir: t.TempDir(), Users: ctUsers(), Resellers: ctResellers(), Clock: clock.Now},
		client:  restclient.Options{RateLimit: -1, Clock: clock},
	}
	for _, m := range mods {
		m(&cfg)
	}
	srv, err := sandbox.Open(cfg.sandbox)
	if err != nil {
		t.Fatalf("sandbox.Open: %v", err)
	}
	t.Cleanup(func() {
		if err := srv.Close(); err != nil {
			t.Errorf("sandbox Close: %v", err)
		}
	})
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	cfg.client.BaseURL = ts.URL
	c, err := restclient.New(cfg.client)
	if err != nil {
		t.Fatalf("restclient.New: %v", err)
	}
	return &ctEnv{t: t, clock: clock, srv: srv, ts: ts, c: c}
}

// newClient returns another client of the same sandbox.
func (e *ctEnv) newClient(opts restclient.Options) *restclient.Client {
	e.t.Helper()
	opts.BaseURL = e.ts.URL
	if opts.RateLimit == 0 {
		opts.RateLimit = -1
	}
	c, err := restclient.New(opts)
	if err != nil {
		e.t.Fatalf("restclient.New: %v", err)
	}
	return c
}

func (e *ctEnv) ctx() context.Context { return e.t.Context() }

func (e *ctEnv) must(err error, what string) {
	e.t.Helper()
	if err != nil {
		e.t.Fatalf("%s: %v", what, err)
	}
}

func (e *ctEnv) uids(addr, folder string) []int64 {
	e.t.Helper()
	uids, err := e.c.GetUIDs(e.ctx(), ctAuth(addr), folder)
	e.must(err, "GetUIDs "+folder)
	return uids
}

func (e *ctEnv) count(addr, folder string) int {
	e.t.Helper()
	n, err := e.c.GetMessageCount(e.ctx(), ctAuth(addr), folder)
	e.must(err, "GetMessageCount "+folder)
	return n
}

func (e *ctEnv) unread(addr, folder string) int {
	e.t.Helper()
	n, err := e.c.GetUnreadMessageCount(e.ctx(), ctAuth(addr), folder)
	e.must(err, "GetUnreadMessageCount "+folder)
	return n
}

func (e *ctEnv) messages(addr, folder string) []directapi.MessageDetail {
	e.t.Helper()
	ms, err := e.c.GetMessages(e.ctx(), ctAuth(addr), folder)
	e.must(err, "GetMessages "+folder)
	return ms
}

func (e *ctEnv) folders(addr, root string, subscribedOnly bool) []string {
	e.t.Helper()
	fs, err := e.c.GetFolders(e.ctx(), ctAuth(addr), root, subscribedOnly)
	e.must(err, "GetFolders "+root)
	return fs
}

// raw returns the stored bytes of one message.
func (e *ctEnv) raw(addr, folder string, uid int64) []byte {
	e.t.Helper()
	rs, err := e.c.GetRawMessagesByUIDs(e.ctx(), ctAuth(addr), folder, []int64{uid})
	e.must(err, "GetRawMessagesByUIDs")
	if len(rs) != 1 {
		e.t.Fatalf("GetRawMessagesByUIDs %s uid %d: %d messages, want 1", folder, uid, len(rs))
	}
	b, err := rs[0].Bytes()
	e.must(err, "RawMessage.Bytes")
	return b
}

// raws returns the stored bytes of every message of a folder, by UID.
func (e *ctEnv) raws(addr, folder string) map[int64][]byte {
	e.t.Helper()
	uids := e.uids(addr, folder)
	out := map[int64][]byte{}
	if len(uids) == 0 {
		return out
	}
	rs, err := e.c.GetRawMessagesByUIDs(e.ctx(), ctAuth(addr), folder, uids)
	e.must(err, "GetRawMessagesByUIDs")
	for _, r := range rs {
		b, err := r.Bytes()
		e.must(err, "RawMessage.Bytes")
		out[r.UID] = b
	}
	return out
}

// deliver stores raw as arrived mail (sandbox admin side, not REST).
func (e *ctEnv) deliver(addr, folder string, raw []byte) int64 {
	e.t.Helper()
	uid, err := e.srv.Deliver(e.ctx(), addr, folder, raw)
	e.must(err, "sandbox Deliver")
	return uid
}

func (e *ctEnv) send(from string, msg directapi.Message) string {
	e.t.Helper()
	id, err := e.c.Send(e.ctx(), ctAuth(from), msg)
	e.must(err, "Send")
	if id == "" {
		e.t.Fatal("Send returned an empty smtpId")
	}
	return id
}

func (e *ctEnv) createFolder(addr, name string) {
	e.t.Helper()
	e.must(e.c.CreateFolder(e.ctx(), ctAuth(addr), name), "CreateFolder "+name)
}

// ctMsgSeq makes Message-IDs of test messages unique.
var ctMsgSeq atomic.Int64

// ctRaw builds a small RFC 5322 message with CRLF line endings.
func ctRaw(from, to, subject, body string) []byte {
	n := ctMsgSeq.Add(1)
	subj := subject
	if !isASCII(subject) {
		subj = mime.QEncoding.Encode("utf-8", subject)
	}
	return []byte("From: " + from + "\r\n" +
		"To: " + to + "\r\n" +
		"Subject: " + subj + "\r\n" +
		"Date: Mon, 10 Mar 2025 11:00:00 +0000\r\n" +
		fmt.Sprintf("Message-ID: <test-%d@other.example>\r\n", n) +
		"MIME-Version: 1.0\r\n" +
		"Content-Type: text/plain; charset=utf-8\r\n" +
		"Content-Transfer-Encoding: 8bit\r\n" +
		"\r\n" + body + "\r\n")
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

func readTestdata(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

func unb64(t *testing.T, s string) []byte {
	t.Helper()
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		t.Fatalf("attachment content is not base64: %v", err)
	}
	return b
}

// headerSection returns the header of a raw message (up to the first empty line).
func headerSection(raw []byte) string {
	s := strings.ReplaceAll(string(raw), "\r\n", "\n")
	if i := strings.Index(s, "\n\n"); i >= 0 {
		return s[:i+1]
	}
	return s
}

// ---------------------------------------------------------------------------
// Assertions

func wantAPICode(t *testing.T, err error, code int) {
	t.Helper()
	var ae *restclient.APIError
	if !errors.As(err, &ae) {
		t.Fatalf("err = %v (%T), want *restclient.APIError with code %d", err, err, code)
	}
	if ae.Code != code || ae.RegCode != "" {
		t.Fatalf("err = %v: code %d regCode %q, want code %d", err, ae.Code, ae.RegCode, code)
	}
}

func wantRegCode(t *testing.T, err error, code string) {
	t.Helper()
	var ae *restclient.APIError
	if !errors.As(err, &ae) {
		t.Fatalf("err = %v (%T), want *restclient.APIError with code %s", err, err, code)
	}
	if ae.RegCode != code {
		t.Fatalf("err = %v: regCode %q, want %q", err, ae.RegCode, code)
	}
}

func wantAuthFailure(t *testing.T, err error) {
	t.Helper()
	if !restclient.IsAuthFailure(err) {
		t.Fatalf("err = %v (%T), want an authentication failure", err, err)
	}
}

func wantAddressError(t *testing.T, err error) {
	t.Helper()
	if !restclient.IsAddressError(err) {
		t.Fatalf("err = %v (%T), want an address error (code 2)", err, err)
	}
}

func wantInts(t *testing.T, what string, got, want []int64) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Fatalf("%s = %v, want %v", what, got, want)
	}
}

func wantStrings(t *testing.T, what string, got, want []string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Fatalf("%s = %q, want %q", what, got, want)
	}
}

func wantN(t *testing.T, what string, got, want int) {
	t.Helper()
	if got != want {
		t.Fatalf("%s = %d, want %d", what, got, want)
	}
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

func msgUIDs(ms []directapi.MessageDetail) []int64 {
	out := make([]int64, 0, len(ms))
	for _, m := range ms {
		out = append(out, m.UID)
	}
	return out
}

func msgSubjects(ms []directapi.MessageDetail) []string {
	out := make([]string, 0, len(ms))
	for _, m := range ms {
		out = append(out, m.Subject)
	}
	sort.Strings(out)
	return out
}

func headerValue(hs []directapi.MessageHeader, name string) (string, bool) {
	for _, h := range hs {
		if strings.EqualFold(h.Name, name) {
			return h.Value, true
		}
	}
	return "", false
}

// byRecipient indexes status records by their To address.
func byRecipient(t *testing.T, logs []directapi.DirectMessageLog) map[string]directapi.DirectMessageLog {
	t.Helper()
	out := map[string]directapi.DirectMessageLog{}
	for _, l := range logs {
		if _, dup := out[l.To]; dup {
			t.Fatalf("two status records for %s: %+v", l.To, logs)
		}
		out[l.To] = l
	}
	return out
}

// messagingOps are the 34 operations as the sandbox counts them.
var messagingOps = []string{
	"Send", "SendWithHeader", "Forward", "GetMessageStatus", "GetMessageStatuses",
	"GetMessageCount", "GetUnreadMessageCount", "GetDeletedMessageCount",
	"GetMessagesByUIDs", "GetUnreadMessages", "GetMessagesByReceivedDate",
	"GetMessagesByReceivedDateUTC", "GetMessagesBySender", "GetMessagesBySubject",
	"GetMessages", "GetMessageMetaData", "SearchMessagesMetadataByReceivedDate",
	"SearchMessagesMetadataByReceivedDateUTC", "GetUIDs", "GetFolders",
	"SetFoldersSubscribed", "CreateFolder", "MoveFolder", "DeleteFolder",
	"CopyMessagesByUIDs", "MoveMessagesByUIDs", "DeleteMessagesByUIDs",
	"MarkMessagesAsReadByUIDs", "MarkMessagesAsUnreadByUIDs", "GetRawMessagesByUIDs",
	"SaveRawMessages", "SendWithTuser", "SendWithHeaderWithTuser", "GetMessageStatusWithTuser",
}

// ---------------------------------------------------------------------------
// The contract

func TestContractMessaging(t *testing.T) {
	if len(messagingOps) != 34 {
		t.Fatalf("messagingOps lists %d operations, want 34", len(messagingOps))
	}
	var covMu sync.Mutex
	covered := map[string]int{}
	env := func(t *testing.T, mods ...func(*ctConfig)) *ctEnv {
		e := newCtEnv(t, mods...)
		t.Cleanup(func() {
			covMu.Lock()
			defer covMu.Unlock()
			for op, n := range e.srv.CallCounts() {
				covered[op] += n
			}
		})
		return e
	}

	var ran, total atomic.Int64
	t.Run("ops", func(t *testing.T) {
		for _, tc := range []struct {
			name string
			fn   func(*testing.T, func(*testing.T, ...func(*ctConfig)) *ctEnv)
		}{
			{"Send", testSend},
			{"SendWithHeader", testSendWithHeader},
			{"Forward", testForward},
			{"GetMessageStatus", testGetMessageStatus},
			{"GetMessageStatuses", testGetMessageStatuses},
			{"StatusAsCSV", testStatusAsCSV},
			{"GetMessageCount", testGetMessageCount},
			{"GetUnreadMessageCount", testGetUnreadMessageCount},
			{"GetDeletedMessageCount", testGetDeletedMessageCount},
			{"GetMessagesByUIDs", testGetMessagesByUIDs},
			{"GetUnreadMessages", testGetUnreadMessages},
			{"GetMessagesByReceivedDate", testByReceivedDate(false, false)},
			{"GetMessagesByReceivedDateUTC", testByReceivedDate(true, false)},
			{"GetMessagesBySender", testGetMessagesBySender},
			{"GetMessagesBySubject", testGetMessagesBySubject},
			{"GetMessages", testGetMessages},
			{"GetMessageMetaData", testGetMessageMetaData},
			{"SearchMessagesMetadataByReceivedDate", testByReceivedDate(false, true)},
			{"SearchMessagesMetadataByReceivedDateUTC", testByReceivedDate(true, true)},
			{"GetUIDs", testGetUIDs},
			{"GetFolders", testGetFolders},
			{"SetFoldersSubscribed", testSetFoldersSubscribed},
			{"CreateFolder", testCreateFolder},
			{"MoveFolder", testMoveFolder},
			{"DeleteFolder", testDeleteFolder},
			{"CopyMessagesByUIDs", testCopyMessages},
			{"MoveMessagesByUIDs", testMoveMessages},
			{"DeleteMessagesByUIDs", testDeleteMessages},
			{"MarkMessagesAsReadByUIDs", testMarkRead},
			{"MarkMessagesAsUnreadByUIDs", testMarkUnread},
			{"GetRawMessagesByUIDs", testGetRawMessages},
			{"SaveRawMessages", testSaveRawMessages},
			{"SendWithTuser", testSendWithTuser},
			{"SendWithHeaderWithTuser", testSendWithHeaderWithTuser},
			{"GetMessageStatusWithTuser", testGetMessageStatusWithTuser},
			{"UIDsNeverReused", testUIDsNeverReused},
			{"ReceivedDateRangeAtEpoch", testReceivedDateRangeAtEpoch},
		} {
			total.Add(1)
			t.Run(tc.name, func(t *testing.T) {
				ran.Add(1)
				t.Parallel()
				tc.fn(t, env)
			})
		}
	})

	// Every documented operation went over the wire in some subtest
	// (checked only when no -run filter left subtests out).
	if ran.Load() != total.Load() {
		return
	}
	covMu.Lock()
	defer covMu.Unlock()
	for _, op := range messagingOps {
		if covered[op] == 0 {
			t.Errorf("operation %s was never called", op)
		}
	}
}

type envFunc = func(*testing.T, ...func(*ctConfig)) *ctEnv

// ccdaMessage is alice's referral to bob (TO), carol (CC) and dave (BCC)
// with a real C-CDA PDF and an XDM package attached.
func ccdaMessage(t *testing.T) (directapi.Message, [][]byte) {
	pdf := readTestdata(t, "unstructured-embedded-pdf.decoded.pdf")
	zip := readTestdata(t, "ccda-inpatient-xdm.zip")
	return directapi.Message{
		Sender:  ctAlice,
		Subject: "Referral: discharge summary for L. McBee",
		Body:    "Dear colleague,\nplease find the discharge summary attached.\n\nRegards, Alice",
		Recipients: []directapi.Recipient{
			{Email: ctBob, Type: directapi.TO},
			{Email: ctCarol, Type: directapi.CC},
			{Email: ctDave, Type: directapi.BCC},
		},
		AttachmentList: []directapi.Attachment{
			{Content: b64(pdf), ContentType: "application/pdf", Filename: "McBee_L1_20151116_Embedded.pdf"},
			{Content: b64(zip), ContentType: "application/zip", Filename: "CCDA_Inpatient_in_XDM.zip"},
		},
	}, [][]byte{pdf, zip}
}

// checkReceived asserts that m is msg as a recipient sees it, with the
// attachments byte-identical to files.
func checkReceived(t *testing.T, m directapi.MessageDetail, msg directapi.Message, files [][]byte) {
	t.Helper()
	if m.Sender != msg.Sender {
		t.Errorf("sender = %q, want %q", m.Sender, msg.Sender)
	}
	if m.Subject != msg.Subject {
		t.Errorf("subject = %q, want %q", m.Subject, msg.Subject)
	}
	if m.Body != msg.Body {
		t.Errorf("body = %q, want %q", m.Body, msg.Body)
	}
	if m.HTMLBody != msg.HTMLBody {
		t.Errorf("htmlBody = %v, want %v", m.HTMLBody, msg.HTMLBody)
	}
	if len(m.AttachmentList) != len(msg.AttachmentList) {
		t.Fatalf("%d attachments, want %d", len(m.AttachmentList), len(msg.AttachmentList))
	}
	for i, a := range m.AttachmentList {
		want := msg.AttachmentList[i]
		if a.Filename != want.Filename || a.ContentType != want.ContentType {
			t.Errorf("attachment %d = %q (%s), want %q (%s)", i, a.Filename, a.ContentType, want.Filename, want.ContentType)
		}
		if got := unb64(t, a.Content); !bytes.Equal(got, files[i]) {
			t.Errorf("attachment %d %q: %d bytes differ from the %d bytes sent", i, a.Filename, len(got), len(files[i]))
		}
	}
}

func testSend(t *testing.T, env envFunc) {
	e := env(t)
	msg, files := ccdaMessage(t)
	id := e.send(ctAlice, msg)

	// Every recipient, BCC included, gets it in INBOX, unread.
	var bobRaw []byte
	for _, rcpt := range []string{ctBob, ctCarol, ctDave} {
		ms := e.messages(rcpt, "INBOX")
		if len(ms) != 1 {
			t.Fatalf("%s INBOX holds %d messages, want 1", rcpt, len(ms))
		}
		m := ms[0]
		checkReceived(t, m, msg, files)
		if m.MsgID != "<"+id+">" {
			t.Errorf("%s: msgID = %q, want <%s>", rcpt, m.MsgID, id)
		}
		if m.Folder != "INBOX" || m.UID <= 0 || m.ReceivedDate.IsZero() || m.Size <= 0 {
			t.Errorf("%s: folder %q uid %d received %v size %d", rcpt, m.Folder, m.UID, m.ReceivedDate, m.Size)
		}
		wantN(t, rcpt+" unread INBOX", e.unread(rcpt, "INBOX"), 1)
		// TO and CC are visible, BCC is not.
		var rc []string
		for _, r := range m.Recipients {
			rc = append(rc, string(r.Type)+":"+r.Email)
		}
		sort.Strings(rc)
		wantStrings(t, rcpt+" recipients", rc, []string{"CC:" + ctCarol, "TO:" + ctBob})
		raw := e.raw(rcpt, "INBOX", m.UID)
		if strings.Contains(strings.ToLower(string(raw)), "dave@") {
			t.Errorf("%s's copy discloses the BCC recipient:\n%s", rcpt, headerSection(raw))
		}
		if rcpt == ctBob {
			bobRaw = raw
		}
	}

	// An unread copy lands in the sender's INBOX.Sent, the same message.
	sent := e.messages(ctAlice, "INBOX.Sent")
	if len(sent) != 1 {
		t.Fatalf("alice INBOX.Sent holds %d messages, want 1", len(sent))
	}
	checkReceived(t, sent[0], msg, files)
	wantN(t, "alice unread INBOX.Sent", e.unread(ctAlice, "INBOX.Sent"), 1)
	sentRaw := e.raw(ctAlice, "INBOX.Sent", sent[0].UID)
	if !bytes.Equal(sentRaw, bobRaw) {
		t.Error("the INBOX.Sent copy differs from the delivered message")
	}
	if strings.Contains(strings.ToLower(headerSection(sentRaw)), "dave@") {
		t.Error("the INBOX.Sent copy names the BCC recipient in a header")
	}
	wantN(t, "alice INBOX", e.count(ctAlice, "INBOX"), 0)

	// Failures deliver nothing.
	plain := directapi.Message{Sender: ctAlice, Subject: "x", Body: "x", Recipients: []directapi.Recipient{{Email: ctBob, Type: directapi.TO}}}
	_, err := e.c.Send(e.ctx(), ctBadAuth(ctAlice), plain)
	wantAuthFailure(t, err)
	_, err = e.c.Send(e.ctx(), directapi.Authentication{Username: "nobody@direct.example", Password: "x"}, plain)
	wantAuthFailure(t, err)

	forged := plain
	forged.Sender = ctCarol
	_, err = e.c.Send(e.ctx(), ctAuth(ctAlice), forged)
	wantAddressError(t, err)

	for _, bad := range []string{"not an address", "bob@", "<bob@direct.example", "Bob <bob@direct.example>, x"} {
		m := plain
		m.Recipients = []directapi.Recipient{{Email: ctBob, Type: directapi.TO}, {Email: bad, Type: directapi.CC}}
		_, err = e.c.Send(e.ctx(), ctAuth(ctAlice), m)
		if !restclient.IsAddressError(err) {
			t.Errorf("recipient %q: err = %v, want address error", bad, err)
		}
	}
	noRcpt := plain
	noRcpt.Recipients = nil
	_, err = e.c.Send(e.ctx(), ctAuth(ctAlice), noRcpt)
	wantAddressError(t, err)

	badAttachment := plain
	badAttachment.AttachmentList = []directapi.Attachment{{Content: "!!! not base64 !!!", ContentType: "application/pdf", Filename: "x.pdf"}}
	_, err = e.c.Send(e.ctx(), ctAuth(ctAlice), badAttachment)
	wantAPICode(t, err, 3)

	wantN(t, "bob INBOX after failed sends", e.count(ctBob, "INBOX"), 1)
	wantN(t, "alice INBOX.Sent after failed sends", e.count(ctAlice, "INBOX.Sent"), 1)
	wantN(t, "Send calls", e.srv.Calls("Send"), 1+2+1+4+1+1)
}

func testSendWithHeader(t *testing.T, env envFunc) {
	e := env(t)
	msg := directapi.MessageWithHeader{
		Message: directapi.Message{
			Sender: ctAlice, Subject: "Re: lab order", Body: "Results follow.",
			Recipients: []directapi.Recipient{{Email: ctBob, Type: directapi.TO}, {Email: ctDave, Type: directapi.BCC}},
		},
		Headers: []directapi.MessageHeader{
			{Name: "X-Foo", Value: "bar baz"},
			{Name: "In-Reply-To", Value: "<order-17@other.example>"},
			{Name: "References", Value: "<order-16@other.example> <order-17@other.example>"},
			// A header the provider writes itself cannot be smuggled in.
			{Name: "Bcc", Value: "eve@other.example"},
		},
	}
	id, err := e.c.SendWithHeader(e.ctx(), ctAuth(ctAlice), msg)
	e.must(err, "SendWithHeader")
	if id == "" {
		t.Fatal("empty smtpId")
	}
	for _, where := range []struct{ addr, folder string }{{ctBob, "INBOX"}, {ctDave, "INBOX"}, {ctAlice, "INBOX.Sent"}} {
		uids := e.uids(where.addr, where.folder)
		if len(uids) != 1 {
			t.Fatalf("%s %s holds %v, want one message", where.addr, where.folder, uids)
		}
		raw := string(e.raw(where.addr, where.folder, uids[0]))
		hdr := headerSection([]byte(raw))
		for _, want := range []string{"X-Foo: bar baz\n", "In-Reply-To: <order-17@other.example>\n",
			"References: <order-16@other.example> <order-17@other.example>\n", "Message-ID: <" + id + ">\n"} {
			if !strings.Contains(hdr, want) {
				t.Errorf("%s %s: header lacks %q:\n%s", where.addr, where.folder, want, hdr)
			}
		}
		if strings.Contains(raw, "eve@") || strings.Contains(strings.ToLower(raw), "dave@") {
			t.Errorf("%s %s: a BCC address appears in the message:\n%s", where.addr, where.folder, hdr)
		}
	}
	ms := e.messages(ctBob, "INBOX")
	if v, ok := headerValue(ms[0].Headers, "X-Foo"); !ok || v != "bar baz" {
		t.Errorf("headers of GetMessages: X-Foo = %q, %v", v, ok)
	}
	if ms[0].Body != "Results follow." || ms[0].Subject != "Re: lab order" {
		t.Errorf("body %q subject %q", ms[0].Body, ms[0].Subject)
	}
	wantN(t, "alice unread INBOX.Sent", e.unread(ctAlice, "INBOX.Sent"), 1)

	// A header value with a line break would inject fields: refused, nothing sent.
	evil := msg
	evil.Headers = []directapi.MessageHeader{{Name: "X-Foo", Value: "a\r\nBcc: eve@other.example"}}
	_, err = e.c.SendWithHeader(e.ctx(), ctAuth(ctAlice), evil)
	wantAPICode(t, err, 3)
	badName := msg
	badName.Headers = []directapi.MessageHeader{{Name: "X Foo:", Value: "a"}}
	_, err = e.c.SendWithHeader(e.ctx(), ctAuth(ctAlice), badName)
	wantAPICode(t, err, 3)
	_, err = e.c.SendWithHeader(e.ctx(), ctBadAuth(ctAlice), msg)
	wantAuthFailure(t, err)
	forged := msg
	forged.Sender = ctBob
	_, err = e.c.SendWithHeader(e.ctx(), ctAuth(ctAlice), forged)
	wantAddressError(t, err)
	wantN(t, "bob INBOX after failures", e.count(ctBob, "INBOX"), 1)
	wantN(t, "alice INBOX.Sent after failures", e.count(ctAlice, "INBOX.Sent"), 1)
}

func testForward(t *testing.T, env envFunc) {
	e := env(t)
	msg, files := ccdaMessage(t)
	msg.Recipients = []directapi.Recipient{{Email: ctBob, Type: directapi.TO}}
	e.send(ctAlice, msg)
	second := directapi.Message{Sender: ctAlice, Subject: "Second note", Body: "Another note.", Recipients: msg.Recipients}
	e.send(ctAlice, second)
	uids := e.uids(ctBob, "INBOX")
	if len(uids) != 2 {
		t.Fatalf("bob INBOX = %v", uids)
	}
	raws := e.raws(ctBob, "INBOX")

	// One UID: forwarded inline as "Fwd: subject" with the same body and files.
	to := []directapi.Recipient{{Email: ctCarol, Type: directapi.TO}}
	id, err := e.c.Forward(e.ctx(), ctAuth(ctBob), "INBOX", uids[:1], to)
	e.must(err, "Forward one")
	got := e.messages(ctCarol, "INBOX")
	if len(got) != 1 {
		t.Fatalf("carol INBOX holds %d, want 1", len(got))
	}
	want := msg
	want.Sender = ctBob
	want.Subject = "Fwd: " + msg.Subject
	checkReceived(t, got[0], want, files)
	if got[0].MsgID != "<"+id+">" {
		t.Errorf("forwarded msgID %q, smtpId %q", got[0].MsgID, id)
	}
	wantN(t, "bob unread INBOX.Sent", e.unread(ctBob, "INBOX.Sent"), 1)
	logs, err := e.c.GetMessageStatus(e.ctx(), ctAuth(ctBob), id)
	e.must(err, "GetMessageStatus of forward")
	if len(logs) != 1 || logs[0].To != ctCarol || logs[0].Status != directapi.StatusDelivered {
		t.Errorf("status of forward = %+v", logs)
	}

	// Two UIDs: one message with both attached whole, as message/rfc822.
	_, err = e.c.Forward(e.ctx(), ctAuth(ctBob), "INBOX", uids, []directapi.Recipient{{Email: ctDave, Type: directapi.TO}, {Email: ctCarol, Type: directapi.CC}})
	e.must(err, "Forward two")
	for _, rcpt := range []string{ctDave, ctCarol} {
		ms, err := e.c.GetMessagesBySubject(e.ctx(), ctAuth(rcpt), "INBOX", "Fwd: 2")
		e.must(err, "GetMessagesBySubject")
		if len(ms) != 1 {
			t.Fatalf("%s: %d forwards of two messages, want 1", rcpt, len(ms))
		}
		m := ms[0]
		if !strings.HasPrefix(m.Subject, "Fwd:") || m.Sender != ctBob {
			t.Errorf("subject %q sender %q", m.Subject, m.Sender)
		}
		if len(m.AttachmentList) != 2 {
			t.Fatalf("%d attachments, want 2", len(m.AttachmentList))
		}
		for i, a := range m.AttachmentList {
			if a.ContentType != "message/rfc822" {
				t.Errorf("attachment %d type %q, want message/rfc822", i, a.ContentType)
			}
			inner := unb64(t, a.Content)
			if !bytes.Equal(inner, raws[uids[i]]) {
				t.Errorf("attachment %d is not the forwarded message byte for byte (%d vs %d bytes)", i, len(inner), len(raws[uids[i]]))
			}
		}
	}
	wantN(t, "bob INBOX.Sent", e.count(ctBob, "INBOX.Sent"), 2)

	// Failures send nothing.
	_, err = e.c.Forward(e.ctx(), ctAuth(ctBob), "INBOX", []int64{uids[0], 999}, to)
	wantAPICode(t, err, 3)
	_, err = e.c.Forward(e.ctx(), ctAuth(ctBob), "INBOX.Nope", uids[:1], to)
	wantAPICode(t, err, 3)
	_, err = e.c.Forward(e.ctx(), ctBadAuth(ctBob), "INBOX", uids[:1], to)
	wantAuthFailure(t, err)
	_, err = e.c.Forward(e.ctx(), ctAuth(ctBob), "INBOX", uids[:1], []directapi.Recipient{{Email: "no address", Type: directapi.TO}})
	wantAddressError(t, err)
	_, err = e.c.Forward(e.ctx(), ctAuth(ctBob), "INBOX", uids[:1], nil)
	wantAddressError(t, err)
	wantN(t, "carol INBOX after failures", e.count(ctCarol, "INBOX"), 2)
	wantN(t, "bob INBOX.Sent after failures", e.count(ctBob, "INBOX.Sent"), 2)
	wantInts(t, "bob INBOX after forwarding", e.uids(ctBob, "INBOX"), uids)
}

func testGetMessageStatus(t *testing.T, env envFunc) {
	e := env(t)
	id := e.send(ctAlice, directapi.Message{Sender: ctAlice, Subject: "status", Body: "b", Recipients: []directapi.Recipient{
		{Email: ctBob, Type: directapi.TO},
		{Email: "unknown@" + ctDomain, Type: directapi.CC},
		{Email: "someone@other.example", Type: directapi.BCC},
	}})
	size := int64(len(e.raw(ctBob, "INBOX", e.uids(ctBob, "INBOX")[0])))
	check := func(wantOther string) {
		t.Helper()
		logs, err := e.c.GetMessageStatus(e.ctx(), ctAuth(ctAlice), id)
		e.must(err, "GetMessageStatus")
		if len(logs) != 3 {
			t.Fatalf("%d records, want one per recipient (3): %+v", len(logs), logs)
		}
		by := byRecipient(t, logs)
		for rcpt, status := range map[string]string{
			ctBob:                   directapi.StatusDelivered,
			"unknown@" + ctDomain:   directapi.StatusLocallyFailed,
			"someone@other.example": wantOther,
		} {
			l, ok := by[rcpt]
			if !ok {
				t.Fatalf("no record for %s: %+v", rcpt, logs)
			}
			if l.Status != status {
				t.Errorf("%s: status %q, want %q", rcpt, l.Status, status)
			}
			if l.From != ctAlice || l.MessageID != id || l.MessageSize != size || !l.TS.Equal(ctEpoch) {
				t.Errorf("%s: record %+v (want from %s, id %s, size %d, ts %v)", rcpt, l, ctAlice, id, size, ctEpoch)
			}
		}
	}
	check(directapi.StatusWaiting)
	e.clock.Advance(59 * time.Minute)
	check(directapi.StatusWaiting)
	e.clock.Advance(time.Minute)
	check(directapi.StatusNoMDNReceived)

	// The smtpId in Message-ID form (with angle brackets) names the same message.
	logs, err := e.c.GetMessageStatus(e.ctx(), ctAuth(ctAlice), "<"+id+">")
	e.must(err, "GetMessageStatus <id>")
	wantN(t, "records for <id>", len(logs), 3)

	// Unknown id: nothing found is an empty report, not a failure.
	logs, err = e.c.GetMessageStatus(e.ctx(), ctAuth(ctAlice), "nosuch@"+ctDomain)
	e.must(err, "GetMessageStatus unknown")
	wantN(t, "records for an unknown id", len(logs), 0)
	// Another user does not see alice's deliveries.
	logs, err = e.c.GetMessageStatus(e.ctx(), ctAuth(ctBob), id)
	e.must(err, "GetMessageStatus as bob")
	wantN(t, "records of alice's message seen by bob", len(logs), 0)
	_, err = e.c.GetMessageStatus(e.ctx(), ctBadAuth(ctAlice), id)
	wantAuthFailure(t, err)
}

func testGetMessageStatuses(t *testing.T, env envFunc) {
	e := env(t)
	id1 := e.send(ctAlice, directapi.Message{Sender: ctAlice, Subject: "one", Body: "1", Recipients: []directapi.Recipient{
		{Email: ctBob, Type: directapi.TO}, {Email: "x@other.example", Type: directapi.TO}}})
	e.clock.Advance(time.Minute)
	id2 := e.send(ctAlice, directapi.Message{Sender: ctAlice, Subject: "two", Body: "2", Recipients: []directapi.Recipient{
		{Email: ctCarol, Type: directapi.TO}}})
	logs, err := e.c.GetMessageStatuses(e.ctx(), ctAuth(ctAlice), []string{id1, id2})
	e.must(err, "GetMessageStatuses")
	got := map[string]string{}
	for _, l := range logs {
		got[l.MessageID+" "+l.To] = l.Status
	}
	want := map[string]string{
		id1 + " " + ctBob:        directapi.StatusDelivered,
		id1 + " x@other.example": directapi.StatusWaiting,
		id2 + " " + ctCarol:      directapi.StatusDelivered,
	}
	if len(logs) != 3 || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("records = %v, want %v", got, want)
	}
	wantN(t, "GetMessageStatuses calls", e.srv.Calls("GetMessageStatuses"), 1)

	// In batches of one smtpId: two requests, the same records.
	c1 := e.newClient(restclient.Options{BatchSize: 1, Clock: e.clock})
	logs1, err := c1.GetMessageStatuses(e.ctx(), ctAuth(ctAlice), []string{id1, id2})
	e.must(err, "GetMessageStatuses batched")
	wantN(t, "records in batches", len(logs1), 3)
	wantN(t, "GetMessageStatuses calls after batching", e.srv.Calls("GetMessageStatuses"), 3)

	_, err = e.c.GetMessageStatuses(e.ctx(), ctBadAuth(ctAlice), []string{id1})
	wantAuthFailure(t, err)
}

// testStatusAsCSV runs the status operations against a sandbox that answers
// with csvData, and expects the same records as messageLogs would give.
func testStatusAsCSV(t *testing.T, env envFunc) {
	e := env(t, func(c *ctConfig) { c.sandbox.StatusAsCSV = true })
	id := e.send(ctAlice, directapi.Message{Sender: ctAlice, Subject: "csv", Body: "b", Recipients: []directapi.Recipient{
		{Email: ctBob, Type: directapi.TO}, {Email: "unknown@" + ctDomain, Type: directapi.TO}, {Email: "far@other.example", Type: directapi.TO}}})
	size := int64(len(e.raw(ctBob, "INBOX", e.uids(ctBob, "INBOX")[0])))
	check := func(logs []directapi.DirectMessageLog, far string) {
		t.Helper()
		by := byRecipient(t, logs)
		want := map[string]string{ctBob: directapi.StatusDelivered, "unknown@" + ctDomain: directapi.StatusLocallyFailed, "far@other.example": far}
		if len(by) != len(want) {
			t.Fatalf("records %+v", logs)
		}
		for to, status := range want {
			l := by[to]
			if l.Status != status || l.From != ctAlice || l.MessageID != id || l.MessageSize != size || !l.TS.Equal(ctEpoch) {
				t.Errorf("csv record for %s = %+v, want status %q from %s id %s size %d ts %v", to, l, status, ctAlice, id, size, ctEpoch)
			}
		}
	}
	logs, err := e.c.GetMessageStatus(e.ctx(), ctAuth(ctAlice), id)
	e.must(err, "GetMessageStatus")
	check(logs, directapi.StatusWaiting)
	logs, err = e.c.GetMessageStatuses(e.ctx(), ctAuth(ctAlice), []string{id})
	e.must(err, "GetMessageStatuses")
	check(logs, directapi.StatusWaiting)
	logs, err = e.c.GetMessageStatusWithTuser(e.ctx(), ctTuser(ctReseller, ctAlice), id)
	e.must(err, "GetMessageStatusWithTuser")
	check(logs, directapi.StatusWaiting)
	e.clock.Advance(time.Hour)
	logs, err = e.c.GetMessageStatus(e.ctx(), ctAuth(ctAlice), id)
	e.must(err, "GetMessageStatus after an hour")
	check(logs, directapi.StatusNoMDNReceived)

	// On the wire the records really came as csvData.
	body := fmt.Sprintf(`{"username":%q,"password":%q}`, ctAlice, ctPasswords[ctAlice])
	resp, err := http.Post(e.ts.URL+directapi.MessagingPath+"/GetMessageStatus/"+id, "application/json", strings.NewReader(body))
	e.must(err, "raw POST")
	defer resp.Body.Close()
	var wire struct {
		Success     bool              `json:"success"`
		HasCvData   bool              `json:"hasCvData"`
		CsvData     []byte            `json:"csvData"`
		MessageLogs []json.RawMessage `json:"messageLogs"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&wire); err != nil {
		t.Fatal(err)
	}
	if !wire.Success || !wire.HasCvData || len(wire.MessageLogs) != 0 || !bytes.Contains(wire.CsvData, []byte(id)) {
		t.Errorf("wire answer: success %v hasCvData %v messageLogs %d csvData %q", wire.Success, wire.HasCvData, len(wire.MessageLogs), wire.CsvData)
	}
}

func testGetMessageCount(t *testing.T, env envFunc) {
	e := env(t)
	wantN(t, "empty INBOX", e.count(ctBob, "INBOX"), 0)
	for i := range 3 {
		e.deliver(ctBob, "INBOX", ctRaw(ctAlice, ctBob, fmt.Sprint("m", i), "x"))
	}
	e.deliver(ctBob, "INBOX.Spam", ctRaw("spam@other.example", ctBob, "spam", "x"))
	wantN(t, "INBOX", e.count(ctBob, "INBOX"), 3)
	wantN(t, "INBOX.Spam", e.count(ctBob, "INBOX.Spam"), 1)
	wantN(t, "INBOX.Drafts", e.count(ctBob, "INBOX.Drafts"), 0)
	wantN(t, "alice INBOX (other mailbox)", e.count(ctAlice, "INBOX"), 0)
	_, err := e.c.GetMessageCount(e.ctx(), ctAuth(ctBob), "INBOX.Nope")
	wantAPICode(t, err, 3)
	_, err = e.c.GetMessageCount(e.ctx(), ctAuth(ctBob), "Elsewhere")
	wantAPICode(t, err, 3)
	_, err = e.c.GetMessageCount(e.ctx(), ctBadAuth(ctBob), "INBOX")
	wantAuthFailure(t, err)
}

func testGetUnreadMessageCount(t *testing.T, env envFunc) {
	e := env(t)
	var uids []int64
	for i := range 3 {
		uids = append(uids, e.deliver(ctBob, "INBOX", ctRaw(ctAlice, ctBob, fmt.Sprint("m", i), "x")))
	}
	wantN(t, "unread before", e.unread(ctBob, "INBOX"), 3)
	e.must(e.c.MarkMessagesAsReadByUIDs(e.ctx(), ctAuth(ctBob), "INBOX", uids[:2]), "MarkMessagesAsReadByUIDs")
	wantN(t, "unread after marking two read", e.unread(ctBob, "INBOX"), 1)
	wantN(t, "count after marking", e.count(ctBob, "INBOX"), 3)
	_, err := e.c.GetUnreadMessageCount(e.ctx(), ctAuth(ctBob), "INBOX.Nope")
	wantAPICode(t, err, 3)
	_, err = e.c.GetUnreadMessageCount(e.ctx(), ctBadAuth(ctBob), "INBOX")
	wantAuthFailure(t, err)
}

func testGetDeletedMessageCount(t *testing.T, env envFunc) {
	e := env(t)
	var uids []int64
	for i := range 3 {
		uids = append(uids, e.deliver(ctBob, "INBOX", ctRaw(ctAlice, ctBob, fmt.Sprint("m", i), "x")))
	}
	deleted := func(folder string) int {
		t.Helper()
		n, err := e.c.GetDeletedMessageCount(e.ctx(), ctAuth(ctBob), folder)
		e.must(err, "GetDeletedMessageCount")
		return n
	}
	wantN(t, "deleted before", deleted("INBOX"), 0)
	e.must(e.c.DeleteMessagesByUIDs(e.ctx(), ctAuth(ctBob), "INBOX", uids[:2], false), "DeleteMessagesByUIDs false")
	wantN(t, "deleted from INBOX", deleted("INBOX"), 2)
	wantN(t, "deleted count of INBOX.Trash", deleted("INBOX.Trash"), 2)
	wantN(t, "deleted from INBOX.Spam", deleted("INBOX.Spam"), 0)
	wantN(t, "INBOX count", e.count(ctBob, "INBOX"), 1)
	_, err := e.c.GetDeletedMessageCount(e.ctx(), ctAuth(ctBob), "INBOX.Nope")
	wantAPICode(t, err, 3)
	_, err = e.c.GetDeletedMessageCount(e.ctx(), ctBadAuth(ctBob), "INBOX")
	wantAuthFailure(t, err)
}

func testGetMessagesByUIDs(t *testing.T, env envFunc) {
	e := env(t)
	var uids []int64
	var raws [][]byte
	for i := range 3 {
		r := ctRaw(ctAlice, ctBob, fmt.Sprint("subject ", i), fmt.Sprint("body ", i))
		raws = append(raws, r)
		uids = append(uids, e.deliver(ctBob, "INBOX", r))
		e.clock.Advance(time.Second)
	}
	ms, err := e.c.GetMessagesByUIDs(e.ctx(), ctAuth(ctBob), "INBOX", []int64{uids[2], uids[0]})
	e.must(err, "GetMessagesByUIDs")
	wantInts(t, "uids returned", msgUIDs(ms), []int64{uids[0], uids[2]})
	for _, m := range ms {
		i := slices.Index(uids, m.UID)
		if m.Subject != fmt.Sprint("subject ", i) || m.Body != fmt.Sprint("body ", i)+"\n" || m.Sender != ctAlice {
			t.Errorf("uid %d: subject %q body %q sender %q", m.UID, m.Subject, m.Body, m.Sender)
		}
		if m.Folder != "INBOX" || m.Size != len(raws[i]) || m.MsgNum != i+1 {
			t.Errorf("uid %d: folder %q size %d (want %d) msgnum %d (want %d)", m.UID, m.Folder, m.Size, len(raws[i]), m.MsgNum, i+1)
		}
		if !m.ReceivedDate.Equal(ctEpoch.Add(time.Duration(i) * time.Second)) {
			t.Errorf("uid %d: receivedDate %v", m.UID, m.ReceivedDate)
		}
		if !m.SentDate.Equal(time.Date(2025, 3, 10, 11, 0, 0, 0, time.UTC)) {
			t.Errorf("uid %d: sentDate %v", m.UID, m.SentDate)
		}
		if !strings.HasPrefix(m.MsgID, "<test-") {
			t.Errorf("uid %d: msgID %q", m.UID, m.MsgID)
		}
	}
	// UIDs that do not exist are left out.
	ms, err = e.c.GetMessagesByUIDs(e.ctx(), ctAuth(ctBob), "INBOX", []int64{uids[1], 999})
	e.must(err, "GetMessagesByUIDs with a missing uid")
	wantInts(t, "uids returned", msgUIDs(ms), []int64{uids[1]})
	// The UIDs of one folder mean nothing in another.
	ms, err = e.c.GetMessagesByUIDs(e.ctx(), ctAuth(ctBob), "INBOX.Spam", uids)
	e.must(err, "GetMessagesByUIDs in INBOX.Spam")
	wantN(t, "messages found in INBOX.Spam", len(ms), 0)

	// 1200 UIDs with the default batch size of 500: three requests.
	e.srv.ResetCalls()
	wantN(t, "default batch size", e.c.BatchSize(), 500)
	many := make([]int64, 1200)
	for i := range many {
		many[i] = int64(i + 1)
	}
	ms, err = e.c.GetMessagesByUIDs(e.ctx(), ctAuth(ctBob), "INBOX", many)
	e.must(err, "GetMessagesByUIDs 1200")
	wantInts(t, "uids among 1200", msgUIDs(ms), uids)
	wantN(t, "requests for 1200 UIDs", e.srv.Calls("GetMessagesByUIDs"), 3)
	// No UIDs: no request at all.
	ms, err = e.c.GetMessagesByUIDs(e.ctx(), ctAuth(ctBob), "INBOX", nil)
	e.must(err, "GetMessagesByUIDs none")
	wantN(t, "messages for no UIDs", len(ms), 0)
	wantN(t, "requests after an empty list", e.srv.Calls("GetMessagesByUIDs"), 3)

	_, err = e.c.GetMessagesByUIDs(e.ctx(), ctAuth(ctBob), "INBOX.Nope", uids)
	wantAPICode(t, err, 3)
	_, err = e.c.GetMessagesByUIDs(e.ctx(), ctBadAuth(ctBob), "INBOX", uids)
	wantAuthFailure(t, err)
}

func testGetUnreadMessages(t *testing.T, env envFunc) {
	e := env(t)
	var uids []int64
	for i := range 3 {
		uids = append(uids, e.deliver(ctBob, "INBOX", ctRaw(ctAlice, ctBob, fmt.Sprint("m", i), fmt.Sprint("body ", i))))
	}
	ms, err := e.c.GetUnreadMessages(e.ctx(), ctAuth(ctBob), "INBOX")
	e.must(err, "GetUnreadMessages")
	wantInts(t, "unread", msgUIDs(ms), uids)
	e.must(e.c.MarkMessagesAsReadByUIDs(e.ctx(), ctAuth(ctBob), "INBOX", uids[1:2]), "mark read")
	ms, err = e.c.GetUnreadMessages(e.ctx(), ctAuth(ctBob), "INBOX")
	e.must(err, "GetUnreadMessages")
	wantInts(t, "unread after marking one read", msgUIDs(ms), []int64{uids[0], uids[2]})
	if ms[1].Body != "body 2\n" {
		t.Errorf("body %q: GetUnreadMessages returns whole messages", ms[1].Body)
	}
	_, err = e.c.GetUnreadMessages(e.ctx(), ctAuth(ctBob), "INBOX.Nope")
	wantAPICode(t, err, 3)
	_, err = e.c.GetUnreadMessages(e.ctx(), ctBadAuth(ctBob), "INBOX")
	wantAuthFailure(t, err)
}

// testByReceivedDate covers the four received-date operations.
func testByReceivedDate(utc, meta bool) func(*testing.T, envFunc) {
	return func(t *testing.T, env envFunc) {
		e := env(t)
		t0 := ctEpoch
		u1 := e.deliver(ctBob, "INBOX", ctRaw(ctAlice, ctBob, "early", "first body"))
		e.clock.Advance(2 * time.Hour)
		t1 := e.clock.Now()
		u2 := e.deliver(ctBob, "INBOX", ctRaw(ctCarol, ctBob, "late", "second body"))

		var name string
		var fn func(context.Context, directapi.Authentication, string, time.Time, time.Time) ([]directapi.MessageDetail, error)
		switch {
		case !utc && !meta:
			name, fn = "GetMessagesByReceivedDate", e.c.GetMessagesByReceivedDate
		case utc && !meta:
			name, fn = "GetMessagesByReceivedDateUTC", e.c.GetMessagesByReceivedDateUTC
		case !utc && meta:
			name, fn = "SearchMessagesMetadataByReceivedDate", e.c.SearchMessagesMetadataByReceivedDate
		default:
			name, fn = "SearchMessagesMetadataByReceivedDateUTC", e.c.SearchMessagesMetadataByReceivedDateUTC
		}
		query := func(begin, end time.Time) []directapi.MessageDetail {
			t.Helper()
			ms, err := fn(e.ctx(), ctAuth(ctBob), "INBOX", begin, end)
			e.must(err, name)
			return ms
		}
		// A range around the first message only.
		ms := query(t0.Add(-time.Minute), t0.Add(time.Minute))
		wantInts(t, "around t0", msgUIDs(ms), []int64{u1})
		// Both ends are inclusive; a range given in another zone means the same instants.
		ms = query(t0.In(time.FixedZone("EST", -5*3600)), t1)
		wantInts(t, "[t0, t1]", msgUIDs(ms), []int64{u1, u2})
		// A range that excludes both.
		ms = query(t0.Add(time.Minute), t1.Add(-time.Minute))
		wantInts(t, "between", msgUIDs(ms), nil)
		ms = query(t1.Add(time.Second), t1.Add(48*time.Hour))
		wantInts(t, "after", msgUIDs(ms), nil)

		ms = query(t1.Add(-time.Second), t1.Add(time.Second))
		if len(ms) != 1 {
			t.Fatalf("around t1: %d messages", len(ms))
		}
		m := ms[0]
		if m.UID != u2 || m.Subject != "late" || m.Sender != ctCarol || !m.ReceivedDate.Equal(t1) || m.Size <= 0 || len(m.Headers) == 0 {
			t.Errorf("message = uid %d subject %q sender %q received %v size %d headers %d", m.UID, m.Subject, m.Sender, m.ReceivedDate, m.Size, len(m.Headers))
		}
		if meta && m.Body != "" {
			t.Errorf("metadata carries a body: %q", m.Body)
		}
		if !meta && m.Body != "second body\n" {
			t.Errorf("body = %q, want the message body", m.Body)
		}

		_, err := fn(e.ctx(), ctAuth(ctBob), "INBOX", t1, t0)
		wantAPICode(t, err, 3) // end before begin
		_, err = fn(e.ctx(), ctAuth(ctBob), "INBOX.Nope", t0, t1)
		wantAPICode(t, err, 3)
		_, err = fn(e.ctx(), ctBadAuth(ctBob), "INBOX", t0, t1)
		wantAuthFailure(t, err)
	}
}

// testReceivedDateRangeAtEpoch asks for the messages received at the
// epoch instant (beginTime = endTime = 0): there are none.
func testReceivedDateRangeAtEpoch(t *testing.T, env envFunc) {
	e := env(t)
	e.deliver(ctBob, "INBOX", ctRaw(ctAlice, ctBob, "today", "x"))
	epoch := time.UnixMilli(0)
	ms, err := e.c.GetMessagesByReceivedDate(e.ctx(), ctAuth(ctBob), "INBOX", epoch, epoch)
	e.must(err, "GetMessagesByReceivedDate [0, 0]")
	if len(ms) != 0 {
		t.Errorf("GetMessagesByReceivedDate(0, 0) returned %d messages received on %v; none was received in 1970: an end time of 0 must not mean \"no range\"", len(ms), ms[0].ReceivedDate)
	}
	ms, err = e.c.SearchMessagesMetadataByReceivedDate(e.ctx(), ctAuth(ctBob), "INBOX", epoch.Add(-time.Hour), epoch)
	e.must(err, "SearchMessagesMetadataByReceivedDate [-1h, 0]")
	if len(ms) != 0 {
		t.Errorf("SearchMessagesMetadataByReceivedDate(-1h, 0) returned %d messages", len(ms))
	}
}

func testGetMessagesBySender(t *testing.T, env envFunc) {
	e := env(t)
	a1 := e.deliver(ctBob, "INBOX", ctRaw(ctAlice, ctBob, "a1", "x"))
	c1 := e.deliver(ctBob, "INBOX", ctRaw("Carol Clinic <"+ctCarol+">", ctBob, "c1", "x"))
	a2 := e.deliver(ctBob, "INBOX", ctRaw(ctAlice, ctBob, "a2", "x"))
	by := func(sender string) []int64 {
		t.Helper()
		ms, err := e.c.GetMessagesBySender(e.ctx(), ctAuth(ctBob), "INBOX", sender)
		e.must(err, "GetMessagesBySender "+sender)
		return msgUIDs(ms)
	}
	wantInts(t, "from alice", by(ctAlice), []int64{a1, a2})
	wantInts(t, "from carol", by(ctCarol), []int64{c1})
	wantInts(t, "from ALICE (case-insensitive)", by(strings.ToUpper(ctAlice)), []int64{a1, a2})
	wantInts(t, "from nobody", by("nobody@other.example"), nil)
	ms, err := e.c.GetMessagesBySender(e.ctx(), ctAuth(ctBob), "INBOX", ctCarol)
	e.must(err, "GetMessagesBySender")
	if len(ms) != 1 || ms[0].Sender != ctCarol || ms[0].Subject != "c1" {
		t.Errorf("messages from carol: %+v", ms)
	}
	_, err = e.c.GetMessagesBySender(e.ctx(), ctAuth(ctBob), "INBOX.Nope", ctAlice)
	wantAPICode(t, err, 3)
	_, err = e.c.GetMessagesBySender(e.ctx(), ctBadAuth(ctBob), "INBOX", ctAlice)
	wantAuthFailure(t, err)
}

func testGetMessagesBySubject(t *testing.T, env envFunc) {
	e := env(t)
	const subject = "Lab Results 2024/03 – Müller, Jürgen"
	// One sent through the provider (it encodes the subject), one arrived raw.
	e.send(ctAlice, directapi.Message{Sender: ctAlice, Subject: subject, Body: "see attached", Recipients: []directapi.Recipient{{Email: ctBob, Type: directapi.TO}}})
	e.deliver(ctBob, "INBOX", ctRaw(ctCarol, ctBob, "Fwd: "+subject, "x"))
	e.deliver(ctBob, "INBOX", ctRaw(ctCarol, ctBob, "Lab Results 2023", "x"))
	by := func(s string) []string {
		t.Helper()
		ms, err := e.c.GetMessagesBySubject(e.ctx(), ctAuth(ctBob), "INBOX", s)
		e.must(err, "GetMessagesBySubject "+s)
		return msgSubjects(ms)
	}
	wantStrings(t, "full subject", by(subject), []string{"Fwd: " + subject, subject})
	wantStrings(t, "2024/03 – Mü", by("2024/03 – Mü"), []string{"Fwd: " + subject, subject})
	wantStrings(t, "case-insensitive", by("LAB RESULTS 2023"), []string{"Lab Results 2023"})
	wantStrings(t, "no match", by("Radiology/CT"), nil)
	wantStrings(t, "dot-only subject", by(".."), nil)
	_, err := e.c.GetMessagesBySubject(e.ctx(), ctAuth(ctBob), "INBOX.Nope", subject)
	wantAPICode(t, err, 3)
	_, err = e.c.GetMessagesBySubject(e.ctx(), ctBadAuth(ctBob), "INBOX", subject)
	wantAuthFailure(t, err)
}

func testGetMessages(t *testing.T, env envFunc) {
	e := env(t)
	msg, files := ccdaMessage(t)
	msg.Recipients = []directapi.Recipient{{Email: ctBob, Type: directapi.TO}}
	e.send(ctAlice, msg)
	html := directapi.Message{Sender: ctCarol, Subject: "HTML note", Body: "<p>Hello <b>Bob</b></p>", HTMLBody: true,
		Recipients: []directapi.Recipient{{Email: ctBob, Type: directapi.TO}}}
	e.send(ctCarol, html)
	e.deliver(ctBob, "INBOX", ctRaw(ctDave, ctBob, "plain", "Grüße\r\nzweite Zeile"))
	ms := e.messages(ctBob, "INBOX")
	if len(ms) != 3 {
		t.Fatalf("%d messages, want 3", len(ms))
	}
	checkReceived(t, ms[0], msg, files)
	checkReceived(t, ms[1], html, nil)
	if ms[2].Body != "Grüße\nzweite Zeile\n" || ms[2].HTMLBody || len(ms[2].AttachmentList) != 0 {
		t.Errorf("raw message: body %q html %v attachments %d", ms[2].Body, ms[2].HTMLBody, len(ms[2].AttachmentList))
	}
	wantInts(t, "uids ascending", msgUIDs(ms), e.uids(ctBob, "INBOX"))
	for i, m := range ms {
		if m.MsgNum != i+1 || m.Folder != "INBOX" {
			t.Errorf("message %d: msgnum %d folder %q", i, m.MsgNum, m.Folder)
		}
	}
	if got := e.messages(ctBob, "INBOX.Drafts"); len(got) != 0 {
		t.Errorf("INBOX.Drafts: %d messages", len(got))
	}
	_, err := e.c.GetMessages(e.ctx(), ctAuth(ctBob), "INBOX.Nope")
	wantAPICode(t, err, 3)
	_, err = e.c.GetMessages(e.ctx(), ctBadAuth(ctBob), "INBOX")
	wantAuthFailure(t, err)
}

func testGetMessageMetaData(t *testing.T, env envFunc) {
	e := env(t)
	msg, _ := ccdaMessage(t)
	id := e.send(ctAlice, msg)
	raw := e.raw(ctBob, "INBOX", e.uids(ctBob, "INBOX")[0])
	ms, err := e.c.GetMessageMetaData(e.ctx(), ctAuth(ctBob), "INBOX")
	e.must(err, "GetMessageMetaData")
	if len(ms) != 1 {
		t.Fatalf("%d messages", len(ms))
	}
	m := ms[0]
	if m.Body != "" || len(m.AttachmentList) != 0 {
		t.Errorf("metadata has a body (%d bytes) or attachments (%d)", len(m.Body), len(m.AttachmentList))
	}
	if m.Subject != msg.Subject || m.Sender != ctAlice || m.UID <= 0 || m.Size != len(raw) ||
		!m.ReceivedDate.Equal(ctEpoch) || !m.SentDate.Equal(ctEpoch) || m.MsgID != "<"+id+">" || m.Folder != "INBOX" {
		t.Errorf("metadata = subject %q sender %q uid %d size %d (raw %d) received %v sent %v msgID %q folder %q",
			m.Subject, m.Sender, m.UID, m.Size, len(raw), m.ReceivedDate, m.SentDate, m.MsgID, m.Folder)
	}
	if v, ok := headerValue(m.Headers, "Message-ID"); !ok || v != "<"+id+">" {
		t.Errorf("headers lack Message-ID: %+v", m.Headers)
	}
	if _, ok := headerValue(m.Headers, "Subject"); !ok {
		t.Errorf("headers lack Subject: %+v", m.Headers)
	}
	if len(m.Recipients) != 2 {
		t.Errorf("recipients %+v, want TO bob and CC carol", m.Recipients)
	}
	// The metadata answer is far smaller than the message with its files.
	if len(raw) < 100_000 {
		t.Errorf("raw message unexpectedly small: %d", len(raw))
	}
	_, err = e.c.GetMessageMetaData(e.ctx(), ctAuth(ctBob), "INBOX.Nope")
	wantAPICode(t, err, 3)
	_, err = e.c.GetMessageMetaData(e.ctx(), ctBadAuth(ctBob), "INBOX")
	wantAuthFailure(t, err)
}

func testGetUIDs(t *testing.T, env envFunc) {
	e := env(t)
	wantInts(t, "empty INBOX", e.uids(ctBob, "INBOX"), []int64{})
	var want []int64
	for i := range 4 {
		want = append(want, e.deliver(ctBob, "INBOX", ctRaw(ctAlice, ctBob, fmt.Sprint("m", i), "x")))
	}
	got := e.uids(ctBob, "INBOX")
	wantInts(t, "INBOX", got, want)
	if !slices.IsSorted(got) || len(slices.Compact(slices.Clone(got))) != len(got) {
		t.Errorf("uids not strictly ascending: %v", got)
	}
	e.must(e.c.DeleteMessagesByUIDs(e.ctx(), ctAuth(ctBob), "INBOX", want[1:2], true), "delete")
	wantInts(t, "after deleting one", e.uids(ctBob, "INBOX"), []int64{want[0], want[2], want[3]})
	_, err := e.c.GetUIDs(e.ctx(), ctAuth(ctBob), "INBOX.Nope")
	wantAPICode(t, err, 3)
	_, err = e.c.GetUIDs(e.ctx(), ctBadAuth(ctBob), "INBOX")
	wantAuthFailure(t, err)
}

var initialFolders = []string{"INBOX.Drafts", "INBOX.Sent", "INBOX.Spam", "INBOX.Templates", "INBOX.Trash"}

func testGetFolders(t *testing.T, env envFunc) {
	e := env(t)
	wantStrings(t, "initial folders", e.folders(ctBob, "INBOX", false), initialFolders)
	wantStrings(t, "initial subscribed", e.folders(ctBob, "INBOX", true), initialFolders)
	e.createFolder(ctBob, "INBOX.A.B.C")
	e.createFolder(ctBob, "INBOX.AB")
	all := []string{"INBOX.A", "INBOX.A.B", "INBOX.A.B.C", "INBOX.AB", "INBOX.Drafts", "INBOX.Sent", "INBOX.Spam", "INBOX.Templates", "INBOX.Trash"}
	wantStrings(t, "all levels", e.folders(ctBob, "INBOX", false), all)
	wantStrings(t, "below INBOX.A", e.folders(ctBob, "INBOX.A", false), []string{"INBOX.A.B", "INBOX.A.B.C"})
	wantStrings(t, "below INBOX.A.B.C", e.folders(ctBob, "INBOX.A.B.C", false), []string{})
	_, err := e.c.SetFoldersSubscribed(e.ctx(), ctAuth(ctBob), []string{"INBOX.A.B", "INBOX.Spam"}, false)
	e.must(err, "SetFoldersSubscribed")
	wantStrings(t, "subscribed only", e.folders(ctBob, "INBOX", true),
		[]string{"INBOX.A", "INBOX.A.B.C", "INBOX.AB", "INBOX.Drafts", "INBOX.Sent", "INBOX.Templates", "INBOX.Trash"})
	wantStrings(t, "subscribed below INBOX.A", e.folders(ctBob, "INBOX.A", true), []string{"INBOX.A.B.C"})
	wantStrings(t, "all levels still", e.folders(ctBob, "INBOX", false), all)
	wantStrings(t, "alice's folders are her own", e.folders(ctAlice, "INBOX", false), initialFolders)
	_, err = e.c.GetFolders(e.ctx(), ctAuth(ctBob), "INBOX.Nope", false)
	wantAPICode(t, err, 3)
	_, err = e.c.GetFolders(e.ctx(), ctBadAuth(ctBob), "INBOX", false)
	wantAuthFailure(t, err)
}

func testSetFoldersSubscribed(t *testing.T, env envFunc) {
	e := env(t)
	e.createFolder(ctBob, "INBOX.Lab")
	got, err := e.c.SetFoldersSubscribed(e.ctx(), ctAuth(ctBob), []string{"INBOX.Lab", "INBOX.Templates"}, false)
	e.must(err, "unsubscribe")
	want := []string{"INBOX", "INBOX.Drafts", "INBOX.Sent", "INBOX.Spam", "INBOX.Trash"}
	// The answer lists the subscribed folders; INBOX itself may or may not be among them.
	got = slices.DeleteFunc(got, func(s string) bool { return s == "INBOX" })
	wantStrings(t, "answer after unsubscribing", got, want[1:])
	wantStrings(t, "GetFolders subscribed", e.folders(ctBob, "INBOX", true), want[1:])
	got, err = e.c.SetFoldersSubscribed(e.ctx(), ctAuth(ctBob), []string{"INBOX.Lab"}, true)
	e.must(err, "subscribe")
	got = slices.DeleteFunc(got, func(s string) bool { return s == "INBOX" })
	wantStrings(t, "answer after subscribing", got, []string{"INBOX.Drafts", "INBOX.Lab", "INBOX.Sent", "INBOX.Spam", "INBOX.Trash"})
	// Repeating is harmless.
	_, err = e.c.SetFoldersSubscribed(e.ctx(), ctAuth(ctBob), []string{"INBOX.Lab"}, true)
	e.must(err, "subscribe again")

	// One unknown folder: refused as a whole, nothing changed.
	_, err = e.c.SetFoldersSubscribed(e.ctx(), ctAuth(ctBob), []string{"INBOX.Drafts", "INBOX.Nope"}, false)
	wantAPICode(t, err, 3)
	_, err = e.c.SetFoldersSubscribed(e.ctx(), ctBadAuth(ctBob), []string{"INBOX.Drafts"}, false)
	wantAuthFailure(t, err)
	wantStrings(t, "after failures", e.folders(ctBob, "INBOX", true), []string{"INBOX.Drafts", "INBOX.Lab", "INBOX.Sent", "INBOX.Spam", "INBOX.Trash"})
}

func testCreateFolder(t *testing.T, env envFunc) {
	e := env(t)
	e.createFolder(ctBob, "INBOX.A.B")
	wantStrings(t, "folders", e.folders(ctBob, "INBOX", false), append([]string{"INBOX.A", "INBOX.A.B"}, initialFolders...))
	wantN(t, "new folder count", e.count(ctBob, "INBOX.A.B"), 0)
	wantInts(t, "new folder uids", e.uids(ctBob, "INBOX.A.B"), []int64{})
	e.createFolder(ctBob, "INBOX.A.C")       // under an existing parent
	e.createFolder(ctBob, "INBOX.Sent.2024") // below a reserved folder is allowed
	uid := e.deliver(ctBob, "INBOX.A.B", ctRaw(ctAlice, ctBob, "filed", "x"))
	wantInts(t, "usable", e.uids(ctBob, "INBOX.A.B"), []int64{uid})

	before := e.folders(ctBob, "INBOX", false)
	for _, name := range []string{"INBOX.A.B", "INBOX.A", "INBOX", "INBOX.Sent", "INBOX.Templates", "INBOX.Drafts", "INBOX.Spam", "INBOX.Trash", "Archive", "INBOX..x", "INBOX.x."} {
		err := e.c.CreateFolder(e.ctx(), ctAuth(ctBob), name)
		if !restclient.IsAPIError(err) {
			t.Errorf("CreateFolder %q: err = %v, want code 3", name, err)
			continue
		}
		wantAPICode(t, err, 3)
	}
	wantAuthFailure(t, e.c.CreateFolder(e.ctx(), ctBadAuth(ctBob), "INBOX.Z"))
	wantStrings(t, "folders after failures", e.folders(ctBob, "INBOX", false), before)
	wantInts(t, "existing folder untouched", e.uids(ctBob, "INBOX.A.B"), []int64{uid})
}

func testMoveFolder(t *testing.T, env envFunc) {
	e := env(t)
	e.createFolder(ctBob, "INBOX.Projects.Sub")
	top := []int64{
		e.deliver(ctBob, "INBOX.Projects", ctRaw(ctAlice, ctBob, "p1", "x")),
		e.deliver(ctBob, "INBOX.Projects", ctRaw(ctAlice, ctBob, "p2", "x")),
	}
	e.must(e.c.MarkMessagesAsReadByUIDs(e.ctx(), ctAuth(ctBob), "INBOX.Projects", top[:1]), "mark")
	sub := []int64{e.deliver(ctBob, "INBOX.Projects.Sub", ctRaw(ctAlice, ctBob, "s1", "x"))}
	topRaw, subRaw := e.raws(ctBob, "INBOX.Projects"), e.raws(ctBob, "INBOX.Projects.Sub")
	_, err := e.c.SetFoldersSubscribed(e.ctx(), ctAuth(ctBob), []string{"INBOX.Projects.Sub"}, false)
	e.must(err, "unsubscribe")

	e.must(e.c.MoveFolder(e.ctx(), ctAuth(ctBob), "INBOX.Projects", "INBOX.Archive.Projects"), "MoveFolder")
	wantStrings(t, "folders after the move", e.folders(ctBob, "INBOX", false),
		append([]string{"INBOX.Archive", "INBOX.Archive.Projects", "INBOX.Archive.Projects.Sub"}, initialFolders...))
	wantInts(t, "moved folder keeps its UIDs", e.uids(ctBob, "INBOX.Archive.Projects"), top)
	wantInts(t, "moved sub-folder keeps its UIDs", e.uids(ctBob, "INBOX.Archive.Projects.Sub"), sub)
	for uid, raw := range topRaw {
		if !bytes.Equal(e.raw(ctBob, "INBOX.Archive.Projects", uid), raw) {
			t.Errorf("uid %d changed in the move", uid)
		}
	}
	for uid, raw := range subRaw {
		if !bytes.Equal(e.raw(ctBob, "INBOX.Archive.Projects.Sub", uid), raw) {
			t.Errorf("sub uid %d changed in the move", uid)
		}
	}
	wantN(t, "unread state moves along", e.unread(ctBob, "INBOX.Archive.Projects"), 1)
	if slices.Contains(e.folders(ctBob, "INBOX", true), "INBOX.Archive.Projects.Sub") {
		t.Error("subscription state was not kept by the move")
	}
	_, err = e.c.GetUIDs(e.ctx(), ctAuth(ctBob), "INBOX.Projects")
	wantAPICode(t, err, 3)
	// The old name, created again, does not reuse the UIDs it handed out.
	e.createFolder(ctBob, "INBOX.Projects")
	if uid := e.deliver(ctBob, "INBOX.Projects", ctRaw(ctAlice, ctBob, "p3", "x")); uid <= slices.Max(top) {
		t.Errorf("re-created folder handed out uid %d, old UIDs went up to %d", uid, slices.Max(top))
	}

	// Failures change nothing.
	before := e.folders(ctBob, "INBOX", false)
	for _, c := range [][2]string{
		{"INBOX.Sent", "INBOX.OldSent"},         // reserved source
		{"INBOX", "INBOX.Root"},                 // reserved source
		{"INBOX.Archive", "INBOX.Drafts"},       // reserved destination
		{"INBOX.Archive", "INBOX.Spam"},         // reserved destination
		{"INBOX.Nope", "INBOX.Other"},           // unknown source
		{"INBOX.Archive", "INBOX.Projects"},     // destination exists
		{"INBOX.Archive", "INBOX.Archive.Deep"}, // into itself
		{"INBOX.Archive", "Archive"},            // not below INBOX
	} {
		err := e.c.MoveFolder(e.ctx(), ctAuth(ctBob), c[0], c[1])
		if !restclient.IsAPIError(err) {
			t.Errorf("MoveFolder %q -> %q: err = %v, want code 3", c[0], c[1], err)
			continue
		}
		wantAPICode(t, err, 3)
	}
	wantAuthFailure(t, e.c.MoveFolder(e.ctx(), ctBadAuth(ctBob), "INBOX.Archive", "INBOX.X"))
	wantStrings(t, "folders after failures", e.folders(ctBob, "INBOX", false), before)
	wantInts(t, "messages after failures", e.uids(ctBob, "INBOX.Archive.Projects"), top)
}

func testDeleteFolder(t *testing.T, env envFunc) {
	e := env(t)
	e.createFolder(ctBob, "INBOX.Old.Sub.Deeper")
	e.createFolder(ctBob, "INBOX.Older") // shares a prefix, must survive
	old := e.deliver(ctBob, "INBOX.Old", ctRaw(ctAlice, ctBob, "o", "x"))
	e.deliver(ctBob, "INBOX.Old.Sub", ctRaw(ctAlice, ctBob, "s", "x"))
	keep := e.deliver(ctBob, "INBOX.Older", ctRaw(ctAlice, ctBob, "k", "x"))
	inbox := e.deliver(ctBob, "INBOX", ctRaw(ctAlice, ctBob, "i", "x"))

	e.must(e.c.DeleteFolder(e.ctx(), ctAuth(ctBob), "INBOX.Old"), "DeleteFolder")
	wantStrings(t, "folders", e.folders(ctBob, "INBOX", false), sorted(append([]string{"INBOX.Older"}, initialFolders...)))
	for _, f := range []string{"INBOX.Old", "INBOX.Old.Sub", "INBOX.Old.Sub.Deeper"} {
		_, err := e.c.GetMessageCount(e.ctx(), ctAuth(ctBob), f)
		wantAPICode(t, err, 3)
	}
	wantInts(t, "INBOX.Older untouched", e.uids(ctBob, "INBOX.Older"), []int64{keep})
	wantInts(t, "INBOX untouched", e.uids(ctBob, "INBOX"), []int64{inbox})
	wantN(t, "deleted folders do not go to the Trash", e.count(ctBob, "INBOX.Trash"), 0)

	// Re-created under the same name: empty, and UIDs are not reused.
	e.createFolder(ctBob, "INBOX.Old")
	wantN(t, "re-created folder", e.count(ctBob, "INBOX.Old"), 0)
	if uid := e.deliver(ctBob, "INBOX.Old", ctRaw(ctAlice, ctBob, "o2", "x")); uid <= old {
		t.Errorf("re-created folder reused uid %d (old one was %d)", uid, old)
	}

	before := e.folders(ctBob, "INBOX", false)
	for _, name := range []string{"INBOX", "INBOX.Sent", "INBOX.Templates", "INBOX.Drafts", "INBOX.Spam", "INBOX.Nope", "Archive"} {
		err := e.c.DeleteFolder(e.ctx(), ctAuth(ctBob), name)
		if !restclient.IsAPIError(err) {
			t.Errorf("DeleteFolder %q: err = %v, want code 3", name, err)
			continue
		}
		wantAPICode(t, err, 3)
	}
	wantAuthFailure(t, e.c.DeleteFolder(e.ctx(), ctBadAuth(ctBob), "INBOX.Older"))
	wantStrings(t, "folders after failures", e.folders(ctBob, "INBOX", false), before)
	wantInts(t, "INBOX after failures", e.uids(ctBob, "INBOX"), []int64{inbox})
}

func testCopyMessages(t *testing.T, env envFunc) {
	e := env(t)
	var src []int64
	for i := range 3 {
		src = append(src, e.deliver(ctBob, "INBOX", ctRaw(ctAlice, ctBob, fmt.Sprint("m", i), "x")))
	}
	e.must(e.c.MarkMessagesAsReadByUIDs(e.ctx(), ctAuth(ctBob), "INBOX", src[1:2]), "mark")
	e.createFolder(ctBob, "INBOX.Keep")
	pre := e.deliver(ctBob, "INBOX.Keep", ctRaw(ctAlice, ctBob, "already here", "x"))
	srcRaw := e.raws(ctBob, "INBOX")

	e.must(e.c.CopyMessagesByUIDs(e.ctx(), ctAuth(ctBob), "INBOX", "INBOX.Keep", src[:2]), "CopyMessagesByUIDs")
	dest := e.uids(ctBob, "INBOX.Keep")
	if len(dest) != 3 || dest[0] != pre || dest[1] <= pre || dest[2] <= dest[1] {
		t.Fatalf("INBOX.Keep uids = %v, want %d then two new UIDs", dest, pre)
	}
	for i, uid := range dest[1:] {
		if !bytes.Equal(e.raw(ctBob, "INBOX.Keep", uid), srcRaw[src[i]]) {
			t.Errorf("copy %d (uid %d) differs from source uid %d", i, uid, src[i])
		}
	}
	unread, err := e.c.GetUnreadMessages(e.ctx(), ctAuth(ctBob), "INBOX.Keep")
	e.must(err, "GetUnreadMessages")
	wantInts(t, "unread copies (read state copied)", msgUIDs(unread), []int64{pre, dest[1]})
	wantInts(t, "source unchanged", e.uids(ctBob, "INBOX"), src)
	wantN(t, "source unread unchanged", e.unread(ctBob, "INBOX"), 2)

	// Copying again gives further new UIDs.
	e.must(e.c.CopyMessagesByUIDs(e.ctx(), ctAuth(ctBob), "INBOX", "INBOX.Keep", src[2:]), "copy again")
	dest2 := e.uids(ctBob, "INBOX.Keep")
	if len(dest2) != 4 || dest2[3] <= dest[2] {
		t.Errorf("after second copy: %v", dest2)
	}

	// One missing UID: refused, nothing copied.
	err = e.c.CopyMessagesByUIDs(e.ctx(), ctAuth(ctBob), "INBOX", "INBOX.Keep", []int64{src[0], 999})
	wantAPICode(t, err, 3)
	err = e.c.CopyMessagesByUIDs(e.ctx(), ctAuth(ctBob), "INBOX", "INBOX.Nope", src[:1])
	wantAPICode(t, err, 3)
	err = e.c.CopyMessagesByUIDs(e.ctx(), ctAuth(ctBob), "INBOX.Nope", "INBOX.Keep", src[:1])
	wantAPICode(t, err, 3)
	wantAuthFailure(t, e.c.CopyMessagesByUIDs(e.ctx(), ctBadAuth(ctBob), "INBOX", "INBOX.Keep", src[:1]))
	wantInts(t, "dest after failures", e.uids(ctBob, "INBOX.Keep"), dest2)
	wantInts(t, "source after failures", e.uids(ctBob, "INBOX"), src)
}

func testMoveMessages(t *testing.T, env envFunc) {
	e := env(t)
	var src []int64
	for i := range 3 {
		src = append(src, e.deliver(ctBob, "INBOX", ctRaw(ctAlice, ctBob, fmt.Sprint("m", i), "x")))
	}
	e.must(e.c.MarkMessagesAsReadByUIDs(e.ctx(), ctAuth(ctBob), "INBOX", src[:1]), "mark")
	srcRaw := e.raws(ctBob, "INBOX")
	e.createFolder(ctBob, "INBOX.Keep")

	e.must(e.c.MoveMessagesByUIDs(e.ctx(), ctAuth(ctBob), "INBOX", "INBOX.Keep", []int64{src[2], src[0]}), "MoveMessagesByUIDs")
	wantInts(t, "source", e.uids(ctBob, "INBOX"), src[1:2])
	dest := e.uids(ctBob, "INBOX.Keep")
	if len(dest) != 2 {
		t.Fatalf("dest %v", dest)
	}
	// New UIDs in source-UID order.
	if !bytes.Equal(e.raw(ctBob, "INBOX.Keep", dest[0]), srcRaw[src[0]]) || !bytes.Equal(e.raw(ctBob, "INBOX.Keep", dest[1]), srcRaw[src[2]]) {
		t.Error("moved messages differ from the originals")
	}
	wantN(t, "unread in dest (read state moved along)", e.unread(ctBob, "INBOX.Keep"), 1)
	wantN(t, "nothing in the Trash", e.count(ctBob, "INBOX.Trash"), 0)

	err := e.c.MoveMessagesByUIDs(e.ctx(), ctAuth(ctBob), "INBOX", "INBOX.Keep", []int64{src[1], src[0]}) // src[0] is gone
	wantAPICode(t, err, 3)
	err = e.c.MoveMessagesByUIDs(e.ctx(), ctAuth(ctBob), "INBOX", "INBOX.Nope", src[1:2])
	wantAPICode(t, err, 3)
	err = e.c.MoveMessagesByUIDs(e.ctx(), ctAuth(ctBob), "INBOX", "INBOX", src[1:2])
	wantAPICode(t, err, 3)
	wantAuthFailure(t, e.c.MoveMessagesByUIDs(e.ctx(), ctBadAuth(ctBob), "INBOX", "INBOX.Keep", src[1:2]))
	wantInts(t, "source after failures", e.uids(ctBob, "INBOX"), src[1:2])
	wantInts(t, "dest after failures", e.uids(ctBob, "INBOX.Keep"), dest)
}

func testDeleteMessages(t *testing.T, env envFunc) {
	e := env(t)
	var src []int64
	for i := range 4 {
		src = append(src, e.deliver(ctBob, "INBOX", ctRaw(ctAlice, ctBob, fmt.Sprint("m", i), "x")))
	}
	srcRaw := e.raws(ctBob, "INBOX")

	// deleteForever false: to INBOX.Trash.
	e.must(e.c.DeleteMessagesByUIDs(e.ctx(), ctAuth(ctBob), "INBOX", src[:2], false), "delete to Trash")
	wantInts(t, "INBOX", e.uids(ctBob, "INBOX"), src[2:])
	trash := e.uids(ctBob, "INBOX.Trash")
	if len(trash) != 2 {
		t.Fatalf("Trash %v", trash)
	}
	for i, uid := range trash {
		if !bytes.Equal(e.raw(ctBob, "INBOX.Trash", uid), srcRaw[src[i]]) {
			t.Errorf("Trash uid %d is not INBOX uid %d", uid, src[i])
		}
	}
	// deleteForever true: gone, the Trash unchanged.
	e.must(e.c.DeleteMessagesByUIDs(e.ctx(), ctAuth(ctBob), "INBOX", src[2:3], true), "delete forever")
	wantInts(t, "INBOX after deleting forever", e.uids(ctBob, "INBOX"), src[3:])
	wantInts(t, "Trash after deleting forever", e.uids(ctBob, "INBOX.Trash"), trash)
	// Deleting inside the Trash removes for good.
	e.must(e.c.DeleteMessagesByUIDs(e.ctx(), ctAuth(ctBob), "INBOX.Trash", trash[:1], false), "delete in Trash")
	wantInts(t, "Trash after deleting in it", e.uids(ctBob, "INBOX.Trash"), trash[1:])
	// A deleted UID is never handed out again.
	if uid := e.deliver(ctBob, "INBOX", ctRaw(ctAlice, ctBob, "new", "x")); uid <= slices.Max(src) {
		t.Errorf("new message got uid %d, deleted ones went up to %d", uid, slices.Max(src))
	}

	// A missing UID: refused, nothing deleted.
	before := e.uids(ctBob, "INBOX")
	for _, forever := range []bool{false, true} {
		err := e.c.DeleteMessagesByUIDs(e.ctx(), ctAuth(ctBob), "INBOX", []int64{src[3], src[0]}, forever)
		wantAPICode(t, err, 3)
	}
	err := e.c.DeleteMessagesByUIDs(e.ctx(), ctAuth(ctBob), "INBOX.Nope", src[3:], false)
	wantAPICode(t, err, 3)
	wantAuthFailure(t, e.c.DeleteMessagesByUIDs(e.ctx(), ctBadAuth(ctBob), "INBOX", src[3:], true))
	wantInts(t, "INBOX after failures", e.uids(ctBob, "INBOX"), before)
	wantInts(t, "Trash after failures", e.uids(ctBob, "INBOX.Trash"), trash[1:])
}

func testMarkRead(t *testing.T, env envFunc) {
	e := env(t)
	var uids []int64
	for i := range 3 {
		uids = append(uids, e.deliver(ctBob, "INBOX", ctRaw(ctAlice, ctBob, fmt.Sprint("m", i), "x")))
	}
	e.must(e.c.MarkMessagesAsReadByUIDs(e.ctx(), ctAuth(ctBob), "INBOX", []int64{uids[0], uids[2]}), "mark read")
	ms, err := e.c.GetUnreadMessages(e.ctx(), ctAuth(ctBob), "INBOX")
	e.must(err, "GetUnreadMessages")
	wantInts(t, "unread", msgUIDs(ms), uids[1:2])
	e.must(e.c.MarkMessagesAsReadByUIDs(e.ctx(), ctAuth(ctBob), "INBOX", []int64{uids[0]}), "mark read again")
	wantN(t, "unread after repeating", e.unread(ctBob, "INBOX"), 1)

	err = e.c.MarkMessagesAsReadByUIDs(e.ctx(), ctAuth(ctBob), "INBOX", []int64{uids[1], 999})
	wantAPICode(t, err, 3)
	wantN(t, "unread after a refused mark", e.unread(ctBob, "INBOX"), 1)
	err = e.c.MarkMessagesAsReadByUIDs(e.ctx(), ctAuth(ctBob), "INBOX.Nope", uids)
	wantAPICode(t, err, 3)
	wantAuthFailure(t, e.c.MarkMessagesAsReadByUIDs(e.ctx(), ctBadAuth(ctBob), "INBOX", uids))
	wantN(t, "unread after failures", e.unread(ctBob, "INBOX"), 1)

	// In batches of two, a failure in the second batch: the first was
	// carried out, and the error says how many UIDs were.
	e.must(e.c.MarkMessagesAsUnreadByUIDs(e.ctx(), ctAuth(ctBob), "INBOX", uids), "mark all unread")
	c2 := e.newClient(restclient.Options{BatchSize: 2, Clock: e.clock})
	e.srv.ResetCalls()
	err = c2.MarkMessagesAsReadByUIDs(e.ctx(), ctAuth(ctBob), "INBOX", []int64{uids[0], uids[1], 999})
	var pe *restclient.PartialError
	if !errors.As(err, &pe) || pe.Done != 2 {
		t.Fatalf("err = %v (%T), want PartialError with 2 done", err, err)
	}
	wantAPICode(t, err, 3)
	wantN(t, "requests", e.srv.Calls("MarkMessagesAsReadByUIDs"), 2)
	wantN(t, "unread after the partial mark", e.unread(ctBob, "INBOX"), 1)
}

func testMarkUnread(t *testing.T, env envFunc) {
	e := env(t)
	var uids []int64
	for i := range 3 {
		uids = append(uids, e.deliver(ctBob, "INBOX", ctRaw(ctAlice, ctBob, fmt.Sprint("m", i), "x")))
	}
	e.must(e.c.MarkMessagesAsReadByUIDs(e.ctx(), ctAuth(ctBob), "INBOX", uids), "mark read")
	wantN(t, "unread", e.unread(ctBob, "INBOX"), 0)
	e.must(e.c.MarkMessagesAsUnreadByUIDs(e.ctx(), ctAuth(ctBob), "INBOX", uids[1:]), "mark unread")
	ms, err := e.c.GetUnreadMessages(e.ctx(), ctAuth(ctBob), "INBOX")
	e.must(err, "GetUnreadMessages")
	wantInts(t, "unread", msgUIDs(ms), uids[1:])

	err = e.c.MarkMessagesAsUnreadByUIDs(e.ctx(), ctAuth(ctBob), "INBOX", []int64{uids[0], 999})
	wantAPICode(t, err, 3)
	wantN(t, "unread after a refused mark", e.unread(ctBob, "INBOX"), 2)
	err = e.c.MarkMessagesAsUnreadByUIDs(e.ctx(), ctAuth(ctBob), "INBOX.Nope", uids)
	wantAPICode(t, err, 3)
	wantAuthFailure(t, e.c.MarkMessagesAsUnreadByUIDs(e.ctx(), ctBadAuth(ctBob), "INBOX", uids))
	wantN(t, "unread after failures", e.unread(ctBob, "INBOX"), 2)
}

// Raw messages as SaveRawMessages stores them: one with CRLF, one with
// bare LF and 8-bit UTF-8, both must come back byte for byte.
var (
	savedCRLF = []byte("From: Carol <carol@direct.example>\r\nTo: bob@direct.example\r\nSubject: saved draft\r\n" +
		"Date: Tue, 11 Mar 2025 08:30:00 -0500\r\nMessage-ID: <draft-1@direct.example>\r\n\r\nDraft text.\r\n")
	savedLF = []byte("From: dave@direct.example\nTo: bob@direct.example\nSubject: =?utf-8?q?Befund_f=C3=BCr_M=C3=BCller?=\n" +
		"Content-Type: text/plain; charset=utf-8\nContent-Transfer-Encoding: 8bit\n\nGrüße aus der Klinik\n")
)

func testGetRawMessages(t *testing.T, env envFunc) {
	e := env(t)
	e.must(e.c.SaveRawMessages(e.ctx(), ctAuth(ctBob), "INBOX", []directapi.RawMessage{
		directapi.NewRawMessage(savedCRLF), directapi.NewRawMessage(savedLF)}), "SaveRawMessages")
	uids := e.uids(ctBob, "INBOX")
	rs, err := e.c.GetRawMessagesByUIDs(e.ctx(), ctAuth(ctBob), "INBOX", []int64{uids[1], uids[0], 999})
	e.must(err, "GetRawMessagesByUIDs")
	if len(rs) != 2 {
		t.Fatalf("%d raw messages, want 2 (unknown UIDs left out)", len(rs))
	}
	want := map[int64][]byte{uids[0]: savedCRLF, uids[1]: savedLF}
	for _, r := range rs {
		b, err := r.Bytes()
		e.must(err, "Bytes")
		if !bytes.Equal(b, want[r.UID]) {
			t.Errorf("uid %d: stored bytes differ:\n got %q\nwant %q", r.UID, b, want[r.UID])
		}
		if r.Folder != "INBOX" {
			t.Errorf("uid %d: folder %q", r.UID, r.Folder)
		}
	}
	for _, r := range rs {
		if r.UID == uids[0] && r.MsgID != "<draft-1@direct.example>" {
			t.Errorf("msgID %q", r.MsgID)
		}
	}
	// Batched: three UIDs in batches of two are two requests.
	e.srv.ResetCalls()
	c2 := e.newClient(restclient.Options{BatchSize: 2, Clock: e.clock})
	rs, err = c2.GetRawMessagesByUIDs(e.ctx(), ctAuth(ctBob), "INBOX", []int64{uids[0], uids[1], 999})
	e.must(err, "batched")
	wantN(t, "batched results", len(rs), 2)
	wantN(t, "batched requests", e.srv.Calls("GetRawMessagesByUIDs"), 2)

	_, err = e.c.GetRawMessagesByUIDs(e.ctx(), ctAuth(ctBob), "INBOX.Nope", uids)
	wantAPICode(t, err, 3)
	_, err = e.c.GetRawMessagesByUIDs(e.ctx(), ctBadAuth(ctBob), "INBOX", uids)
	wantAuthFailure(t, err)
}

func testSaveRawMessages(t *testing.T, env envFunc) {
	e := env(t)
	old := e.deliver(ctBob, "INBOX", ctRaw(ctAlice, ctBob, "old", "x"))
	e.must(e.c.MarkMessagesAsReadByUIDs(e.ctx(), ctAuth(ctBob), "INBOX", []int64{old}), "mark")
	e.clock.Advance(time.Hour)
	e.must(e.c.SaveRawMessages(e.ctx(), ctAuth(ctBob), "INBOX", []directapi.RawMessage{
		directapi.NewRawMessage(savedCRLF), directapi.NewRawMessage(savedLF)}), "SaveRawMessages")
	uids := e.uids(ctBob, "INBOX")
	if len(uids) != 3 || uids[0] != old || uids[1] <= old || uids[2] <= uids[1] {
		t.Fatalf("uids %v: want %d then two new ascending UIDs", uids, old)
	}
	if !bytes.Equal(e.raw(ctBob, "INBOX", uids[1]), savedCRLF) || !bytes.Equal(e.raw(ctBob, "INBOX", uids[2]), savedLF) {
		t.Error("saved messages are not stored byte for byte, in order")
	}
	ms, err := e.c.GetUnreadMessages(e.ctx(), ctAuth(ctBob), "INBOX")
	e.must(err, "GetUnreadMessages")
	wantInts(t, "saved messages are unread", msgUIDs(ms), uids[1:])
	if ms[0].Subject != "saved draft" || ms[0].Sender != ctCarol || ms[1].Subject != "Befund für Müller" || ms[1].Body != "Grüße aus der Klinik\n" {
		t.Errorf("saved messages read back as %q/%q, %q/%q", ms[0].Subject, ms[0].Sender, ms[1].Subject, ms[1].Body)
	}
	if !ms[0].ReceivedDate.Equal(ctEpoch.Add(time.Hour)) {
		t.Errorf("receivedDate %v, want the time of saving", ms[0].ReceivedDate)
	}
	// Into another folder, e.g. drafts.
	e.must(e.c.SaveRawMessages(e.ctx(), ctAuth(ctBob), "INBOX.Drafts", []directapi.RawMessage{directapi.NewRawMessage(savedCRLF)}), "save to Drafts")
	wantN(t, "Drafts", e.count(ctBob, "INBOX.Drafts"), 1)

	// One bad message fails the whole request: nothing saved.
	err = e.c.SaveRawMessages(e.ctx(), ctAuth(ctBob), "INBOX", []directapi.RawMessage{
		directapi.NewRawMessage(savedCRLF), {Data: "%%% not base64 %%%"}})
	wantAPICode(t, err, 3)
	err = e.c.SaveRawMessages(e.ctx(), ctAuth(ctBob), "INBOX", []directapi.RawMessage{{Data: ""}})
	wantAPICode(t, err, 3)
	err = e.c.SaveRawMessages(e.ctx(), ctAuth(ctBob), "INBOX.Nope", []directapi.RawMessage{directapi.NewRawMessage(savedCRLF)})
	wantAPICode(t, err, 3)
	wantAuthFailure(t, e.c.SaveRawMessages(e.ctx(), ctBadAuth(ctBob), "INBOX", []directapi.RawMessage{directapi.NewRawMessage(savedCRLF)}))
	wantInts(t, "INBOX after failures", e.uids(ctBob, "INBOX"), uids)
}

func testSendWithTuser(t *testing.T, env envFunc) {
	e := env(t)
	msg := directapi.Message{Sender: ctAlice, Subject: "on behalf", Body: "sent by carol for alice",
		Recipients: []directapi.Recipient{{Email: ctBob, Type: directapi.TO}}}
	id, err := e.c.SendWithTuser(e.ctx(), ctTuser(ctReseller, ctAlice), msg)
	e.must(err, "SendWithTuser")
	ms := e.messages(ctBob, "INBOX")
	if len(ms) != 1 || ms[0].Sender != ctAlice || ms[0].Subject != "on behalf" || ms[0].MsgID != "<"+id+">" {
		t.Fatalf("bob INBOX: %+v", ms)
	}
	wantN(t, "alice (directAddr) INBOX.Sent", e.count(ctAlice, "INBOX.Sent"), 1)
	wantN(t, "alice unread INBOX.Sent", e.unread(ctAlice, "INBOX.Sent"), 1)
	wantN(t, "carol (T-user) INBOX.Sent", e.count(ctCarol, "INBOX.Sent"), 0)
	logs, err := e.c.GetMessageStatus(e.ctx(), ctAuth(ctAlice), id)
	e.must(err, "status")
	if len(logs) != 1 || logs[0].From != ctAlice || logs[0].Status != directapi.StatusDelivered {
		t.Errorf("status %+v", logs)
	}
	// The registration account may act as T-user too.
	reseller := directapi.AuthenticationWithTuser{Username: ctReseller, Password: directapi.Secret(ctPasswords[ctReseller]), DirectAddr: ctAlice}
	_, err = e.c.SendWithTuser(e.ctx(), reseller, msg)
	e.must(err, "SendWithTuser as reseller")
	wantN(t, "alice INBOX.Sent", e.count(ctAlice, "INBOX.Sent"), 2)

	unknown := ctTuser(ctReseller, "nobody@"+ctDomain)
	m := msg
	m.Sender = "nobody@" + ctDomain
	_, err = e.c.SendWithTuser(e.ctx(), unknown, m)
	wantAddressError(t, err)
	noAddr := ctTuser(ctReseller, "")
	_, err = e.c.SendWithTuser(e.ctx(), noAddr, msg)
	wantAddressError(t, err)
	bad := ctTuser(ctReseller, ctAlice)
	bad.Password = "wrong"
	_, err = e.c.SendWithTuser(e.ctx(), bad, msg)
	wantAuthFailure(t, err)
	forged := msg
	forged.Sender = ctCarol // must be directAddr
	_, err = e.c.SendWithTuser(e.ctx(), ctTuser(ctReseller, ctAlice), forged)
	wantAddressError(t, err)
	wantN(t, "bob INBOX after failures", e.count(ctBob, "INBOX"), 2)
	wantN(t, "alice INBOX.Sent after failures", e.count(ctAlice, "INBOX.Sent"), 2)
}

func testSendWithHeaderWithTuser(t *testing.T, env envFunc) {
	e := env(t)
	msg := directapi.MessageWithHeader{
		Message: directapi.Message{Sender: ctAlice, Subject: "on behalf with headers", Body: "b",
			Recipients: []directapi.Recipient{{Email: ctBob, Type: directapi.TO}}},
		Headers: []directapi.MessageHeader{{Name: "X-Foo", Value: "tuser"}, {Name: "In-Reply-To", Value: "<q-1@other.example>"}},
	}
	id, err := e.c.SendWithHeaderWithTuser(e.ctx(), ctTuser(ctReseller, ctAlice), msg)
	e.must(err, "SendWithHeaderWithTuser")
	uids := e.uids(ctBob, "INBOX")
	if len(uids) != 1 {
		t.Fatalf("bob INBOX %v", uids)
	}
	hdr := headerSection(e.raw(ctBob, "INBOX", uids[0]))
	for _, want := range []string{"X-Foo: tuser\n", "In-Reply-To: <q-1@other.example>\n", "Message-ID: <" + id + ">\n", "From: " + ctAlice} {
		if !strings.Contains(hdr, want) {
			t.Errorf("header lacks %q:\n%s", want, hdr)
		}
	}
	wantN(t, "alice INBOX.Sent", e.count(ctAlice, "INBOX.Sent"), 1)
	wantN(t, "dave INBOX.Sent", e.count(ctDave, "INBOX.Sent"), 0)

	m := msg
	m.Sender = "ghost@" + ctDomain
	_, err = e.c.SendWithHeaderWithTuser(e.ctx(), ctTuser(ctReseller, "ghost@"+ctDomain), m)
	wantAddressError(t, err)
	bad := ctTuser(ctReseller, ctAlice)
	bad.Password = "wrong"
	_, err = e.c.SendWithHeaderWithTuser(e.ctx(), bad, msg)
	wantAuthFailure(t, err)
	evil := msg
	evil.Headers = []directapi.MessageHeader{{Name: "X-Foo", Value: "a\nBcc: eve@other.example"}}
	_, err = e.c.SendWithHeaderWithTuser(e.ctx(), ctTuser(ctReseller, ctAlice), evil)
	wantAPICode(t, err, 3)
	wantN(t, "bob INBOX after failures", e.count(ctBob, "INBOX"), 1)
}

func testGetMessageStatusWithTuser(t *testing.T, env envFunc) {
	e := env(t)
	id := e.send(ctAlice, directapi.Message{Sender: ctAlice, Subject: "s", Body: "b", Recipients: []directapi.Recipient{
		{Email: ctBob, Type: directapi.TO}, {Email: "far@other.example", Type: directapi.TO}}})
	logs, err := e.c.GetMessageStatusWithTuser(e.ctx(), ctTuser(ctReseller, ctAlice), id)
	e.must(err, "GetMessageStatusWithTuser")
	by := byRecipient(t, logs)
	if len(by) != 2 || by[ctBob].Status != directapi.StatusDelivered || by["far@other.example"].Status != directapi.StatusWaiting || by[ctBob].MessageID != id {
		t.Errorf("records %+v", logs)
	}
	e.clock.Advance(time.Hour)
	logs, err = e.c.GetMessageStatusWithTuser(e.ctx(), ctTuser(ctReseller, ctAlice), id)
	e.must(err, "GetMessageStatusWithTuser later")
	if by := byRecipient(t, logs); by["far@other.example"].Status != directapi.StatusNoMDNReceived {
		t.Errorf("after an hour: %+v", logs)
	}
	// Acting for someone else: alice's message is not theirs.
	logs, err = e.c.GetMessageStatusWithTuser(e.ctx(), ctTuser(ctReseller, ctBob), id)
	e.must(err, "GetMessageStatusWithTuser for bob")
	wantN(t, "records seen acting for bob", len(logs), 0)

	_, err = e.c.GetMessageStatusWithTuser(e.ctx(), ctTuser(ctReseller, "nobody@"+ctDomain), id)
	wantAddressError(t, err)
	bad := ctTuser(ctReseller, ctAlice)
	bad.Password = "wrong"
	_, err = e.c.GetMessageStatusWithTuser(e.ctx(), bad, id)
	wantAuthFailure(t, err)
}

// testUIDsNeverReused: UIDs are never handed out twice in a folder name,
// whatever happened to the messages or the folder.
func testUIDsNeverReused(t *testing.T, env envFunc) {
	e := env(t)
	seen := map[int64]bool{}
	take := func(uid int64, how string) {
		t.Helper()
		if seen[uid] {
			t.Fatalf("uid %d handed out again (%s)", uid, how)
		}
		seen[uid] = true
	}
	e.createFolder(ctBob, "INBOX.Work")
	u1 := e.deliver(ctBob, "INBOX.Work", ctRaw(ctAlice, ctBob, "1", "x"))
	u2 := e.deliver(ctBob, "INBOX.Work", ctRaw(ctAlice, ctBob, "2", "x"))
	take(u1, "first")
	take(u2, "second")
	// The newest deleted forever: the next message must not get its UID.
	e.must(e.c.DeleteMessagesByUIDs(e.ctx(), ctAuth(ctBob), "INBOX.Work", []int64{u2}, true), "delete")
	take(e.deliver(ctBob, "INBOX.Work", ctRaw(ctAlice, ctBob, "3", "x")), "after delete forever")
	// Moved out: same.
	last := e.uids(ctBob, "INBOX.Work")
	e.must(e.c.MoveMessagesByUIDs(e.ctx(), ctAuth(ctBob), "INBOX.Work", "INBOX", last[len(last)-1:]), "move out")
	e.must(e.c.SaveRawMessages(e.ctx(), ctAuth(ctBob), "INBOX.Work", []directapi.RawMessage{directapi.NewRawMessage(savedCRLF)}), "save")
	for _, u := range e.uids(ctBob, "INBOX.Work") {
		if u != u1 {
			take(u, "after move out")
		}
	}
	// Folder deleted and created again.
	e.must(e.c.DeleteFolder(e.ctx(), ctAuth(ctBob), "INBOX.Work"), "DeleteFolder")
	e.createFolder(ctBob, "INBOX.Work")
	take(e.deliver(ctBob, "INBOX.Work", ctRaw(ctAlice, ctBob, "4", "x")), "after DeleteFolder+CreateFolder")
	// Deleted via a parent and re-created by a nested CreateFolder.
	e.createFolder(ctBob, "INBOX.Work.Child")
	c1 := e.deliver(ctBob, "INBOX.Work.Child", ctRaw(ctAlice, ctBob, "c", "x"))
	e.must(e.c.DeleteFolder(e.ctx(), ctAuth(ctBob), "INBOX.Work"), "DeleteFolder parent")
	e.createFolder(ctBob, "INBOX.Work.Child")
	if c2 := e.deliver(ctBob, "INBOX.Work.Child", ctRaw(ctAlice, ctBob, "c2", "x")); c2 <= c1 {
		t.Errorf("re-created child reused uid %d (had %d)", c2, c1)
	}
	take(e.deliver(ctBob, "INBOX.Work", ctRaw(ctAlice, ctBob, "5", "x")), "parent re-created implicitly")
	// The Trash too, after it was deleted and re-created by a delete.
	t1 := e.deliver(ctBob, "INBOX", ctRaw(ctAlice, ctBob, "t1", "x"))
	e.must(e.c.DeleteMessagesByUIDs(e.ctx(), ctAuth(ctBob), "INBOX", []int64{t1}, false), "to Trash")
	trash := e.uids(ctBob, "INBOX.Trash")
	e.must(e.c.DeleteFolder(e.ctx(), ctAuth(ctBob), "INBOX.Trash"), "delete Trash")
	t2 := e.deliver(ctBob, "INBOX", ctRaw(ctAlice, ctBob, "t2", "x"))
	e.must(e.c.DeleteMessagesByUIDs(e.ctx(), ctAuth(ctBob), "INBOX", []int64{t2}, false), "to new Trash")
	if got := e.uids(ctBob, "INBOX.Trash"); len(got) != 1 || got[0] <= trash[0] {
		t.Errorf("re-created Trash uids %v, old Trash had %v", got, trash)
	}
}
