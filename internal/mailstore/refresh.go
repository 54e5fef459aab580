package mailstore

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/emersion/go-imap/v2"

	"github.com/directbridge/directbridge/internal/seqview"
	"github.com/directbridge/directbridge/internal/state"
	"github.com/directbridge/directbridge/upstream/directapi"
)

// Sync refreshes the mirror with a refresh that starts now or later.
func (m *Folder) Sync(ctx context.Context) error {
	return m.refresh(ctx, time.Now(), false)
}

// Discover is a refresh that reads the UIDs only (one call): enough to
// find what this bridge just saved, whose read state it knows. A full
// refresh started later serves too.
func (m *Folder) Discover(ctx context.Context) error {
	return m.refresh(ctx, time.Now(), true)
}

// awaitFlight waits for the refresh under way, if any, to end. A refresh
// that read the folder after a save was asked pairs that save's message
// (awaitSaves), so an APPEND that finds one under way may need no
// refresh of its own.
func (m *Folder) awaitFlight(ctx context.Context) {
	m.mu.Lock()
	f := m.flight
	m.mu.Unlock()
	if f == nil {
		return
	}
	select {
	case <-f.done:
	case <-ctx.Done():
	}
}

// syncIfOlder refreshes the mirror unless a refresh that started less
// than maxAge ago succeeded: connections that ask at once share one
// refresh instead of each making its own in turn.
func (m *Folder) syncIfOlder(ctx context.Context, maxAge time.Duration) error {
	return m.refresh(ctx, time.Now().Add(-maxAge), false)
}

// refresh makes sure a refresh that started at notBefore or later has
// succeeded: it returns at once if the last one did, waits for the one
// under way if that one qualifies, and otherwise (after any under way)
// makes one itself. Only one runs at a time, and nobody holds a lock that
// commands need while it talks to the provider. A light refresh (UIDs
// only, see discover) serves only callers that asked for no more.
func (m *Folder) refresh(ctx context.Context, notBefore time.Time, light bool) error {
	for {
		m.mu.Lock()
		if m.loaded && (!m.lastStart.Before(notBefore) || light && !m.lastLight.Before(notBefore)) {
			m.mu.Unlock()
			return nil
		}
		if f := m.flight; f != nil {
			m.mu.Unlock()
			select {
			case <-f.done:
			case <-ctx.Done():
				return ctx.Err()
			}
			// A failed refresh is not shared: its error may be its
			// caller's (a canceled command) or a blip; try again.
			if f.err == nil && !f.started.Before(notBefore) && (light || !f.light) {
				return nil
			}
			continue
		}
		f := &refreshFlight{started: time.Now(), done: make(chan struct{}), light: light && m.loaded}
		m.flight = f
		m.mu.Unlock()

		// A light refresh for arrivals may find them without a listing
		// (discover.go).
		listed := true
		if f.light {
			var done bool
			done, f.err = m.discoverBySearch(ctx, f.started)
			listed = !done && f.err == nil
		}
		if listed {
			f.err = m.doRefresh(ctx, f.started, f.light)
		}
		m.mu.Lock()
		m.flight = nil
		switch {
		case f.err != nil:
		case f.light:
			m.lastLight = f.started
			if listed {
				m.lastListed, m.listedAt = f.started, f.started
			}
		default:
			m.lastStart, m.listedAt = f.started, f.started
		}
		m.mu.Unlock()
		close(f.done)
		return f.err
	}
}

