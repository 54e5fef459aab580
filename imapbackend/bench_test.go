package imapbackend_test

import (
	"testing"

	"github.com/emersion/go-imap/v2"
)

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
