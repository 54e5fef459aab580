package mailstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/emersion/go-imap/v2"

	"github.com/directbridge/directbridge/internal/mimeconv"
	"github.com/directbridge/directbridge/internal/state"
	"github.com/directbridge/directbridge/upstream"
	"github.com/directbridge/directbridge/upstream/directapi"
)

// APPEND saves with one provider call (SaveRawMessages), which answers
// without the new UID. The saved message is noted as an arrival the
// folder expects, and a refresh finds the new UIDs: arrivals are paired
// with them in the order they were saved (the provider's UIDs follow the
// order messages arrive), and get the flags the client asked for then.
//
// The IMAP front asks for the UID at once (wantUID) so that its answer
// carries APPENDUID (RFC 4315 §3), and for the folder the connection has
// selected the EXISTS the client expects (RFC 9051 §6.3.12): that costs
// a light refresh after the save, which concurrent APPENDs share: the
// new messages' metadata (one SearchMessagesMetadataByReceivedDate),
// which alone places them when it tells all (discover.go), else a
// listing (GetUIDs) and the metadata confirming the pairing
// (orderConfirmed, pairBySize).
// Without wantUID the refresh comes at the next command of any
// connection on the folder other than APPEND, from the poller, or
// appendSettle after the last APPEND, whichever is first, shared by every
// APPEND made meanwhile.

// appendSettle is how long after an APPEND the folder is refreshed when
// nothing else did it first.
const appendSettle = 300 * time.Millisecond

// arrivalTTL is how long an arrival waits for a refresh to find it.
const arrivalTTL = 2 * time.Minute

// arrivalTries is how many refreshes that started after an arrival was
// saved may fail to pair it before it is given up: its message was
// expunged before any refresh saw it (imaptest appends and expunges at
// once), or the provider changed the bytes and the Message-ID is shared.
// Without a bound such arrivals would pile up and slow every refresh.
const arrivalTries = 3

// arrival is a message saved to the folder whose UID is not known yet.
type arrival struct {
	sent  time.Time // when SaveRawMessages was asked
	at    time.Time // when it answered
	msgID string
	size  int
	// subject and date identify a message without Message-ID in the
	// provider's metadata beside its size (sameMeta).
	subject string
	date    time.Time
	seen    bool
	kept    []imap.Flag
	raw     []byte        // the bytes saved, for the cache once the UID is known
	uid     imap.UID      // set (under the mirror's mu) when a refresh placed it
	tries   int           // refreshes that listed its message (if not expunged) and could not pair it
	done    chan struct{} // closed when SaveRawMessages answered
	// uncertain: the save's answer was lost, so the message may not be
	// there; only its bytes found in the folder place it (never the
	// order of new UIDs, which could be another message's).
	uncertain bool
}

// abandon forgets an arrival that was not found.
func (m *Folder) abandon(a *arrival) {
	m.mu.Lock()
	defer m.mu.Unlock()
	a.raw = nil
	m.pending = slices.DeleteFunc(slices.Clone(m.pending), func(b *arrival) bool { return b == a })
}

// saving notes a save about to be asked for: a refresh whose listing may
// hold its message waits for the answer before pairing (awaitSaves), so
// that no message saved through the bridge is shown to sessions without
// its bytes and flags.
func (m *Folder) saving(a *arrival) {
	a.done = make(chan struct{})
	m.mu.Lock()
	defer m.mu.Unlock()
	m.inflight = append(m.inflight, a)
}

// saveEnded notes the provider's answer to a's save: saved, a waits to
// be paired (pending, and a refresh soon); not, it is forgotten.
// It is one step under the mirror's lock: a refresh never finds the save
// neither asked nor waiting (holdBackLocked would hold its UID back).
func (m *Folder) saveEnded(a *arrival, saved bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.inflight = slices.DeleteFunc(m.inflight, func(b *arrival) bool { return b == a })
	if saved {
		a.at = time.Now()
		m.pending = append(m.pending, a)
		m.armSettleLocked()
	}
	close(a.done)
}

// awaitSaves waits for the saves asked for before listed (when a refresh
// read the folder's UIDs) to be answered, or for ctx (its error then).
func (m *Folder) awaitSaves(ctx context.Context, listed time.Time) error {
	m.mu.Lock()
	var wait []chan struct{}
	for _, a := range m.inflight {
		if a.sent.Before(listed) {
			wait = append(wait, a.done)
		}
	}
	m.mu.Unlock()
	return awaitAll(ctx, wait)
}

