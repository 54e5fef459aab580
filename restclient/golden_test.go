package restclient

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/directbridge/directbridge/upstream/directapi"
)

// This file checks every request the client sends against golden
// expectations written from messaging-rest.md and registration-rest.md, and
// decodes golden responses written from the same documents.

const (
	msgPrefix = "/message-rest/api/message"
	regPrefix = "/DirectRegistrationRESTful/rest/Patient"

	okMessaging    = `{"success":true,"code":0,"message":"OK"}`
	okRegistration = `{"code":"000","success":true,"sessionId":"SESSION-NEW"}`
)

// recordedRequest is what the recording server saw.
type recordedRequest struct {
	Method      string
	RequestURI  string
	EscapedPath string
	Header      http.Header
	Body        []byte
}

// recorder is an httptest server that records every request and answers
// with respond (by default a success envelope of the service addressed).
type recorder struct {
	srv     *httptest.Server
	mu      sync.Mutex
	reqs    []recordedRequest
	respond func(n int, r *http.Request, body []byte) (status int, answer string)
}

func newRecorder(t *testing.T) *recorder {
	t.Helper()
	rec := &recorder{}
	rec.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			t.Errorf("reading request body: %v", err)
		}
		rec.mu.Lock()
		n := len(rec.reqs)
		rec.reqs = append(rec.reqs, recordedRequest{Method: r.Method, RequestURI: r.RequestURI,
			EscapedPath: r.URL.EscapedPath(), Header: r.Header.Clone(), Body: body})
		respond := rec.respond
		rec.mu.Unlock()
		status, answer := http.StatusOK, okMessaging
		if strings.HasPrefix(r.URL.Path, regPrefix) {
			answer = okRegistration
		}
		if respond != nil {
			status, answer = respond(n, r, body)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		io.WriteString(w, answer)
	}))
	t.Cleanup(rec.srv.Close)
	return rec
}

func (rec *recorder) requests() []recordedRequest {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return slices.Clone(rec.reqs)
}

func (rec *recorder) reset() {
	rec.mu.Lock()
	rec.reqs = nil
	rec.mu.Unlock()
}

// newTestClient returns a client of base with a fake clock, no rate limit
// and opts applied.
func newTestClient(t *testing.T, base string, fc *fakeClock, opts ...func(*Options)) *Client {
	t.Helper()
	o := Options{BaseURL: base, Clock: fc, RateLimit: -1}
	for _, f := range opts {
		f(&o)
	}
	c, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// decodeJSON decodes b keeping numbers exact.
func decodeJSON(t *testing.T, b []byte) any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("decoding %s: %v", b, err)
	}
	if dec.More() {
		t.Fatalf("trailing data after JSON value: %s", b)
	}
	return v
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// diffJSON reports every difference between got and want (decoded JSON):
// the key set of every object, the length of every array, every value.
func diffJSON(at string, got, want any) []string {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return []string{fmt.Sprintf("%s: got %T %v; want an object", at, got, got)}
		}
		var diffs []string
		if gk, wk := sortedKeys(g), sortedKeys(w); !slices.Equal(gk, wk) {
			diffs = append(diffs, fmt.Sprintf("%s: keys %q; want exactly %q", at, gk, wk))
		}
		for _, k := range sortedKeys(w) {
			if gv, ok := g[k]; ok {
				diffs = append(diffs, diffJSON(at+"."+k, gv, w[k])...)
			}
		}
		return diffs
	case []any:
		g, ok := got.([]any)
		if !ok {
			return []string{fmt.Sprintf("%s: got %T %v; want an array", at, got, got)}
		}
		if len(g) != len(w) {
			return []string{fmt.Sprintf("%s: %d items; want %d", at, len(g), len(w))}
		}
		var diffs []string
		for i := range w {
			diffs = append(diffs, diffJSON(fmt.Sprintf("%s[%d]", at, i), g[i], w[i])...)
		}
		return diffs
	default:
		if !reflect.DeepEqual(got, want) {
			return []string{fmt.Sprintf("%s: got %#v; want %#v", at, got, want)}
		}
		return nil
	}
}

// Golden request inputs and their JSON, as the documents define them.
var (
	gAuth     = directapi.Authentication{Username: "alice@direct.example", Password: "pw-alice"}
	gAuthJSON = `{"username":"alice@direct.example","password":"pw-alice"}`

	gTauth     = directapi.AuthenticationWithTuser{Username: "tuser@direct.example", Password: "pw-tuser", DirectAddr: "bob@direct.example"}
	gTauthJSON = `{"username":"tuser@direct.example","password":"pw-tuser","directAddr":"bob@direct.example"}`

	gMsg = directapi.Message{
		Sender:   "alice@direct.example",
		Subject:  "Lab results",
		Body:     "<p>See attached & reply</p>",
		HTMLBody: true,
		Recipients: []directapi.Recipient{
			{Email: "dr.smith@clinic.direct.example", Type: directapi.TO},
			{Email: "nurse@clinic.direct.example", Type: directapi.CC},
			{Email: "audit@direct.example", Type: directapi.BCC},
		},
		AttachmentList: []directapi.Attachment{{Content: "SGVsbG8sIHdvcmxkIQ==", ContentType: "text/plain", Filename: "hello.txt"}},
	}
	gMsgJSON = `{"sender":"alice@direct.example","subject":"Lab results","body":"<p>See attached & reply</p>","htmlBody":true,
		"recipients":[{"email":"dr.smith@clinic.direct.example","type":"TO"},{"email":"nurse@clinic.direct.example","type":"CC"},{"email":"audit@direct.example","type":"BCC"}],
		"attachmentList":[{"content":"SGVsbG8sIHdvcmxkIQ==","contentType":"text/plain","filename":"hello.txt"}]}`

	gMsgH = directapi.MessageWithHeader{Message: gMsg, Headers: []directapi.MessageHeader{
		{Name: "X-Priority", Value: "1"},
		{Name: "Disposition-Notification-Options", Value: "X-DIRECT-FINAL-DESTINATION-DELIVERY=optional,true"},
	}}
	gMsgHJSON = strings.TrimSuffix(gMsgJSON, "}") + `,"headers":[{"name":"X-Priority","value":"1"},
		{"name":"Disposition-Notification-Options","value":"X-DIRECT-FINAL-DESTINATION-DELIVERY=optional,true"}]}`

	gBegin = time.Date(2024, 3, 1, 13, 0, 0, 0, time.FixedZone("CET", 3600))       // 2024-03-01T12:00:00Z
	gEnd   = time.Date(2024, 3, 2, 8, 30, 15, 250*int(time.Millisecond), time.UTC) // with a fraction

	gRaw     = []byte("From: alice@direct.example\r\nTo: bob@direct.example\r\nSubject: draft\r\n\r\nbody\r\n")
	gRawB64  = base64.StdEncoding.EncodeToString(gRaw)
	gPatient = directapi.IDProofedIndividualRESTful{
		IDProofedIndividual: directapi.IDProofedIndividual{FirstName: "John", LastName: "Doe", SSN4: "1234", DOB: "1980-01-02"},
		DirectUsername:      "john.doe", DirectPassword: "pw-john",
	}
	gPatientJSON = `{"firstName":"John","lastName":"Doe","ssn4":"1234","dob":"1980-01-02","directUsername":"john.doe","directPassword":"pw-john"}`
)

