package imapbackend_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/emersion/go-imap/v2"

	"github.com/directbridge/directbridge/upstream/directapi"
)

// Benchmarks measure time; the tests count REST calls. Run with
//   go test -run NONE -bench . ./imapbackend/
// Each reports REST calls per operation next to the time, since a round
// trip to the provider is the unit of cost.

// benchFill saves n small messages into folder at the provider.
func benchFill(b *testing.B, e *env, folder string, n int) {
	b.Helper()
	var batch []directapi.RawMessage
	for i := range n {
		batch = append(batch, directapi.NewRawMessage([]byte(testMessage(fmt.Sprintf("bench%05d", i)))))
	}
	if err := e.client.SaveRawMessages(context.Background(), auth(alice), folder, batch); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkListing2000 is what a mail client does on opening a folder of
// 2,000 messages: SELECT, then UID FETCH 1:* of flags, size, date and
// envelope. The mirror is warm after the first iteration.
func BenchmarkListing2000(b *testing.B) {
	e := newEnv(b, options{})
	benchFill(b, e, "INBOX", 2000)
	c := e.login(alice, alicePW)
	opts := &imap.FetchOptions{UID: true, Flags: true, RFC822Size: true, InternalDate: true, Envelope: true}
	e.sandbox.ResetCalls()
	b.ResetTimer()
	for range b.N {
		if _, err := c.Select("INBOX", nil).Wait(); err != nil {
			b.Fatal(err)
		}
		msgs, err := c.Fetch(imap.UIDSet{imap.UIDRange{Start: 1, Stop: 0}}, opts).Collect()
		if err != nil || len(msgs) != 2000 {
			b.Fatalf("%d messages, %v", len(msgs), err)
		}
	}
	b.ReportMetric(float64(e.sandbox.TotalCalls())/float64(b.N), "REST-calls/op")
}

// BenchmarkFetchBody measures BODY.PEEK[] of one message from the cache.
func BenchmarkFetchBody(b *testing.B) {
	e := newEnv(b, options{})
	benchFill(b, e, "INBOX", 10)
	c := e.login(alice, alicePW)
	if _, err := c.Select("INBOX", nil).Wait(); err != nil {
		b.Fatal(err)
	}
	opts := &imap.FetchOptions{BodySection: []*imap.FetchItemBodySection{{Peek: true}}}
	e.sandbox.ResetCalls()
	b.ResetTimer()
	for range b.N {
		if _, err := c.Fetch(imap.UIDSetNum(5), opts).Collect(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(e.sandbox.TotalCalls())/float64(b.N), "REST-calls/op")
}

// BenchmarkOneMessagePerCommand is the JavaMail/mbsync pattern: one
// UID FETCH of a whole body per command, in UID order, over a folder whose
// bodies are cached after the first pass. It measures the bridge's own
// time per command (go test -bench OneMessage -cpuprofile cpu.out).
func BenchmarkOneMessagePerCommand(b *testing.B) {
	const n = 500
	e := newEnv(b, options{})
	fill(b, e, "INBOX", n)
	c := e.login(alice, alicePW)
	if _, err := c.Select("INBOX", nil).Wait(); err != nil {
		b.Fatal(err)
	}
	var all imap.SeqSet
	all.AddRange(1, n)
	listing, err := c.Fetch(all, &imap.FetchOptions{UID: true}).Collect()
	if err != nil || len(listing) != n {
		b.Fatalf("listing: %d, %v", len(listing), err)
	}
	body := &imap.FetchItemBodySection{Peek: true}
	opts := &imap.FetchOptions{UID: true, Flags: true, RFC822Size: true, BodySection: []*imap.FetchItemBodySection{body}}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		m := listing[i%n]
		if _, err := c.Fetch(imap.UIDSetNum(m.UID), opts).Collect(); err != nil {
			b.Fatal(err)
		}
	}
}