// armSettleLocked (re)starts the settle timer.
func (m *Folder) armSettleLocked() {
	if m.settle == nil {
		m.settle = time.AfterFunc(appendSettle, func() { m.store.bg.Go(m.settled) })
	} else {
		m.settle.Reset(appendSettle)
	}
}

// settled marks appended messages read and refreshes the folder after
// appends, so watchers see them.
func (m *Folder) settled(life context.Context) {
	ctx, cancel := context.WithTimeout(life, m.store.cfg.CallTimeout)
	defer cancel()
	m.markAppendedRead(ctx)
	m.mu.Lock()
	m.settle = nil
	m.mu.Unlock()
	// A refresh under way (an APPEND's, waiting for its search) may
	// place what waits: only what it leaves needs one more.
	m.awaitFlight(ctx)
	m.mu.Lock()
	waiting := len(m.pending) > 0 && !m.dropped
	m.mu.Unlock()
	if !waiting {
		return
	}
	if err := m.Discover(ctx); err != nil {
		m.store.cfg.Logger.Warn("imap refresh after append failed", "user", m.user, "err", err)
	}
}

// ShowArrivals refreshes the folder when appends wait to be found, for
// SELECT, STATUS and the update a session gets after each command; when
// a refresh is under way it does
// not wait, for that refresh shows what it finds to every view (RFC 9051
// §7: the server may send updates at any time), and the session sees it
// at its next command. The arrivals waiting are other connections'
// APPENDs still being answered (an APPEND answers once its UID is
// found), which may be counted on either side of this command. Under a
// stream of APPENDs from other connections (imaptest's ten clients)
// waiting would queue every command of the folder behind a refresh of
// its own, one after the other.
func (m *Folder) ShowArrivals(ctx context.Context) error {
	m.mu.Lock()
	busy := m.flight != nil
	m.mu.Unlock()
	if busy || !m.Expecting() {
		return nil
	}
	return m.Discover(ctx)
}

// Expecting reports arrivals not found yet.
func (m *Folder) Expecting() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.pending) > 0
}

// sequential reports arrivals each saved after the one before was
// answered: the provider numbered them in that order. Saves that overlapped
// could have been numbered either way.
func sequential(as []*arrival) bool {
	for i := 1; i < len(as); i++ {
		if as[i].sent.Before(as[i-1].at) {
			return false
		}
	}
	return true
}

// placed returns the UID a refresh gave the arrival, or 0.
func (m *Folder) placed(a *arrival) imap.UID {
	m.mu.Lock()
	defer m.mu.Unlock()
	return a.uid
}