// opCase is one operation of the documents with the request it must send.
type opCase struct {
	name   string
	once   bool   // retried only when surely not processed
	method string // HTTP method
	path   string // exact escaped request path
	body   string // golden JSON body; "" means no body
	call   func(ctx context.Context, c *Client) error
}

func ignore1[T any](_ T, err error) error { return err }

// allOps lists every operation of both documents, with golden requests.
func allOps() []opCase {
	const smtpID = "<abc.123@direct.example>"
	const smtpIDPath = "%3Cabc.123@direct.example%3E"
	uidsJSON := func(uids string) string { return `{"auth":` + gAuthJSON + `,"uids":` + uids + `}` }
	return []opCase{
		// messaging-rest.md, Endpoints 1-34
		{name: "Send", once: true, method: "PUT", path: msgPrefix + "/Send",
			body: `{"authentication":` + gAuthJSON + `,"message":` + gMsgJSON + `}`,
			call: func(ctx context.Context, c *Client) error { return ignore1(c.Send(ctx, gAuth, gMsg)) }},
		{name: "SendWithHeader", once: true, method: "PUT", path: msgPrefix + "/SendWithHeader",
			body: `{"authentication":` + gAuthJSON + `,"message":` + gMsgHJSON + `}`,
			call: func(ctx context.Context, c *Client) error { return ignore1(c.SendWithHeader(ctx, gAuth, gMsgH)) }},
		{name: "Forward", once: true, method: "PUT", path: msgPrefix + "/Forward/INBOX.Lab%20Results",
			body: `{"auth":` + gAuthJSON + `,"uids":[5000000000,7],"recipients":[{"email":"dr.smith@clinic.direct.example","type":"TO"}]}`,
			call: func(ctx context.Context, c *Client) error {
				return ignore1(c.Forward(ctx, gAuth, "INBOX.Lab Results", []int64{5000000000, 7}, []directapi.Recipient{{Email: "dr.smith@clinic.direct.example", Type: directapi.TO}}))
			}},
		{name: "GetMessageStatus", method: "POST", path: msgPrefix + "/GetMessageStatus/" + smtpIDPath, body: gAuthJSON,
			call: func(ctx context.Context, c *Client) error { return ignore1(c.GetMessageStatus(ctx, gAuth, smtpID)) }},
		{name: "GetMessageStatuses", method: "POST", path: msgPrefix + "/GetMessageStatus/",
			body: `{"auth":` + gAuthJSON + `,"smtpIds":["<abc.123@direct.example>","<def.456@direct.example>"]}`,
			call: func(ctx context.Context, c *Client) error {
				return ignore1(c.GetMessageStatuses(ctx, gAuth, []string{smtpID, "<def.456@direct.example>"}))
			}},
		{name: "GetMessageCount", method: "POST", path: msgPrefix + "/GetMessageCount/INBOX", body: gAuthJSON,
			call: func(ctx context.Context, c *Client) error { return ignore1(c.GetMessageCount(ctx, gAuth, "INBOX")) }},
		{name: "GetUnreadMessageCount", method: "POST", path: msgPrefix + "/GetUnreadMessageCount/INBOX.Sent", body: gAuthJSON,
			call: func(ctx context.Context, c *Client) error {
				return ignore1(c.GetUnreadMessageCount(ctx, gAuth, "INBOX.Sent"))
			}},
		{name: "GetDeletedMessageCount", method: "POST", path: msgPrefix + "/GetDeletedMessageCount/INBOX.Trash", body: gAuthJSON,
			call: func(ctx context.Context, c *Client) error {
				return ignore1(c.GetDeletedMessageCount(ctx, gAuth, "INBOX.Trash"))
			}},
		{name: "GetMessagesByUIDs", method: "POST", path: msgPrefix + "/GetMessagesByUIDs/INBOX", body: uidsJSON("[1,2,5000000000]"),
			call: func(ctx context.Context, c *Client) error {
				return ignore1(c.GetMessagesByUIDs(ctx, gAuth, "INBOX", []int64{1, 2, 5000000000}))
			}},
		{name: "GetUnreadMessages", method: "POST", path: msgPrefix + "/GetUnreadMessages/INBOX", body: gAuthJSON,
			call: func(ctx context.Context, c *Client) error { return ignore1(c.GetUnreadMessages(ctx, gAuth, "INBOX")) }},
		{name: "GetMessagesByReceivedDate", method: "POST", path: msgPrefix + "/GetMessagesByReceivedDate/INBOX/1709294400000/1709368215250", body: gAuthJSON,
			call: func(ctx context.Context, c *Client) error {
				return ignore1(c.GetMessagesByReceivedDate(ctx, gAuth, "INBOX", gBegin, gEnd))
			}},
		{name: "GetMessagesByReceivedDateUTC", method: "POST", path: msgPrefix + "/GetMessagesByReceivedDateUTC/INBOX/20240301120000/20240302083015", body: gAuthJSON,
			call: func(ctx context.Context, c *Client) error {
				return ignore1(c.GetMessagesByReceivedDateUTC(ctx, gAuth, "INBOX", gBegin, gEnd))
			}},
		{name: "GetMessagesBySender", method: "POST", path: msgPrefix + "/GetMessagesBySender/INBOX/dr.smith@clinic.direct.example", body: gAuthJSON,
			call: func(ctx context.Context, c *Client) error {
				return ignore1(c.GetMessagesBySender(ctx, gAuth, "INBOX", "dr.smith@clinic.direct.example"))
			}},
		{name: "GetMessagesBySubject", method: "POST", path: msgPrefix + "/GetMessagesBySubject/INBOX.Sent/lab%20results%2F2024", body: gAuthJSON,
			call: func(ctx context.Context, c *Client) error {
				return ignore1(c.GetMessagesBySubject(ctx, gAuth, "INBOX.Sent", "lab results/2024"))
			}},
		{name: "GetMessages", method: "POST", path: msgPrefix + "/GetMessages/INBOX", body: gAuthJSON,
			call: func(ctx context.Context, c *Client) error { return ignore1(c.GetMessages(ctx, gAuth, "INBOX")) }},
		{name: "GetMessageMetaData", method: "POST", path: msgPrefix + "/GetMessageMetaData/INBOX", body: gAuthJSON,
			call: func(ctx context.Context, c *Client) error { return ignore1(c.GetMessageMetaData(ctx, gAuth, "INBOX")) }},
		{name: "SearchMessagesMetadataByReceivedDate", method: "POST", path: msgPrefix + "/SearchMessagesMetadataByReceivedDate/INBOX/1709294400000/1709368215250", body: gAuthJSON,
			call: func(ctx context.Context, c *Client) error {
				return ignore1(c.SearchMessagesMetadataByReceivedDate(ctx, gAuth, "INBOX", gBegin, gEnd))
			}},
		{name: "SearchMessagesMetadataByReceivedDateUTC", method: "POST", path: msgPrefix + "/SearchMessagesMetadataByReceivedDateUTC/INBOX/20240301120000/20240302083015", body: gAuthJSON,
			call: func(ctx context.Context, c *Client) error {
				return ignore1(c.SearchMessagesMetadataByReceivedDateUTC(ctx, gAuth, "INBOX", gBegin, gEnd))
			}},
		{name: "GetUIDs", method: "POST", path: msgPrefix + "/GetUIDs/INBOX", body: gAuthJSON,
			call: func(ctx context.Context, c *Client) error { return ignore1(c.GetUIDs(ctx, gAuth, "INBOX")) }},
		{name: "GetFolders", method: "POST", path: msgPrefix + "/GetFolders/INBOX/true", body: gAuthJSON,
			call: func(ctx context.Context, c *Client) error { return ignore1(c.GetFolders(ctx, gAuth, "INBOX", true)) }},
		{name: "SetFoldersSubscribed", method: "POST", path: msgPrefix + "/SetFoldersSubscribed/",
			body: `{"auth":` + gAuthJSON + `,"folders":["INBOX.Lab","INBOX.Referrals"],"subscribed":false}`,
			call: func(ctx context.Context, c *Client) error {
				return ignore1(c.SetFoldersSubscribed(ctx, gAuth, []string{"INBOX.Lab", "INBOX.Referrals"}, false))
			}},
		{name: "CreateFolder", once: true, method: "POST", path: msgPrefix + "/CreateFolder/INBOX.Lab%20Results", body: gAuthJSON,
			call: func(ctx context.Context, c *Client) error { return c.CreateFolder(ctx, gAuth, "INBOX.Lab Results") }},
		{name: "MoveFolder", once: true, method: "POST", path: msgPrefix + "/MoveFolder/INBOX.Lab/INBOX.Archive.Lab", body: gAuthJSON,
			call: func(ctx context.Context, c *Client) error {
				return c.MoveFolder(ctx, gAuth, "INBOX.Lab", "INBOX.Archive.Lab")
			}},
		{name: "DeleteFolder", once: true, method: "POST", path: msgPrefix + "/DeleteFolder/INBOX.Old", body: gAuthJSON,
			call: func(ctx context.Context, c *Client) error { return c.DeleteFolder(ctx, gAuth, "INBOX.Old") }},
		{name: "CopyMessagesByUIDs", once: true, method: "POST", path: msgPrefix + "/CopyMessagesByUIDs/INBOX/INBOX.Archive", body: uidsJSON("[1,2]"),
			call: func(ctx context.Context, c *Client) error {
				return c.CopyMessagesByUIDs(ctx, gAuth, "INBOX", "INBOX.Archive", []int64{1, 2})
			}},
		{name: "MoveMessagesByUIDs", once: true, method: "POST", path: msgPrefix + "/MoveMessagesByUIDs/INBOX/INBOX.Archive", body: uidsJSON("[3]"),
			call: func(ctx context.Context, c *Client) error {
				return c.MoveMessagesByUIDs(ctx, gAuth, "INBOX", "INBOX.Archive", []int64{3})
			}},
		{name: "DeleteMessagesByUIDs", once: true, method: "POST", path: msgPrefix + "/DeleteMessagesByUIDs/INBOX/false", body: uidsJSON("[4,5]"),
			call: func(ctx context.Context, c *Client) error {
				return c.DeleteMessagesByUIDs(ctx, gAuth, "INBOX", []int64{4, 5}, false)
			}},
		{name: "DeleteMessagesByUIDs forever", once: true, method: "POST", path: msgPrefix + "/DeleteMessagesByUIDs/INBOX.Trash/true", body: uidsJSON("[6]"),
			call: func(ctx context.Context, c *Client) error {
				return c.DeleteMessagesByUIDs(ctx, gAuth, "INBOX.Trash", []int64{6}, true)
			}},
		{name: "MarkMessagesAsReadByUIDs", method: "POST", path: msgPrefix + "/MarkMessagesAsReadByUIDs/INBOX", body: uidsJSON("[1]"),
			call: func(ctx context.Context, c *Client) error {
				return c.MarkMessagesAsReadByUIDs(ctx, gAuth, "INBOX", []int64{1})
			}},
		{name: "MarkMessagesAsUnreadByUIDs", method: "POST", path: msgPrefix + "/MarkMessagesAsUnreadByUIDs/INBOX", body: uidsJSON("[1,2]"),
			call: func(ctx context.Context, c *Client) error {
				return c.MarkMessagesAsUnreadByUIDs(ctx, gAuth, "INBOX", []int64{1, 2})
			}},
		{name: "GetRawMessagesByUIDs", method: "POST", path: msgPrefix + "/GetRawMessagesByUIDs/INBOX", body: uidsJSON("[9]"),
			call: func(ctx context.Context, c *Client) error {
				return ignore1(c.GetRawMessagesByUIDs(ctx, gAuth, "INBOX", []int64{9}))
			}},
		{name: "SaveRawMessages", once: true, method: "POST", path: msgPrefix + "/SaveRawMessages/INBOX.Drafts",
			body: `{"auth":` + gAuthJSON + `,"messages":[{"data":"` + gRawB64 + `"}]}`,
			call: func(ctx context.Context, c *Client) error {
				return c.SaveRawMessages(ctx, gAuth, "INBOX.Drafts", []directapi.RawMessage{directapi.NewRawMessage(gRaw)})
			}},
		{name: "SendWithTuser", once: true, method: "PUT", path: msgPrefix + "/SendWithTuser",
			body: `{"authentication":` + gTauthJSON + `,"message":` + gMsgJSON + `}`,
			call: func(ctx context.Context, c *Client) error { return ignore1(c.SendWithTuser(ctx, gTauth, gMsg)) }},
		{name: "SendWithHeaderWithTuser", once: true, method: "PUT", path: msgPrefix + "/SendWithHeaderWithTuser",
			body: `{"authentication":` + gTauthJSON + `,"message":` + gMsgHJSON + `}`,
			call: func(ctx context.Context, c *Client) error {
				return ignore1(c.SendWithHeaderWithTuser(ctx, gTauth, gMsgH))
			}},
		{name: "GetMessageStatusWithTuser", method: "POST", path: msgPrefix + "/GetMessageStatusWithTuser/" + smtpIDPath, body: gTauthJSON,
			call: func(ctx context.Context, c *Client) error {
				return ignore1(c.GetMessageStatusWithTuser(ctx, gTauth, smtpID))
			}},

		// registration-rest.md, Endpoints 1-5
		{name: "Login", method: "POST", path: regPrefix + "/login", body: `{"username":"reseller-1","password":"pw-reseller"}`,
			call: func(ctx context.Context, c *Client) error {
				return ignore1(c.Login(ctx, directapi.LoginRequest{Username: "reseller-1", Password: "pw-reseller"}))
			}},
		{name: "ProvisionIDProofedPatient", once: true, method: "POST", path: regPrefix + "/ProvisionIDProofedPatient/SESSION-1/patients.direct.example",
			body: gPatientJSON,
			call: func(ctx context.Context, c *Client) error {
				return ignore1(c.ProvisionIDProofedPatient(ctx, "SESSION-1", "patients.direct.example", gPatient))
			}},
		{name: "ProvisionIDProofedPatient by id", once: true, method: "POST", path: regPrefix + "/ProvisionIDProofedPatient/SESSION-1/patients.direct.example",
			body: `{"id":5000000000,"directUsername":"john.doe","directPassword":"pw-john"}`,
			call: func(ctx context.Context, c *Client) error {
				p := directapi.IDProofedIndividualRESTful{IDProofedIndividual: directapi.IDProofedIndividual{ID: 5000000000}, DirectUsername: "john.doe", DirectPassword: "pw-john"}
				return ignore1(c.ProvisionIDProofedPatient(ctx, "SESSION-1", "patients.direct.example", p))
			}},
		{name: "GetPatientAddressByMeta", method: "POST", path: regPrefix + "/GetPatientAddressByMeta/SESSION-1/patients.direct.example",
			body: `{"firstName":"John","lastName":"Doe","ssn4":"1234","dob":"1980-01-02"}`,
			call: func(ctx context.Context, c *Client) error {
				return ignore1(c.GetPatientAddressByMeta(ctx, "SESSION-1", "patients.direct.example", gPatient.IDProofedIndividual))
			}},
		{name: "GetPatientAddressByMeta by id", method: "POST", path: regPrefix + "/GetPatientAddressByMeta/SESSION-1/patients.direct.example",
			body: `{"id":42}`,
			call: func(ctx context.Context, c *Client) error {
				return ignore1(c.GetPatientAddressByMeta(ctx, "SESSION-1", "patients.direct.example", directapi.IDProofedIndividual{ID: 42}))
			}},
		{name: "GetPatientAddressByUsername", method: "GET", path: regPrefix + "/GetPatientAddressByUsername/SESSION-1/patients.direct.example/john.doe",
			call: func(ctx context.Context, c *Client) error {
				return ignore1(c.GetPatientAddressByUsername(ctx, "SESSION-1", "patients.direct.example", "john.doe"))
			}},
		{name: "SetPatientsPasswords", method: "POST", path: regPrefix + "/SetPatientsPasswords/SESSION-1/patients.direct.example",
			body: `[{"username":"john.doe","password":"pw-1"},{"username":"jane.roe","password":"pw-2"}]`,
			call: func(ctx context.Context, c *Client) error {
				return c.SetPatientsPasswords(ctx, "SESSION-1", "patients.direct.example",
					[]directapi.UserPassword{{Username: "john.doe", Password: "pw-1"}, {Username: "jane.roe", Password: "pw-2"}})
			}},
		{name: "SetPatientsPasswords none", method: "POST", path: regPrefix + "/SetPatientsPasswords/SESSION-1/patients.direct.example",
			body: `[]`,
			call: func(ctx context.Context, c *Client) error {
				return c.SetPatientsPasswords(ctx, "SESSION-1", "patients.direct.example", nil)
			}},
	}
}

