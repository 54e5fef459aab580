package upstream_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/directbridge/directbridge/upstream"
)

// markRecorder is a provider that records SetRead calls and refuses any
// that names UID 99 (as a provider refuses a request naming a message
// that no longer exists).
type markRecorder struct {
	upstream.Provider
	mu    sync.Mutex
	calls [][]int64
	read  map[int64]bool
}

func (p *markRecorder) SetRead(_ context.Context, _ upstream.Auth, _ string, uids []int64, read bool) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls = append(p.calls, slices.Clone(uids))
	if slices.Contains(uids, 99) {
		return upstream.Classify("SetRead", upstream.ErrRefused, errors.New("no message with uid 99"))
	}
	for _, u := range uids {
		p.read[u] = read
	}
	return nil
}

// markAll runs SetRead for each set of UIDs at once and returns the errors.
func markAll(p upstream.Provider, sets [][]int64) []error {
	errs := make([]error, len(sets))
	var wg sync.WaitGroup
	for i, uids := range sets {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = p.SetRead(context.Background(), upstream.Auth{Username: "a@x", Password: "pw"}, "INBOX", uids, true)
		}()
	}
	wg.Wait()
	return errs
}

// TestCoalescingMergesWaitingCalls: calls that wait for the budget at the
// same time go out as one, and every UID is marked.
func TestCoalescingMergesWaitingCalls(t *testing.T) {
	rec := &markRecorder{read: map[int64]bool{}}
	b := upstream.NewBudget(5)
	p := upstream.WithCoalescing(upstream.WithBudget(rec, b), b)
	// Spend the burst, so that the calls below wait.
	for range 5 {
		if err := b.Wait(context.Background(), "other"); err != nil {
			t.Fatal(err)
		}
	}
	sets := [][]int64{{1, 2}, {3}, {4, 5}, {2, 6}, {7}, {8}}
	for i, err := range markAll(p, sets) {
		if err != nil {
			t.Fatalf("SetRead %v: %v", sets[i], err)
		}
	}
	for u := int64(1); u <= 8; u++ {
		if !rec.read[u] {
			t.Errorf("UID %d not marked", u)
		}
	}
	if len(rec.calls) > 2 {
		t.Errorf("%d provider calls for %d waiting callers (%v); want them merged", len(rec.calls), len(sets), rec.calls)
	}
}

// TestCoalescingRefusalIsEachCallersOwn: a merged call the provider
// refuses because of one caller's UIDs is repeated by each caller alone:
// only that caller is refused.
func TestCoalescingRefusalIsEachCallersOwn(t *testing.T) {
	rec := &markRecorder{read: map[int64]bool{}}
	b := upstream.NewBudget(5)
	p := upstream.WithCoalescing(upstream.WithBudget(rec, b), b)
	for range 5 {
		if err := b.Wait(context.Background(), "other"); err != nil {
			t.Fatal(err)
		}
	}
	sets := [][]int64{{1}, {99}, {2}, {3}}
	errs := markAll(p, sets)
	for i, err := range errs {
		refused := slices.Contains(sets[i], 99)
		if refused != upstream.IsRefusal(err) {
			t.Errorf("SetRead %v: %v", sets[i], err)
		}
	}
	for _, u := range []int64{1, 2, 3} {
		if !rec.read[u] {
			t.Errorf("UID %d not marked", u)
		}
	}
}

// TestCoalescingWithoutBudget: with no budget nothing waits, and calls
// go to the provider as they are.
func TestCoalescingWithoutBudget(t *testing.T) {
	rec := &markRecorder{read: map[int64]bool{}}
	p := upstream.WithCoalescing(rec, upstream.NewBudget(0))
	if p != upstream.Provider(rec) {
		t.Fatalf("an unlimited budget wraps the provider")
	}
}