// placeArrivals pairs the arrivals with the UIDs not paired yet a refresh
// that started at started found (ascending) and records their kept flags
// into w, which the refresh writes to the state store with the rest of
// what it learnt before it shows them. It returns the UIDs placed, true
// for those to be shown read, and commit, which the refresh calls once
// that write succeeded: only then are the arrivals taken as placed (their
// UIDs answered as APPENDUID, their bytes cached, \Seen queued for the
// read marking, markAppendedRead). A refresh that fails before (the
// unread list or the state store unavailable) leaves them waiting for the
// next, which pairs them again: placed earlier, an APPEND would be
// answered with a UID whose flags were never written.
//
// Only arrivals saved before the refresh started are paired: those are
// certainly among the UIDs it read; later ones wait for the next refresh.
// With as many new UIDs as such arrivals, one read of their metadata
// pairs them: by order when the saves did not overlap, by size and bytes
// when they did (pairBySize); otherwise (mail came in as well, or the
// metadata does not tell) by content, then by Message-ID and size. Arrivals not
// placed wait up to arrivalTTL. Failures are logged: the messages are
// saved, and only their flags are at stake.
func (m *Folder) placeArrivals(ctx context.Context, newUIDs []imap.UID, started time.Time, w *state.RefreshWrite) (placed map[imap.UID]bool, commit func()) {
	m.mu.Lock()
	pending := slices.Clone(m.pending)
	auth := m.auth
	m.mu.Unlock()
	if len(pending) == 0 {
		return nil, func() {}
	}
	if len(newUIDs) == 0 {
		return nil, func() {
			m.mu.Lock()
			m.giveUpLocked(pending, started)
			m.mu.Unlock()
		}
	}
	pairs := map[int]imap.UID{} // index in pending -> UID
	// As many new UIDs as saves answered: one read of their metadata
	// pairs them by order (saves one after the other, answered before
	// the refresh began) or by size (saves at once); downloading them to
	// compare bytes is the last resort.
	var details []directapi.MessageDetail
	read := false
	// Saves asked after the refresh began may be in its listing or not;
	// the others are (unless expunged meanwhile): with fewer new UIDs
	// than saves answered, those are the ones to pair.
	saves := pending
	if len(newUIDs) < len(pending) {
		saves = slices.DeleteFunc(slices.Clone(pending), func(a *arrival) bool { return !a.sent.Before(started) })
	}
	index := func(k int) int { return slices.Index(pending, saves[k]) } // in pending
	if n := len(newUIDs); n == len(saves) && n > 0 &&
		!slices.ContainsFunc(pending, func(a *arrival) bool { return a.uncertain }) {
		var err error
		details, err = m.receivedSince(ctx, auth, earliestSent(saves), newUIDs)
		read = err == nil
		if err != nil {
			m.store.cfg.Logger.Warn("imap append: reading new messages failed", "user", m.user, "err", err)
		} else {
			for k, u := range pairByRead(saves, newUIDs, details, started) {
				pairs[index(k)] = u
			}
		}
		for i, u := range pairs {
			m.store.clock.learn(pending[i].sent, pending[i].at, detailOf(details, u).ReceivedDate.Time)
		}
	}
	if len(pairs) < len(pending) {
		for i, u := range m.pairByContent(ctx, auth, pending, newUIDs, pairs) {
			pairs[i] = u
		}
	}
	if len(pairs) < len(pending) {
		m.pairByMetadata(ctx, auth, pending, newUIDs, pairs, details, read)
	}
	var readUIDs []imap.UID
	placed = make(map[imap.UID]bool, len(pairs))
	for i, u := range pairs {
		a := pending[i]
		if len(a.kept) > 0 {
			if w.Flags == nil {
				w.Flags = map[uint32][]string{}
			}
			w.Flags[uint32(u)] = flagStrings(a.kept)
		}
		placed[u] = a.seen
		if a.seen {
			readUIDs = append(readUIDs, u)
		}
	}
	return placed, func() { m.commitArrivals(pending, pairs, readUIDs, started, details) }
}

