package mailstore

import (
	"context"
	"errors"
	"time"

	"github.com/directbridge/directbridge/upstream"
)

// APPENDs to one folder share SaveRawMessages calls (issue 22: fewer
// calls per command under a budget). The operation takes several
// messages in one request, so saves are group-committed per folder: one
// SaveRawMessages of a folder is under way at a time, and the APPENDs
// that come meanwhile (while it waits for the provider's budget, or for
// its answer) go together in the next one. Nothing waits for company: a
// save with no call under way goes at once, so a lone APPEND costs what
// it did, and ten clients appending at once cost a call or two per round
// instead of ten. The journal, the arrivals and their pairing with UIDs
// are each message's own, as before (arrivals.go).
//
// Bounds: a batch holds at most saveBatchMax messages and saveBatchBytes
// of them (the provider's request limits are "not shown"; one large
// message still goes alone), and only saves with the same credentials
// share a call.
const (
	saveBatchMax   = 32
	saveBatchBytes = 8 << 20
)

// saveBatch is the saves of one folder that go in one SaveRawMessages.
type saveBatch struct {
	auth  upstream.Auth
	items []*arrival
	bytes int
	done  chan struct{} // closed when every item's outcome is known
}

// fits reports that a save of size bytes with auth may join b.
func (b *saveBatch) fits(auth upstream.Auth, size int) bool {
	return b.auth == auth && len(b.items) < saveBatchMax && b.bytes+size <= saveBatchBytes
}

// save stores a's message at the provider, in a call of its own or with
// other APPENDs to the folder (above), and returns that call's outcome
// for it: nil (saved: a waits to be paired), upstream.ErrUnknownOutcome
// (a is noted uncertain and waits to be found by its bytes), or the
// failure (a is forgotten).
//
// The call is made without ctx's cancellation: it carries other sessions'
// messages, which one client hanging up must not turn into unknown
// outcomes. It is bounded by the store's call timeout instead, so an
// APPEND never waits longer than the call before it and its own.
func (m *Folder) save(ctx context.Context, auth upstream.Auth, a *arrival) error {
	m.mu.Lock()
	if b := m.saveNext; b != nil && b.fits(auth, len(a.raw)) {
		b.items = append(b.items, a)
		b.bytes += len(a.raw)
		m.mu.Unlock()
		<-b.done
		return a.saveErr
	}
	b := &saveBatch{auth: auth, items: []*arrival{a}, bytes: len(a.raw), done: make(chan struct{})}
	m.saveNext = b
	if m.saveSlot == nil {
		m.saveSlot = make(chan struct{}, 1)
	}
	slot := m.saveSlot
	m.mu.Unlock()

	slot <- struct{}{} // the call before this one has been answered
	m.mu.Lock()
	if m.saveNext == b {
		m.saveNext = nil // closed: later saves start the next batch
	}
	m.saveCur = b
	m.mu.Unlock()
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), m.store.cfg.CallTimeout)
	m.sendBatch(cctx, b)
	cancel()
	m.mu.Lock()
	m.saveCur = nil
	m.mu.Unlock()
	<-slot
	close(b.done)
	return a.saveErr
}

// sendBatch makes b's SaveRawMessages and settles each item's outcome.
func (m *Folder) sendBatch(ctx context.Context, b *saveBatch) {
	now := time.Now()
	raws := make([][]byte, len(b.items))
	m.mu.Lock()
	for i, a := range b.items {
		// Asked for now: a refresh that lists the folder from here on
		// waits for the answer before pairing (awaitSaves), so that no
		// message saved through the bridge is shown to sessions without
		// its bytes and flags.
		a.sent = now
		a.done = make(chan struct{})
		m.inflight = append(m.inflight, a)
		raws[i] = a.raw
	}
	m.mu.Unlock()
	err := m.store.cfg.Provider.Save(ctx, b.auth, m.name, raws)
	if err != nil && len(b.items) > 1 && errors.Is(err, upstream.ErrRefused) {
		m.splitRefused(ctx, b, err)
		return
	}
	unknown := errors.Is(err, upstream.ErrUnknownOutcome)
	for _, a := range b.items {
		a.uncertain = unknown
		a.saveErr = err
		m.saveEnded(a, err == nil || unknown)
	}
}

// splitRefused handles a batch of several messages the provider refused.
// One bad message (too large, say) must not fail the APPENDs it shared
// the call with, and what SaveRawMessages does with the others when it
// refuses one is "not shown" (the sandbox saves none): so each message is
// taken as possibly saved, the folder is looked at once for their bytes,
// and those not found are saved again, each in a call of its own whose
// outcome is that APPEND's. Found ones are saved; none is saved twice.
func (m *Folder) splitRefused(ctx context.Context, b *saveBatch, err error) {
	for _, a := range b.items {
		a.uncertain = true
		m.saveEnded(a, true)
	}
	if derr := m.Discover(ctx); derr != nil {
		// The folder could not be read: whether they were saved cannot be
		// told, which the APPENDs' journal entries answer on a retry.
		for _, a := range b.items {
			if m.placed(a) == 0 {
				a.saveErr = errors.Join(upstream.ErrUnknownOutcome, err)
			}
		}
		return
	}
	for _, a := range b.items {
		if m.placed(a) != 0 {
			continue
		}
		raw := a.raw
		m.abandon(a) // which lets its bytes go: they are sent again
		a.raw, a.uncertain = raw, false
		one := &saveBatch{auth: b.auth, items: []*arrival{a}, bytes: len(a.raw)}
		m.sendBatch(ctx, one)
	}
}

// awaitNextSave waits, when a batch of saves to the folder is under way or
// waiting to go, for it to be answered: the refresh that finds the UIDs
// of the batch just answered then finds that batch's too, one light
// refresh for both instead of one each (under a stream of APPENDs, as
// imaptest's, half the refreshes). It waits for that one batch only, so
// an APPEND's answer waits at most one more save.
func (m *Folder) awaitNextSave(ctx context.Context) {
	m.mu.Lock()
	b := m.saveCur
	if b == nil {
		b = m.saveNext
	}
	m.mu.Unlock()
	if b == nil {
		return
	}
	select {
	case <-b.done:
	case <-ctx.Done():
	}
}
