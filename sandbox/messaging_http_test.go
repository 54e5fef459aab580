package sandbox_test

// Raw-HTTP tests of the sandbox's messaging service. Requests are JSON
// written by hand from messaging-rest.md, not restclient types, and answers
// are decoded into map[string]any, so that these tests check the wire
// format itself.

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/directbridge/directbridge/sandbox"
)

const (
	wireMsgPath = "/message-rest/api/message"
	wireRegPath = "/DirectRegistrationRESTful/rest/Patient"

	wireAlice = "alice@direct.example"
	wireBob   = "bob@direct.example"

	wireAliceAuth = `{"username":"alice@direct.example","password":"alice-secret-1"}`
	wireBobAuth   = `{"username":"bob@direct.example","password":"bob-secret-1"}`
	// tuserAsAlice is the registration account tuser acting as T-user for alice.
	wireTuserAsAlice = `{"username":"tuser","password":"tuser-secret-1","directAddr":"alice@direct.example"}`
	// bobAsAlice is a mailbox user trying to act as T-user for another: refused.
	wireBobAsAlice = `{"username":"bob@direct.example","password":"bob-secret-1","directAddr":"alice@direct.example"}`
)

func wireUsers() []sandbox.Account {
	return []sandbox.Account{{Name: wireAlice, Password: "alice-secret-1"}, {Name: wireBob, Password: "bob-secret-1"}}
}

type wireEnv struct {
	t   *testing.T
	srv *sandbox.Server
	ts  *httptest.Server
}

func newWireEnv(t *testing.T, opts sandbox.Options) *wireEnv {
	t.Helper()
	if opts.Dir == "" {
		opts.Dir = t.TempDir()
	}
	if opts.Users == nil {
		opts.Users = wireUsers()
	}
	if opts.Resellers == nil {
		opts.Resellers = []sandbox.Account{{Name: "tuser", Password: "tuser-secret-1"}}
	}
	srv, err := sandbox.Open(opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { srv.Close() })
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	return &wireEnv{t: t, srv: srv, ts: ts}
}

// answer is one HTTP answer.
type wireAnswer struct {
	status int
	header http.Header
	body   []byte
	json   map[string]any
}

