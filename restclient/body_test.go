package restclient

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/directbridge/directbridge/upstream/directapi"
)

// trickyStrings are strings whose JSON escaping is easy to get wrong.
func trickyStrings() []string {
	out := []string{
		"", "a", `"`, `\`, `\"`, "\x7f", "<a href=\"x\">&amp;</a>", "\u2028", "\u2029", "a\u2028b\u2029c",
		"\xff", "\xc3", "a\xc3", "\xe2\x80", "\xe2\x80\xa8\xe2\x80", "\xed\xa0\x80", "\xf4\x90\x80\x80", "\xc0\xaf",
		"\xef\xbf\xbd", "é", "日本語", "😀", "\U0010ffff", "\x00", "\b\f\n\r\t\v", "line\r\nline\r\n",
		"</script>", strings.Repeat("\x01", 1000), strings.Repeat("é\x00", 700), strings.Repeat("\u2028", 300),
		base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{0, 1, 2, 0xff}, 3000)),
	}
	var ctl strings.Builder
	for b := range 0x80 {
		ctl.WriteByte(byte(b))
	}
	out = append(out, ctl.String())
	r := rand.New(rand.NewPCG(1, 2))
	for range 20 {
		b := make([]byte, r.IntN(2000))
		for i := range b {
			b[i] = byte(r.UintN(256))
		}
		out = append(out, string(b))
	}
	return out
}

// readers read a body in every way the HTTP transport might.
var readers = map[string]func(io.Reader) io.Reader{
	"whole":    func(r io.Reader) io.Reader { return r },
	"one byte": iotest.OneByteReader,
	"half":     iotest.HalfReader,
	"5 bytes":  func(r io.Reader) io.Reader { return &chunkReader{r: r, n: 5} },
	"7 bytes":  func(r io.Reader) io.Reader { return &chunkReader{r: r, n: 7} },
}

// chunkReader reads at most n bytes at a time.
type chunkReader struct {
	r io.Reader
	n int
}

func (c *chunkReader) Read(p []byte) (int, error) { return c.r.Read(p[:min(len(p), c.n)]) }

// TestJSONStringIsEncodingJSON: for a corpus of tricky strings, the
// streamed escaping is json.Marshal's byte for byte (with and without
// HTML escaping), read in pieces of any size, and the length counted
// beforehand is its length.
func TestJSONStringIsEncodingJSON(t *testing.T) {
	for _, s := range trickyStrings() {
		for _, html := range []bool{true, false} {
			var want bytes.Buffer
			enc := json.NewEncoder(&want)
			enc.SetEscapeHTML(html)
			if err := enc.Encode(s); err != nil {
				t.Fatal(err)
			}
			want.Truncate(want.Len() - 1) // the Encoder's newline
			if html {
				m, _ := json.Marshal(s)
				if !bytes.Equal(m, want.Bytes()) {
					t.Fatalf("json.Marshal and an HTML-escaping Encoder differ on %q", s)
				}
			}
			if n := jsonStringLen(s, html); n != int64(want.Len()) {
				t.Errorf("jsonStringLen(%.40q, html %t) = %d; json writes %d bytes", s, html, n, want.Len())
			}
			for name, wrap := range readers {
				got, err := io.ReadAll(wrap(&jsonStringReader{s: s, escapeHTML: html}))
				if err != nil {
					t.Fatal(err)
				}
				got = append(append([]byte{'"'}, got...), '"')
				if !bytes.Equal(got, want.Bytes()) {
					t.Errorf("%.40q (html %t, read %s): %.80q; json writes %.80q", s, html, name, got, want.Bytes())
				}
			}
		}
	}
}

// FuzzJSONString: any string is escaped as json.Marshal escapes it.
func FuzzJSONString(f *testing.F) {
	for _, s := range trickyStrings() {
		f.Add(s, 3)
	}
	f.Fuzz(func(t *testing.T, s string, chunk int) {
		want, _ := json.Marshal(s)
		if n := jsonStringLen(s, true); n != int64(len(want)) {
			t.Fatalf("jsonStringLen %d; json writes %d bytes", n, len(want))
		}
		r := &chunkReader{r: &jsonStringReader{s: s, escapeHTML: true}, n: max(1, chunk%64)}
		got, err := io.ReadAll(r)
		if err != nil || `"`+string(got)+`"` != string(want) {
			t.Fatalf("streamed %q; json writes %q (%v)", got, want, err)
		}
	})
}

