package mailstore

import (
	"context"
	"slices"
	"time"

	"github.com/emersion/go-imap/v2"

	"github.com/directbridge/directbridge/internal/seqview"
	"github.com/directbridge/directbridge/internal/state"
	"github.com/directbridge/directbridge/upstream/directapi"
)

// A poll that finds nothing must be cheap: with a real provider's budget
// (100 requests a second) shared by a thousand users idling on INBOX,
// every call a poll spends is a second more before new mail shows (issue
// 22). A full refresh costs two calls (GetUIDs and GetUnreadMessageCount)
// and tells everything: arrivals, expunges and read state changed
// elsewhere. Most polls peek instead: one SearchMessagesMetadataByReceivedDate
// over what was received since the last look. New mail is received now,
// so the peek finds it and shows it from the metadata it answered with
// (or has a full refresh follow at once when it cannot), without waiting
// for the next full refresh (but see peekSkew). What a peek cannot see (messages
// expunged, read or copied in by another client of the provider: a copy
// keeps its source's received date) waits for the full refresh, which
// polls make as often as their budget lets (Store.pollTimes), and for a
// command that refreshes (SELECT, and commands that change the folder).

// fullShare is the part of the polls' budget that full refreshes get;
// peeks get the rest. With a thousand folders watched at 100 requests a
// second, each is peeked at every 10.2 s and refreshed in full every
// 1,000 s; with eight, peeked at every second and refreshed in full every
// 8 s. Without a budget (the embedded sandbox) every poll is full.
const fullShare = 1.0 / 50

// fullMax bounds the time between two full refreshes of a folder, however
// many are watched: past it, they cost more than their share.
const fullMax = 30 * time.Minute

// peekSkew widens a peek's window either way while the provider's clock
// is not known (provclock.go): received dates are the provider's clock.
// The clock is learnt from the bridge's own saves (APPEND); a provider
// whose clock runs more than this behind the bridge's, on a mailbox the
// bridge never saved to, has its new mail found by full refreshes only.
const peekSkew = metaSkew

// peekMargin starts a peek's window this much before the last look: mail
// dated received before a look but searchable only after it (a delivery
// pipeline that commits late) is still found by the next peek. UIDs the
// mirror knows are left out of the answer anyway.
const peekMargin = time.Minute

// peek asks the provider for the messages received in the folder since
// the last look (one call) and shows those new to the mirror
// (placeFound); refresh reports new mail it could not show so: then the
// caller refreshes in full. started is when the peek began (the
// bridge's clock). A folder whose state a peek cannot judge (not loaded,
// saves or transfers under way, whose UIDs only a listing pairs) asks
// for the full refresh without a call, as before peeks.
func (m *Folder) peek(ctx context.Context, started time.Time) (found, refresh bool, err error) {
	m.mu.Lock()
	if !m.placeableLocked(m.validity, m.uidNext) {
		m.mu.Unlock()
		return false, true, nil
	}
	auth, uidNext := m.auth, m.uidNext
	since := m.lastLookLocked()
	m.mu.Unlock()
	begin, end, ok := m.store.clock.window(since.Add(-peekMargin), started)
	if !ok {
		begin, end = since.Add(-peekMargin-peekSkew), started.Add(peekSkew)
	}
	// Nothing received can be dated later than now on the provider's
	// clock, however far off the estimate: a day past it costs nothing.
	end = end.Add(24 * time.Hour)
	details, err := m.store.cfg.Provider.MetadataReceived(ctx, auth, m.name, begin, end)
	if err != nil {
		return false, false, err
	}
	var fresh []imap.UID
	byUID := make(map[imap.UID]*directapi.MessageDetail, len(details))
	m.mu.Lock()
	for i := range details {
		d := &details[i]
		if d.UID <= 0 || d.UID > MaxUID {
			continue
		}
		u := imap.UID(d.UID)
		if _, gone := m.removed[u]; u >= uidNext && !gone && m.byUID[u] == nil && byUID[u] == nil {
			fresh = append(fresh, u)
			byUID[u] = d
		}
	}
	if len(fresh) == 0 && m.uidNext == uidNext && started.After(m.lastPeek) {
		m.lastPeek = started
	}
	m.mu.Unlock()
	if len(fresh) == 0 {
		return false, false, nil
	}
	placed, err := m.placeFound(ctx, uidNext, fresh, byUID)
	if err != nil || !placed {
		return true, true, err // the caller's full refresh shows them
	}
	m.mu.Lock()
	if started.After(m.lastPeek) {
		m.lastPeek = started
	}
	m.mu.Unlock()
	return true, false, nil
}