// doRefresh reads the folder from the provider and merges it into the
// mirror, queueing the differences into the views. It costs two calls
// when nothing changed (GetUIDs and GetUnreadMessageCount), a SetRead
// when a read marking of appended messages waits, the pairing of
// arrivals' calls when some wait (arrivals.go), and one more
// (GetUnreadMessages) when the read state cannot be inferred: the provider
// reports read state only through the list of unread messages, so the
// bridge infers it when the unread count matches "old state plus new
// messages unread" and asks otherwise, and also after a read marking of
// its own failed (readUnsure: it may have been carried out all the same).
// A change by another client that keeps the count (one message read and
// another unread between two polls) is seen at the next count change.
//
// A refresh is one pass (internal/mailstore/doc.go, rule 4): it reads the provider
// (the listing and the count together; on a first load the count
// after the listing), sends the read marking that
// waits for the messages the listing still has, reads what else it needs
// (arrivals' bytes, the unread list, flags written down before copies),
// writes what it learnt to the state store in one transaction, and then
// shows it to the views (apply). Nothing in it calls Sync, Discover or
// refresh.
func (m *Folder) doRefresh(ctx context.Context, started time.Time, light bool) error {
	m.mu.Lock()
	auth, loaded, v0, readGen := m.auth, m.loaded, m.version, m.readUnsure
	unsure := m.readUnsure > m.readSure || m.wantList
	m.mu.Unlock()

	// A first load reads the folder's state before the listing: the
	// UIDNEXT it holds then names only UIDs the listing will show (or
	// that are gone), whereas one raised meanwhile (a COPY into the
	// folder writes the largest UID it saw) could pass over a UID the
	// listing lacks, and the next refresh would take that UID for a
	// renumbering.
	var first state.FolderState // the folder's state before a first load
	if !loaded {
		var err error
		if first, err = m.store.cfg.State.Folder(ctx, m.user, m.name); err != nil {
			return err
		}
	}

	c := m.store.cfg.Provider
	// The two reads go out together: a refresh costs one round trip of
	// time, not two. A light one reads the UIDs only. A first load reads
	// the count after the listing: it has no earlier state to check the
	// count against, and a count taken before a message came in (unread)
	// would have the listed message shown read, which it never was (a
	// later refresh sees the count disagree and asks; see doRefresh).
	// Counted after, every listed message still unread is counted.
	var unread int
	var unreadErr error
	readCount := func() {
		if !light {
			unread, unreadErr = c.UnreadCount(ctx, auth, m.name)
		}
	}
	var pids []int64
	var err error
	if loaded {
		counted := make(chan struct{})
		go func() {
			defer close(counted)
			readCount()
		}()
		pids, err = c.UIDs(ctx, auth, m.name)
		<-counted
	} else if pids, err = c.UIDs(ctx, auth, m.name); err == nil {
		readCount()
	}
	if err != nil {
		return err
	}
	// An APPEND whose save was asked before the listing came back may be
	// in it: its answer pairs it (arrivals.go).
	if err := m.awaitSaves(ctx, time.Now()); err != nil {
		return err // unanswered saves: what the listing holds cannot be told
	}
	if unreadErr != nil {
		return unreadErr
	}
	uids := make([]imap.UID, 0, len(pids))
	for _, p := range pids {
		if p <= 0 || p > MaxUID {
			return fmt.Errorf("%w: %d in %s", ErrUIDTooLarge, p, m.name)
		}
		uids = append(uids, imap.UID(p))
	}
	slices.Sort(uids)
	uids = slices.Compact(uids)

	if !loaded {
		return m.load(ctx, auth, first, uids, unread)
	}
	if !light {
		// Appended messages asked \Seen are shown read and counted
		// unread by the provider until their marking goes out: it goes
		// now, for those the listing still has, and the count read
		// before it is corrected (arrivals.go).
		unread -= m.markListedRead(ctx, uids)
	}

	m.mu.Lock()
	uids = m.holdBackLocked(uids)
	stillUnread := 0
	var added []imap.UID
	for _, u := range uids {
		if fl, ok := m.mb.Flags(u); ok {
			if !HasSeen(fl) {
				stillUnread++
			}
		} else if _, gone := m.removed[u]; !gone && u >= m.uidNext {
			added = append(added, u)
		}
	}
	changed := m.version != v0
	candidates := slices.Clone(added)
	for u := range m.unclaimed {
		if _, ok := m.mb.Flags(u); ok {
			candidates = append(candidates, u)
		}
	}
	slices.Sort(candidates)
	validity, uidNext := m.validity, m.uidNext
	m.mu.Unlock()

	// What the state store gets, once, before the views see anything.
	var w state.RefreshWrite
	// Messages this bridge saved (APPEND) get their flags now.
	placed, commitArrivals := m.placeArrivals(ctx, candidates, started, &w)

	var unreadSet map[imap.UID]bool
	// A light refresh has no count: known messages keep their state, new
	// ones are unread unless just marked read.
	// Messages held back are counted by the provider too: the count
	// then disagrees when one is unread, and the list is asked. Taking
	// any count up to the number held for agreement would hide a read
	// state the mirror has wrong until the held messages are shown, and
	// then for good when they are counted the other way (model seed 556:
	// two read states swapped).
	if !light && (unread != stillUnread+len(added) || unsure) {
		if changed {
			// The count disagrees and the list is not asked (commands
			// changed the mirror meanwhile): the read state shown is
			// a guess until a refresh reads it.
			m.mu.Lock()
			m.readInferredLocked()
			m.mu.Unlock()
		} else if unreadSet, err = m.unreadUIDs(ctx, auth); err != nil {
			return err
		}
	}
	kept := map[uint32][]string{}
	if len(added) > 0 || len(placed) > 0 {
		// Flags stored for a UID before the mirror saw it (COPY and MOVE
		// set them on the new UIDs) show at once. Only UIDs from the
		// lowest new one on: the folder's other flags are in the mirror
		// already.
		from := imap.UID(MaxUID)
		for _, u := range added {
			from = min(from, u)
		}
		for u := range placed {
			from = min(from, u)
		}
		if kept, err = m.store.cfg.State.FlagsFrom(ctx, m.user, m.name, validity, uint32(from)); err != nil {
			return err
		}
		for u, fl := range w.Flags { // the arrivals' own, added when written
			kept[u] = state.ApplyFlagChange(kept[u], state.FlagChange{Add: fl})
		}
		// Copies whose flags were written down before a call the bridge
		// did not see end (copies.go).
		var copies []imap.UID
		for _, u := range added {
			if _, ok := placed[u]; !ok {
				copies = append(copies, u)
			}
		}
		if err := m.pendingFlagsFor(ctx, auth, copies, kept, &w); err != nil {
			m.store.cfg.Logger.Warn("imap refresh: flags written down before a copy", "user", m.user, "err", err)
		}
	}
	if n := len(uids); n > 0 && uids[n-1] >= uidNext {
		w.MaxUID = uint32(uids[n-1])
	}
	before, err := m.store.cfg.State.WriteRefresh(ctx, m.user, m.name, validity, w)
	if err != nil {
		return err
	}
	m.seenElsewhere(before)
	commitArrivals()
	m.noteUnclaimed(added, placed)
	return m.apply(ctx, v0, readGen, uids, unreadSet, kept, placed)
}