// trickyMessage is a message whose every string is one of the tricky
// ones, with long ones among them.
func trickyMessage() directapi.MessageWithHeader {
	ts := trickyStrings()
	pick := func(i int) string { return ts[i%len(ts)] }
	big := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{0, 1, 2, 0xff}, 5000))
	msg := directapi.MessageWithHeader{Message: directapi.Message{
		Sender: "a@d.example", Subject: pick(7) + pick(10) + strings.Repeat("\x1b", 300), Body: strings.Join(ts, "\r\n"),
		Recipients: []directapi.Recipient{{Email: "b@d.example", Type: directapi.TO}, {Email: pick(20), Type: directapi.BCC}},
	}}
	for i := range 12 { // ten holes and more: token 1 is not token 10
		msg.AttachmentList = append(msg.AttachmentList, directapi.Attachment{Content: big[:len(big)-4*i], ContentType: pick(i), Filename: pick(i + 3)})
	}
	msg.AttachmentList = append(msg.AttachmentList, directapi.Attachment{Content: strings.Repeat("<é\"\\>\x00", 2000), ContentType: "text/plain", Filename: "odd.txt"})
	for i := range len(ts) {
		msg.Headers = append(msg.Headers, directapi.MessageHeader{Name: "X-" + pick(i), Value: pick(i + 1)})
	}
	return msg
}

// TestSendBodyIsTheSameJSON: each send request, written with its strings
// spliced back in, is byte for byte the JSON of the whole request, its
// length told before it is written, read alike in pieces of any size and
// again for a retry; the caller's message is not changed; the long
// strings are not in the encoded skeleton.
func TestSendBodyIsTheSameJSON(t *testing.T) {
	msg := trickyMessage()
	keep := trickyMessage()
	auth := directapi.Authentication{Username: "a<b>&c@d.example", Password: directapi.Secret("p\"w\\\u00e9\u2028")}
	for _, tuser := range []string{"", "t\x01<user>@d.example"} {
		for _, withHeaders := range []bool{false, true} {
			for _, minLen := range []int{1, minHole} {
				op, req, h := sendRequest(auth, tuser, msg, withHeaders)
				if minLen != minHole { // cut every string
					op, req, h = sendRequestCutting(minLen, auth, tuser, msg, withHeaders)
				}
				want, err := encodeJSON(wholeRequest(op, auth, tuser, msg))
				if err != nil {
					t.Fatal(err)
				}
				skeleton, _ := encodeJSON(req)
				if bytes.Contains(skeleton, []byte(msg.AttachmentList[0].Content[:64])) || len(skeleton) > 64<<10 {
					t.Errorf("%s: the encoded skeleton (%d bytes) holds the long strings", op, len(skeleton))
				}
				b, err := h.body(req)
				if err != nil {
					t.Fatalf("%s: %v", op, err)
				}
				if b.Len() != int64(len(want)) {
					t.Errorf("%s (cut from %d bytes): Len %d; the JSON has %d bytes", op, minLen, b.Len(), len(want))
				}
				for name, wrap := range readers {
					got, err := io.ReadAll(wrap(b.Open()))
					if err != nil || !bytes.Equal(got, want) {
						t.Fatalf("%s (cut from %d bytes, read %s): %d bytes differ from the JSON's %d: %v", op, minLen, name, len(got), len(want), err)
					}
				}
				if size, err := SendSize(auth, tuser, msg, withHeaders); err != nil || size != int64(len(want)) {
					t.Errorf("%s: SendSize %d, %v; the JSON has %d bytes", op, size, err, len(want))
				}
			}
		}
	}
	if !equalJSON(t, msg, keep) {
		t.Fatal("the caller's message was changed")
	}
}

// sendRequestCutting is sendRequest with strings of minLen bytes or more cut.
func sendRequestCutting(minLen int, auth directapi.Authentication, tuser string, msg directapi.MessageWithHeader, withHeaders bool) (string, any, *holes) {
	op, _, _ := sendRequest(auth, tuser, msg, withHeaders)
	h := newHoles(minLen)
	tauth := directapi.AuthenticationWithTuser{Username: auth.Username, Password: auth.Password, DirectAddr: tuser}
	switch op {
	case "SendWithHeader":
		return op, directapi.SendRequestWithHeader{Authentication: auth, Message: h.messageWithHeader(msg)}, h
	case "Send":
		return op, directapi.SendRequest{Authentication: auth, Message: h.message(msg.Message)}, h
	case "SendWithHeaderWithTuser":
		return op, directapi.SendWithHeaderWithTuserRequest{Authentication: tauth, Message: h.messageWithHeader(msg)}, h
	}
	return op, directapi.SendWithTuserRequest{Authentication: tauth, Message: h.message(msg.Message)}, h
}

