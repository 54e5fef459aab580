package mailstore

import (
	"context"
	"slices"
	"time"

	"github.com/emersion/go-imap/v2"

	"github.com/directbridge/directbridge/internal/seqview"
	"github.com/directbridge/directbridge/internal/state"
)

// An APPEND needs its message's UID (APPENDUID, RFC 4315 §3) and the
// EXISTS of its folder (RFC 9051 §6.3.12). A light refresh finds them by
// listing the folder (GetUIDs) and confirming the pairing with the new
// messages' metadata (SearchMessagesMetadataByReceivedDate): two round
// trips one after the other, and a listing of the whole folder, dear on
// a large one, for every APPEND. Once the provider's clock is known
// (provclock.go), the metadata of what was received since the oldest
// arrival saved after the last listing alone tells the new UIDs:
// discoverBySearch places the arrivals from it, in one round trip. The
// search is open at the end (it may wait for the budget, and what was
// saved meanwhile is in its answer too), and an older arrival the last
// listing could not pair (its message expunged at once, or listed before
// its save was answered) is left to the listings (unlisted), so that it
// does not send every later refresh to the listing too.
//
// It applies only where it is as certain as the listing: the UIDs above
// those the mirror knows that the answer holds run on from the mirror's
// UIDNEXT without a hole, each is paired with an arrival (pairByRead), and
// no transfer into the folder is under way. A hole may be a message the
// search does not show (a copy keeps its source's received date) or one
// removed meanwhile, which only a listing tells apart; a UID paired with
// no arrival is mail that came in as well. Then it does nothing, and the
// refresh lists the folder as before. It never removes anything from the
// mirror: removals are the business of the listing refreshes (polls,
// commands that change the folder).

// discoverBySearch places the arrivals waiting from the provider's
// metadata, for a light refresh that started at started. done is false
// when it did nothing (the caller lists the folder).
func (m *Folder) discoverBySearch(ctx context.Context, started time.Time) (done bool, err error) {
	m.mu.Lock()
	if !m.loaded || m.mb == nil || m.gone != nil || len(m.pending) == 0 || len(m.unclaimed) > 0 ||
		slices.ContainsFunc(m.pending, func(a *arrival) bool { return a.uncertain }) {
		m.mu.Unlock()
		return false, nil
	}
	auth, uidNext, validity, listedAt := m.auth, m.uidNext, m.validity, m.listedAt
	candidates := unlisted(m.pending, listedAt, time.Time{})
	m.mu.Unlock()
	if len(candidates) == 0 {
		return false, nil
	}
	since := earliestSent(candidates)
	asked := time.Now()
	begin, end, ok := m.store.clock.window(since, asked)
	if !ok {
		return false, nil
	}
	// Open at the end: the search may wait for the provider's budget,
	// and what was saved meanwhile is in its answer too.
	end = end.Add(openEnd)
	if _, busy := m.store.transferFloor(m.user, m.name); busy {
		return false, nil // copies may be coming, whose UIDs only a listing shows
	}
	details, err := m.store.cfg.Provider.MetadataReceived(ctx, auth, m.name, begin, end)
	if err != nil {
		// The listing may still work (a search refused or rate limited).
		m.store.cfg.Logger.Warn("imap append: reading new messages failed", "user", m.user, "err", err)
		return false, nil
	}
	// A save asked before the answer came may be in it: its arrival is
	// needed to pair it.
	if err := m.awaitSaves(ctx, time.Now()); err != nil {
		return false, err
	}
	var newUIDs []imap.UID
	for _, d := range details {
		if d.UID >= int64(uidNext) && d.UID <= MaxUID {
			newUIDs = append(newUIDs, imap.UID(d.UID))
		}
	}
	slices.Sort(newUIDs)
	for i, u := range newUIDs {
		if u != uidNext+imap.UID(i) {
			return false, nil // a hole, or the same UID twice
		}
	}
	m.mu.Lock()
	// Every arrival since the last listing, if the answer holds them all;
	// else those answered before the search was asked, which it must
	// hold (the others were saved after the provider answered).
	pending := unlisted(m.pending, listedAt, time.Time{})
	if len(newUIDs) < len(pending) {
		pending = unlisted(pending, listedAt, asked)
	}
	// Anything that changed meanwhile is for the listing: an arrival
	// whose save's answer was lost (only its bytes may place it), a
	// folder gone, UIDs shown by another way.
	stale := m.uidNext != uidNext || len(m.unclaimed) > 0 || m.gone != nil ||
		slices.ContainsFunc(pending, func(a *arrival) bool { return a.uncertain })
	m.mu.Unlock()
	if stale || len(newUIDs) == 0 || len(newUIDs) != len(pending) {
		return false, nil
	}
	pairs := pairByRead(pending, newUIDs, details, asked)
	if len(pairs) != len(pending) {
		return false, nil
	}
	// What the listing refresh writes for arrivals: their kept flags and
	// the largest UID, in one transaction, before anyone sees them.
	w := state.RefreshWrite{MaxUID: uint32(newUIDs[len(newUIDs)-1])}
	var readUIDs []imap.UID
	shown := make(map[imap.UID][]imap.Flag, len(pairs))
	for i, u := range pairs {
		a := pending[i]
		m.store.clock.learn(a.sent, a.at, detailOf(details, u).ReceivedDate.Time)
		if len(a.kept) > 0 {
			if w.Flags == nil {
				w.Flags = map[uint32][]string{}
			}
			w.Flags[uint32(u)] = flagStrings(a.kept)
		}
		shown[u] = withSeen(canonicalFlags(flagStrings(a.kept)), a.seen)
		if a.seen {
			readUIDs = append(readUIDs, u)
		}
	}
	before, err := m.store.cfg.State.WriteRefresh(ctx, m.user, m.name, validity, w)
	if err != nil {
		return false, err
	}
	m.seenElsewhere(before)
	m.commitArrivals(pending, pairs, readUIDs, started, details)
	m.addArrivals(newUIDs, shown)
	return true, nil
}