func TestGoldenRequests(t *testing.T) {
	ops := allOps()
	seen := map[string]bool{}
	for _, op := range ops {
		seen[strings.Fields(op.name)[0]] = true
	}
	if len(seen) != 34+5 {
		t.Fatalf("golden table covers %d operations; want all 34 messaging and 5 registration operations", len(seen))
	}
	rec := newRecorder(t)
	c := newTestClient(t, rec.srv.URL+"/", newFakeClock()) // a trailing slash on the base URL is ignored
	for _, op := range ops {
		t.Run(op.name, func(t *testing.T) {
			rec.reset()
			if err := op.call(context.Background(), c); err != nil {
				t.Fatalf("call: %v", err)
			}
			reqs := rec.requests()
			if len(reqs) != 1 {
				t.Fatalf("sent %d requests; want 1", len(reqs))
			}
			r := reqs[0]
			if r.Method != op.method {
				t.Errorf("method %s; want %s", r.Method, op.method)
			}
			if r.RequestURI != op.path {
				t.Errorf("request URI\n  %s\nwant\n  %s", r.RequestURI, op.path)
			}
			if r.EscapedPath != op.path {
				t.Errorf("escaped path %s; want %s", r.EscapedPath, op.path)
			}
			if got := r.Header.Get("Accept"); got != "application/json" {
				t.Errorf("Accept %q; want application/json", got)
			}
			if got := r.Header.Get("User-Agent"); got != "directbridge" {
				t.Errorf("User-Agent %q; want directbridge", got)
			}
			if op.body == "" {
				if len(r.Body) != 0 {
					t.Errorf("sent a body %s; want none", r.Body)
				}
				if ct := r.Header.Get("Content-Type"); ct != "" {
					t.Errorf("Content-Type %q without a body", ct)
				}
				return
			}
			if ct := r.Header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type %q; want application/json", ct)
			}
			for _, d := range diffJSON("$", decodeJSON(t, r.Body), decodeJSON(t, []byte(op.body))) {
				t.Error(d)
			}
			if t.Failed() {
				t.Logf("body sent: %s", r.Body)
			}
		})
	}
}

