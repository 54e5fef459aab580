package upstream

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

// drain spends the budget's burst so that the next requests queue.
func drain(t *testing.T, b *Budget) {
	t.Helper()
	for range int(b.burst) {
		if err := b.Wait(context.Background(), "filler"); err != nil {
			t.Fatal(err)
		}
	}
}

// order starts the requests one after another (each queued before the
// next starts) and returns the order in which they were let through.
func order(t *testing.T, b *Budget, reqs []struct {
	user string
	p    Priority
}) []int {
	t.Helper()
	var mu sync.Mutex
	var got []int
	var wg sync.WaitGroup
	for i, r := range reqs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := b.Wait(WithPriority(context.Background(), r.p), r.user); err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			got = append(got, i)
			mu.Unlock()
		}()
		// Until it is queued: the order of arrival is part of the test.
		for deadline := time.Now().Add(time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
			s := b.Stats()
			if n := s.Queued[0] + s.Queued[1] + s.Queued[2]; n == i+1 {
				break
			}
		}
	}
	wg.Wait()
	return got
}

func TestBudgetPriorityOrder(t *testing.T) {
	b := NewBudget(40)
	drain(t, b)
	got := order(t, b, []struct {
		user string
		p    Priority
	}{
		{"a", Poll}, {"a", ReadAhead}, {"a", Interactive}, {"b", Poll}, {"b", Interactive},
	})
	// Interactive first (in arrival order), then read-ahead, then polls.
	want := []int{2, 4, 1, 0, 3}
	if len(got) != len(want) {
		t.Fatalf("granted %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("granted %v, want %v", got, want)
		}
	}
}

func TestBudgetFairBetweenUsers(t *testing.T) {
	b := NewBudget(40)
	drain(t, b)
	// A user with a burst of six requests queued before another user's
	// one: the other user's goes second, not seventh.
	reqs := []struct {
		user string
		p    Priority
	}{{"mbsync", Interactive}, {"mbsync", Interactive}, {"mbsync", Interactive}, {"mbsync", Interactive},
		{"mbsync", Interactive}, {"mbsync", Interactive}, {"thunderbird", Interactive}}
	got := order(t, b, reqs)
	pos := -1
	for i, g := range got {
		if g == 6 {
			pos = i
		}
	}
	if pos < 0 || pos > 1 {
		t.Fatalf("granted %v: the second user's request came at position %d", got, pos)
	}
}

func TestBudgetUnlimitedNeverWaits(t *testing.T) {
	b := NewBudget(0)
	for range 10000 {
		if err := b.Wait(WithPriority(context.Background(), Poll), "u"); err != nil {
			t.Fatal(err)
		}
	}
}

func TestBudgetCanceledWaiterGivesUp(t *testing.T) {
	b := NewBudget(1)
	drain(t, b)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := b.Wait(ctx, "u"); err == nil {
		t.Fatal("a canceled request was let through without a token")
	}
}

// countingProvider counts UIDs calls; the rest of Provider is unused.
type countingProvider struct {
	Provider
	calls int
}

func (p *countingProvider) UIDs(context.Context, Auth, string) ([]int64, error) {
	p.calls++
	return nil, nil
}

func TestPrepaidRequestsDoNotWaitAgain(t *testing.T) {
	b := NewBudget(10)
	drain(t, b)
	p := &countingProvider{}
	bp := WithBudget(p, b)
	// Prepaying waits for the tokens (a second at 10/s for two polls'
	// worth at the poll share); then both requests go at once, even
	// with an empty budget.
	ctx, err := b.Prepay(WithPriority(context.Background(), Poll), "u", 2)
	if err != nil {
		t.Fatal(err)
	}
	drain(t, b)
	done := make(chan error, 1)
	go func() {
		_, err1 := bp.UIDs(ctx, Auth{Username: "u"}, "INBOX")
		_, err2 := bp.UIDs(ctx, Auth{Username: "u"}, "INBOX")
		done <- errors.Join(err1, err2)
	}()
	select {
	case err := <-done:
		if err != nil || p.calls != 2 {
			t.Fatalf("prepaid requests: %d calls, %v", p.calls, err)
		}
	case <-time.After(50 * time.Millisecond):
		t.Fatal("prepaid requests waited for the budget")
	}
	// A third is not prepaid: it waits for a token.
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if _, err := bp.UIDs(short, Auth{Username: "u"}, "INBOX"); err == nil {
		t.Fatal("a request beyond the prepaid ones went without a token")
	}
}

