package sandbox

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"testing/iotest"
	"unicode/utf8"

	"github.com/directbridge/directbridge/upstream/directapi"
)

// referenceRawSave reads a SaveRawMessages body the way every other
// request is read (UTF-8 checked, encoding/json, then RawMessage.Bytes): the streamed
// reader must agree with it.
func referenceRawSave(body []byte) (*rawSaveRequest, bool) {
	var r directapi.RawMessagesRequestType
	if len(bytes.TrimSpace(body)) == 0 || !utf8.Valid(body) || json.Unmarshal(body, &r) != nil {
		return nil, false
	}
	out := &rawSaveRequest{Auth: r.Auth}
	for _, m := range r.Messages {
		raw, err := m.Bytes()
		if err != nil || len(raw) == 0 {
			raw = nil
		}
		out.Messages = append(out.Messages, rawSaveMessage{Data: raw})
	}
	return out, true
}

func streamRawSave(body []byte, size int64) (*rawSaveRequest, error) {
	var q rawSaveRequest
	err := q.decodeStream(iotest.HalfReader(bytes.NewReader(body)), size)
	return &q, err
}

func sameRawSave(a, b *rawSaveRequest) bool {
	if a.Auth != b.Auth || len(a.Messages) != len(b.Messages) {
		return false
	}
	for i := range a.Messages {
		if !bytes.Equal(a.Messages[i].Data, b.Messages[i].Data) || (a.Messages[i].Data == nil) != (b.Messages[i].Data == nil) {
			return false
		}
	}
	return true
}

var rawSaveSeeds = []string{
	`{"auth":{"username":"a@d.example","password":"pw"},"messages":[{"data":"SGVsbG8sIHdvcmxkIQ=="}]}`,
	`{"Auth":{"Username":"a@d.example","Password":"p\"w\u00e9"},"MESSAGES":[{"DATA":"SGVs\r\nbG8="},{"data":"SGVsbG8"}],"extra":[1,{"x":"]}"}]}`,
	`{"messages":[{"data":"SGVsbG8\/d29ybGQ="},{"data":"SGVsbG8_d29ybGQ-"},{"data":"\u0053GVsbG8="}],"auth":{"username":"x","password":"y"}}`,
	`{"auth":{"username":"x","password":"y"},"messages":[{"data":null},{"data":""},{"data":"!!!"},{"data":"SGVsbG8=x"},{"data":12},{"other":"SGVsbG8="}]}`,
	`{"auth":{"username":"x","password":"y"},"messages":null}`,
	`{"auth":{"username":"x","password":"y"},"messages":[null,{"data":"QQ=="}]}`,
	`  {"auth" : {"username":"x"} , "messages" : [ { "data" : "QUJD" } ] }  `,
	`{"auth":{"username":"x","password":"y"},"messages":[{"data":"QUJD`,
	`{"auth":{"username":"x","password":"y"},"messages":[{"data":"QU` + "\n" + `JD"}]}`,
	`{"auth":{"username":"x","password":"y"},"messages":[{"data":"QUJD"}]}}`,
	`{"auth":{"username":"x","password":"y"},"messages":[{"data":"QUJD"},]}`,
	`{"auth":"x","messages":[]}`,
	`[]`,
	``,
	`{"auth":{"username":"x","password":"y"},"messages":[{"data":"QUJD\\"}]}`,
	`{"auth":{"username":"x","password":"y"},"messages":[{"data":"QUJD\u00e9"}]}`,
	`{"auth":{"username":"x","password":"y"},"messages":[{"data":"QUJD"}],"n":tru}`,
}

// TestRawSaveStreamAgreesWithJSON: the streamed reader takes what
// encoding/json takes, refuses what it refuses, and decodes the same
// bytes, on shapes a client or a fuzzer might send.
func TestRawSaveStreamAgreesWithJSON(t *testing.T) {
	big := bytes.Repeat([]byte("0123456789abcdef\r\n"), 20000)
	long := `{"auth":{"username":"x","password":"y"},"messages":[{"data":"` + string(directapi.NewRawMessage(big).Data) + `"}]}`
	for _, body := range append(rawSaveSeeds, long) {
		checkRawSave(t, []byte(body))
	}
	q, err := streamRawSave([]byte(long), int64(len(long)))
	if err != nil || !bytes.Equal(q.Messages[0].Data, big) {
		t.Fatalf("long message: %v", err)
	}
	if cap(q.Messages[0].Data) != len(big) {
		t.Errorf("cap %d for %d bytes", cap(q.Messages[0].Data), len(big))
	}
}

func checkRawSave(t *testing.T, body []byte) {
	t.Helper()
	want, ok := referenceRawSave(body)
	for _, size := range []int64{-1, int64(len(body))} {
		got, err := streamRawSave(body, size)
		switch {
		case ok != (err == nil):
			t.Fatalf("%.80q: encoding/json ok=%v, streamed err=%v", body, ok, err)
		case ok && !sameRawSave(got, want):
			t.Fatalf("%.80q: streamed %+v, want %+v", body, got, want)
		}
	}
}

func FuzzRawSave(f *testing.F) {
	for _, s := range rawSaveSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		if !strings.Contains(string(body), "\\u0000") { // json keeps NUL in strings; both refuse it in base64
			checkRawSave(t, body)
		}
	})
}
