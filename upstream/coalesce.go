package upstream

import (
	"context"
	"slices"
	"strings"
	"sync"
)

// WithCoalescing returns p with the SetRead and Delete calls of one user on
// one folder that wait for the budget at the same time merged into one
// call: while the first waits for its turn, the others add their UIDs to
// it. Several sessions on a folder (a client's parallel connections,
// imaptest's ten) each marking or expunging a few messages then cost one
// request instead of one each, where the budget is what limits them.
//
// p must not wait for b itself (wrap the provider WithBudget first: the
// merged call's first request spends the token the first caller waited
// for, through Prepay; further batches of a long UID list wait again).
// With no budget there is no wait to merge in, and p is returned.
//
// Both operations take a set of UIDs and are safe to repeat, so a merged
// call the provider refuses (one caller's UID was expunged meanwhile, and
// a provider refuses the whole request) is repeated by each caller alone,
// and each gets the answer to its own UIDs.
//
// Save calls are merged too (coalesce_save.go), with other rules: a save
// is not safe to repeat.
func WithCoalescing(p Provider, b *Budget, opts ...CoalesceOption) Provider {
	if b == nil || b.Rate() == 0 {
		return p
	}
	c := &coalescing{Provider: p, b: b, open: map[batchKey]*batch{}, saves: map[batchKey]*saveBatch{}, saveMax: saveMergeMax}
	for _, o := range opts {
		o(c)
	}
	return c
}

// CoalesceOption adjusts WithCoalescing.
type CoalesceOption func(*coalescing)

// SaveBatchMax caps the messages of a merged Save at n (at least 1): the
// REST client's batch size, so that a merged save is always one request
// (a split one that failed half way would leave every caller's outcome
// unknown).
func SaveBatchMax(n int) CoalesceOption {
	return func(c *coalescing) { c.saveMax = max(1, min(n, saveMergeMax)) }
}

type coalescing struct {
	Provider
	b *Budget

	mu      sync.Mutex
	open    map[batchKey]*batch     // batches waiting for the budget
	saves   map[batchKey]*saveBatch // Save batches waiting for the budget
	saveMax int                     // messages per merged Save
}

// batchKey is what calls must share to be merged.
type batchKey struct {
	auth   Auth // the same credentials: a merged call is made with them
	folder string
	op     string
	flag   bool // SetRead's read, Delete's forever
	// prio is the budget priority a merged Save waits at: a background
	// save (a bounce filed by the tracker) must not hold a client's
	// APPEND back at its own priority.
	prio Priority
}

// batch is a merged call: UIDs gather while its first caller waits.
type batch struct {
	uids    []int64
	callers int
	done    chan struct{}
	err     error
	alone   bool // callers must repeat their own call (see merge)
}

func (c *coalescing) SetRead(ctx context.Context, auth Auth, folder string, uids []int64, read bool) error {
	return c.merge(ctx, batchKey{auth: auth, folder: folder, op: "SetRead", flag: read}, uids, func(ctx context.Context, uids []int64) error {
		return c.Provider.SetRead(ctx, auth, folder, uids, read)
	})
}

func (c *coalescing) Delete(ctx context.Context, auth Auth, folder string, uids []int64, forever bool) error {
	return c.merge(ctx, batchKey{auth: auth, folder: folder, op: "Delete", flag: forever}, uids, func(ctx context.Context, uids []int64) error {
		return c.Provider.Delete(ctx, auth, folder, uids, forever)
	})
}

// merge joins the batch of key waiting for the budget, or starts one and
// waits for the budget itself, then makes the call for every UID gathered.
func (c *coalescing) merge(ctx context.Context, key batchKey, uids []int64, call func(context.Context, []int64) error) error {
	c.mu.Lock()
	if b := c.open[key]; b != nil {
		b.uids = append(b.uids, uids...)
		b.callers++
		c.mu.Unlock()
		select {
		case <-b.done:
		case <-ctx.Done():
			// The UIDs may still be in the call: the outcome is not known.
			return Classify(key.op, ErrUnknownOutcome, ctx.Err())
		}
		if b.alone {
			return call(ctx, uids) // through the budget, on its own
		}
		return b.err
	}
	b := &batch{uids: slices.Clone(uids), callers: 1, done: make(chan struct{})}
	c.open[key] = b
	c.mu.Unlock()

	paid, err := c.b.Prepay(ctx, strings.ToLower(key.auth.Username), 1)
	c.mu.Lock()
	delete(c.open, key)
	all, merged := b.uids, b.callers > 1
	c.mu.Unlock()
	if err != nil {
		// This caller gave up waiting; the others go on by themselves.
		b.alone = true
		close(b.done)
		return Classify(key.op, ErrTemporary, err)
	}
	slices.Sort(all)
	err = call(paid, slices.Compact(all))
	if merged && IsRefusal(err) {
		b.alone = true
		close(b.done)
		return call(ctx, uids)
	}
	b.err = err
	close(b.done)
	return err
}