// holdBackMax bounds how long refreshes hold back new UIDs for transfers
// under way (holdBackLocked): under COPYs into one folder that never
// pause, mail delivered to it is shown after this at the latest. It
// outlasts a transfer whose answer is lost when its call times out (the
// call, then the look whether it landed), so that its copies are not
// shown before it ends.
func (m *Folder) holdBackMax() time.Duration {
	return 2*m.store.cfg.CallTimeout + 10*time.Second
}

// holdBackLocked returns uids (ascending) without the new UIDs a
// transfer under way into the folder may have given its copies (from
// its floor on, transferFloor): they are shown once it has ended. A
// copy is to be shown with its source's flags, which only its transfer
// knows for certain: shown before, without them, a session could copy
// it on or change its flags, and a transfer whose answer was lost
// (its copies then paired by the refresh after it, pendingFlagsFor,
// among the UIDs new to that refresh) would leave it without its flags
// for ever (model seed 785). The transfer shows its own copies when it
// ends (addCopies), or has the refresh after it show them.
//
// Nothing is held back while saves wait for their UIDs (an APPEND is
// answered once its message is placed, and placed means shown), nor for
// longer than holdBackMax. Only a suffix of new UIDs is held back, and
// UIDNEXT stays below it: the UIDs shown stay ascending (RFC 3501
// §2.3.1.1), and a held-back UID shown later is not taken for a
// renumbering.
func (m *Folder) holdBackLocked(uids []imap.UID) []imap.UID {
	floor, busy := m.store.transferFloor(m.user, m.name)
	if !busy || len(m.pending) > 0 || len(m.inflight) > 0 {
		m.heldSince = time.Time{}
		return uids
	}
	i, _ := slices.BinarySearch(uids, imap.UID(max(floor, int64(m.uidNext))))
	if i == len(uids) {
		m.heldSince = time.Time{} // nothing new from the floor on
		return uids
	}
	now := time.Now()
	if m.heldSince.IsZero() {
		m.heldSince = now
	}
	if now.Sub(m.heldSince) > m.holdBackMax() {
		return uids
	}
	return uids[:i]
}

// holding reports whether the last refresh held UIDs back.
func (m *Folder) holding() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return !m.heldSince.IsZero()
}

