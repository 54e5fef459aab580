package upstream_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/directbridge/directbridge/upstream"
)

// saveRecorder is a provider that records Save calls and stores what they
// carry, unless fail says otherwise for a call.
type saveRecorder struct {
	upstream.Provider
	mu     sync.Mutex
	calls  [][]string
	stored []string
	// fail, if set, is asked for each call's messages: an error to
	// answer, and whether the messages are stored all the same.
	fail func(msgs []string) (error, bool)
}

func (p *saveRecorder) Save(_ context.Context, _ upstream.Auth, _ string, raws [][]byte) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	var msgs []string
	for _, r := range raws {
		msgs = append(msgs, string(r))
	}
	p.calls = append(p.calls, msgs)
	if p.fail != nil {
		if err, stored := p.fail(msgs); err != nil {
			if stored {
				p.stored = append(p.stored, msgs...)
			}
			return err
		}
	}
	p.stored = append(p.stored, msgs...)
	return nil
}

// spentBudget returns a budget of 5 requests a second whose burst is
// spent, so that calls wait for it.
func spentBudget(t *testing.T) *upstream.Budget {
	b := upstream.NewBudget(5)
	for range 5 {
		if err := b.Wait(context.Background(), "other"); err != nil {
			t.Fatal(err)
		}
	}
	return b
}

// saveAll saves each message at once, each in a call of its own, and
// returns the errors.
func saveAll(ctxs []context.Context, p upstream.Provider, msgs []string) []error {
	errs := make([]error, len(msgs))
	var wg sync.WaitGroup
	for i, m := range msgs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx := context.Background()
			if ctxs != nil {
				ctx = ctxs[i]
			}
			errs[i] = p.Save(ctx, upstream.Auth{Username: "a@x", Password: "pw"}, "INBOX", [][]byte{[]byte(m)})
		}()
	}
	wg.Wait()
	return errs
}

func messages(n int) []string {
	var out []string
	for i := range n {
		out = append(out, fmt.Sprintf("message %d", i))
	}
	return out
}

// TestCoalescingMergesWaitingSaves: saves to one folder that wait for the
// budget at the same time go out as one SaveRawMessages, and each message
// is stored once.
func TestCoalescingMergesWaitingSaves(t *testing.T) {
	rec := &saveRecorder{}
	b := spentBudget(t)
	p := upstream.WithCoalescing(upstream.WithBudget(rec, b), b)
	msgs := messages(6)
	for i, err := range saveAll(nil, p, msgs) {
		if err != nil {
			t.Fatalf("Save %d: %v", i, err)
		}
	}
	if len(rec.calls) > 2 {
		t.Errorf("%d provider calls for %d waiting saves (%v); want them merged", len(rec.calls), len(msgs), rec.calls)
	}
	if got := slices.Sorted(slices.Values(rec.stored)); !slices.Equal(got, msgs) {
		t.Errorf("stored %v; want each of %v once", got, msgs)
	}
}

// TestCoalescingRefusedSaveIsUnknown: a merged save the provider refuses
// may have stored some of its messages ("not shown"): every caller is told
// the outcome is unknown, and nothing is sent again.
func TestCoalescingRefusedSaveIsUnknown(t *testing.T) {
	rec := &saveRecorder{fail: func(msgs []string) (error, bool) {
		if len(msgs) > 1 {
			return upstream.Classify("Save", upstream.ErrRefused, errors.New("message 2 refused")), true
		}
		return nil, false
	}}
	b := spentBudget(t)
	p := upstream.WithCoalescing(upstream.WithBudget(rec, b), b)
	msgs := messages(4)
	errs := saveAll(nil, p, msgs)
	merged := slices.ContainsFunc(rec.calls, func(c []string) bool { return len(c) > 1 })
	if !merged {
		t.Skipf("the saves did not wait together (%v)", rec.calls)
	}
	for i, err := range errs {
		inMerged := slices.ContainsFunc(rec.calls, func(c []string) bool { return len(c) > 1 && slices.Contains(c, msgs[i]) })
		if inMerged && !errors.Is(err, upstream.ErrUnknownOutcome) {
			t.Errorf("Save %d, in the refused merged call: %v; want an unknown outcome", i, err)
		}
	}
	seen := map[string]int{}
	for _, c := range rec.calls {
		for _, m := range c {
			seen[m]++
		}
	}
	for m, n := range seen {
		if n > 1 {
			t.Errorf("%q sent %d times; a refused merged save must not be repeated", m, n)
		}
	}
}

