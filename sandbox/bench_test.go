package sandbox_test

// Benchmarks of the sandbox's by-UID operations on folders of different
// sizes. They report per-call cost and assert nothing: the point is to see
// whether a call on one message grows with the folder (it should not).
// Run them with
//
//	go test -run '^$' -bench . ./sandbox/

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/directbridge/directbridge/sandbox"
)

// benchSizes are the folder sizes each benchmark runs on.
var benchSizes = []int{10, 2000, 10000}

// benchMessage is a message of about 8 KiB, the size of a short clinical
// note with a small attachment: large enough that SQLite stores it across
// overflow pages, as real messages are.
func benchMessage(i int) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "From: Sender %d <sender%d@other.example>\r\nTo: alice@direct.example\r\n", i%37, i%37)
	fmt.Fprintf(&b, "Subject: note %d\r\nMessage-ID: <bench-%d@other.example>\r\n", i, i)
	b.WriteString("Date: Mon, 02 Mar 2026 10:00:00 +0000\r\nMIME-Version: 1.0\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n")
	for b.Len() < 8<<10 {
		fmt.Fprintf(&b, "line %d of message %d: the quick brown fox jumps over the lazy dog\r\n", b.Len(), i)
	}
	return []byte(b.String())
}

// benchFolder opens a sandbox whose INBOX of alice holds n messages.
func benchFolder(tb testing.TB, n int) *sandbox.Server {
	tb.Helper()
	srv, err := sandbox.Open(sandbox.Options{Dir: tb.TempDir(), Users: wireUsers()})
	if err != nil {
		tb.Fatalf("Open: %v", err)
	}
	tb.Cleanup(func() { srv.Close() })
	var batch []string
	for i := range n {
		batch = append(batch, `{"data":"`+base64.StdEncoding.EncodeToString(benchMessage(i))+`"}`)
		if len(batch) == 500 || i == n-1 {
			benchCall(tb, srv, "/SaveRawMessages/INBOX", `{"auth":`+wireAliceAuth+`,"messages":[`+strings.Join(batch, ",")+`]}`)
			batch = nil
		}
	}
	return srv
}

// benchCall runs one messaging operation in process (no sockets, so only
// the sandbox's own cost is measured) and fails on anything but HTTP 200.
func benchCall(b testing.TB, srv *sandbox.Server, path, body string) {
	req := httptest.NewRequest(http.MethodPost, wireMsgPath+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	srv.ServeHTTP(w, req)
	if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), `"success":true`) {
		b.Fatalf("%s: HTTP %d: %.200s", path, w.Code, w.Body.String())
	}
}

// benchByUID runs op on one UID per call, walking through the folder so
// that every position is visited.
func benchByUID(b *testing.B, op string) {
	for _, n := range benchSizes {
		srv := benchFolder(b, n)
		b.Run(fmt.Sprintf("messages=%d", n), func(b *testing.B) {
			i := 0
			for b.Loop() {
				uid := int64(i%n) + 1
				i += 7919 // a prime, so successive calls land far apart
				benchCall(b, srv, "/"+op+"/INBOX", wireUIDsBody(wireAliceAuth, uid))
			}
		})
	}
}

// BenchmarkRawByUID is GetRawMessagesByUIDs of one message, what an IMAP
// client fetching one body per command costs the provider.
func BenchmarkRawByUID(b *testing.B) { benchByUID(b, "GetRawMessagesByUIDs") }

// BenchmarkMessagesByUID is GetMessagesByUIDs of one message, whose answer
// carries the message number.
func BenchmarkMessagesByUID(b *testing.B) { benchByUID(b, "GetMessagesByUIDs") }

// BenchmarkMarkByUID is MarkMessagesAsReadByUIDs of one message.
func BenchmarkMarkByUID(b *testing.B) { benchByUID(b, "MarkMessagesAsReadByUIDs") }