// TestGoldenKeySets spells out the key sets the documents require, on top
// of the whole-body comparison of TestGoldenRequests.
func TestGoldenKeySets(t *testing.T) {
	rec := newRecorder(t)
	c := newTestClient(t, rec.srv.URL, newFakeClock())
	ctx := context.Background()
	body := func() map[string]any {
		t.Helper()
		reqs := rec.requests()
		rec.reset()
		if len(reqs) != 1 {
			t.Fatalf("%d requests; want 1", len(reqs))
		}
		m, ok := decodeJSON(t, reqs[0].Body).(map[string]any)
		if !ok {
			t.Fatalf("body %s is not an object", reqs[0].Body)
		}
		return m
	}
	obj := func(v any) map[string]any {
		t.Helper()
		m, ok := v.(map[string]any)
		if !ok {
			t.Fatalf("%v is not an object", v)
		}
		return m
	}
	first := func(v any) map[string]any {
		t.Helper()
		a, ok := v.([]any)
		if !ok || len(a) == 0 {
			t.Fatalf("%v is not a non-empty array", v)
		}
		return obj(a[0])
	}
	wantKeys := func(what string, m map[string]any, keys ...string) {
		t.Helper()
		sort.Strings(keys)
		if got := sortedKeys(m); !slices.Equal(got, keys) {
			t.Errorf("%s keys %q; want exactly %q", what, got, keys)
		}
	}
	msgKeys := []string{"sender", "subject", "body", "htmlBody", "recipients", "attachmentList"}

	if _, err := c.Send(ctx, gAuth, gMsg); err != nil {
		t.Fatal(err)
	}
	b := body()
	wantKeys("Send", b, "authentication", "message")
	wantKeys("Send authentication", obj(b["authentication"]), "username", "password")
	wantKeys("Send message", obj(b["message"]), msgKeys...)
	wantKeys("Send recipient", first(obj(b["message"])["recipients"]), "email", "type")
	wantKeys("Send attachment", first(obj(b["message"])["attachmentList"]), "content", "contentType", "filename")

	if _, err := c.SendWithHeader(ctx, gAuth, gMsgH); err != nil {
		t.Fatal(err)
	}
	b = body()
	wantKeys("SendWithHeader", b, "authentication", "message")
	wantKeys("SendWithHeader message", obj(b["message"]), append(slices.Clone(msgKeys), "headers")...)
	wantKeys("SendWithHeader header", first(obj(b["message"])["headers"]), "name", "value")

	if _, err := c.SendWithHeaderWithTuser(ctx, gTauth, gMsgH); err != nil {
		t.Fatal(err)
	}
	b = body()
	wantKeys("SendWithHeaderWithTuser authentication", obj(b["authentication"]), "username", "password", "directAddr")

	if _, err := c.GetMessageStatusWithTuser(ctx, gTauth, "<x@y>"); err != nil {
		t.Fatal(err)
	}
	wantKeys("GetMessageStatusWithTuser", body(), "username", "password", "directAddr")

	// A minimal message: the required fields stay even when empty or
	// false; the optional ones go.
	if _, err := c.Send(ctx, gAuth, directapi.Message{Sender: "alice@direct.example", Recipients: []directapi.Recipient{{Email: "b@x", Type: directapi.TO}}}); err != nil {
		t.Fatal(err)
	}
	m := obj(body()["message"])
	wantKeys("minimal message", m, "sender", "htmlBody", "recipients")
	if m["htmlBody"] != false {
		t.Errorf("htmlBody = %v; want false", m["htmlBody"])
	}

	if _, err := c.GetMessagesByUIDs(ctx, gAuth, "INBOX", []int64{1}); err != nil {
		t.Fatal(err)
	}
	b = body()
	wantKeys("UidsRequestType", b, "auth", "uids")
	wantKeys("UidsRequestType auth", obj(b["auth"]), "username", "password")

	if _, err := c.Forward(ctx, gAuth, "INBOX", []int64{1}, []directapi.Recipient{{Email: "b@x", Type: directapi.CC}}); err != nil {
		t.Fatal(err)
	}
	b = body()
	wantKeys("Forward UidsRequestType", b, "auth", "uids", "recipients")
	wantKeys("Forward recipient", first(b["recipients"]), "email", "type")

	if _, err := c.GetMessageStatuses(ctx, gAuth, []string{"<a@x>"}); err != nil {
		t.Fatal(err)
	}
	wantKeys("SmtpIdsRequestType", body(), "auth", "smtpIds")

	if _, err := c.SetFoldersSubscribed(ctx, gAuth, []string{"INBOX.A"}, true); err != nil {
		t.Fatal(err)
	}
	b = body()
	wantKeys("SetFoldersSubscribedRequestType", b, "auth", "folders", "subscribed")
	if b["subscribed"] != true {
		t.Errorf("subscribed = %v; want true", b["subscribed"])
	}

	if err := c.SaveRawMessages(ctx, gAuth, "INBOX", []directapi.RawMessage{directapi.NewRawMessage(gRaw)}); err != nil {
		t.Fatal(err)
	}
	b = body()
	wantKeys("RawMessagesRequestType", b, "auth", "messages")
	wantKeys("RawMessage", first(b["messages"]), "data")

	if _, err := c.Login(ctx, directapi.LoginRequest{Username: "r", Password: "p"}); err != nil {
		t.Fatal(err)
	}
	wantKeys("LoginRequest", body(), "username", "password")

	if _, err := c.ProvisionIDProofedPatient(ctx, "S", "d.example", gPatient); err != nil {
		t.Fatal(err)
	}
	wantKeys("IDProofedIndividualRESTful", body(), "firstName", "lastName", "ssn4", "dob", "directUsername", "directPassword")
	p := gPatient
	p.ID = 77
	if _, err := c.ProvisionIDProofedPatient(ctx, "S", "d.example", p); err != nil {
		t.Fatal(err)
	}
	wantKeys("IDProofedIndividualRESTful with id", body(), "id", "firstName", "lastName", "ssn4", "dob", "directUsername", "directPassword")

	if err := c.SetPatientsPasswords(ctx, "S", "d.example", []directapi.UserPassword{{Username: "u", Password: "p"}}); err != nil {
		t.Fatal(err)
	}
	reqs := rec.requests()
	rec.reset()
	arr, ok := decodeJSON(t, reqs[0].Body).([]any)
	if !ok || len(arr) != 1 {
		t.Fatalf("SetPatientsPasswords body %s; want a JSON array", reqs[0].Body)
	}
	wantKeys("UserPassword", obj(arr[0]), "username", "password")
}

