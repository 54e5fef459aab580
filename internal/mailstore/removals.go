package mailstore

import (
	"context"
	"fmt"
	"slices"

	"github.com/emersion/go-imap/v2"

	"github.com/directbridge/directbridge/upstream"
)

// Several connections on one folder often expunge the same messages at
// once: each sees \Deleted on them (set by any of them) and sends its
// EXPUNGE. Sent as they come, all but the first DeleteMessagesByUIDs would
// be refused (the provider refuses a whole request when one UID is gone),
// and each refusal costs a listing and a retry (mutateExisting): in
// imaptest's stress two Deletes in three were refused. Instead a removal
// under way claims its UIDs (Folder.removing); an EXPUNGE naming claimed
// UIDs removes the others itself and waits for the claim's outcome, within
// its own context (internal/mailstore/doc.go: every wait is bounded). What the
// claim removed is removed for the waiter too (RFC 9051 §6.4.3 asks only
// that the messages be gone when EXPUNGE answers OK, and their EXPUNGE
// responses reach every view); what it failed to remove the waiter tries
// again itself. A claim to the Trash is not shared with a removal for
// good, nor the other way round: a message a connection copied away must
// not end in the Trash as well (imapbackend's copiedAway); two removals of
// different kinds of one message race as before (the loser's request is
// refused and retried without it, mutateExisting).

// removal is one DeleteMessagesByUIDs under way (its retries included).
type removal struct {
	forever bool
	done    chan struct{}
	removed map[imap.UID]bool // what it removed; set before done closes
}

// awaited is a removal another command has under way for some of the
// UIDs asked.
type awaited struct {
	r    *removal
	uids []imap.UID
}

// removeAtProvider removes uids from the folder at the provider (for
// good or to the Trash) and from the mirror, sharing the removals under
// way for the same UIDs. It returns the UIDs removed (by this call or
// by one it waited for); on error, those removed before it.
func (m *Folder) removeAtProvider(ctx context.Context, auth upstream.Auth, uids []imap.UID, forever bool) ([]imap.UID, error) {
	validity := m.Validity()
	op := func(u []int64) error { return m.store.cfg.Provider.Delete(ctx, auth, m.name, u, forever) }
	var removed []imap.UID
	// Each round either removes the UIDs claimed or waits for another's
	// claim; a UID whose claim failed is tried again in the next round,
	// by this call: bounded, as every round ends a claim.
	for round := 0; len(uids) > 0 && round <= mutateRetries; round++ {
		mine, waits := m.claimRemoval(uids, forever)
		if mine != nil {
			done, err := m.mutateExisting(ctx, auth, mine.uids(), op)
			m.remove(ctx, validity, done)
			m.endRemoval(mine, done)
			removed = append(removed, done...)
			if err != nil {
				return removed, err
			}
		}
		uids = nil
		for _, w := range waits {
			select {
			case <-w.r.done:
			case <-ctx.Done():
				return removed, ctx.Err()
			}
			for _, u := range w.uids {
				if w.r.removed[u] {
					removed = append(removed, u)
				} else {
					uids = append(uids, u)
				}
			}
		}
	}
	if len(uids) > 0 {
		// Every round waited for another's removal of these, and each
		// failed: they may still be there.
		return removed, fmt.Errorf("%w: removing messages another command failed to remove", upstream.ErrTemporary)
	}
	return removed, nil
}

// uids lists the UIDs a removal claimed, ascending.
func (r *removal) uids() []imap.UID {
	out := make([]imap.UID, 0, len(r.removed))
	for u := range r.removed {
		out = append(out, u)
	}
	slices.Sort(out)
	return out
}

// claimRemoval claims the UIDs of uids that the mirror still has and no
// removal of the same kind has claimed (mine, nil when none), and returns
// the removals under way for the others. A UID the mirror no longer has
// is gone already and left out.
func (m *Folder) claimRemoval(uids []imap.UID, forever bool) (mine *removal, waits []awaited) {
	m.mu.Lock()
	defer m.mu.Unlock()
	byRemoval := map[*removal]int{}
	for _, u := range uids {
		if !m.live(u) {
			continue
		}
		if r := m.removing[u]; r != nil && r.forever == forever {
			i, ok := byRemoval[r]
			if !ok {
				i = len(waits)
				byRemoval[r] = i
				waits = append(waits, awaited{r: r})
			}
			waits[i].uids = append(waits[i].uids, u)
			continue
		}
		if mine == nil {
			mine = &removal{forever: forever, done: make(chan struct{}), removed: map[imap.UID]bool{}}
		}
		mine.removed[u] = false
		if m.removing == nil {
			m.removing = map[imap.UID]*removal{}
		}
		if m.removing[u] == nil {
			m.removing[u] = mine
		}
	}
	return mine, waits
}

// endRemoval records what a removal did (done) and lets its waiters go.
func (m *Folder) endRemoval(r *removal, done []imap.UID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for u := range r.removed {
		if m.removing[u] == r {
			delete(m.removing, u)
		}
	}
	clear(r.removed)
	for _, u := range done {
		r.removed[u] = true
	}
	close(r.done)
}