// commitArrivals takes the arrivals pending[i] as placed at pairs[i]
// (placeArrivals), and queues the read marking of readUIDs.
// details is the provider's metadata read for the pairing, if any.
func (m *Folder) commitArrivals(pending []*arrival, pairs map[int]imap.UID, readUIDs []imap.UID, started time.Time, details []directapi.MessageDetail) {
	metas := make(map[int]*directapi.MessageDetail, len(pairs))
	for i, u := range pairs {
		listed := detailOf(details, u)
		if m.store.shared() && (listed == nil || listed.ReceivedDate.IsZero()) {
			// Among replicas, INTERNALDATE is the provider's only: the
			// others list it from there, and this clock's second may
			// not be the provider's. Loaded when a client asks.
			continue
		}
		metas[i] = savedMeta(u, pending[i], listed)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	ref := m.ref()
	for i, u := range pairs {
		a := pending[i]
		a.uid = u
		// The bytes are in hand: no download when a client fetches them,
		// and a session still shown the message after another expunged
		// it can fetch it (RFC 2180 §4.1), as with Dovecot.
		m.store.bodies.put(ref, u, a.raw)
		if m.savedAt == nil {
			m.savedAt = map[imap.UID]saved{}
		}
		m.savedAt[u] = saved{at: a.at, meta: metas[i]}
		a.raw = nil
	}
	m.giveUpLocked(pending, started)
	if len(readUIDs) == 0 {
		return
	}
	if len(m.unmarked) == 0 {
		m.unmarkedSince = time.Now()
	}
	m.unmarked, m.unmarkedAuth = append(m.unmarked, readUIDs...), m.auth
	if len(m.unmarked) >= BatchSize || time.Since(m.unmarkedSince) >= maxUnmarkedAge {
		// A steady stream of APPENDs keeps resetting the timer: the
		// marking goes out anyway, at a bounded size and age.
		m.store.bg.Go(func(life context.Context) {
			ctx, cancel := context.WithTimeout(life, m.store.cfg.CallTimeout)
			defer cancel()
			m.markAppendedRead(ctx)
		})
	} else {
		m.armSettleLocked()
	}
}

// maxUnmarkedAge bounds how long an appended message's \Seen waits for
// its SetRead while APPENDs keep coming (see below).
const maxUnmarkedAge = 2 * time.Second

// Appended messages asked \Seen are shown \Seen at once, and marked read
// at the provider (SetRead) in one call for all those placed meanwhile:
// when the settle timer fires, before a full refresh reads the read
// state (which would otherwise show them unread again), at shutdown, and
// at the latest after BatchSize messages or maxUnmarkedAge while APPENDs
// keep coming. A client that appends a hundred messages one after the
// other so pays one SetRead, not a hundred. A message expunged or moved
// meanwhile is left out (forgetLocked), so are those a client marked
// unread since (ApplyFlags: its choice is the later one), and a refusal
// because one vanished at the provider is retried with those that
// remain (mutateExisting). Should the call fail all the same, the next
// full refresh shows the provider's state: the messages are saved, only
// \Seen is lost.

// markAppendedRead sends the SetRead that waits, if any.
// Store.MarkAppendedRead sends them all at shutdown.
func (m *Folder) markAppendedRead(ctx context.Context) {
	// seenMu first, then the list: whoever waits for seenMu (a COPY
	// about to carry the read state, markAppendedReadOf) knows no
	// marking is under way once it has it.
	if m.seenMu.Lock(ctx) != nil {
		return // the marking stays in the list for the next
	}
	defer m.seenMu.Unlock()
	m.mu.Lock()
	uids, auth := m.unmarked, m.unmarkedAuth
	m.unmarked, m.unmarkedAuth = nil, upstream.Auth{}
	m.mu.Unlock()
	if len(uids) == 0 {
		return
	}
	mark := func(u []int64) error { return m.store.cfg.Provider.SetRead(ctx, auth, m.name, u, true) }
	done, err := m.mutateExisting(ctx, auth, uids, mark)
	if err != nil {
		m.store.cfg.Logger.Warn("imap append: marking read failed", "user", m.user, "err", err)
		m.readUnsureNow()
		m.requeueUnmarked(ctx, uids, auth)
		return
	}
	// A refresh may have read them unread meanwhile.
	seen := true
	ups := make([]shown, len(done))
	for i, u := range done {
		ups[i] = shown{UID: u, Seen: &seen}
	}
	m.show(ups, nil)
}

// markListedRead is the read marking a full refresh sends from its own
// listing (uids, ascending): for the waiting messages the listing still
// has (the others are gone, and their EXPUNGE comes with the refresh),
// never through another refresh. It returns how many it marked read:
// the mirror shows them read already, and the provider's unread count,
// read before, still counted them.
func (m *Folder) markListedRead(ctx context.Context, uids []imap.UID) int {
	if m.seenMu.Lock(ctx) != nil { // before the list: see markAppendedRead
		return 0
	}
	defer m.seenMu.Unlock()
	m.mu.Lock()
	waiting, auth := m.unmarked, m.unmarkedAuth
	m.unmarked, m.unmarkedAuth = nil, upstream.Auth{}
	m.mu.Unlock()
	listed := slices.DeleteFunc(waiting, func(u imap.UID) bool {
		_, ok := slices.BinarySearch(uids, u)
		return !ok
	})
	if len(listed) == 0 {
		return 0
	}
	mark := func(u []int64) error { return m.store.cfg.Provider.SetRead(ctx, auth, m.name, u, true) }
	done, err := m.mutateExisting(ctx, auth, listed, mark)
	if err != nil {
		m.store.cfg.Logger.Warn("imap append: marking read failed", "user", m.user, "err", err)
		m.readUnsureNow()
		m.requeueUnmarked(ctx, listed, auth)
		return 0
	}
	// Shown without raising the mirror's version: the refresh that sends
	// it made the change itself, after its own reads, and must not take
	// it for another's (it would then leave the read state it read).
	seen := true
	ups := make([]shown, len(done))
	for i, u := range done {
		ups[i] = shown{UID: u, Seen: &seen}
	}
	m.showOwn(ups)
	return len(done)
}

// requeueUnmarked puts a read marking back in the list when it was cut
// short by its context (the store closing, say), so that the next one
// (Close's own) sends it; a refusal by the provider is not retried.
func (m *Folder) requeueUnmarked(ctx context.Context, uids []imap.UID, auth upstream.Auth) {
	if ctx.Err() == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.unmarked) == 0 {
		m.unmarkedSince = time.Now()
	}
	m.unmarked, m.unmarkedAuth = append(slices.Clone(uids), m.unmarked...), auth
}

