package upstream

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Priority orders the requests that wait for the provider budget.
type Priority int8

const (
	// Interactive is a request a client is waiting for. It goes first.
	Interactive Priority = iota
	// ReadAhead is a request made in the hope a client will soon need its
	// answer (the next messages of a sequential fetch).
	ReadAhead
	// Poll is a refresh nobody waits for: it goes last, and takes what
	// the others leave.
	Poll
	numPriorities
)

func (p Priority) String() string {
	switch p {
	case Interactive:
		return "interactive"
	case ReadAhead:
		return "readahead"
	case Poll:
		return "poll"
	}
	return "unknown"
}

type priorityKey struct{}

// WithPriority marks the requests made with ctx. Unmarked requests are
// Interactive.
func WithPriority(ctx context.Context, p Priority) context.Context {
	return context.WithValue(ctx, priorityKey{}, p)
}

// PriorityOf returns the priority ctx carries.
func PriorityOf(ctx context.Context) Priority {
	if p, ok := ctx.Value(priorityKey{}).(Priority); ok && p >= 0 && p < numPriorities {
		return p
	}
	return Interactive
}

// Budget spends the provider's request budget: at most rate requests per
// second (with a burst of one second's worth), handed out in priority
// order (Interactive, then ReadAhead, then Poll), and within a priority
// round-robin between users, so one user's mbsync cannot starve another
// user's Thunderbird. Polls go last and take what the clients leave: the
// pollers stretch their intervals so that their polls together fit in the
// rate (see PollShare), and a client's request waits for the next token at
// most, however busy the pollers are. A poll that finds nothing costs one
// call (mailstore's peek), so that a thousand users idling on INBOX at 100
// requests a second see new mail within some ten seconds (issue 22); an
// earlier cap of half the rate for polls made it twenty.
//
// The provider's documents state no rate limit ("Limits: not shown"); the
// rate is the bridge's own courtesy to a real provider. A Budget with
// rate 0 is unlimited and never waits (the embedded sandbox).
//
// Concurrency: every field below mu is guarded by it. Waiters are woken by
// closing their channel from dispatch, which a timer runs when the next
// token is due.
type Budget struct {
	full float64 // the configured rate; 0 is unlimited, and never changes
	now  func() time.Time

	mu sync.Mutex
	// rate and burst are this process's part of full: all of it, or
	// full/n while n replicas share the provider (SetShare).
	rate, burst float64
	replicas    int
	tokens      float64
	last        time.Time
	queues      [numPriorities]userQueues
	timer       *time.Timer
	granted     [numPriorities]uint64
	waited      [numPriorities]time.Duration
}

// userQueues is one priority's waiters, per user, with the users served
// round-robin in order.
type userQueues struct {
	byUser map[string][]*waiter
	order  []string // users with waiters, next to serve first
}

type waiter struct {
	ready chan struct{}
	since time.Time
	done  bool // granted or abandoned
}

// NewBudget returns a Budget of rate requests per second; rate <= 0 is
// unlimited.
func NewBudget(rate float64) *Budget {
	b := &Budget{full: max(rate, 0), rate: max(rate, 0), replicas: 1, now: time.Now}
	b.burst = max(b.rate, 1)
	b.tokens = b.burst
	b.last = b.now()
	for i := range b.queues {
		b.queues[i].byUser = map[string][]*waiter{}
	}
	return b
}

// Rate is the budget in requests per second, for all replicas together;
// 0 is unlimited.
func (b *Budget) Rate() float64 { return b.full }

// SetShare makes this process spend 1/n of the budget, n being the
// replicas that share the provider (their heartbeats, issue 21): the
// provider sees one bridge whatever the replica count. A share taken
// away takes the tokens above it too; one given back fills up at the
// new rate. n < 1 counts as 1.
func (b *Budget) SetShare(n int) {
	if b == nil || b.full == 0 {
		return
	}
	n = max(n, 1)
	b.mu.Lock()
	defer b.mu.Unlock()
	if n == b.replicas {
		return
	}
	b.refillLocked()
	b.replicas = n
	b.rate = b.full / float64(n)
	b.burst = max(b.rate, 1)
	b.tokens = min(b.tokens, b.burst)
}