// wholeRequest is the request of op as the caller meant it: the message
// whole, nothing cut.
func wholeRequest(op string, auth directapi.Authentication, tuser string, msg directapi.MessageWithHeader) any {
	tauth := directapi.AuthenticationWithTuser{Username: auth.Username, Password: auth.Password, DirectAddr: tuser}
	switch op {
	case "Send":
		return directapi.SendRequest{Authentication: auth, Message: msg.Message}
	case "SendWithHeader":
		return directapi.SendRequestWithHeader{Authentication: auth, Message: msg}
	case "SendWithTuser":
		return directapi.SendWithTuserRequest{Authentication: tauth, Message: msg.Message}
	}
	return directapi.SendWithHeaderWithTuserRequest{Authentication: tauth, Message: msg}
}

func equalJSON(t *testing.T, a, b any) bool {
	t.Helper()
	x, err1 := json.Marshal(a)
	y, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && bytes.Equal(x, y)
}

// TestSendRequestOnTheWire: what the provider receives for each send is
// the JSON of the request, under a Content-Length equal to SendSize.
func TestSendRequestOnTheWire(t *testing.T) {
	type got struct {
		path   string
		length int64
		body   []byte
	}
	var seen []got
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		seen = append(seen, got{r.URL.Path, r.ContentLength, body})
		io.WriteString(w, `{"success":true,"code":0,"message":"","smtpId":"<1@p>"}`)
	}))
	defer srv.Close()
	c, err := New(Options{BaseURL: srv.URL, RateLimit: Unlimited})
	if err != nil {
		t.Fatal(err)
	}
	up := Upstream(c)
	msg := trickyMessage()
	auth := directapi.Authentication{Username: "a@d.example", Password: "pw"}
	for _, tuser := range []string{"", "t@d.example"} {
		for _, withHeaders := range []bool{false, true} {
			seen = nil
			if _, err := up.Send(context.Background(), auth, tuser, msg, withHeaders); err != nil {
				t.Fatal(err)
			}
			op, _, _ := sendRequest(auth, tuser, msg, withHeaders)
			req := wholeRequest(op, auth, tuser, msg)
			want, _ := encodeJSON(req)
			size, err := SendSize(auth, tuser, msg, withHeaders)
			if err != nil {
				t.Fatal(err)
			}
			if len(seen) != 1 || !strings.HasSuffix(seen[0].path, "/"+op) {
				t.Fatalf("%s: the provider saw %d requests", op, len(seen))
			}
			if seen[0].length != size || size != int64(len(want)) || !bytes.Equal(seen[0].body, want) {
				t.Errorf("%s: Content-Length %d, SendSize %d, body of %d bytes; the JSON has %d bytes (same: %t)",
					op, seen[0].length, size, len(seen[0].body), len(want), bytes.Equal(seen[0].body, want))
			}
		}
	}
}

// TestSaveSize: SaveSize tells the length of the request Save writes.
func TestSaveSize(t *testing.T) {
	auth := directapi.Authentication{Username: "a<b>@d.example", Password: "p\"w\u2028"}
	for _, raws := range [][][]byte{{[]byte("x")}, {{}, []byte("Subject: x\r\n\r\nhi\r\n"), bytes.Repeat([]byte{0xff}, 10001)}} {
		b, err := newRawBody(auth, raws)
		if err != nil {
			t.Fatal(err)
		}
		var sizes []int64
		for _, r := range raws {
			sizes = append(sizes, int64(len(r)))
		}
		n, err := SaveSize(auth, sizes...)
		data, _ := io.ReadAll(b.Open())
		if err != nil || n != int64(len(data)) || n != b.Len() {
			t.Errorf("SaveSize %d (%v); the body has %d bytes, Len %d", n, err, len(data), b.Len())
		}
	}
}

// BenchmarkSendBody measures writing a send request of a 40 MB body
// (text with an escape every 20 bytes) and its length counted first:
// time, and heap allocated per request (which stays a few kilobytes
// whatever the message size).
func BenchmarkSendBody(b *testing.B) {
	body := strings.Repeat("clinical text line\r\n", 2_000_000)
	msg := directapi.MessageWithHeader{Message: directapi.Message{Sender: "a@d.example", Subject: "s", Body: body,
		Recipients: []directapi.Recipient{{Email: "b@d.example", Type: directapi.TO}}}}
	auth := directapi.Authentication{Username: "a@d.example", Password: "pw"}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		_, req, h := sendRequest(auth, "", msg, false)
		sb, err := h.body(req)
		if err != nil {
			b.Fatal(err)
		}
		if n, err := io.Copy(io.Discard, sb.Open()); err != nil || n != sb.Len() {
			b.Fatalf("%d bytes of %d: %v", n, sb.Len(), err)
		}
	}
}