// noteUnclaimed keeps the UIDs added that no arrival claimed while
// arrivals still wait, and forgets the claimed and the stale.
func (m *Folder) noteUnclaimed(added []imap.UID, placed map[imap.UID]bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := time.Now()
	// Saves still unanswered count as waiting too: their messages may be
	// in a later listing beside this one's newcomers.
	waiting := len(m.pending) > 0 || len(m.inflight) > 0
	for u, at := range m.unclaimed {
		if _, ok := placed[u]; ok || now.Sub(at) > arrivalTTL || !waiting {
			delete(m.unclaimed, u)
		}
	}
	if !waiting {
		return
	}
	for _, u := range added {
		if _, ok := placed[u]; !ok {
			if m.unclaimed == nil {
				m.unclaimed = map[imap.UID]time.Time{}
			}
			m.unclaimed[u] = now
		}
	}
}

// unreadUIDs asks the provider which messages are unread. The answer holds
// whole messages: their metadata is kept (without bodies), so that it
// costs no second call later.
func (m *Folder) unreadUIDs(ctx context.Context, auth directapi.Authentication) (map[imap.UID]bool, error) {
	msgs, err := m.store.cfg.Provider.Unread(ctx, auth, m.name)
	if err != nil {
		return nil, err
	}
	set := make(map[imap.UID]bool, len(msgs))
	for i := range msgs {
		if d := msgs[i]; d.UID > 0 && d.UID <= MaxUID {
			set[imap.UID(d.UID)] = true
		}
	}
	m.fillMeta(msgs)
	return set, nil
}

// load builds the mirror the first time.
func (m *Folder) load(ctx context.Context, auth directapi.Authentication, st state.FolderState, uids []imap.UID, unread int) error {
	// New UIDs a transfer under way may have made wait for it, as in a
	// refresh (holdBackLocked); the count then covers more than the
	// messages shown, so the read state is asked for below.
	held := 0
	m.mu.Lock()
	waiting := len(m.pending) > 0 || len(m.inflight) > 0
	m.mu.Unlock()
	if floor, busy := m.store.transferFloor(m.user, m.name); busy && !waiting {
		i, _ := slices.BinarySearch(uids, imap.UID(max(floor, int64(st.UIDNext))))
		uids, held = uids[:i], len(uids)-i
	}
	kept, err := m.store.cfg.State.Flags(ctx, m.user, m.name, st.UIDValidity)
	if err != nil {
		return err
	}
	// Messages that arrived while the bridge was not looking may be
	// copies whose flags were written down before it was stopped.
	var newer []imap.UID
	for _, u := range uids {
		if u >= imap.UID(st.UIDNext) {
			newer = append(newer, u)
		}
	}
	var w state.RefreshWrite
	if err := m.pendingFlagsFor(ctx, auth, newer, kept, &w); err != nil {
		m.store.cfg.Logger.Warn("imap load: flags written down before a copy", "user", m.user, "err", err)
	}
	var unreadSet map[imap.UID]bool
	var details []directapi.MessageDetail
	switch {
	case unread >= len(uids) && held == 0:
		// Every message is unread: nothing to ask.
		unreadSet = make(map[imap.UID]bool, len(uids))
		for _, u := range uids {
			unreadSet[u] = true
		}
	case unread > 0 && held == 0 && m.inferFromMemo(st.UIDValidity, uids, unread, &unreadSet):
		// What the bridge knew before it forgot the folder agrees with
		// the counts (readmemo.go).
	case unread > 0:
		// Whole messages: kept as metadata below.
		if details, err = m.store.cfg.Provider.Unread(ctx, auth, m.name); err != nil {
			return err
		}
		unreadSet = make(map[imap.UID]bool, len(details))
		for _, d := range details {
			if d.UID > 0 && d.UID <= MaxUID {
				unreadSet[imap.UID(d.UID)] = true
			}
		}
	}
	// \Recent (RFC 3501 §2.3.2) starts at the UIDNEXT the state store
	// had before this process first loaded the folder, so messages that
	// arrived while the bridge was not looking are recent.
	mb := seqview.NewMailbox(seqview.Config{UIDValidity: st.UIDValidity, UIDNext: imap.UID(st.UIDNext), RecentFrom: imap.UID(max(st.UIDNext, 1))})
	byUID := make(map[imap.UID]*Message, len(uids))
	add := make([]seqview.NewMessage, 0, len(uids))
	for _, u := range uids {
		byUID[u] = &Message{UID: u}
		add = append(add, seqview.NewMessage{UID: u, Flags: withSeen(canonicalFlags(kept[uint32(u)]), !unreadSet[u])})
	}
	if err := mb.Add(add...); err != nil {
		return err
	}
	if n := len(uids); n > 0 && uids[n-1] >= imap.UID(st.UIDNext) {
		w.MaxUID = uint32(uids[n-1])
	}
	// What the load learnt, in one transaction before sessions see it.
	before, err := m.store.cfg.State.WriteRefresh(ctx, m.user, m.name, st.UIDValidity, w)
	if err != nil {
		return err
	}
	if m.store.shared() && before > 0 {
		mb.NotRecent(imap.UID(before - 1)) // see seenElsewhere
	}
	m.mu.Lock()
	m.syncedAt = time.Now()
	m.validity = st.UIDValidity
	m.uidNext = imap.UID(st.UIDNext)
	m.mb, m.byUID = mb, byUID
	// Copies placed while this load ran carry the flags written for them
	// after it read the state store; the next refresh starts after this
	// load ends and reads the rest itself.
	var late []seqview.FlagChange
	for u, c := range m.carried {
		if _, ok := mb.Flags(u); ok {
			late = append(late, seqview.FlagChange{UID: u, Op: imap.StoreFlagsAdd, Flags: c.flags})
		}
	}
	m.carried = nil
	mb.SetFlags(nil, late...)
	// Messages that arrive from now on lack metadata and are found by
	// received date (LoadMeta); the unread ones came with the load.
	m.metaAt = m.syncedAt
	if held > 0 {
		m.heldSince = time.Now() // the transfer's end shows them (holding)
	}
	m.loaded = true
	m.syncedAt = time.Now()
	m.raiseUIDNextLocked(uids)
	m.metaFrom = m.uidNext
	m.mu.Unlock()
	m.fillMeta(details)
	return nil
}