// Share is the number of replicas this process shares the budget with
// (itself included), as SetShare last set it.
func (b *Budget) Share() int {
	if b == nil {
		return 1
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.replicas
}

// Wait blocks until a request of user at the priority ctx carries may go,
// or ctx ends.
func (b *Budget) Wait(ctx context.Context, user string) error {
	if b == nil || b.full == 0 {
		return ctx.Err()
	}
	p := PriorityOf(ctx)
	b.mu.Lock()
	b.refillLocked()
	if b.idleAheadLocked(p) && b.takeLocked() {
		b.granted[p]++
		b.mu.Unlock()
		return nil
	}
	w := &waiter{ready: make(chan struct{}), since: b.now()}
	q := &b.queues[p]
	if len(q.byUser[user]) == 0 {
		q.order = append(q.order, user)
	}
	q.byUser[user] = append(q.byUser[user], w)
	b.armLocked()
	b.mu.Unlock()

	select {
	case <-w.ready:
		return nil
	case <-ctx.Done():
		b.mu.Lock()
		granted := w.done
		w.done = true
		b.mu.Unlock()
		if granted {
			return nil // the token is spent: use it
		}
		return ctx.Err()
	}
}

// idleAheadLocked reports that no request of priority p or higher waits.
func (b *Budget) idleAheadLocked(p Priority) bool {
	for i := Interactive; i <= p; i++ {
		if len(b.queues[i].order) > 0 {
			return false
		}
	}
	return true
}

func (b *Budget) refillLocked() {
	now := b.now()
	el := now.Sub(b.last).Seconds()
	if el <= 0 {
		return
	}
	b.last = now
	b.tokens = min(b.burst, b.tokens+el*b.rate)
}

// takeLocked spends a token if one is there.
func (b *Budget) takeLocked() bool {
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

// dispatch hands out the tokens that are due, then re-arms the timer.
func (b *Budget) dispatch() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.timer = nil
	b.refillLocked()
	for {
		w, p := b.nextLocked()
		if w == nil {
			break
		}
		b.granted[p]++
		b.waited[p] += b.now().Sub(w.since)
		close(w.ready)
	}
	b.armLocked()
}

// nextLocked takes the next waiter that may go now and spends its token.
func (b *Budget) nextLocked() (*waiter, Priority) {
	for p := Interactive; p < numPriorities; p++ {
		q := &b.queues[p]
		for len(q.order) > 0 {
			user := q.order[0]
			ws := q.byUser[user]
			// Skip waiters that gave up.
			for len(ws) > 0 && ws[0].done {
				ws = ws[1:]
			}
			if len(ws) == 0 {
				delete(q.byUser, user)
				q.order = q.order[1:]
				continue
			}
			if !b.takeLocked() {
				q.byUser[user] = ws
				return nil, 0
			}
			w := ws[0]
			w.done = true
			ws = ws[1:]
			q.order = q.order[1:]
			if len(ws) > 0 {
				q.byUser[user] = ws
				q.order = append(q.order, user) // round-robin
			} else {
				delete(q.byUser, user)
			}
			return w, p
		}
	}
	return nil, 0
}

// armLocked sets the timer for when the next token is due, if anyone
// waits.
func (b *Budget) armLocked() {
	if b.timer != nil {
		return
	}
	waiting := false
	for i := range b.queues {
		if len(b.queues[i].order) > 0 {
			waiting = true
		}
	}
	if !waiting {
		return
	}
	need := max(1-b.tokens, 0)
	d := time.Duration(need / b.rate * float64(time.Second))
	b.timer = time.AfterFunc(max(d, time.Millisecond), b.dispatch)
}

// PollShare is the number of requests per second the budget lets all
// pollers make together (all of it, behind the clients' requests), or 0
// when unlimited. Pollers stretch their intervals so that their polls fit
// in it.
func (b *Budget) PollShare() float64 {
	if b == nil {
		return 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.rate
}

// BudgetStats is what a Budget has handed out, for metrics.
type BudgetStats struct {
	Granted [numPriorities]uint64
	Waited  [numPriorities]time.Duration
	Queued  [numPriorities]int
}

// Stats returns counts since the start.
func (b *Budget) Stats() BudgetStats {
	var s BudgetStats
	if b == nil {
		return s
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	s.Granted, s.Waited = b.granted, b.waited
	for i := range b.queues {
		for _, ws := range b.queues[i].byUser {
			s.Queued[i] += len(ws)
		}
	}
	return s
}

type prepaidKey struct{}

// Prepay waits for n requests' worth of the budget for user, at the
// priority ctx carries, and returns a context whose first n requests do
// not wait again: HTTP requests of a provider that paces itself (see
// Charge), calls of any other through WithBudget. Requests beyond them (a
// refresh that found changes, a retry) wait at ctx's priority. A poller
// prepays its refresh before it starts, so that a client that joins the
// refresh under way (a SELECT sharing it) never waits behind polls in the
// budget's queue, while polls still take no more than their share.
func (b *Budget) Prepay(ctx context.Context, user string, n int) (context.Context, error) {
	if b == nil || b.full == 0 || n <= 0 {
		return ctx, ctx.Err()
	}
	for range n {
		if err := b.Wait(ctx, strings.ToLower(user)); err != nil {
			return ctx, err
		}
	}
	left := new(atomic.Int64)
	left.Store(int64(n))
	return context.WithValue(ctx, prepaidKey{}, left), nil
}

// prepaid takes one prepaid request from ctx, if it has any left.
func prepaid(ctx context.Context) bool {
	left, ok := ctx.Value(prepaidKey{}).(*atomic.Int64)
	return ok && left.Add(-1) >= 0
}
