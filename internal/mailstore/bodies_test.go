package mailstore

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"

	"github.com/directbridge/directbridge/upstream"
)

// rawProvider is a fake upstream.Provider that serves Raw from memory and
// records every request; the other methods are not used by Bodies.
type rawProvider struct {
	upstream.Provider
	mu       sync.Mutex
	requests [][]int64
	msgs     map[int64][]byte
	delay    time.Duration // added to every answer
}

func (p *rawProvider) Raw(_ context.Context, _ upstream.Auth, _ string, uids []int64) (map[int64][]byte, error) {
	time.Sleep(p.delay)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.requests = append(p.requests, slices.Clone(uids))
	out := map[int64][]byte{}
	for _, u := range uids {
		if b, ok := p.msgs[u]; ok {
			out[u] = b
		}
	}
	return out, nil
}

// order is a folder of UIDs 1..n for read-ahead.
type order int

func (o order) After(uid imap.UID, n int) []imap.UID {
	var out []imap.UID
	for u := uid + 1; u <= imap.UID(o) && len(out) < n; u++ {
		out = append(out, u)
	}
	return out
}

func newRawProvider(n int) *rawProvider {
	p := &rawProvider{msgs: map[int64][]byte{}}
	for u := 1; u <= n; u++ {
		p.msgs[int64(u)] = []byte(fmt.Sprintf("message %d", u))
	}
	return p
}

var ref = FolderRef{User: "alice@direct.example", Folder: "INBOX", Validity: 7}

func TestBodiesReadAhead(t *testing.T) {
	const n = 500
	p := newRawProvider(n)
	b := NewBodies(p, 64<<20)
	for u := imap.UID(1); u <= n; u++ {
		got, err := b.Get(context.Background(), upstream.Auth{}, ref, []imap.UID{u}, order(n))
		if err != nil || string(got[u]) != fmt.Sprintf("message %d", u) {
			t.Fatalf("UID %d: %q, %v", u, got[u], err)
		}
	}
	// The first fetch shows no pattern yet; from the second on, each
	// request brings the next readAheadWindow messages too.
	if max := (n+readAheadWindow-1)/readAheadWindow + 2; len(p.requests) > max {
		t.Fatalf("%d requests for %d one-message fetches; want at most %d", len(p.requests), n, max)
	}
}

func TestBodiesNoReadAheadForRandomAccess(t *testing.T) {
	p := newRawProvider(200)
	b := NewBodies(p, 64<<20)
	for _, u := range []imap.UID{17, 150, 3, 99, 42} {
		if _, err := b.Get(context.Background(), upstream.Auth{}, ref, []imap.UID{u}, order(200)); err != nil {
			t.Fatal(err)
		}
	}
	for _, r := range p.requests {
		if len(r) != 1 {
			t.Fatalf("request %v: a random reader was read ahead for", r)
		}
	}
}

func TestBodiesBatches(t *testing.T) {
	p := newRawProvider(1234)
	b := NewBodies(p, 64<<20)
	var all []imap.UID
	for u := imap.UID(1); u <= 1234; u++ {
		all = append(all, u)
	}
	got, err := b.Get(context.Background(), upstream.Auth{}, ref, all, nil)
	if err != nil || len(got) != 1234 {
		t.Fatalf("%d messages, %v", len(got), err)
	}
	if len(p.requests) != 3 {
		t.Fatalf("%d requests for 1,234 messages; want 3 batches of at most %d", len(p.requests), BatchSize)
	}
	for _, r := range p.requests {
		if len(r) > BatchSize {
			t.Fatalf("a request of %d UIDs", len(r))
		}
	}
	// Cached now: no request at all.
	p.requests = nil
	if _, err := b.Get(context.Background(), upstream.Auth{}, ref, all[:10], nil); err != nil || len(p.requests) != 0 {
		t.Fatalf("cached fetch made %d requests, %v", len(p.requests), err)
	}
	// Another UIDVALIDITY is another folder as far as the cache goes.
	other := ref
	other.Validity++
	if _, err := b.Get(context.Background(), upstream.Auth{}, other, all[:1], nil); err != nil || len(p.requests) != 1 {
		t.Fatalf("fetch under a new UIDVALIDITY made %d requests, %v", len(p.requests), err)
	}
}

func TestBodiesMissingMessages(t *testing.T) {
	p := newRawProvider(5)
	b := NewBodies(p, 64<<20)
	got, err := b.Get(context.Background(), upstream.Auth{}, ref, []imap.UID{4, 5, 6, 7}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[6] != nil {
		t.Fatalf("answer %v; want UIDs 4 and 5 only", got)
	}
}

// TestBodiesReadAheadInBackground: a sequential reader is served from the
// cache after its first fetches: the next window is downloaded while it
// reads, in requests of a whole window each, and no message twice.
func TestBodiesReadAheadInBackground(t *testing.T) {
	const n = 1000
	p := newRawProvider(n)
	p.delay = 2 * time.Millisecond // a provider round trip
	b := NewBodies(p, 64<<20)
	waited := 0
	for u := imap.UID(1); u <= n; u++ {
		p.mu.Lock()
		before := len(p.requests)
		p.mu.Unlock()
		got, err := b.Get(context.Background(), upstream.Auth{}, ref, []imap.UID{u}, order(n))
		if err != nil || string(got[u]) != fmt.Sprintf("message %d", u) {
			t.Fatalf("UID %d: %q, %v", u, got[u], err)
		}
		time.Sleep(100 * time.Microsecond) // the client's round trip
		// A request made during this Get that brings u: the reader waited.
		p.mu.Lock()
		for _, r := range p.requests[before:] {
			if slices.Contains(r, int64(u)) {
				waited++
			}
		}
		p.mu.Unlock()
	}
	if waited > 2 {
		t.Errorf("the reader waited for the provider %d times; want only at the start", waited)
	}
	seen := map[int64]bool{}
	for i, r := range p.requests {
		if i > 1 && len(r) < readAheadWindow && r[len(r)-1] != n {
			t.Errorf("request %d brings %d messages; want a window of at least %d", i, len(r), readAheadWindow)
		}
		for _, u := range r {
			if seen[u] {
				t.Errorf("UID %d downloaded twice", u)
			}
			seen[u] = true
		}
	}
}