// openEnd is how far past now a light refresh's search reaches: the
// provider's clock may run ahead of the bridge's, and the search may wait
// for the budget before it is answered.
const openEnd = 24 * time.Hour

// unlisted returns the arrivals of pending that a search can place: those
// answered since the start of the last listing (listedAt) and, when
// before is not zero, before it.
//
// One answered before listedAt was listed then if its message was still
// there, and the mirror shows that UID (paired or, if its save's answer
// came late, unclaimed) or never will (expunged meanwhile, as imaptest's
// clients do at once): it waits for the listing refreshes that pair it or
// give it up (giveUpLocked), and must not keep every light refresh
// meanwhile from placing the newer ones by their metadata alone. One
// answered after the search was asked may have been saved after the
// provider answered it: it waits for the next refresh (its APPEND asks
// for one). A new UID that is none of theirs still sends the refresh to
// the listing.
func unlisted(pending []*arrival, listedAt, before time.Time) []*arrival {
	var out []*arrival
	for _, a := range pending {
		if !a.at.Before(listedAt) && (before.IsZero() || a.at.Before(before)) {
			out = append(out, a)
		}
	}
	return out
}

// earliestSent is when the first of the saves of as was asked (they are
// in the order answered).
func earliestSent(as []*arrival) time.Time {
	t := as[0].sent
	for _, a := range as[1:] {
		if a.sent.Before(t) {
			t = a.sent
		}
	}
	return t
}

// addArrivals shows placed arrivals (newUIDs ascending, with the flags
// to show) in the mirror, as a listing refresh would have: noted as put
// in by the bridge (added), so that a refresh whose listing was read
// before does not take them for expunged.
func (m *Folder) addArrivals(newUIDs []imap.UID, shown map[imap.UID][]imap.Flag) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.dropped || m.gone != nil || !m.loaded {
		return
	}
	m.version++
	m.readInferredLocked()
	if m.added == nil {
		m.added = map[imap.UID]uint64{}
	}
	var add []seqview.NewMessage
	for _, u := range newUIDs {
		if m.byUID[u] != nil {
			continue
		}
		if _, gone := m.removed[u]; gone {
			continue
		}
		sv := m.savedAt[u]
		m.byUID[u] = &Message{UID: u, saved: sv.at, meta: sv.meta}
		delete(m.savedAt, u)
		m.added[u] = m.version
		add = append(add, seqview.NewMessage{UID: u, Flags: shown[u]})
	}
	if err := m.showAddLocked(add); err != nil {
		m.store.cfg.Logger.Warn("imap append: showing the new messages failed", "user", m.user, "err", err)
		return
	}
	m.raiseUIDNextLocked(newUIDs) // written with the arrivals' flags already
}