func TestGoldenPathEscaping(t *testing.T) {
	rec := newRecorder(t)
	c := newTestClient(t, rec.srv.URL, newFakeClock())
	ctx := context.Background()
	tests := []struct {
		name string
		call func() error
		path string
	}{
		{"dot-only folder is not normalised away", func() error { return ignore1(c.GetUIDs(ctx, gAuth, "..")) },
			msgPrefix + "/GetUIDs/%2E%2E"},
		{"single dot", func() error { return ignore1(c.GetMessageCount(ctx, gAuth, ".")) },
			msgPrefix + "/GetMessageCount/%2E"},
		{"slash, question mark, hash, percent", func() error { return ignore1(c.GetMessagesBySubject(ctx, gAuth, "INBOX", "a/b?c#d%e")) },
			msgPrefix + "/GetMessagesBySubject/INBOX/a%2Fb%3Fc%23d%25e"},
		{"non-ASCII", func() error { return ignore1(c.GetMessagesBySubject(ctx, gAuth, "INBOX", "Befund Müller")) },
			msgPrefix + "/GetMessagesBySubject/INBOX/Befund%20M%C3%BCller"},
		{"sessionId and username escaped", func() error {
			return ignore1(c.GetPatientAddressByUsername(ctx, "a/b c", "d.example", "j doe"))
		}, regPrefix + "/GetPatientAddressByUsername/a%2Fb%20c/d.example/j%20doe"},
	}
	for _, tt := range tests {
		rec.reset()
		if err := tt.call(); err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		reqs := rec.requests()
		if len(reqs) != 1 || reqs[0].RequestURI != tt.path {
			t.Errorf("%s: requests %+v; want one to %s", tt.name, reqs, tt.path)
		}
	}

	// An empty path parameter is refused before anything is sent.
	rec.reset()
	for name, call := range map[string]func() error{
		"empty folder":    func() error { return ignore1(c.GetUIDs(ctx, gAuth, "")) },
		"empty dest":      func() error { return c.MoveMessagesByUIDs(ctx, gAuth, "INBOX", "", []int64{1}) },
		"empty smtpId":    func() error { return ignore1(c.GetMessageStatus(ctx, gAuth, "")) },
		"empty sessionId": func() error { return ignore1(c.GetPatientAddressByUsername(ctx, "", "d.example", "jdoe")) },
		"empty username":  func() error { return ignore1(c.GetPatientAddressByUsername(ctx, "S", "d.example", "")) },
	} {
		if err := call(); err == nil || !strings.Contains(err.Error(), "empty path parameter") {
			t.Errorf("%s: err = %v; want an empty path parameter error", name, err)
		}
	}
	if n := len(rec.requests()); n != 0 {
		t.Errorf("%d requests sent for empty path parameters", n)
	}
}