// TestCoalescingFailedSaveIsNotRepeated: a merged save that failed after
// the provider may have looked at it (here an "other error" answer,
// code 4, after the messages were stored) is not sent again: every caller
// is told the outcome is unknown, and each message is stored once.
func TestCoalescingFailedSaveIsNotRepeated(t *testing.T) {
	rec := &saveRecorder{fail: func(msgs []string) (error, bool) {
		if len(msgs) > 1 {
			return upstream.Classify("Save", upstream.ErrTemporary, errors.New("code 4: other error")), true
		}
		return nil, false
	}}
	b := spentBudget(t)
	p := upstream.WithCoalescing(upstream.WithBudget(rec, b), b)
	msgs := messages(4)
	errs := saveAll(nil, p, msgs)
	if !slices.ContainsFunc(rec.calls, func(c []string) bool { return len(c) > 1 }) {
		t.Skipf("the saves did not wait together (%v)", rec.calls)
	}
	for i, err := range errs {
		inMerged := slices.ContainsFunc(rec.calls, func(c []string) bool { return len(c) > 1 && slices.Contains(c, msgs[i]) })
		if inMerged && !errors.Is(err, upstream.ErrUnknownOutcome) {
			t.Errorf("Save %d, in the failed merged call: %v; want an unknown outcome", i, err)
		}
	}
	count := map[string]int{}
	for _, m := range rec.stored {
		count[m]++
	}
	for m, n := range count {
		if n > 1 {
			t.Errorf("%q stored %d times", m, n)
		}
	}
}

// TestCoalescingBusySaveRepeatsAlone: a merged save the provider turned
// away unread (HTTP 429) is sent again by each caller alone.
func TestCoalescingBusySaveRepeatsAlone(t *testing.T) {
	rec := &saveRecorder{fail: func(msgs []string) (error, bool) {
		if len(msgs) > 1 {
			return &upstream.Error{Op: "Save", Class: upstream.ErrTemporary, Busy: true, Err: errors.New("429")}, false
		}
		return nil, false
	}}
	b := spentBudget(t)
	p := upstream.WithCoalescing(upstream.WithBudget(rec, b), b)
	msgs := messages(4)
	for i, err := range saveAll(nil, p, msgs) {
		if err != nil {
			t.Errorf("Save %d: %v", i, err)
		}
	}
	if got := slices.Sorted(slices.Values(rec.stored)); !slices.Equal(got, msgs) {
		t.Errorf("stored %v; want each of %v once", got, msgs)
	}
}

// TestCoalescingSaveSurvivesTheFirstCallerLeaving: once a merged save is
// on its way, the first caller's context ending does not cut it off for
// the others.
func TestCoalescingSaveSurvivesTheFirstCallerLeaving(t *testing.T) {
	release := make(chan struct{})
	rec := &saveRecorder{}
	slow := &slowSaver{saveRecorder: rec, release: release, started: make(chan struct{}, 1)}
	b := spentBudget(t)
	p := upstream.WithCoalescing(upstream.WithBudget(slow, b), b)
	first, cancel := context.WithCancel(context.Background())
	errs := make(chan error, 2)
	auth := upstream.Auth{Username: "a@x", Password: "pw"}
	go func() { errs <- p.Save(first, auth, "INBOX", [][]byte{[]byte("first")}) }()
	time.Sleep(20 * time.Millisecond) // the first waits for the budget
	go func() { errs <- p.Save(context.Background(), auth, "INBOX", [][]byte{[]byte("second")}) }()
	<-slow.started // on its way
	cancel()
	time.Sleep(20 * time.Millisecond)
	close(release)
	for range 2 {
		if err := <-errs; err != nil {
			t.Errorf("Save: %v", err)
		}
	}
	if got := slices.Sorted(slices.Values(rec.stored)); !slices.Equal(got, []string{"first", "second"}) {
		t.Errorf("stored %v; want both once", got)
	}
}

// slowSaver holds each Save until release is closed, unless its context
// ends first.
type slowSaver struct {
	*saveRecorder
	release chan struct{}
	started chan struct{} // told when a Save arrives
}

func (s *slowSaver) Save(ctx context.Context, auth upstream.Auth, folder string, raws [][]byte) error {
	select {
	case s.started <- struct{}{}:
	default:
	}
	select {
	case <-s.release:
	case <-ctx.Done():
		return upstream.Classify("Save", upstream.ErrUnknownOutcome, ctx.Err())
	}
	return s.saveRecorder.Save(ctx, auth, folder, raws)
}

// TestCoalescingSaveLeavesWhileWaiting: a caller whose context ends while
// its merged save still waits for the budget takes its message out: it is
// never sent, and the caller is told so (ErrTemporary: certainly not
// saved).
func TestCoalescingSaveLeavesWhileWaiting(t *testing.T) {
	rec := &saveRecorder{}
	b := spentBudget(t)
	p := upstream.WithCoalescing(upstream.WithBudget(rec, b), b)
	msgs := messages(3)
	ctxs := []context.Context{context.Background(), nil, context.Background()}
	var cancel context.CancelFunc
	ctxs[1], cancel = context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	errs := saveAll(ctxs, p, msgs)
	if !errors.Is(errs[1], upstream.ErrTemporary) && !errors.Is(errs[1], upstream.ErrUnknownOutcome) {
		t.Errorf("Save 1, given up: %v; want a temporary failure", errs[1])
	}
	stored := slices.Contains(rec.stored, msgs[1])
	if errors.Is(errs[1], upstream.ErrTemporary) && stored {
		t.Errorf("Save 1 was told it was not saved, and its message was stored: %v", rec.calls)
	}
	for _, i := range []int{0, 2} {
		if errs[i] != nil || !slices.Contains(rec.stored, msgs[i]) {
			t.Errorf("Save %d: %v (stored %v)", i, errs[i], rec.stored)
		}
	}
}