// markAppendedReadOf sends the read marking that waits when it names any
// of uids: before a COPY or MOVE, or a move to the Trash, which carry the
// provider's read state to the new message.
func (m *Folder) markAppendedReadOf(ctx context.Context, uids []imap.UID) {
	m.mu.Lock()
	waits := slices.ContainsFunc(m.unmarked, func(u imap.UID) bool { return slices.Contains(uids, u) })
	m.mu.Unlock()
	if waits {
		m.markAppendedRead(ctx)
		return
	}
	// A marking taken from the list may be under way: wait for it.
	if m.seenMu.Lock(ctx) == nil {
		m.seenMu.Unlock() // an empty section: the wait is the point
	}
}

// dropUnmarkedLocked takes uids out of the read marking that waits.
func (m *Folder) dropUnmarkedLocked(uids []imap.UID) {
	if len(m.unmarked) == 0 || len(uids) == 0 {
		return
	}
	drop := make(map[imap.UID]bool, len(uids))
	for _, u := range uids {
		drop[u] = true
	}
	m.unmarked = slices.DeleteFunc(m.unmarked, func(u imap.UID) bool { return drop[u] })
}

// pairByRead pairs saves (answered, oldest first) with as many new UIDs
// by their metadata: by order when each save was asked after the one
// before was answered and all were answered before the refresh started,
// else by size (pairBySize). Indexes are in saves; nil or partial when
// the metadata does not tell.
func pairByRead(saves []*arrival, newUIDs []imap.UID, details []directapi.MessageDetail, started time.Time) map[int]imap.UID {
	n := len(saves)
	if n == 0 || n != len(newUIDs) {
		return nil
	}
	if sequential(saves) && saves[n-1].at.Before(started) && orderConfirmed(saves, newUIDs, details) {
		pairs := make(map[int]imap.UID, n)
		for k, u := range newUIDs {
			pairs[k] = u
		}
		return pairs
	}
	return pairBySize(saves, newUIDs, details)
}

// orderConfirmed checks a pairing by order against the new messages'
// metadata (details): each must have its arrival's size and Message-ID.
// As many new UIDs as saves is not enough: a message delivered at the
// same moment while another client removed the one saved gives the same
// count, and a wrong APPENDUID would make the client take the delivered
// message for its own.
func orderConfirmed(pending []*arrival, newUIDs []imap.UID, details []directapi.MessageDetail) bool {
	for i, u := range newUIDs {
		d := detailOf(details, u)
		// Without a Message-ID only the size confirms (a download of the
		// new messages to compare bytes would cost an APPEND of 20 MB
		// another 20 MB and more); copies placed by COPY/MOVE are never
		// among the candidates (addCopies takes them out of unclaimed).
		if d == nil || !sameMeta(pending[i], d) {
			return false
		}
	}
	return true
}

// sameMeta reports whether the provider's metadata d fits the arrival a:
// its size (when the provider gives one) and its Message-ID, or, for a
// message without one, its subject and date as the provider lists them:
// size alone would take another message of the same size (delivered, or
// copied in, while the one saved was removed by another client) for it,
// and give it the APPEND's UID and flags. A provider that lists these
// otherwise pairs nothing here; the bytes then decide (pairByContent).
func sameMeta(a *arrival, d *directapi.MessageDetail) bool {
	if d.Size >= 0 && d.Size != a.size {
		return false
	}
	if a.msgID != "" {
		return d.MsgID == a.msgID
	}
	diff := d.SentDate.Sub(a.date)
	return d.Subject == a.subject && d.SentDate.IsZero() == a.date.IsZero() && diff < time.Second && diff > -time.Second
}

// detailOf returns the metadata of uid in details, or nil.
func detailOf(details []directapi.MessageDetail, uid imap.UID) *directapi.MessageDetail {
	for i := range details {
		if details[i].UID == int64(uid) {
			return &details[i]
		}
	}
	return nil
}