// inferFromMemo sets *set from the folder's read memo when it agrees with
// the provider's unread count.
func (m *Folder) inferFromMemo(validity uint32, uids []imap.UID, unread int, set *map[imap.UID]bool) bool {
	memo := m.store.takeMemo(m.user, m.name, validity)
	if memo == nil {
		return false
	}
	*set = memo.infer(uids, unread)
	return *set != nil
}

// raiseUIDNextLocked keeps UIDNEXT above every UID seen (uids ascending).
// It returns the largest UID when that raised it, else 0: addCopies
// writes it to the state store after letting go of the lock
// (saveUIDNext); a refresh has written it already (WriteRefresh).
func (m *Folder) raiseUIDNextLocked(uids []imap.UID) uint32 {
	if n := len(uids); n > 0 && uids[n-1] >= m.uidNext {
		m.uidNext = uids[n-1] + 1
		m.mb.SetUIDNext(m.uidNext)
		return uint32(uids[n-1])
	}
	return 0
}

// saveUIDNext records the largest UID seen, so UIDNEXT never goes down
// across restarts.
func (m *Folder) saveUIDNext(ctx context.Context, largest uint32) error {
	if largest == 0 {
		return nil
	}
	return m.store.cfg.State.SeenUIDs(ctx, m.user, m.name, largest)
}