// peekable reports whether a peek can judge the folder: loaded, and no
// save, arrival or transfer under way whose UIDs only a listing pairs
// (arrivals.go; savedAt: arrivals a light refresh took out of pending
// and has not shown yet). Called with m.mu held.
func (m *Folder) peekable() bool {
	return m.loaded && m.mb != nil && m.gone == nil && len(m.pending) == 0 && len(m.inflight) == 0 &&
		len(m.unclaimed) == 0 && len(m.savedAt) == 0
}

// placeFound shows new mail a peek found (fresh, from the metadata
// byUID) without the full refresh that would list the folder again (two
// calls more per message delivered, on a budget the polls of every
// folder share): when the new UIDs run on from the mirror's UIDNEXT
// without a hole, as deliveries do, and no flags written down for copies
// wait (pendingFlagsFor, which only a listing refresh applies). They are
// shown unread, as mail just delivered is: the metadata holds no read
// state. One read in the provider's web interface meanwhile, or copied in
// by another client from a message read there (a copy of recent mail is
// dated recent), shows read at the next full refresh (the count
// disagrees). The UIDNEXT mark and any kept flags are written
// first, in one transaction, as a refresh writes them. placed is false
// when the mirror moved meanwhile or the rule does not hold: the caller
// refreshes in full.
func (m *Folder) placeFound(ctx context.Context, uidNext imap.UID, fresh []imap.UID, byUID map[imap.UID]*directapi.MessageDetail) (placed bool, err error) {
	slices.Sort(fresh)
	for i, u := range fresh {
		if u != uidNext+imap.UID(i) {
			return false, nil // a hole: a message the search does not show (a copy) or one gone
		}
	}
	st := m.store.cfg.State
	if pend, err := st.PendingFlagsOf(ctx, m.user, m.name); err != nil || len(pend) > 0 {
		return false, err
	}
	m.mu.Lock()
	validity := m.validity
	m.mu.Unlock()
	kept, err := st.FlagsFrom(ctx, m.user, m.name, validity, uint32(fresh[0]))
	if err != nil {
		return false, err
	}
	// Checked again below, after the write; checked here too, so that a
	// mirror that moved meanwhile does not get the mark raised for a
	// refresh that will place these itself (on a shared store a mark
	// above the mirror's UIDNEXT reads as another replica's, seenElsewhere).
	if !m.stillPlaceable(validity, uidNext) {
		return false, nil
	}
	before, err := st.WriteRefresh(ctx, m.user, m.name, validity, state.RefreshWrite{MaxUID: uint32(fresh[len(fresh)-1])})
	if err != nil {
		return false, err
	}
	m.seenElsewhere(before)
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.placeableLocked(validity, uidNext) {
		return false, nil
	}
	m.version++
	m.readInferredLocked() // shown unread: the provider's count will tell
	if m.added == nil {
		m.added = map[imap.UID]uint64{}
	}
	add := make([]seqview.NewMessage, 0, len(fresh))
	for _, u := range fresh {
		m.byUID[u] = &Message{UID: u, meta: metaOnly(byUID[u])}
		m.added[u] = m.version
		add = append(add, seqview.NewMessage{UID: u, Flags: withSeen(canonicalFlags(kept[uint32(u)]), false)})
	}
	if err := m.showAddLocked(add); err != nil {
		return false, err
	}
	m.raiseUIDNextLocked(fresh) // written above
	return true, nil
}

// stillPlaceable is placeableLocked, taking the lock.
func (m *Folder) stillPlaceable(validity uint32, uidNext imap.UID) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.placeableLocked(validity, uidNext)
}

// placeableLocked reports whether what a peek found can still be placed:
// the mirror as the peek saw it (validity, UIDNEXT), nothing under way a
// listing must pair, and no COPY or MOVE into the folder begun during the
// search, whose copies (dated as their sources) it may have found: they
// are the transfer's to show, with their sources' flags (holdBackLocked).
func (m *Folder) placeableLocked(validity uint32, uidNext imap.UID) bool {
	if m.dropped || m.validity != validity || m.uidNext != uidNext || !m.peekable() {
		return false
	}
	_, busy := m.store.transferFloor(m.user, m.name)
	return !busy
}

// lastLookLocked is when the provider was last asked about new mail in
// the folder: the last full refresh or peek that started.
func (m *Folder) lastLookLocked() time.Time {
	if m.lastPeek.After(m.lastStart) {
		return m.lastPeek
	}
	return m.lastStart
}