// do sends body to url path p (below the server root) and decodes the
// answer, which must be a JSON object with Content-Type application/json.
func (r *wireEnv) do(method, p string, body []byte) wireAnswer {
	r.t.Helper()
	req, err := http.NewRequest(method, r.ts.URL+p, bytes.NewReader(body))
	if err != nil {
		r.t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := r.ts.Client().Do(req)
	if err != nil {
		r.t.Fatalf("%s %s: %v", method, p, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		r.t.Fatal(err)
	}
	a := wireAnswer{status: resp.StatusCode, header: resp.Header, body: data}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		r.t.Fatalf("%s %s: Content-Type %q, want application/json (body %q)", method, p, ct, data)
	}
	if err := json.Unmarshal(data, &a.json); err != nil {
		r.t.Fatalf("%s %s: answer is not a JSON object: %v: %q", method, p, err, data)
	}
	return a
}

// msg calls {msg}+p.
func (r *wireEnv) msg(method, p, body string) wireAnswer {
	r.t.Helper()
	return r.do(method, wireMsgPath+p, []byte(body))
}

// envelope checks the APIResponse keys and returns success and code.
func wireEnvelope(t *testing.T, what string, a wireAnswer) (bool, int) {
	t.Helper()
	for _, k := range []string{"success", "code", "message"} {
		if _, ok := a.json[k]; !ok {
			t.Fatalf("%s: answer lacks %q: %s", what, k, a.body)
		}
	}
	success, ok := a.json["success"].(bool)
	if !ok {
		t.Fatalf("%s: success is %T, want boolean", what, a.json["success"])
	}
	code, ok := a.json["code"].(float64)
	if !ok || code != float64(int(code)) {
		t.Fatalf("%s: code is %v (%T), want an integer", what, a.json["code"], a.json["code"])
	}
	if _, ok := a.json["message"].(string); !ok {
		t.Fatalf("%s: message is %T, want string", what, a.json["message"])
	}
	return success, int(code)
}

// ok calls an operation that must succeed with HTTP 200.
func (r *wireEnv) ok(method, p, body string) map[string]any {
	r.t.Helper()
	a := r.msg(method, p, body)
	success, code := wireEnvelope(r.t, method+" "+p, a)
	if !success || a.status != http.StatusOK {
		r.t.Fatalf("%s %s: HTTP %d success %v code %d: %s", method, p, a.status, success, code, a.body)
	}
	return a.json
}

// fails calls an operation that must fail with the given HTTP status and code.
func (r *wireEnv) fails(method, p, body string, status, code int) map[string]any {
	r.t.Helper()
	a := r.msg(method, p, body)
	success, got := wireEnvelope(r.t, method+" "+p, a)
	if success || got != code || a.status != status {
		r.t.Fatalf("%s %s: HTTP %d success %v code %d, want HTTP %d success false code %d: %s", method, p, a.status, success, got, status, code, a.body)
	}
	return a.json
}

func wireList(t *testing.T, m map[string]any, key string) []any {
	t.Helper()
	v, ok := m[key].([]any)
	if !ok {
		t.Fatalf("answer field %q is %T, want an array: %v", key, m[key], m)
	}
	return v
}

func wireNum(t *testing.T, m map[string]any, key string) int64 {
	t.Helper()
	v, ok := m[key].(float64)
	if !ok {
		t.Fatalf("answer field %q is %T, want a number: %v", key, m[key], m)
	}
	return int64(v)
}

func wireStr(t *testing.T, m map[string]any, key string) string {
	t.Helper()
	v, ok := m[key].(string)
	if !ok {
		t.Fatalf("answer field %q is %T, want a string: %v", key, m[key], m)
	}
	return v
}

func wireUIDList(t *testing.T, m map[string]any) []int64 {
	t.Helper()
	var out []int64
	for _, v := range wireList(t, m, "uids") {
		out = append(out, int64(v.(float64)))
	}
	return out
}

func (r *wireEnv) uids(auth, folder string) []int64 {
	r.t.Helper()
	return wireUIDList(r.t, r.ok("POST", "/GetUIDs/"+folder, auth))
}

func (r *wireEnv) count(auth, folder string) int64 {
	r.t.Helper()
	return wireNum(r.t, r.ok("POST", "/GetMessageCount/"+folder, auth), "count")
}

func (r *wireEnv) unread(auth, folder string) int64 {
	r.t.Helper()
	return wireNum(r.t, r.ok("POST", "/GetUnreadMessageCount/"+folder, auth), "count")
}

func (r *wireEnv) folders(auth, root, only string) []string {
	r.t.Helper()
	var out []string
	for _, v := range wireList(r.t, r.ok("POST", "/GetFolders/"+root+"/"+only, auth), "folders") {
		out = append(out, v.(string))
	}
	return out
}

// sendBody is a SendRequest from alice to bob, written from the document.
func wireSendBody(subject string) string {
	return `{"authentication":` + wireAliceAuth + `,"message":{"sender":"alice@direct.example","subject":"` + subject +
		`","body":"Line one\nLine two","htmlBody":false,"recipients":[{"email":"bob@direct.example","type":"TO"}],` +
		`"attachmentList":[{"content":"SGVsbG8gd29ybGQ=","contentType":"text/plain","filename":"hello.txt"}]}}`
}

func wireUIDsBody(auth string, uids ...int64) string {
	js, _ := json.Marshal(uids)
	return `{"auth":` + auth + `,"uids":` + string(js) + `}`
}

var wireRawSample = base64.StdEncoding.EncodeToString([]byte("From: carol@other.example\r\nTo: bob@direct.example\r\nSubject: raw\r\n\r\nraw body\r\n"))

// TestHTTPEveryOperationEnvelope calls all 34 operations with valid
// requests and then with a wrong password: every answer is a JSON object
// with success, code and message, and Content-Type application/json.
func TestHTTPEveryOperationEnvelope(t *testing.T) {
	t.Parallel()
	r := newWireEnv(t, sandbox.Options{})

	id1 := wireStr(t, r.ok("PUT", "/Send", wireSendBody("Hello Bob")), "smtpId")
	id2 := wireStr(t, r.ok("PUT", "/SendWithHeader", `{"authentication":`+wireAliceAuth+`,"message":{"sender":"alice@direct.example",`+
		`"subject":"With header","body":"b","htmlBody":true,"recipients":[{"email":"bob@direct.example","type":"TO"}],`+
		`"headers":[{"name":"X-Foo","value":"bar"}]}}`), "smtpId")
	if id1 == "" || id2 == "" || id1 == id2 {
		t.Fatalf("smtpIds %q %q", id1, id2)
	}
	in := r.uids(wireBobAuth, "INBOX")
	if len(in) != 2 {
		t.Fatalf("bob INBOX %v", in)
	}
	id3 := wireStr(t, r.ok("PUT", "/Forward/INBOX", `{"auth":`+wireBobAuth+`,"uids":[`+fmt.Sprint(in[0])+`],"recipients":[{"email":"alice@direct.example","type":"TO"}]}`), "smtpId")

	st := r.ok("POST", "/GetMessageStatus/"+id1, wireAliceAuth)
	logs := wireList(t, st, "messageLogs")
	if len(logs) != 1 || logs[0].(map[string]any)["status"] != "Delivered" || st["hasCvData"] != false {
		t.Errorf("GetMessageStatus: %v", st)
	}
	l := logs[0].(map[string]any)
	for _, k := range []string{"from", "to", "messageId", "messageSize", "status", "ts"} {
		if _, ok := l[k]; !ok {
			t.Errorf("DirectMessageLog lacks %q: %v", k, l)
		}
	}
	st = r.ok("POST", "/GetMessageStatus/", `{"auth":`+wireAliceAuth+`,"smtpIds":["`+id1+`","`+id2+`"]}`)
	if n := len(wireList(t, st, "messageLogs")); n != 2 {
		t.Errorf("GetMessageStatus/ (several): %d records", n)
	}
	if n := wireNum(t, r.ok("POST", "/GetMessageCount/INBOX", wireBobAuth), "count"); n != 2 {
		t.Errorf("GetMessageCount %d", n)
	}
	if n := wireNum(t, r.ok("POST", "/GetUnreadMessageCount/INBOX", wireBobAuth), "count"); n != 2 {
		t.Errorf("GetUnreadMessageCount %d", n)
	}
	if n := wireNum(t, r.ok("POST", "/GetDeletedMessageCount/INBOX", wireBobAuth), "count"); n != 0 {
		t.Errorf("GetDeletedMessageCount %d", n)
	}
	ms := wireList(t, r.ok("POST", "/GetMessagesByUIDs/INBOX", wireUIDsBody(wireBobAuth, in[0])), "messages")
	if len(ms) != 1 {
		t.Fatalf("GetMessagesByUIDs: %d", len(ms))
	}
	m := ms[0].(map[string]any)
	for _, k := range []string{"uid", "msgnum", "folder", "size", "receivedDate", "sentDate", "sender", "subject", "body", "htmlBody", "recipients", "attachmentList", "headers", "msgID", "expunged"} {
		if _, ok := m[k]; !ok {
			t.Errorf("MessageDetail lacks %q", k)
		}
	}
	if m["subject"] != "Hello Bob" || m["body"] != "Line one\nLine two" || m["sender"] != wireAlice {
		t.Errorf("message %v", m)
	}
	att := m["attachmentList"].([]any)
	if len(att) != 1 || att[0].(map[string]any)["content"] != "SGVsbG8gd29ybGQ=" || att[0].(map[string]any)["filename"] != "hello.txt" {
		t.Errorf("attachments %v", att)
	}
	for _, c := range []struct{ p, want string }{
		{"/GetUnreadMessages/INBOX", "2"},
		{"/GetMessagesByReceivedDate/INBOX/0/4102444800000", "2"},
		{"/GetMessagesByReceivedDateUTC/INBOX/20000101000000/20991231235959", "2"},
		{"/GetMessagesBySender/INBOX/alice%40direct.example", "2"},
		{"/GetMessagesBySubject/INBOX/Hello%20Bob", "1"},
		{"/GetMessages/INBOX", "2"},
		{"/GetMessageMetaData/INBOX", "2"},
		{"/SearchMessagesMetadataByReceivedDate/INBOX/0/4102444800000", "2"},
		{"/SearchMessagesMetadataByReceivedDateUTC/INBOX/20000101000000/20991231235959", "2"},
	} {
		if n := len(wireList(t, r.ok("POST", c.p, wireBobAuth), "messages")); fmt.Sprint(n) != c.want {
			t.Errorf("%s: %d messages, want %s", c.p, n, c.want)
		}
	}
	for _, v := range wireList(t, r.ok("POST", "/GetMessageMetaData/INBOX", wireBobAuth), "messages") {
		if b, _ := v.(map[string]any)["body"].(string); b != "" {
			t.Errorf("metadata with body %q", b)
		}
	}
	if fs := r.folders(wireBobAuth, "INBOX", "false"); len(fs) != 5 {
		t.Errorf("GetFolders %v", fs)
	}
	sub := wireList(t, r.ok("POST", "/SetFoldersSubscribed/", `{"auth":`+wireBobAuth+`,"folders":["INBOX.Spam"],"subscribed":false}`), "folders")
	if slices.Contains(sub, any("INBOX.Spam")) {
		t.Errorf("SetFoldersSubscribed answer still lists INBOX.Spam: %v", sub)
	}
	r.ok("POST", "/CreateFolder/INBOX.Work", wireBobAuth)
	r.ok("POST", "/MoveFolder/INBOX.Work/INBOX.Archive", wireBobAuth)
	r.ok("POST", "/CopyMessagesByUIDs/INBOX/INBOX.Archive", wireUIDsBody(wireBobAuth, in...))
	arch := r.uids(wireBobAuth, "INBOX.Archive")
	r.ok("POST", "/MoveMessagesByUIDs/INBOX.Archive/INBOX.Drafts", wireUIDsBody(wireBobAuth, arch[0]))
	r.ok("POST", "/DeleteMessagesByUIDs/INBOX.Archive/false", wireUIDsBody(wireBobAuth, arch[1]))
	if n := r.count(wireBobAuth, "INBOX.Trash"); n != 1 {
		t.Errorf("Trash %d", n)
	}
	r.ok("POST", "/MarkMessagesAsReadByUIDs/INBOX", wireUIDsBody(wireBobAuth, in[0]))
	if n := r.unread(wireBobAuth, "INBOX"); n != 1 {
		t.Errorf("unread after marking read: %d", n)
	}
	r.ok("POST", "/MarkMessagesAsUnreadByUIDs/INBOX", wireUIDsBody(wireBobAuth, in[0]))
	if n := r.unread(wireBobAuth, "INBOX"); n != 2 {
		t.Errorf("unread after marking unread: %d", n)
	}
	raws := wireList(t, r.ok("POST", "/GetRawMessagesByUIDs/INBOX", wireUIDsBody(wireBobAuth, in...)), "messages")
	if len(raws) != 2 {
		t.Fatalf("GetRawMessagesByUIDs: %d", len(raws))
	}
	for _, v := range raws {
		rm := v.(map[string]any)
		data, err := base64.StdEncoding.DecodeString(rm["data"].(string))
		if err != nil || !bytes.Contains(data, []byte("From: ")) || rm["folder"] != "INBOX" {
			t.Errorf("raw message %v: %v", rm, err)
		}
	}
	r.ok("POST", "/SaveRawMessages/INBOX", `{"auth":`+wireBobAuth+`,"messages":[{"data":"`+wireRawSample+`"}]}`)
	if n := r.count(wireBobAuth, "INBOX"); n != 3 {
		t.Errorf("INBOX after SaveRawMessages: %d", n)
	}
	r.ok("POST", "/DeleteFolder/INBOX.Archive", wireBobAuth)
	id4 := wireStr(t, r.ok("PUT", "/SendWithTuser", `{"authentication":`+wireTuserAsAlice+`,"message":{"sender":"alice@direct.example",`+
		`"subject":"tuser","htmlBody":false,"recipients":[{"email":"bob@direct.example","type":"TO"}]}}`), "smtpId")
	r.ok("PUT", "/SendWithHeaderWithTuser", `{"authentication":`+wireTuserAsAlice+`,"message":{"sender":"alice@direct.example",`+
		`"subject":"tuser hdr","htmlBody":false,"recipients":[{"email":"bob@direct.example","type":"TO"}],"headers":[{"name":"X-Foo","value":"1"}]}}`)
	st = r.ok("POST", "/GetMessageStatusWithTuser/"+id4, wireTuserAsAlice)
	if n := len(wireList(t, st, "messageLogs")); n != 1 {
		t.Errorf("GetMessageStatusWithTuser: %d records", n)
	}
	_ = id3

	counts := r.srv.CallCounts()
	if len(counts) != 34 {
		var ops []string
		for op := range counts {
			ops = append(ops, op)
		}
		sort.Strings(ops)
		t.Errorf("%d operations called, want 34: %v", len(counts), ops)
	}

	// Every operation, wrong password: HTTP 200, success false, code 1.
	bad := func(s string) string {
		return strings.NewReplacer("alice-secret-1", "nope", "bob-secret-1", "nope", "tuser-secret-1", "nope").Replace(s)
	}
	for _, c := range []struct{ method, p, body string }{
		{"PUT", "/Send", wireSendBody("x")},
		{"PUT", "/SendWithHeader", `{"authentication":` + wireAliceAuth + `,"message":{"sender":"alice@direct.example","htmlBody":false,"recipients":[{"email":"bob@direct.example","type":"TO"}],"headers":[]}}`},
		{"PUT", "/Forward/INBOX", wireUIDsBody(wireBobAuth, in[0])},
		{"POST", "/GetMessageStatus/" + id1, wireAliceAuth},
		{"POST", "/GetMessageStatus/", `{"auth":` + wireAliceAuth + `,"smtpIds":["` + id1 + `"]}`},
		{"POST", "/GetMessageCount/INBOX", wireBobAuth},
		{"POST", "/GetUnreadMessageCount/INBOX", wireBobAuth},
		{"POST", "/GetDeletedMessageCount/INBOX", wireBobAuth},
		{"POST", "/GetMessagesByUIDs/INBOX", wireUIDsBody(wireBobAuth, in[0])},
		{"POST", "/GetUnreadMessages/INBOX", wireBobAuth},
		{"POST", "/GetMessagesByReceivedDate/INBOX/0/1", wireBobAuth},
		{"POST", "/GetMessagesByReceivedDateUTC/INBOX/20000101000000/20991231235959", wireBobAuth},
		{"POST", "/GetMessagesBySender/INBOX/alice", wireBobAuth},
		{"POST", "/GetMessagesBySubject/INBOX/Hello", wireBobAuth},
		{"POST", "/GetMessages/INBOX", wireBobAuth},
		{"POST", "/GetMessageMetaData/INBOX", wireBobAuth},
		{"POST", "/SearchMessagesMetadataByReceivedDate/INBOX/0/1", wireBobAuth},
		{"POST", "/SearchMessagesMetadataByReceivedDateUTC/INBOX/20000101000000/20991231235959", wireBobAuth},
		{"POST", "/GetUIDs/INBOX", wireBobAuth},
		{"POST", "/GetFolders/INBOX/false", wireBobAuth},
		{"POST", "/SetFoldersSubscribed/", `{"auth":` + wireBobAuth + `,"folders":["INBOX.Spam"],"subscribed":true}`},
		{"POST", "/CreateFolder/INBOX.Z", wireBobAuth},
		{"POST", "/MoveFolder/INBOX.Drafts2/INBOX.Z", wireBobAuth},
		{"POST", "/DeleteFolder/INBOX.Z", wireBobAuth},
		{"POST", "/CopyMessagesByUIDs/INBOX/INBOX.Drafts", wireUIDsBody(wireBobAuth, in[0])},
		{"POST", "/MoveMessagesByUIDs/INBOX/INBOX.Drafts", wireUIDsBody(wireBobAuth, in[0])},
		{"POST", "/DeleteMessagesByUIDs/INBOX/true", wireUIDsBody(wireBobAuth, in[0])},
		{"POST", "/MarkMessagesAsReadByUIDs/INBOX", wireUIDsBody(wireBobAuth, in[0])},
		{"POST", "/MarkMessagesAsUnreadByUIDs/INBOX", wireUIDsBody(wireBobAuth, in[0])},
		{"POST", "/GetRawMessagesByUIDs/INBOX", wireUIDsBody(wireBobAuth, in[0])},
		{"POST", "/SaveRawMessages/INBOX", `{"auth":` + wireBobAuth + `,"messages":[{"data":"` + wireRawSample + `"}]}`},
		{"PUT", "/SendWithTuser", `{"authentication":` + wireTuserAsAlice + `,"message":{"sender":"alice@direct.example","htmlBody":false,"recipients":[{"email":"bob@direct.example","type":"TO"}]}}`},
		{"PUT", "/SendWithHeaderWithTuser", `{"authentication":` + wireTuserAsAlice + `,"message":{"sender":"alice@direct.example","htmlBody":false,"recipients":[{"email":"bob@direct.example","type":"TO"}]}}`},
		{"POST", "/GetMessageStatusWithTuser/" + id1, wireTuserAsAlice},
	} {
		r.fails(c.method, c.p, bad(c.body), http.StatusOK, 1)
	}
	// The failed requests changed nothing.
	if n := r.count(wireBobAuth, "INBOX"); n != 5 {
		t.Errorf("bob INBOX after the failed requests: %d", n)
	}
	if n := r.unread(wireBobAuth, "INBOX"); n != 5 {
		t.Errorf("bob unread after the failed requests: %d", n)
	}
}

func TestHTTPBadBodies(t *testing.T) {
	t.Parallel()
	r := newWireEnv(t, sandbox.Options{MaxBodyBytes: 1024})

	// Malformed JSON: 400, the envelope, code 3.
	for _, body := range []string{`{"username": "bob@`, `not json`, `["bob@direct.example"]`, `{"username": 7}`} {
		r.fails("POST", "/GetUIDs/INBOX", body, http.StatusBadRequest, 3)
	}
	r.fails("PUT", "/Send", `{"authentication":`+wireAliceAuth+`,"message":`, http.StatusBadRequest, 3)
	// No body at all.
	r.fails("POST", "/GetUIDs/INBOX", ``, http.StatusBadRequest, 3)

	// Not UTF-8.
	a := r.do("POST", wireMsgPath+"/GetUIDs/INBOX", []byte("{\"username\":\"bob@direct.example\",\"password\":\"\xff\xfe\"}"))
	if success, code := wireEnvelope(t, "non-UTF-8", a); success || code != 3 || a.status != http.StatusBadRequest {
		t.Errorf("non-UTF-8 body: HTTP %d code %d", a.status, code)
	}
	a = r.do("PUT", wireMsgPath+"/Send", []byte(strings.Replace(wireSendBody("x"), "Line one", "Line \xe9one", 1)))
	if success, code := wireEnvelope(t, "non-UTF-8 send", a); success || code != 3 || a.status != http.StatusBadRequest {
		t.Errorf("non-UTF-8 Send: HTTP %d code %d", a.status, code)
	}

	// Over the limit: 413.
	big := wireSendBody(strings.Repeat("s", 1100))
	r.fails("PUT", "/Send", big, http.StatusRequestEntityTooLarge, 3)
	// Just under the limit: fine.
	small := wireSendBody(strings.Repeat("s", 1024-len(wireSendBody(""))))
	if len(small) != 1024 {
		t.Fatalf("small body is %d bytes", len(small))
	}
	r.ok("PUT", "/Send", small)
	if n := r.count(wireBobAuth, "INBOX"); n != 1 {
		t.Errorf("bob INBOX %d: the refused bodies must not deliver", n)
	}
}

func TestHTTPRouting(t *testing.T) {
	t.Parallel()
	r := newWireEnv(t, sandbox.Options{})

	// Unknown paths: 404 with a JSON envelope.
	r.fails("POST", "/NoSuchOperation", wireBobAuth, http.StatusNotFound, 3)
	r.fails("POST", "/GetUIDs", wireBobAuth, http.StatusNotFound, 3) // folder missing
	r.fails("POST", "/GetUIDs/INBOX/extra", wireBobAuth, http.StatusNotFound, 3)
	a := r.do("GET", "/nowhere", nil)
	if success, _ := wireEnvelope(t, "GET /nowhere", a); success || a.status != http.StatusNotFound {
		t.Errorf("GET /nowhere: HTTP %d", a.status)
	}
	a = r.do("POST", wireRegPath+"/NoSuchOperation", []byte(`{}`))
	if a.status != http.StatusNotFound || a.json["success"] != false || a.json["code"] == nil {
		t.Errorf("registration 404: HTTP %d %s", a.status, a.body)
	}

	// Wrong method: 405 with a JSON envelope and Allow.
	a = r.do("GET", wireMsgPath+"/Send", nil)
	if success, _ := wireEnvelope(t, "GET /Send", a); success || a.status != http.StatusMethodNotAllowed || a.header.Get("Allow") != "PUT" {
		t.Errorf("GET /Send: HTTP %d Allow %q", a.status, a.header.Get("Allow"))
	}
	a = r.msg("POST", "/Send", wireSendBody("x"))
	if success, _ := wireEnvelope(t, "POST /Send", a); success || a.status != http.StatusMethodNotAllowed {
		t.Errorf("POST /Send: HTTP %d", a.status)
	}
	a = r.msg("PUT", "/GetUIDs/INBOX", wireBobAuth)
	if success, _ := wireEnvelope(t, "PUT /GetUIDs", a); success || a.status != http.StatusMethodNotAllowed || a.header.Get("Allow") != "POST" {
		t.Errorf("PUT /GetUIDs: HTTP %d Allow %q", a.status, a.header.Get("Allow"))
	}
	if n := r.count(wireBobAuth, "INBOX"); n != 0 {
		t.Errorf("a refused POST /Send delivered: %d", n)
	}

	// Trailing slash forms of operations 5 and 21, and the bare forms.
	id := wireStr(t, r.ok("PUT", "/Send", wireSendBody("s")), "smtpId")
	for _, p := range []string{"/GetMessageStatus/", "/GetMessageStatus"} {
		st := r.ok("POST", p, `{"auth":`+wireAliceAuth+`,"smtpIds":["`+id+`"]}`)
		if n := len(wireList(t, st, "messageLogs")); n != 1 {
			t.Errorf("%s: %d records", p, n)
		}
	}
	// The single-id form also takes the Message-ID with angle brackets.
	if n := len(wireList(t, r.ok("POST", "/GetMessageStatus/%3C"+id+"%3E", wireAliceAuth), "messageLogs")); n != 1 {
		t.Errorf("GetMessageStatus/<id>: %d records", n)
	}
	r.fails("POST", "/GetMessageStatus/", `{"auth":`+wireAliceAuth+`,"smtpIds":[]}`, http.StatusOK, 3)
	for i, p := range []string{"/SetFoldersSubscribed/", "/SetFoldersSubscribed"} {
		sub := i == 1
		r.ok("POST", p, fmt.Sprintf(`{"auth":%s,"folders":["INBOX.Spam"],"subscribed":%v}`, wireBobAuth, sub))
		if got := slices.Contains(r.folders(wireBobAuth, "INBOX", "true"), "INBOX.Spam"); got != sub {
			t.Errorf("%s subscribed=%v: INBOX.Spam subscribed %v", p, sub, got)
		}
	}
}

func TestHTTPMissingFields(t *testing.T) {
	t.Parallel()
	r := newWireEnv(t, sandbox.Options{})
	r.ok("PUT", "/Send", wireSendBody("s"))
	uid := r.uids(wireBobAuth, "INBOX")[0]

	// No credentials: authentication failed.
	r.fails("POST", "/GetUIDs/INBOX", `{}`, http.StatusOK, 1)
	r.fails("POST", "/GetUIDs/INBOX", `{"username":"bob@direct.example"}`, http.StatusOK, 1)
	r.fails("POST", "/MarkMessagesAsReadByUIDs/INBOX", fmt.Sprintf(`{"uids":[%d]}`, uid), http.StatusOK, 1)
	r.fails("POST", "/MarkMessagesAsReadByUIDs/INBOX", fmt.Sprintf(`{"auth":{},"uids":[%d]}`, uid), http.StatusOK, 1)
	r.fails("PUT", "/Send", `{"message":{"sender":"alice@direct.example","htmlBody":false,"recipients":[{"email":"bob@direct.example","type":"TO"}]}}`, http.StatusOK, 1)
	r.fails("PUT", "/SendWithTuser", `{"authentication":`+wireBobAuth+`,"message":{"sender":"alice@direct.example","htmlBody":false,"recipients":[{"email":"bob@direct.example","type":"TO"}]}}`, http.StatusOK, 2) // no directAddr

	// No uids: other error (3) for every UID operation.
	for _, p := range []string{"/MarkMessagesAsReadByUIDs/INBOX", "/MarkMessagesAsUnreadByUIDs/INBOX", "/GetMessagesByUIDs/INBOX",
		"/GetRawMessagesByUIDs/INBOX", "/CopyMessagesByUIDs/INBOX/INBOX.Drafts", "/MoveMessagesByUIDs/INBOX/INBOX.Drafts",
		"/DeleteMessagesByUIDs/INBOX/false", "/Forward/INBOX"} {
		method := "POST"
		if strings.HasPrefix(p, "/Forward") {
			method = "PUT"
		}
		r.fails(method, p, `{"auth":`+wireBobAuth+`}`, http.StatusOK, 3)
		r.fails(method, p, `{"auth":`+wireBobAuth+`,"uids":[]}`, http.StatusOK, 3)
	}
	r.fails("POST", "/SaveRawMessages/INBOX", `{"auth":`+wireBobAuth+`}`, http.StatusOK, 3)
	r.fails("POST", "/SetFoldersSubscribed/", `{"auth":`+wireBobAuth+`,"subscribed":false}`, http.StatusOK, 3)
	// Bad path values.
	r.fails("POST", "/GetFolders/INBOX/maybe", wireBobAuth, http.StatusOK, 3)
	r.fails("POST", "/DeleteMessagesByUIDs/INBOX/sometimes", wireUIDsBody(wireBobAuth, uid), http.StatusOK, 3)
	r.fails("POST", "/GetMessagesByReceivedDate/INBOX/yesterday/1", wireBobAuth, http.StatusOK, 3)
	r.fails("POST", "/GetMessagesByReceivedDateUTC/INBOX/2024-01-01/20250101000000", wireBobAuth, http.StatusOK, 3)
	// Nothing of that changed the mailbox.
	if n := r.unread(wireBobAuth, "INBOX"); n != 1 {
		t.Errorf("unread %d", n)
	}
	if got := r.uids(wireBobAuth, "INBOX"); !slices.Equal(got, []int64{uid}) {
		t.Errorf("INBOX %v", got)
	}
}

func TestHTTPFolderNamesEscaped(t *testing.T) {
	t.Parallel()
	r := newWireEnv(t, sandbox.Options{})
	const name = "INBOX.Lab Results/2024"
	const esc = "INBOX.Lab%20Results%2F2024"
	r.ok("POST", "/CreateFolder/"+esc, wireBobAuth)
	fs := r.folders(wireBobAuth, "INBOX", "false")
	if !slices.Contains(fs, name) || len(fs) != 6 {
		t.Fatalf("folders %q: want %q as one new folder", fs, name)
	}
	r.ok("POST", "/SaveRawMessages/"+esc, `{"auth":`+wireBobAuth+`,"messages":[{"data":"`+wireRawSample+`"}]}`)
	if n := r.count(wireBobAuth, esc); n != 1 {
		t.Errorf("count %d", n)
	}
	ms := wireList(t, r.ok("POST", "/GetMessages/"+esc, wireBobAuth), "messages")
	if len(ms) != 1 || ms[0].(map[string]any)["folder"] != name {
		t.Errorf("messages %v", ms)
	}
	// A subject with "/" and spaces, escaped the same way.
	r.ok("PUT", "/Send", wireSendBody("Lab 2024/03 f\u00fcr M\u00fcller"))
	if n := len(wireList(t, r.ok("POST", "/GetMessagesBySubject/INBOX/2024%2F03%20f%C3%BCr", wireBobAuth), "messages")); n != 1 {
		t.Errorf("subject search with %%2F: %d", n)
	}
	r.ok("POST", "/MoveFolder/"+esc+"/INBOX.Lab%20Results%2F2025", wireBobAuth)
	fs = r.folders(wireBobAuth, "INBOX", "false")
	if !slices.Contains(fs, "INBOX.Lab Results/2025") || slices.Contains(fs, name) {
		t.Errorf("folders after rename %q", fs)
	}
	if n := r.count(wireBobAuth, "INBOX.Lab%20Results%2F2025"); n != 1 {
		t.Errorf("count after rename %d", n)
	}
	r.ok("POST", "/DeleteFolder/INBOX.Lab%20Results%2F2025", wireBobAuth)
	if fs := r.folders(wireBobAuth, "INBOX", "false"); len(fs) != 5 {
		t.Errorf("folders after delete %q", fs)
	}
}

func TestHTTPGetFoldersSubscribedOnly(t *testing.T) {
	t.Parallel()
	r := newWireEnv(t, sandbox.Options{})
	r.ok("POST", "/CreateFolder/INBOX.A.B", wireBobAuth)
	r.ok("POST", "/SetFoldersSubscribed/", `{"auth":`+wireBobAuth+`,"folders":["INBOX.A","INBOX.Spam"],"subscribed":false}`)
	all := r.folders(wireBobAuth, "INBOX", "false")
	subscribed := r.folders(wireBobAuth, "INBOX", "true")
	if !slices.Equal(all, []string{"INBOX.A", "INBOX.A.B", "INBOX.Drafts", "INBOX.Sent", "INBOX.Spam", "INBOX.Templates", "INBOX.Trash"}) {
		t.Errorf("false: %q", all)
	}
	if !slices.Equal(subscribed, []string{"INBOX.A.B", "INBOX.Drafts", "INBOX.Sent", "INBOX.Templates", "INBOX.Trash"}) {
		t.Errorf("true: %q", subscribed)
	}
	if got := r.folders(wireBobAuth, "INBOX.A", "true"); !slices.Equal(got, []string{"INBOX.A.B"}) {
		t.Errorf("INBOX.A true: %q", got)
	}
}

func TestHTTPFailedRequestChangesNothing(t *testing.T) {
	t.Parallel()
	r := newWireEnv(t, sandbox.Options{})
	r.ok("PUT", "/Send", wireSendBody("one"))
	r.ok("PUT", "/Send", wireSendBody("two"))
	in := r.uids(wireBobAuth, "INBOX")
	r.ok("POST", "/CreateFolder/INBOX.Keep", wireBobAuth)
	r.ok("POST", "/MarkMessagesAsReadByUIDs/INBOX", wireUIDsBody(wireBobAuth, in[1]))
	snapshot := func() string {
		return fmt.Sprint(r.uids(wireBobAuth, "INBOX"), r.unread(wireBobAuth, "INBOX"), r.uids(wireBobAuth, "INBOX.Keep"),
			r.uids(wireBobAuth, "INBOX.Trash"), r.uids(wireBobAuth, "INBOX.Sent"), r.uids(wireAliceAuth, "INBOX"), r.folders(wireBobAuth, "INBOX", "true"))
	}
	before := snapshot()
	mixed := wireUIDsBody(wireBobAuth, in[0], 999)
	r.fails("POST", "/CopyMessagesByUIDs/INBOX/INBOX.Keep", mixed, http.StatusOK, 3)
	r.fails("POST", "/MoveMessagesByUIDs/INBOX/INBOX.Keep", mixed, http.StatusOK, 3)
	r.fails("POST", "/DeleteMessagesByUIDs/INBOX/false", mixed, http.StatusOK, 3)
	r.fails("POST", "/DeleteMessagesByUIDs/INBOX/true", mixed, http.StatusOK, 3)
	r.fails("POST", "/MarkMessagesAsReadByUIDs/INBOX", mixed, http.StatusOK, 3)
	r.fails("POST", "/MarkMessagesAsUnreadByUIDs/INBOX", wireUIDsBody(wireBobAuth, in[1], 999), http.StatusOK, 3)
	r.fails("PUT", "/Forward/INBOX", `{"auth":`+wireBobAuth+`,"uids":[`+fmt.Sprint(in[0])+`,999],"recipients":[{"email":"alice@direct.example","type":"TO"}]}`, http.StatusOK, 3)
	r.fails("POST", "/SaveRawMessages/INBOX", `{"auth":`+wireBobAuth+`,"messages":[{"data":"`+wireRawSample+`"},{"data":"***"}]}`, http.StatusOK, 3)
	r.fails("POST", "/SetFoldersSubscribed/", `{"auth":`+wireBobAuth+`,"folders":["INBOX.Spam","INBOX.Nope"],"subscribed":false}`, http.StatusOK, 3)
	r.fails("POST", "/CopyMessagesByUIDs/INBOX/INBOX.Nope", wireUIDsBody(wireBobAuth, in[0]), http.StatusOK, 3)
	r.fails("POST", "/MoveFolder/INBOX.Keep/INBOX.Sent", wireBobAuth, http.StatusOK, 3)
	r.fails("POST", "/DeleteFolder/INBOX.Drafts", wireBobAuth, http.StatusOK, 3)
	r.fails("POST", "/CreateFolder/INBOX.Spam", wireBobAuth, http.StatusOK, 3)
	r.fails("PUT", "/Send", `{"authentication":`+wireAliceAuth+`,"message":{"sender":"alice@direct.example","htmlBody":false,`+
		`"recipients":[{"email":"bob@direct.example","type":"TO"},{"email":"not an address","type":"TO"}]}}`, http.StatusOK, 2)
	r.fails("PUT", "/Send", `{"authentication":`+wireAliceAuth+`,"message":{"sender":"alice@direct.example","htmlBody":false,`+
		`"recipients":[{"email":"bob@direct.example","type":"XX"}]}}`, http.StatusOK, 3)
	if after := snapshot(); after != before {
		t.Errorf("failed requests changed the mailbox:\nbefore %s\nafter  %s", before, after)
	}
}

func TestHTTPForwardRecipientForms(t *testing.T) {
	t.Parallel()
	r := newWireEnv(t, sandbox.Options{})
	r.ok("PUT", "/Send", wireSendBody("to forward"))
	uid := r.uids(wireBobAuth, "INBOX")[0]
	for _, rc := range []string{
		`[{"email":"alice@direct.example","type":"TO"}]`,
		`{"recipient":[{"email":"alice@direct.example","type":"TO"}]}`,
	} {
		r.ok("PUT", "/Forward/INBOX", fmt.Sprintf(`{"auth":%s,"uids":[%d],"recipients":%s}`, wireBobAuth, uid, rc))
	}
	ms := wireList(t, r.ok("POST", "/GetMessages/INBOX", wireAliceAuth), "messages")
	if len(ms) != 2 {
		t.Fatalf("alice got %d forwards, want 2", len(ms))
	}
	for _, v := range ms {
		m := v.(map[string]any)
		if m["subject"] != "Fwd: to forward" || m["sender"] != wireBob {
			t.Errorf("forward %v / %v", m["subject"], m["sender"])
		}
	}
	// Lower-case recipient types are accepted as well.
	r.ok("PUT", "/Forward/INBOX", fmt.Sprintf(`{"auth":%s,"uids":[%d],"recipients":[{"email":"alice@direct.example","type":"cc"}]}`, wireBobAuth, uid))
	if n := r.count(wireAliceAuth, "INBOX"); n != 3 {
		t.Errorf("alice INBOX %d", n)
	}
}

// TestHTTPNonASCIIFolderTree: a folder with a non-ASCII name takes its
// sub-folders along when it is renamed or deleted.
func TestHTTPNonASCIIFolderTree(t *testing.T) {
	r := newWireEnv(t, sandbox.Options{Users: wireUsers()})
	r.ok("POST", "/CreateFolder/"+url.PathEscape("INBOX.Café.Sub"), wireAliceAuth)
	r.ok("POST", "/MoveFolder/"+url.PathEscape("INBOX.Café")+"/"+url.PathEscape("INBOX.Bücher"), wireAliceAuth)
	got := strings.Join(r.folders(wireAliceAuth, "INBOX", "false"), ",")
	if !strings.Contains(got, "INBOX.Bücher.Sub") || strings.Contains(got, "Café") {
		t.Fatalf("after rename: %s", got)
	}
	r.ok("POST", "/DeleteFolder/"+url.PathEscape("INBOX.Bücher"), wireAliceAuth)
	if got := strings.Join(r.folders(wireAliceAuth, "INBOX", "false"), ","); strings.Contains(got, "Bücher") {
		t.Fatalf("after delete: %s", got)
	}
}

// TestHTTPClientMessageIDKept: SendWithHeader with a valid Message-ID the
// sandbox has not sent yet keeps it as the message's Message-ID and
// smtpId; a repeated or malformed one, or any with MintMessageIDs, gets a
// minted one.
func TestHTTPClientMessageIDKept(t *testing.T) {
	t.Parallel()
	send := func(r *wireEnv, msgID string) string {
		return wireStr(t, r.ok("PUT", "/SendWithHeader", `{"authentication":`+wireAliceAuth+`,"message":{"sender":"alice@direct.example",`+
			`"subject":"ids","body":"b","htmlBody":false,"recipients":[{"email":"bob@direct.example","type":"TO"}],`+
			`"headers":[{"name":"Message-ID","value":"`+msgID+`"}]}}`), "smtpId")
	}
	r := newWireEnv(t, sandbox.Options{})
	if got := send(r, "<kept-1@client.example>"); got != "kept-1@client.example" {
		t.Errorf("smtpId %q; want the client's Message-ID", got)
	}
	if got := send(r, "<kept-1@client.example>"); got == "kept-1@client.example" {
		t.Errorf("a Message-ID sent before was kept again")
	}
	if got := send(r, "no brackets@client.example"); strings.Contains(got, "client.example") {
		t.Errorf("a malformed Message-ID was kept: %q", got)
	}
	minting := newWireEnv(t, sandbox.Options{MintMessageIDs: true})
	if got := send(minting, "<kept-2@client.example>"); got == "kept-2@client.example" || got == "" {
		t.Errorf("with MintMessageIDs the smtpId is %q", got)
	}
}

// TestHTTPTuserScope: a mailbox user cannot act as T-user for another
// mailbox (code 1), and a T-user cannot act outside its domain (code 2).
func TestHTTPTuserScope(t *testing.T) {
	t.Parallel()
	r := newWireEnv(t, sandbox.Options{Users: append(wireUsers(), sandbox.Account{Name: "eve@other.example", Password: "eve-secret-1"})})
	send := func(auth string) (bool, int) {
		a := r.msg("PUT", "/SendWithTuser", `{"authentication":`+auth+`,"message":{"sender":"alice@direct.example",`+
			`"subject":"s","body":"b","htmlBody":false,"recipients":[{"email":"bob@direct.example","type":"TO"}]}}`)
		return wireEnvelope(t, "SendWithTuser", a)
	}
	if ok, code := send(wireBobAsAlice); ok || code != 1 {
		t.Errorf("bob as T-user for alice: success %v code %v; want code 1", ok, code)
	}
	outside := `{"username":"tuser","password":"tuser-secret-1","directAddr":"eve@other.example"}`
	a := r.msg("PUT", "/SendWithTuser", `{"authentication":`+outside+`,"message":{"sender":"eve@other.example",`+
		`"subject":"s","body":"b","htmlBody":false,"recipients":[{"email":"bob@direct.example","type":"TO"}]}}`)
	if ok, code := wireEnvelope(t, "SendWithTuser", a); ok || code != 2 {
		t.Errorf("T-user outside its domain: success %v code %v; want code 2", ok, code)
	}
	if ok, _ := send(wireTuserAsAlice); !ok {
		t.Errorf("T-user for a mailbox of its domain refused")
	}
}