// apply merges a fresh UID list and read state into the folder's
// seqview.Mailbox, which gives the views their EXPUNGE, EXISTS, FETCH
// FLAGS and FLAGS. unreadSet nil means "infer": messages already known
// keep their state, new ones are unread unless readNow (arrivals just
// marked read). v0 is the mirror's version when the answers were asked
// for: when commands changed the mirror since, their changes stand and
// the read state of the answers is not applied (the next refresh brings
// it). keptFlags is the stored flags of the folder, read when new
// messages were expected.
func (m *Folder) apply(ctx context.Context, v0, readGen uint64, uids []imap.UID, unreadSet map[imap.UID]bool, keptFlags map[uint32][]string, placed map[imap.UID]bool) error {
	m.mu.Lock()
	changed := m.version != v0
	if changed && unreadSet != nil {
		// The provider's read state, read but not applied: it may show
		// a change another client made that the mirror lacks, so a
		// STORE must no longer take the mirror's word (readExact).
		unreadSet = nil
		m.readInferredLocked()
	}
	if unreadSet != nil {
		// The provider's read state, as it was after every read marking
		// that had failed when this refresh began (readUnsure).
		m.readSure = max(m.readSure, readGen)
	}
	keep := make(map[imap.UID]bool, len(uids))
	for _, u := range uids {
		keep[u] = true
	}
	// Removals this bridge made: a UID it removed stays removed; once a
	// refresh that started after the removal no longer lists it, the
	// note is dropped.
	for u, at := range m.removed {
		if keep[u] {
			delete(keep, u)
		} else if at <= v0 {
			delete(m.removed, u)
		}
	}
	// A UID the mirror never knew, below the largest one it knows, means
	// the provider renumbered the folder: the old UIDs are void. Below the
	// UIDNEXT it announced, too: a folder created again under a name
	// inherits the name's UIDNEXT (state.Store.ForgetFolder), which a
	// provider that numbers a new folder from 1 again undercuts. Either
	// way the folder gets a new UIDVALIDITY once, and a UIDNEXT above the
	// UIDs the provider now lists, not the old one, so the next arrival
	// does not look like a renumbering again.
	for _, u := range uids {
		if msg := m.byUID[u]; keep[u] && (msg == nil || msg.expunged) && u < m.uidNext {
			m.renumberedLocked()
			m.mu.Unlock()
			next := slices.Max(uids) + 1
			m.store.cfg.Logger.Warn("imap: the provider gave a folder UIDs below its UIDNEXT; new UIDVALIDITY",
				"user", m.user, "uidnext", uint32(next))
			if _, err := m.store.cfg.State.ResetFolder(ctx, m.user, m.name, uint32(next)); err != nil {
				return err
			}
			m.store.publish(change{U: m.user, F: m.name, Drop: true})
			return ErrFolderGone
		}
	}
	for u, at := range m.added {
		if keep[u] || at <= v0 {
			delete(m.added, u)
		}
	}
	var gone []imap.UID
	for _, u := range m.mb.UIDs() {
		if _, mine := m.added[u]; !keep[u] && !mine {
			gone = append(gone, u)
		}
	}
	if len(gone) > 0 {
		m.showExpungeLocked(gone)
		m.forgetLocked(gone)
	}
	var changes []seqview.FlagChange
	var add []seqview.NewMessage
	for _, u := range uids {
		if !keep[u] {
			continue
		}
		if msg := m.byUID[u]; msg != nil && !msg.expunged {
			if seen, ok := placed[u]; ok {
				// An arrival paired after its message was shown.
				sv := m.savedAt[u]
				msg.saved = sv.at
				if msg.meta == nil {
					msg.meta = sv.meta
				}
				delete(m.savedAt, u)
				changes = append(changes, seqview.FlagChange{UID: u, Op: imap.StoreFlagsAdd,
					Flags: withSeen(canonicalFlags(keptFlags[uint32(u)]), seen)})
			}
			if unreadSet != nil {
				op := imap.StoreFlagsAdd
				if unreadSet[u] {
					op = imap.StoreFlagsDel
				}
				changes = append(changes, seqview.FlagChange{UID: u, Op: op, Flags: []imap.Flag{imap.FlagSeen}})
			}
			continue
		}
		sv := m.savedAt[u]
		m.byUID[u] = &Message{UID: u, saved: sv.at, meta: sv.meta}
		delete(m.savedAt, u)
		read := placed[u] || unreadSet != nil && !unreadSet[u]
		kept := m.takeCarriedLocked(u, v0, canonicalFlags(keptFlags[uint32(u)]))
		add = append(add, seqview.NewMessage{UID: u, Flags: withSeen(kept, read)})
	}
	m.dropCarriedLocked(v0)
	m.showFlagsLocked(nil, changes)
	if err := m.showAddLocked(add); err != nil {
		m.mu.Unlock()
		return err
	}
	switch {
	case unreadSet != nil:
		m.readExact = time.Now() // the provider's read state, whole
		m.wantList = false
	case len(add) > 0 || len(placed) > 0:
		m.readInferredLocked() // newcomers counted unread, arrivals
	}
	m.syncedAt = time.Now()
	m.publishSyncedLocked()
	m.raiseUIDNextLocked(uids) // written by doRefresh already
	m.mu.Unlock()
	return nil
}

// renumberedLocked gives the folder a new UIDVALIDITY: connections that
// have it selected are told BYE-worthy news (seqview.ErrGone) and must
// select it again.
// The caller gives the state store the new UIDNEXT (ResetFolder) after
// letting go of the lock.
func (m *Folder) renumberedLocked() {
	m.markGoneLocked()
	m.loaded = false
	m.dropped = true
	m.store.drop(m)
	m.store.unclaimAll(m.user, m.name) // the old UIDs are void
}
