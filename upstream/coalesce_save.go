package upstream

import (
	"context"
	"errors"
	"slices"
	"strings"
)

// Save calls of one user to one folder that wait for the budget at the
// same time go out as one SaveRawMessages, which takes several messages:
// while the first waits for its turn, the others add their messages (in
// the order they came; the provider numbers them in some order, which the
// mail engine does not assume: saves that overlap in time are paired with
// their UIDs by metadata, internal/mailstore/arrivals.go). A save is not
// safe to repeat, so the outcome of a merged call is each caller's as
// follows:
//
//   - answered: saved, for every caller;
//   - ErrUnknownOutcome: unknown, for every caller (each looks for its own
//     bytes, as after any lost answer);
//   - ErrRefused: what SaveRawMessages does with the other messages when
//     it refuses a request is "not shown", so some may be stored: unknown
//     for every caller (ErrUnknownOutcome wrapping the refusal), never
//     repeated blindly;
//   - ErrTemporary: certainly not carried out (not asked, or not answered
//     in time before anything was sent): each caller repeats its own save
//     alone, so one caller's failure is not the others';
//   - any other class (the credentials, the folder) is every caller's.
//
// A caller whose context ends while its batch still waits for the budget
// takes its message out: certainly not saved (ErrTemporary). Once the
// batch is on its way, its outcome is unknown to that caller.
//
// A batch holds at most saveMergeMax messages of at most saveMergeBytes
// in all (the provider's request limits are "not shown"); a save that
// does not fit waits for the budget on its own, as without merging.
const (
	saveMergeMax   = 32
	saveMergeBytes = 8 << 20
)

// saveBatch is a merged Save: messages gather while its first caller
// waits for the budget.
type saveBatch struct {
	raws   [][]byte
	owners []*saveCaller // in the order of their messages in raws
	bytes  int
	done   chan struct{}
	err    error
	alone  bool // callers must repeat their own save
}

// saveCaller is one Save call's share of a batch.
type saveCaller struct {
	raws [][]byte
}

func (c *coalescing) Save(ctx context.Context, auth Auth, folder string, raws [][]byte) error {
	size := 0
	for _, r := range raws {
		size += len(r)
	}
	key := batchKey{auth: auth, folder: folder, op: "Save"}
	me := &saveCaller{raws: raws}
	c.mu.Lock()
	if b := c.saves[key]; b != nil && len(b.raws)+len(raws) <= saveMergeMax && b.bytes+size <= saveMergeBytes {
		b.owners = append(b.owners, me)
		b.raws = append(b.raws, raws...)
		b.bytes += size
		c.mu.Unlock()
		return c.awaitSave(ctx, key, b, me)
	}
	if c.saves[key] != nil {
		// The batch waiting is full: this save waits on its own.
		c.mu.Unlock()
		return c.Provider.Save(ctx, auth, folder, raws)
	}
	b := &saveBatch{raws: slices.Clone(raws), owners: []*saveCaller{me}, bytes: size, done: make(chan struct{})}
	c.saves[key] = b
	c.mu.Unlock()

	paid, err := c.b.Prepay(ctx, strings.ToLower(auth.Username), 1)
	c.mu.Lock()
	if c.saves[key] == b {
		delete(c.saves, key)
	}
	all, merged := b.raws, len(b.owners) > 1
	c.mu.Unlock()
	if err != nil {
		// This caller gave up waiting; the others save by themselves.
		b.alone = true
		close(b.done)
		return Classify("Save", ErrTemporary, err)
	}
	if !merged {
		err = c.Provider.Save(paid, auth, folder, all)
		b.err = err
		close(b.done)
		return err
	}
	err = c.Provider.Save(paid, auth, folder, all)
	switch {
	case err == nil, errors.Is(err, ErrUnknownOutcome):
	case errors.Is(err, ErrRefused):
		err = Classify("Save", ErrUnknownOutcome, err)
	case errors.Is(err, ErrTemporary):
		b.alone = true
		close(b.done)
		return c.Provider.Save(ctx, auth, folder, raws)
	}
	b.err = err
	close(b.done)
	return err
}

// awaitSave waits for the outcome of batch b that me joined.
func (c *coalescing) awaitSave(ctx context.Context, key batchKey, b *saveBatch, me *saveCaller) error {
	select {
	case <-b.done:
	case <-ctx.Done():
		c.mu.Lock()
		if c.saves[key] == b {
			// Still waiting for the budget: taken out, never sent.
			b.remove(me)
			c.mu.Unlock()
			return Classify("Save", ErrTemporary, ctx.Err())
		}
		c.mu.Unlock()
		// On its way: the message may be saved.
		return Classify("Save", ErrUnknownOutcome, ctx.Err())
	}
	if b.alone {
		return c.Provider.Save(ctx, key.auth, key.folder, me.raws)
	}
	return b.err
}

// remove takes me's messages out of b (under the coalescing lock, while
// b waits for the budget).
func (b *saveBatch) remove(me *saveCaller) {
	i := slices.Index(b.owners, me)
	if i < 0 {
		return
	}
	start := 0
	for _, o := range b.owners[:i] {
		start += len(o.raws)
	}
	b.raws = slices.Delete(b.raws, start, start+len(me.raws))
	b.owners = slices.Delete(b.owners, i, i+1)
	for _, r := range me.raws {
		b.bytes -= len(r)
	}
}