func TestGoldenBaseURLs(t *testing.T) {
	msgRec := newRecorder(t)
	regRec := newRecorder(t)
	c := newTestClient(t, msgRec.srv.URL+"///", newFakeClock(), func(o *Options) {
		o.RegistrationBaseURL = regRec.srv.URL + "/"
		o.UserAgent = "directbridge-test/1.0"
	})
	ctx := context.Background()
	if _, err := c.GetUIDs(ctx, gAuth, "INBOX"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Login(ctx, directapi.LoginRequest{Username: "r", Password: "p"}); err != nil {
		t.Fatal(err)
	}
	m, r := msgRec.requests(), regRec.requests()
	if len(m) != 1 || m[0].RequestURI != msgPrefix+"/GetUIDs/INBOX" {
		t.Errorf("messaging requests %+v", m)
	}
	if len(r) != 1 || r[0].RequestURI != regPrefix+"/login" {
		t.Errorf("registration requests %+v", r)
	}
	if len(m) == 1 && m[0].Header.Get("User-Agent") != "directbridge-test/1.0" {
		t.Errorf("User-Agent %q", m[0].Header.Get("User-Agent"))
	}
	if _, err := New(Options{}); err == nil {
		t.Error("New without BaseURL succeeded")
	}
}

// Golden responses, written from the documents' field tables.

const goldenMessagesResponse = `{
  "success": true, "code": 0, "message": "2 messages", "unknownEnvelopeField": [1, 2],
  "messages": [
    {
      "uid": 5000000000, "msgnum": 3, "msgID": "<m1@clinic.direct.example>", "folder": "INBOX",
      "expunged": false, "size": 2048,
      "sentDate": 1709294400000, "receivedDate": "2024-03-01T12:00:05.000+0000",
      "replyTo": "dr.smith@clinic.direct.example",
      "headers": [{"name": "X-Priority", "value": "1"}],
      "sender": "dr.smith@clinic.direct.example", "subject": "Referral", "body": "<b>hi</b>", "htmlBody": true,
      "recipients": [{"email": "alice@direct.example", "type": "TO"}],
      "attachments": [{"content": "SGVsbG8=", "contentType": "application/pdf", "filename": "referral.pdf"}],
      "someFutureField": {"nested": true}
    },
    {
      "uid": 2, "msgnum": 1, "msgID": null, "folder": null, "expunged": true, "size": -1,
      "sentDate": null, "receivedDate": "20240301120000",
      "sender": "b@x", "htmlBody": false, "recipients": [],
      "attachmentList": [{"content": "QQ==", "contentType": "text/plain", "filename": "a.txt"}],
      "attachments": [{"content": "Qg==", "contentType": "text/plain", "filename": "b.txt"}]
    }
  ]
}`

func TestGoldenMessageDetail(t *testing.T) {
	var resp directapi.GetMessageResponse
	if err := json.Unmarshal([]byte(goldenMessagesResponse), &resp); err != nil {
		t.Fatal(err)
	}
	if !resp.Success || resp.Message != "2 messages" || len(resp.Messages) != 2 {
		t.Fatalf("envelope %+v", resp.APIResponse)
	}
	m := resp.Messages[0]
	if m.UID != 5000000000 {
		t.Errorf("uid %d; want 5000000000 (beyond 32 bits)", m.UID)
	}
	want := directapi.MessageDetail{
		Message: directapi.Message{Sender: "dr.smith@clinic.direct.example", Subject: "Referral", Body: "<b>hi</b>", HTMLBody: true,
			Recipients:     []directapi.Recipient{{Email: "alice@direct.example", Type: directapi.TO}},
			AttachmentList: []directapi.Attachment{{Content: "SGVsbG8=", ContentType: "application/pdf", Filename: "referral.pdf"}}},
		UID: 5000000000, MsgNum: 3, MsgID: "<m1@clinic.direct.example>", Folder: "INBOX", Size: 2048,
		SentDate:     directapi.Date{Time: time.Date(2024, 3, 1, 12, 0, 0, 0, time.UTC)},
		ReceivedDate: directapi.Date{Time: time.Date(2024, 3, 1, 12, 0, 5, 0, time.UTC)},
		ReplyTo:      "dr.smith@clinic.direct.example",
		Headers:      []directapi.MessageHeader{{Name: "X-Priority", Value: "1"}},
	}
	if !messageDetailEqual(m, want) {
		t.Errorf("message 0 =\n%+v\nwant\n%+v", m, want)
	}
	m = resp.Messages[1]
	if m.UID != 2 || m.MsgID != "" || m.Folder != "" || !m.Expunged || m.Size != -1 || !m.SentDate.IsZero() ||
		!m.ReceivedDate.Equal(time.Date(2024, 3, 1, 12, 0, 0, 0, time.UTC)) {
		t.Errorf("message 1 = %+v", m)
	}
	// attachmentList wins over the "attachments" alias when both are present.
	if len(m.AttachmentList) != 1 || m.AttachmentList[0].Filename != "a.txt" {
		t.Errorf("message 1 attachments %+v; want attachmentList kept", m.AttachmentList)
	}
	if m.Recipients == nil || len(m.Recipients) != 0 {
		t.Errorf("recipients %#v; want empty, not nil", m.Recipients)
	}

	// Same through the client, for each operation answering GetMessageResponse.
	rec := newRecorder(t)
	rec.respond = func(int, *http.Request, []byte) (int, string) { return 200, goldenMessagesResponse }
	c := newTestClient(t, rec.srv.URL, newFakeClock())
	ctx := context.Background()
	for name, call := range map[string]func() ([]directapi.MessageDetail, error){
		"GetMessages":        func() ([]directapi.MessageDetail, error) { return c.GetMessages(ctx, gAuth, "INBOX") },
		"GetMessageMetaData": func() ([]directapi.MessageDetail, error) { return c.GetMessageMetaData(ctx, gAuth, "INBOX") },
		"GetUnreadMessages":  func() ([]directapi.MessageDetail, error) { return c.GetUnreadMessages(ctx, gAuth, "INBOX") },
		"GetMessagesByUIDs": func() ([]directapi.MessageDetail, error) {
			return c.GetMessagesByUIDs(ctx, gAuth, "INBOX", []int64{5000000000, 2})
		},
		"GetMessagesBySender": func() ([]directapi.MessageDetail, error) {
			return c.GetMessagesBySender(ctx, gAuth, "INBOX", "dr.smith@clinic.direct.example")
		},
	} {
		msgs, err := call()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(msgs) != 2 || !messageDetailEqual(msgs[0], want) || msgs[1].UID != 2 {
			t.Errorf("%s = %+v", name, msgs)
		}
	}
}

func messageDetailEqual(a, b directapi.MessageDetail) bool {
	if !a.SentDate.Equal(b.SentDate.Time) || !a.ReceivedDate.Equal(b.ReceivedDate.Time) {
		return false
	}
	a.SentDate, a.ReceivedDate, b.SentDate, b.ReceivedDate = directapi.Date{}, directapi.Date{}, directapi.Date{}, directapi.Date{}
	return reflect.DeepEqual(a, b)
}

func TestGoldenMessagingResponses(t *testing.T) {
	statusLogsJSON := `{"success":true,"code":0,"message":"OK","hasCvData":false,"csvData":null,"messageLogs":[
		{"from":"alice@direct.example","to":"bob@direct.example","messageId":"<abc.123@direct.example>","messageSize":5000000001,
		 "status":"Delivered","statusDetails":"MDN processed","ts":1709294400000,"xdrId":"x1","uniqueId":"u1","sourceId":"s1","patientId":"p1"},
		{"from":"alice@direct.example","to":"carol@direct.example","messageId":"<abc.123@direct.example>","messageSize":10,
		 "status":"NO MDN Received","ts":"2024-03-01T13:00:00Z"}]}`
	csv := "From,To,Message ID,Message Size,Status,Sent Time,XDR Message ID,XDR Source ID,XDR Unique ID,XDR Patient ID\r\n" +
		"alice@direct.example,bob@direct.example,<abc.123@direct.example>,42,Waiting*,20240301120000,,,,\r\n"
	statusCSVJSON := `{"success":true,"code":0,"message":"OK","hasCvData":true,"csvData":"` +
		base64.StdEncoding.EncodeToString([]byte(csv)) + `","messageLogs":[]}`
	rawJSON := `{"success":true,"code":0,"message":"OK","messages":[{"uid":9,"msgID":"<r@x>","folder":"INBOX","data":"` +
		base64.StdEncoding.EncodeToString(gRaw)[:20] + "\\r\\n" + base64.StdEncoding.EncodeToString(gRaw)[20:] + `"}]}`

	answers := map[string]string{
		"/GetUIDs/":                   `{"success":true,"code":0,"message":"OK","uids":[1,5000000000,9007199254740993]}`,
		"/GetFolders/":                `{"success":true,"code":0,"message":"OK","folders":["INBOX.Sent","INBOX.Trash","INBOX.Lab Results"]}`,
		"/SetFoldersSubscribed/":      `{"success":true,"code":0,"message":"OK","folders":["INBOX.Lab Results"]}`,
		"/GetMessageCount/":           `{"success":true,"code":0,"message":"OK","count":42}`,
		"/Send":                       `{"success":true,"code":0,"message":"sent","smtpId":"<abc.123@direct.example>"}`,
		"/Forward/":                   `{"success":true,"code":0,"message":"sent","smtpId":"<fwd.1@direct.example>"}`,
		"/GetMessageStatus/%3Clogs":   statusLogsJSON,
		"/GetMessageStatus/%3Ccsv":    statusCSVJSON,
		"/GetMessageStatusWithTuser/": statusCSVJSON,
		"/GetRawMessagesByUIDs/":      rawJSON,
	}
	rec := newRecorder(t)
	rec.respond = func(_ int, r *http.Request, _ []byte) (int, string) {
		for k, v := range answers {
			if strings.HasPrefix(r.RequestURI, msgPrefix+k) {
				return 200, v
			}
		}
		return 200, okMessaging
	}
	c := newTestClient(t, rec.srv.URL, newFakeClock())
	ctx := context.Background()

	uids, err := c.GetUIDs(ctx, gAuth, "INBOX")
	if err != nil || !slices.Equal(uids, []int64{1, 5000000000, 9007199254740993}) {
		t.Errorf("GetUIDs = %v, %v; want exact 64-bit UIDs", uids, err)
	}
	folders, err := c.GetFolders(ctx, gAuth, "INBOX", false)
	if err != nil || !slices.Equal(folders, []string{"INBOX.Sent", "INBOX.Trash", "INBOX.Lab Results"}) {
		t.Errorf("GetFolders = %v, %v", folders, err)
	}
	folders, err = c.SetFoldersSubscribed(ctx, gAuth, []string{"INBOX.Lab Results"}, true)
	if err != nil || !slices.Equal(folders, []string{"INBOX.Lab Results"}) {
		t.Errorf("SetFoldersSubscribed = %v, %v", folders, err)
	}
	if n, err := c.GetMessageCount(ctx, gAuth, "INBOX"); err != nil || n != 42 {
		t.Errorf("GetMessageCount = %d, %v", n, err)
	}
	if id, err := c.Send(ctx, gAuth, gMsg); err != nil || id != "<abc.123@direct.example>" {
		t.Errorf("Send = %q, %v", id, err)
	}
	if id, err := c.Forward(ctx, gAuth, "INBOX", []int64{1}, nil); err != nil || id != "<fwd.1@direct.example>" {
		t.Errorf("Forward = %q, %v", id, err)
	}
	logs, err := c.GetMessageStatus(ctx, gAuth, "<logs@x>")
	if err != nil {
		t.Fatal(err)
	}
	wantLogs := []directapi.DirectMessageLog{
		{From: "alice@direct.example", To: "bob@direct.example", MessageID: "<abc.123@direct.example>", MessageSize: 5000000001,
			Status: directapi.StatusDelivered, StatusDetails: "MDN processed", TS: ts("20240301120000"), XdrID: "x1", UniqueID: "u1", SourceID: "s1", PatientID: "p1"},
		{From: "alice@direct.example", To: "carol@direct.example", MessageID: "<abc.123@direct.example>", MessageSize: 10,
			Status: directapi.StatusNoMDNReceived, TS: ts("20240301130000")},
	}
	if !logsEqual(logs, wantLogs) {
		t.Errorf("GetMessageStatus (messageLogs) =\n%+v\nwant\n%+v", logs, wantLogs)
	}
	wantCSV := []directapi.DirectMessageLog{{From: "alice@direct.example", To: "bob@direct.example", MessageID: "<abc.123@direct.example>",
		MessageSize: 42, Status: directapi.StatusWaiting, TS: ts("20240301120000")}}
	logs, err = c.GetMessageStatus(ctx, gAuth, "<csv@x>")
	if err != nil || !logsEqual(logs, wantCSV) {
		t.Errorf("GetMessageStatus (csvData) = %+v, %v; want %+v", logs, err, wantCSV)
	}
	logs, err = c.GetMessageStatusWithTuser(ctx, gTauth, "<csv@x>")
	if err != nil || !logsEqual(logs, wantCSV) {
		t.Errorf("GetMessageStatusWithTuser = %+v, %v", logs, err)
	}
	raws, err := c.GetRawMessagesByUIDs(ctx, gAuth, "INBOX", []int64{9})
	if err != nil || len(raws) != 1 || raws[0].UID != 9 || raws[0].MsgID != "<r@x>" || raws[0].Folder != "INBOX" {
		t.Fatalf("GetRawMessagesByUIDs = %+v, %v", raws, err)
	}
	if b, err := raws[0].Bytes(); err != nil || !bytes.Equal(b, gRaw) {
		t.Errorf("RawMessage.Bytes = %q, %v; want %q", b, err, gRaw)
	}
	if _, err := (directapi.RawMessage{UID: 4, Data: "***"}).Bytes(); err == nil || !strings.Contains(err.Error(), "uid 4") {
		t.Errorf("Bytes of bad base64: %v; want an error naming the uid", err)
	}
}

func TestGoldenRegistrationResponses(t *testing.T) {
	const userJSON = `{"firstName":"John","lastName":"Doe","email":"john@example.com","phone":"555-0100",
		"sameAsOrganizationAddress":false,"address":"1 Main St","city":"Springfield","state":"Illinois","country":"US","zipcode":"62701",
		"username":"john.doe","userType":"SMTP","endpoint":"","UserStateType":"activated","someNewField":1}`
	answers := map[string]string{
		"/login": `{"code":"000","success":true,"sessionId":"9f8e7d6c"}`,
		"/ProvisionIDProofedPatient/": `{"code":"000","success":true,"users":[` + userJSON + `],
			"paymentConfirmation":{"orderId":1001,"amount":12.5,"orderTime":1709294400000,"detail":"1 address",
			"products":[{"name":"Patient address","description":"1 year","quantity":1,"offerPrice":25,"salePrice":12.5,"amount":12.5,
			"startDate":"2024-03-01","expireDate":"2025-03-01"}]}}`,
		"/GetPatientAddressByMeta/":     `{"code":"000","success":true,"patient":[` + userJSON + `]}`,
		"/GetPatientAddressByUsername/": `{"code":"000","success":true,"patient":[]}`,
		"/SetPatientsPasswords/":        `{"code":"000","success":true,"errorMessage":null}`,
	}
	rec := newRecorder(t)
	rec.respond = func(_ int, r *http.Request, _ []byte) (int, string) {
		for k, v := range answers {
			if strings.HasPrefix(r.RequestURI, regPrefix+k) {
				return 200, v
			}
		}
		t.Errorf("unexpected request %s", r.RequestURI)
		return 404, ""
	}
	c := newTestClient(t, rec.srv.URL, newFakeClock())
	ctx := context.Background()

	sid, err := c.Login(ctx, directapi.LoginRequest{Username: "r", Password: "p"})
	if err != nil || sid.Reveal() != "9f8e7d6c" {
		t.Fatalf("Login = %q, %v", sid.Reveal(), err)
	}
	f := false
	wantUser := directapi.DirectUserDetail{
		DirectUser: directapi.DirectUser{
			BaseUser: directapi.BaseUser{FirstName: "John", LastName: "Doe", Email: "john@example.com", Phone: "555-0100",
				SameAsOrganizationAddress: &f, Address: "1 Main St", City: "Springfield", State: "Illinois", Country: "US", Zipcode: "62701"},
			Username: "john.doe", UserType: directapi.UserTypeSMTP,
		},
		UserStateType: directapi.UserStateActivated,
	}
	resp, err := c.ProvisionIDProofedPatient(ctx, sid, "patients.direct.example", gPatient)
	if err != nil {
		t.Fatal(err)
	}
	if !resp.Success || resp.Code != "000" || len(resp.Users) != 1 || !reflect.DeepEqual(resp.Users[0], wantUser) {
		t.Errorf("ProvisionIDProofedPatient users = %+v", resp.Users)
	}
	pc := resp.PaymentConfirmation
	if pc == nil || pc.OrderID != 1001 || pc.Amount != 12.5 || pc.Detail != "1 address" ||
		!pc.OrderTime.Equal(time.Date(2024, 3, 1, 12, 0, 0, 0, time.UTC)) || len(pc.Products) != 1 {
		t.Fatalf("paymentConfirmation = %+v", pc)
	}
	wantProduct := directapi.Product{Name: "Patient address", Description: "1 year", Quantity: 1, OfferPrice: 25, SalePrice: 12.5, Amount: 12.5,
		StartDate: "2024-03-01", ExpireDate: "2025-03-01"}
	if pc.Products[0] != wantProduct {
		t.Errorf("product = %+v; want %+v", pc.Products[0], wantProduct)
	}
	users, err := c.GetPatientAddressByMeta(ctx, sid, "patients.direct.example", directapi.IDProofedIndividual{ID: 1})
	if err != nil || len(users) != 1 || !reflect.DeepEqual(users[0], wantUser) {
		t.Errorf("GetPatientAddressByMeta = %+v, %v", users, err)
	}
	if users[0].UserStateType != "activated" {
		t.Errorf("UserStateType = %q", users[0].UserStateType)
	}
	users, err = c.GetPatientAddressByUsername(ctx, sid, "patients.direct.example", "nobody")
	if err != nil || users == nil || len(users) != 0 {
		t.Errorf("GetPatientAddressByUsername (no match) = %#v, %v", users, err)
	}
	if err := c.SetPatientsPasswords(ctx, sid, "patients.direct.example", []directapi.UserPassword{{Username: "john.doe", Password: "x"}}); err != nil {
		t.Errorf("SetPatientsPasswords: %v", err)
	}

	// The registration envelope's capitalised state name, both ways.
	b, err := json.Marshal(wantUser)
	if err != nil {
		t.Fatal(err)
	}
	if m := decodeJSON(t, b).(map[string]any); m["UserStateType"] != "activated" || m["userType"] != "SMTP" {
		t.Errorf("DirectUserDetail marshals as %s", b)
	}
}