// pairBySize pairs saves made at once (whose order the provider may have
// numbered either way) with as many new UIDs, by metadata, when that is
// as certain as a pairing by order: the saves fall into groups of the
// same bytes, and each group's size and Message-ID fit exactly as many
// new messages as the group has saves. Within a group any pairing
// serves, the bytes being the same (paired in the order saved). Saves of
// different bytes with the same size and Message-ID, or a new message
// that fits no group, pair nothing here.
func pairBySize(pending []*arrival, newUIDs []imap.UID, details []directapi.MessageDetail) map[int]imap.UID {
	type group struct {
		first *arrival
		saves []int      // indexes in pending
		uids  []imap.UID // new UIDs that fit, ascending
	}
	var groups []*group
	for i, a := range pending {
		var g *group
		for _, h := range groups {
			if h.first.size == a.size && h.first.msgID == a.msgID {
				if !bytes.Equal(h.first.raw, a.raw) {
					return nil // alike in metadata, not in bytes
				}
				g = h
				break
			}
		}
		if g == nil {
			g = &group{first: a}
			groups = append(groups, g)
		}
		g.saves = append(g.saves, i)
	}
	for _, u := range newUIDs {
		d := detailOf(details, u)
		if d == nil || d.Size < 0 {
			return nil
		}
		fits := 0
		for _, g := range groups {
			if sameMeta(g.first, d) {
				g.uids = append(g.uids, u)
				fits++
			}
		}
		if fits != 1 {
			return nil
		}
	}
	pairs := make(map[int]imap.UID, len(pending))
	for _, g := range groups {
		if len(g.uids) != len(g.saves) {
			return nil
		}
		for k, i := range g.saves {
			pairs[i] = g.uids[k]
		}
	}
	return pairs
}

// maxContentPairing bounds the new messages downloaded to pair arrivals by
// content: one batch of the body cache.
const maxContentPairing = BatchSize

// pairByContent pairs arrivals with new UIDs whose bytes are the bytes
// saved, in one download of the new messages (which the body cache keeps:
// clients that append mostly read what they appended, and a session still
// shown a message another one expunged can then fetch it, RFC 2180 §4.1).
// Identical messages appended at once are paired in the order saved; any
// of them serves, as their bytes are the same. A provider that rewrites
// what it saves (adds a header, say) pairs nothing here, and the caller
// falls back to the metadata.
func (m *Folder) pairByContent(ctx context.Context, auth upstream.Auth, pending []*arrival, newUIDs []imap.UID, paired map[int]imap.UID) map[int]imap.UID {
	pairs := map[int]imap.UID{}
	taken := make(map[imap.UID]bool, len(pending))
	for _, u := range paired {
		taken[u] = true
	}
	newUIDs = slices.DeleteFunc(slices.Clone(newUIDs), func(u imap.UID) bool { return taken[u] })
	if len(newUIDs) == 0 || len(newUIDs) > maxContentPairing {
		return pairs
	}
	m.mu.Lock()
	ref := m.ref()
	m.mu.Unlock()
	got, err := m.store.bodies.Get(ctx, auth, ref, newUIDs, nil)
	if err != nil {
		m.store.cfg.Logger.Warn("imap append: reading new messages failed", "user", m.user, "err", err)
		return pairs
	}
	for i, a := range pending {
		if _, ok := paired[i]; ok {
			continue
		}
		for _, u := range newUIDs {
			if raw, ok := got[u]; ok && !taken[u] && len(raw) == len(a.raw) && bytes.Equal(raw, a.raw) {
				pairs[i] = u
				taken[u] = true
				break
			}
		}
	}
	return pairs
}

