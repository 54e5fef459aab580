package mailstore

import (
	"context"
	"slices"

	"github.com/emersion/go-imap/v2"

	"github.com/directbridge/directbridge/internal/seqview"
	"github.com/directbridge/directbridge/upstream"
)

// STOREs of \Seen on one folder from several sessions share provider
// calls (issue 22: fewer calls per command under a budget). Each
// direction's call and its showing are one step per folder already
// (seenMu, flags.go), so sessions that STORE at once queue there; instead
// of each making its own call in turn, the ones that queue behind a call
// under way go together in the next: one MarkMessagesAsReadByUIDs (or
// ...Unread) of the union of their UIDs. A lone STORE goes at once, as
// before. Each session's UIDs are picked from the mirror when the shared
// call is about to be made, under seenMu, as its own call would have
// picked them, and each is shown the UIDs of its own that were marked;
// the other sessions get FETCH FLAGS as for any change.

// seenReq is one STORE's share of a read marking.
type seenReq struct {
	// pick returns the UIDs this STORE needs marked, read from the
	// mirror under seenMu.
	pick   func() []imap.UID
	source *seqview.View // the session, which is not sent FETCH FLAGS
	uids   []imap.UID    // picked
	done   []imap.UID    // marked: set before the batch's done closes
	err    error
}

// seenBatch is the STOREs that go in one read marking.
type seenBatch struct {
	auth upstream.Auth
	reqs []*seenReq
	done chan struct{}
}

// markSeen marks the UIDs r picks read or unread at the provider, in a
// call shared with the STOREs that queue with it (above), and shows the
// change. It returns the UIDs picked and those marked; messages gone at
// the provider are left out of the latter (mutateExisting). On failure the mirror learns the provider's
// read state again, as after any failed marking, and every STORE of the
// call gets the error.
//
// The call is made without ctx's cancellation (it carries other sessions'
// changes) and bounded by the store's call timeout.
func (m *Folder) markSeen(ctx context.Context, auth upstream.Auth, read bool, r *seenReq) (picked, done []imap.UID, err error) {
	i := 0
	if read {
		i = 1
	}
	m.mu.Lock()
	if b := m.seenNext[i]; b != nil && b.auth == auth {
		b.reqs = append(b.reqs, r)
		m.mu.Unlock()
		<-b.done
		return r.uids, r.done, r.err
	}
	b := &seenBatch{auth: auth, reqs: []*seenReq{r}, done: make(chan struct{})}
	m.seenNext[i] = b
	m.mu.Unlock()

	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), m.store.cfg.CallTimeout)
	defer cancel()
	err = m.seenMu.Lock(lctx)
	m.mu.Lock()
	if m.seenNext[i] == b {
		m.seenNext[i] = nil // closed: later STOREs start the next batch
	}
	m.mu.Unlock()
	if err != nil {
		for _, q := range b.reqs {
			q.err = err
		}
		close(b.done)
		return nil, nil, err
	}
	m.sendSeen(lctx, auth, read, b)
	close(b.done)
	return r.uids, r.done, r.err
}

// sendSeen makes b's read marking, holding seenMu, and releases it.
func (m *Folder) sendSeen(ctx context.Context, auth upstream.Auth, read bool, b *seenBatch) {
	var union []imap.UID
	for _, q := range b.reqs {
		q.uids = q.pick()
		union = append(union, q.uids...)
	}
	slices.Sort(union)
	union = slices.Compact(union)
	if len(union) == 0 {
		m.seenMu.Unlock()
		return
	}
	mark := func(u []int64) error { return m.store.cfg.Provider.SetRead(ctx, auth, m.name, u, read) }
	done, err := m.mutateExisting(ctx, auth, union, mark)
	if err != nil {
		// The failed call may have been carried out in part or in whole
		// (an answer lost): the mirror learns the provider's read state
		// again (after seenMu: a refresh takes it).
		m.readUnsureNow()
		m.seenMu.Unlock()
		m.resync(ctx, "after a failed read marking")
		for _, q := range b.reqs {
			q.err = err
		}
		return
	}
	marked := make(map[imap.UID]bool, len(done))
	for _, u := range done {
		marked[u] = true
	}
	for _, q := range b.reqs {
		var shownNow []shown
		for _, u := range q.uids {
			if marked[u] {
				q.done = append(q.done, u)
				shownNow = append(shownNow, shown{UID: u, Seen: &read})
			}
		}
		m.show(shownNow, q.source)
	}
	m.seenMu.Unlock()
}