// pacingProvider is a RequestPacer whose UIDs sends requests requests,
// each after Pace, as restclient's Client does.
type pacingProvider struct {
	Provider
	requests int
	sent     int
}

func (p *pacingProvider) PacesRequests() bool { return true }

func (p *pacingProvider) UIDs(ctx context.Context, _ Auth, _ string) ([]int64, error) {
	for range p.requests {
		if err := Pace(ctx); err != nil {
			return nil, err
		}
		p.sent++
	}
	return nil, nil
}

// TestBudgetChargesPacedRequests: WithBudget over a provider that paces
// itself does not wait per call but charges every request the call
// sends, to the call's user and at its priority; prepaid requests go at
// once. A context without a budget, or with an unlimited one, never waits.
func TestBudgetChargesPacedRequests(t *testing.T) {
	b := NewBudget(1000)
	p := &pacingProvider{requests: 3}
	bp := WithBudget(p, b)
	if _, err := bp.UIDs(WithPriority(context.Background(), ReadAhead), Auth{Username: "U"}, "INBOX"); err != nil {
		t.Fatal(err)
	}
	if s := b.Stats(); s.Granted[ReadAhead] != 3 || p.sent != 3 {
		t.Fatalf("a call of 3 requests: %d sent, %v granted; want 3 read-ahead tokens", p.sent, s.Granted)
	}
	ctx, err := b.Prepay(context.Background(), "u", 2)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bp.UIDs(ctx, Auth{Username: "U"}, "INBOX"); err != nil {
		t.Fatal(err)
	}
	if s := b.Stats(); s.Granted[Interactive] != 3 {
		t.Fatalf("3 requests with 2 prepaid: %d tokens in all, want 3", s.Granted[Interactive])
	}

	// The budget spent, a charged request waits; an uncharged one does not.
	small := NewBudget(1)
	drain(t, small)
	short, cancel := context.WithTimeout(Charge(context.Background(), small, "u"), 20*time.Millisecond)
	defer cancel()
	if err := Pace(short); err == nil {
		t.Fatal("a request charged to a spent budget went at once")
	}
	if err := Pace(context.Background()); err != nil {
		t.Fatal(err)
	}
	if ctx := Charge(context.Background(), NewBudget(0), "u"); ctx != context.Background() {
		t.Error("an unlimited budget is put in the context")
	}
}

// TestBudgetShare: replicas sharing the provider each spend their part
// (issue 21): with two, one replica's burst is half the budget's, and so
// is what its polls may take; given the whole back, it refills at the full rate.
func TestBudgetShare(t *testing.T) {
	b := NewBudget(40)
	b.SetShare(2)
	if got := b.Share(); got != 2 {
		t.Fatalf("Share = %d, want 2", got)
	}
	if got := b.PollShare(); got != 20 {
		t.Fatalf("PollShare with two replicas = %v, want 20", got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	granted := 0
	for b.Wait(ctx, "u") == nil {
		granted++
	}
	// 20 at once, and at most one more refilled within 20 ms at 20/s.
	if granted < 20 || granted > 21 {
		t.Fatalf("granted at once with two replicas: %d, want 20 (half of 40)", granted)
	}
	b.SetShare(1)
	if got := b.PollShare(); got != 40 {
		t.Fatalf("PollShare alone = %v, want 40", got)
	}
	if b.Rate() != 40 {
		t.Fatalf("Rate = %v, want the configured 40", b.Rate())
	}
	u := NewBudget(0)
	u.SetShare(3)
	if u.Wait(context.Background(), "u") != nil || u.PollShare() != 0 {
		t.Fatal("an unlimited budget stays unlimited when shared")
	}
}