// pairByMetadata pairs the arrivals pairs lacks, where that cannot be
// wrong: one arrival and one new message with its Message-ID and size
// (clients that append the same message twice at once get their flags
// from no one). It uses the metadata placeArrivals read (read) when that
// lists every UID not paired, else reads the metadata of what arrived
// since the first of them was saved (APPENDs are received when saved),
// not the messages whole, which may be many.
func (m *Folder) pairByMetadata(ctx context.Context, auth upstream.Auth, pending []*arrival, newUIDs []imap.UID, pairs map[int]imap.UID, details []directapi.MessageDetail, read bool) {
	paired := make(map[imap.UID]bool, len(pairs))
	for _, u := range pairs {
		paired[u] = true
	}
	var unpaired []imap.UID
	for _, u := range newUIDs {
		if !paired[u] {
			unpaired = append(unpaired, u)
		}
	}
	if !read || !holdsAll(details, unpaired) {
		var err error
		if details, err = m.receivedSince(ctx, auth, earliestSent(pending), unpaired); err != nil {
			m.store.cfg.Logger.Warn("imap append: reading new messages failed", "user", m.user, "err", err)
			return
		}
	}
	free := make(map[int64]bool, len(newUIDs))
	for _, u := range newUIDs {
		free[int64(u)] = true
	}
	for _, u := range pairs {
		delete(free, int64(u))
	}
	for i, a := range pending {
		if _, ok := pairs[i]; ok || a.msgID == "" || slices.ContainsFunc(pending, func(b *arrival) bool { return b != a && b.msgID == a.msgID }) {
			continue
		}
		var match []int64
		for _, d := range details {
			if free[d.UID] && d.MsgID == a.msgID && (d.Size < 0 || d.Size == a.size) {
				match = append(match, d.UID)
			}
		}
		if len(match) == 1 {
			pairs[i] = imap.UID(match[0])
			delete(free, match[0])
			for _, d := range details {
				if d.UID == match[0] {
					m.store.clock.learn(a.sent, a.at, d.ReceivedDate.Time)
				}
			}
		}
	}
}

// giveUpLocked counts a refresh that started at started and could not
// pair the arrivals of tried saved before then (their messages were
// listed unless expunged), and drops those that have waited too long.
func (m *Folder) giveUpLocked(tried []*arrival, started time.Time) {
	now := time.Now()
	for _, a := range tried {
		if a.uid == 0 && a.at.Before(started) {
			a.tries++
		}
	}
	m.pending = slices.DeleteFunc(slices.Clone(m.pending), func(a *arrival) bool {
		drop := a.uid != 0 || a.tries >= arrivalTries || now.Sub(a.at) > arrivalTTL
		if drop {
			a.raw = nil // the retry memory may keep the arrival: not its bytes
		}
		return drop
	})
}

// saved is what the bridge knows of a message it saved once a refresh
// paired it with its UID.
type saved struct {
	at   time.Time
	meta *directapi.MessageDetail
}

// savedMeta is the metadata of a message saved through the bridge, read
// from the bytes saved as the provider would list them (the headers, the
// size, the time it was saved), so that ENVELOPE, INTERNALDATE and
// RFC822.SIZE of what clients append cost no SearchMessagesMetadata call
// (among replicas, only when the pairing read the provider's metadata:
// commitArrivals).
// A later listing does not replace it (fillMeta), so the values a client
// saw do not change. The time is the provider's when its metadata was read
// to pair the message (listed, if not nil), so that every replica of the
// bridge, which lists it from the provider, shows the same INTERNALDATE;
// else the bridge's clock when the save was answered.
func savedMeta(uid imap.UID, a *arrival, listed *directapi.MessageDetail) *directapi.MessageDetail {
	d := &directapi.MessageDetail{UID: int64(uid), Size: len(a.raw), ReceivedDate: directapi.NewDate(a.at.UTC())}
	if listed != nil && !listed.ReceivedDate.IsZero() {
		d.ReceivedDate = listed.ReceivedDate
	}
	p, err := mimeconv.Parse(a.raw, mimeconv.ParseOptions{SkipBodies: true})
	if err != nil {
		return nil // the provider's listing will say
	}
	d.Sender, d.Subject, d.Recipients = p.Sender, p.Subject, p.Recipients
	d.MsgID, d.ReplyTo, d.Headers = p.MessageID, p.ReplyTo, p.Headers
	if !p.SentDate.IsZero() {
		d.SentDate = directapi.NewDate(p.SentDate)
	}
	return d
}

