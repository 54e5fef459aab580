package upstream

import (
	"context"
	"errors"
	"slices"
	"strings"
)

// Save calls of one user to one folder that wait for the budget at the
// same time, at the same priority, go out as one SaveRawMessages, which
// takes several messages: while the first waits for its turn, the others
// add their messages (in the order they came; the provider numbers them
// in some order, which the mail engine does not assume: saves that
// overlap in time are paired with their UIDs by metadata and bytes,
// internal/mailstore/arrivals.go).
//
// A save is not safe to repeat, and what a provider that answers a failure
// has done with a request of several messages is "not shown" (the
// documents' codes 3 and 4 say only "other error"). So a merged call is
// never sent again unless it certainly did not reach the provider, and
// its outcome is each caller's as follows:
//
//   - answered: saved, for every caller;
//   - refused for the credentials (ErrAuth) or the folder (ErrNotFound,
//     ErrReserved): the same for every caller, which alone would have got
//     it too; nothing was stored;
//   - turned away before the provider looked at it (HTTP 429, Busy): each
//     caller saves alone;
//   - any other failure, answered or not: unknown, for every caller
//     (ErrUnknownOutcome wrapping it): each looks for its own bytes, as
//     after any lost answer, and a retry is answered from the folder.
//
// A caller whose context ends while its batch still waits for the budget
// takes its message out: certainly not saved (ErrTemporary). Once the
// batch is on its way, it is sent whatever happens to the callers'
// contexts (one client hanging up must not make the others' outcome
// unknown), within the first caller's deadline, and its outcome is
// unknown to a caller that stops waiting.
//
// A batch holds at most saveMergeMax messages (or the REST client's batch
// size, SaveBatchMax) and saveMergeBytes of them, which base64 and JSON
// keep below the smallest request limit the bridge allows (1 MiB): a
// merged save is always one request, which the provider's size limit
// takes whenever each message alone fits. A save that does not fit waits
// for the budget on its own, as without merging.
const (
	saveMergeMax   = 32
	saveMergeBytes = 512 << 10
)

// saveBatch is a merged Save: messages gather while its first caller
// waits for the budget.
type saveBatch struct {
	raws   [][]byte
	owners []*saveCaller // in the order of their messages in raws
	bytes  int
	state  saveState // under the coalescing lock
	done   chan struct{}
	err    error
	alone  bool // callers must save by themselves
}

type saveState int8

const (
	saveWaiting   saveState = iota // gathering, waiting for the budget
	saveSent                       // on its way: no one may leave
	saveAbandoned                  // the first caller gave up: never sent
)

// saveCaller is one Save call's share of a batch.
type saveCaller struct {
	raws [][]byte
}

func (c *coalescing) Save(ctx context.Context, auth Auth, folder string, raws [][]byte) error {
	size := 0
	for _, r := range raws {
		size += len(r)
	}
	if size > saveMergeBytes || len(raws) > c.saveMax {
		return c.Provider.Save(ctx, auth, folder, raws)
	}
	key := batchKey{auth: auth, folder: folder, op: "Save", prio: PriorityOf(ctx)}
	me := &saveCaller{raws: raws}
	c.mu.Lock()
	if b := c.saves[key]; b != nil {
		if len(b.raws)+len(raws) > c.saveMax || b.bytes+size > saveMergeBytes {
			// The batch waiting is full: this save waits on its own.
			c.mu.Unlock()
			return c.Provider.Save(ctx, auth, folder, raws)
		}
		b.owners = append(b.owners, me)
		b.raws = append(b.raws, raws...)
		b.bytes += size
		c.mu.Unlock()
		return c.awaitSave(ctx, key, b, me)
	}
	b := &saveBatch{raws: slices.Clone(raws), owners: []*saveCaller{me}, bytes: size, done: make(chan struct{})}
	c.saves[key] = b
	c.mu.Unlock()

	paid, err := c.b.Prepay(ctx, strings.ToLower(auth.Username), 1)
	c.mu.Lock()
	delete(c.saves, key)
	if err != nil {
		// This caller gave up waiting; the others save by themselves.
		b.state, b.alone = saveAbandoned, true
		c.mu.Unlock()
		close(b.done)
		return Classify("Save", ErrTemporary, err)
	}
	b.state = saveSent
	all, merged := b.raws, len(b.owners) > 1
	c.mu.Unlock()
	if !merged {
		err = c.Provider.Save(paid, auth, folder, all)
		b.err = err
		close(b.done)
		return err
	}
	sendCtx, cancel := context.WithoutCancel(paid), context.CancelFunc(func() {})
	if d, ok := ctx.Deadline(); ok {
		sendCtx, cancel = context.WithDeadline(sendCtx, d)
	}
	err = c.Provider.Save(sendCtx, auth, folder, all)
	cancel()
	switch {
	case err == nil, errors.Is(err, ErrUnknownOutcome), errors.Is(err, ErrAuth),
		errors.Is(err, ErrNotFound), errors.Is(err, ErrReserved):
	case turnedAway(err):
		b.alone = true
		close(b.done)
		return c.Provider.Save(ctx, auth, folder, raws)
	default:
		err = Classify("Save", ErrUnknownOutcome, err)
	}
	b.err = err
	close(b.done)
	return err
}

// turnedAway reports a failure the provider answered before looking at the
// request: it asked the bridge to slow down (HTTP 429).
func turnedAway(err error) bool {
	e := Detail(err)
	return e != nil && e.Busy && errors.Is(err, ErrTemporary)
}

// awaitSave waits for the outcome of batch b that me joined.
func (c *coalescing) awaitSave(ctx context.Context, key batchKey, b *saveBatch, me *saveCaller) error {
	select {
	case <-b.done:
	case <-ctx.Done():
		c.mu.Lock()
		switch b.state {
		case saveWaiting:
			// Still waiting for the budget: taken out, never sent.
			b.remove(me)
			c.mu.Unlock()
			return Classify("Save", ErrTemporary, ctx.Err())
		case saveAbandoned:
			c.mu.Unlock()
			return Classify("Save", ErrTemporary, ctx.Err())
		}
		c.mu.Unlock()
		select {
		case <-b.done: // answered meanwhile: its outcome is known
		default:
			return Classify("Save", ErrUnknownOutcome, ctx.Err())
		}
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
