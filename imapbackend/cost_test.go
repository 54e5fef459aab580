package imapbackend_test

// REST cost per client action, counted at the sandbox (deterministic): the
// targets of the mailstore issue.

import (
	"context"
	"fmt"
	"testing"

	"github.com/emersion/go-imap/v2"

	"github.com/directbridge/directbridge/directapi"
)

// fill saves n small messages into folder at the provider in one call.
func fill(t testing.TB, e *env, folder string, n int) {
	t.Helper()
	var batch []directapi.RawMessage
	for i := range n {
		batch = append(batch, directapi.NewRawMessage([]byte(testMessage(fmt.Sprintf("cost%05d", i)))))
	}
	if err := e.client.SaveRawMessages(context.Background(), auth(alice), folder, batch); err != nil {
		t.Fatal(err)
	}
}

// TestSequentialFetchReadsAhead: a client that fetches one body per
// command in UID order (JavaMail, mbsync, fetchmail, offlineimap) costs
// at most ceil(N/50)+2 GetRawMessagesByUIDs calls for N messages, and
// every body is still the right one.
func TestSequentialFetchReadsAhead(t *testing.T) {
	const n = 230
	e := newEnv(t, options{})
	fill(t, e, "INBOX", n)
	c := e.login(alice, alicePW)
	if _, err := c.Select("INBOX", nil).Wait(); err != nil {
		t.Fatal(err)
	}
	var all imap.SeqSet
	all.AddRange(1, n)
	listing, err := c.Fetch(all, &imap.FetchOptions{UID: true}).Collect()
	if err != nil || len(listing) != n {
		t.Fatalf("listing: %d messages, %v", len(listing), err)
	}
	e.sandbox.ResetCalls()
	body := &imap.FetchItemBodySection{Peek: true}
	for i, m := range listing {
		got, err := c.Fetch(imap.UIDSetNum(m.UID), &imap.FetchOptions{UID: true, BodySection: []*imap.FetchItemBodySection{body}}).Collect()
		if err != nil || len(got) != 1 {
			t.Fatalf("fetch of UID %d: %d answers, %v", m.UID, len(got), err)
		}
		if want := fmt.Sprintf("Subject: cost%05d", i); !containsLine(got[0].FindBodySection(body), want) {
			t.Fatalf("UID %d: body lacks %q", m.UID, want)
		}
	}
	calls := e.sandbox.Calls("GetRawMessagesByUIDs")
	t.Logf("%d one-message fetches cost %d GetRawMessagesByUIDs calls (%v)", n, calls, e.sandbox.CallCounts())
	if limit := (n+49)/50 + 2; calls > limit {
		t.Errorf("%d GetRawMessagesByUIDs calls for %d one-message fetches; want at most %d", calls, n, limit)
	}
	if total := e.sandbox.TotalCalls(); total > calls+2 {
		t.Errorf("%d REST calls in all (%v); want little beyond the raw fetches", total, e.sandbox.CallCounts())
	}
}

func containsLine(b []byte, line string) bool {
	for _, l := range splitLines(string(b)) {
		if l == line {
			return true
		}
	}
	return false
}

func splitLines(s string) []string {
	var out []string
	start := 0
	for i := 0; i < len(s); i++ {
		if s[i] == '\n' {
			end := i
			if end > start && s[end-1] == '\r' {
				end--
			}
			out = append(out, s[start:end])
			start = i + 1
		}
	}
	return append(out, s[start:])
}