// Append saves raw into the folder (one SaveRawMessages) and notes it as
// an arrival, whose flags (seen, kept) the refresh that finds its UID
// sets. With wantUID (the client expects APPENDUID in the answer, and
// the EXISTS when it has the folder selected), the UID is found now: by the
// refresh under way when it read the folder after the save (concurrent
// APPENDs share it), else by a light refresh of its own; uid is 0 when it
// could not be told. Without, uid is 0 and the next refresh finds it.
//
// The attempt is journaled (attempts.go): a retry of an APPEND whose
// answer was lost is answered from what the folder shows, never saved
// twice. When the provider's answer is lost (upstream.ErrUnknownOutcome),
// the folder is looked at at once for these very bytes (content pairing
// only, see placeArrivals); found, Append succeeds; not found, the answer
// is ErrOutcomeUnknown and the attempt stays in the journal for the
// retry. A nil error means the provider holds the message.
func (m *Folder) Append(ctx context.Context, auth upstream.Auth, raw []byte, msgID string, seen bool, kept []imap.Flag, wantUID bool) (uid imap.UID, err error) {
	log := m.store.cfg.Logger
	st := m.store
	key := st.appendKey(m.name, raw)
	id, u, err := st.beginAttempt(ctx, m.user, key, 0)
	if err != nil {
		return 0, err // without the journal a lost answer could not be told
	}
	if id == 0 {
		uid, done, err := m.resolveAppend(ctx, auth, u, raw, msgID)
		if err != nil || done {
			if err != nil {
				return 0, err
			}
			return uid, m.flagFound(ctx, auth, uid, seen, kept)
		}
		if id, err = st.beginAgain(ctx, m.user, key, 0); err != nil {
			return 0, err
		}
	}
	if answerLost(ctx) {
		st.endAttempts(context.WithoutCancel(ctx), []state.Attempt{{ID: id}})
		return 0, ErrAnswerLost
	}
	a := &arrival{sent: time.Now(), msgID: msgID, size: len(raw), seen: seen, kept: kept, raw: raw}
	if msgID == "" {
		if p, err := mimeconv.Parse(raw, mimeconv.ParseOptions{SkipBodies: true}); err == nil {
			a.subject, a.date = p.Subject, p.SentDate
		}
	}
	m.saving(a)
	// Under a budget, saves to the folder that wait for it at the same
	// moment go out in one SaveRawMessages (upstream.WithCoalescing).
	err = st.cfg.Provider.Save(ctx, auth, m.name, [][]byte{raw})
	unknown := errors.Is(err, upstream.ErrUnknownOutcome)
	a.uncertain = unknown
	m.saveEnded(a, err == nil || unknown)
	// The journal entry is written without the command's context, which
	// may be spent: it is what a retry is answered from.
	jctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), st.cfg.CallTimeout)
	defer cancel()
	if unknown {
		if derr := m.Discover(jctx); derr != nil || m.placed(a) == 0 {
			m.abandon(a)
			st.markUnknown(jctx, id)
			log.Warn("imap append: outcome unknown and the message not found; a retry is answered from the folder", "user", m.user, "err", err)
			return 0, fmt.Errorf("%w: %w", ErrOutcomeUnknown, err)
		}
		log.Info("imap append: answer lost, message found in the folder", "user", m.user)
		err = nil
	}
	// Decided: saved, or certainly not. A saved message's entry stays
	// until its answer was written (endAnswered): the bridge killed
	// before the client read it leaves the entry, and the client's retry
	// (through another replica, or after a restart) is answered from the
	// folder instead of saving the message again.
	if err != nil {
		st.endAttempts(jctx, []state.Attempt{{ID: id}})
		return 0, err
	}
	defer st.endAnswered(id)
	if !wantUID {
		return 0, nil
	}
	m.awaitOverlapping(ctx, a)
	m.awaitFlight(ctx)
	if m.placed(a) == 0 {
		// Any refresh that started once the save was answered lists its
		// message: one under way, or started meanwhile by another
		// APPEND, serves, and concurrent APPENDs share one instead of
		// each queueing a refresh of its own behind it.
		if err := m.refresh(ctx, a.at, true); err != nil {
			log.Warn("imap refresh after append failed", "user", m.user, "err", err)
			return 0, nil // saved: never an error, or the client saves it again
		}
	}
	return m.placed(a), nil
}

// flagFound gives the message an earlier attempt saved the flags the
// retry asks for.
func (m *Folder) flagFound(ctx context.Context, auth upstream.Auth, uid imap.UID, seen bool, kept []imap.Flag) error {
	up := FlagUpdate{UID: uid}
	if seen {
		up.Seen = &seen
	}
	if len(kept) > 0 {
		up.Kept = &KeptChange{Add: kept}
	}
	if up.Seen == nil && up.Kept == nil {
		return nil
	}
	_, err := m.store.ApplyFlags(ctx, auth, m.name, m.Validity(), m, []FlagUpdate{up}, nil)
	return err
}
