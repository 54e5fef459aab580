package imapbackend

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/emersion/go-imap/v2"

	"github.com/directbridge/directbridge/directapi"
	"github.com/directbridge/directbridge/seqview"
)

// mirror is the bridge's view of one provider folder of one user, shared by
// every connection that selects it: the UIDs, the read state, the flags the
// bridge keeps, message metadata loaded when first needed, and the views
// of the connections that have it selected (package seqview). One poller per
// mirror refreshes it while any connection watches it, so a hundred idle
// connections on one folder cost one poll per interval.
//
// Concurrency: mu guards every field below it, and is never held across a
// provider call or a state-store call, so no command on the folder waits
// for another's round trip. Refreshes are versioned instead of locked out:
// every change a command applies to the mirror raises version, and a
// refresh whose provider answers were read before such a change does not
// undo it (its read state is not applied; UIDs removed meanwhile stay
// removed, see removed). One refresh runs at a time; callers that want one
// share it (see refresh).
type mirror struct {
	hub  *hub
	user string // lower-case Direct address
	name string // provider folder name, also the IMAP name

	mu       sync.Mutex
	auth     directapi.Authentication // latest credentials of a watcher: polling needs some
	validity uint32
	uidNext  imap.UID // one more than the largest UID ever seen
	// mb is what sessions see of the folder: the UIDs in order, every
	// message's flags (\Seen from the provider, the rest from the state
	// store), \Recent, and the views of the connections that have the
	// folder selected (package seqview). Set by the first load.
	mb *seqview.Mailbox
	// byUID holds the handle (metadata) of every message of mb, and of
	// messages expunged lately, which a session not told yet may still
	// fetch (ghosts, oldest first, bounded by maxGhosts).
	byUID    map[imap.UID]*message
	ghosts   []imap.UID
	loaded   bool
	syncedAt time.Time // when the last refresh finished
	// version counts the changes commands applied to the mirror (flags,
	// removals); a refresh compares it before and after its round trips.
	version uint64
	// removed holds UIDs this bridge removed (EXPUNGE, MOVE) at the
	// version of the removal, until a refresh that started later shows
	// the provider no longer lists them: an earlier refresh's answer must
	// not bring them back, nor take them for a renumbering.
	removed map[imap.UID]uint64
	// added holds UIDs this bridge put into the mirror itself (copies,
	// arrivals.go) at the version it did, until a refresh that started
	// later lists them: an earlier refresh's answer lacks them but must
	// not take them for expunged.
	added map[imap.UID]uint64
	// flight is the refresh under way, if any; lastStart is when the
	// last successful one started.
	flight    *refreshFlight
	lastStart time.Time
	lastLight time.Time // when the last light refresh (discover) started
	// metaAt is when metadata was last listed for the folder (whole or
	// by received date): messages that arrived since are found with
	// SearchMessagesMetadataByReceivedDate from it on (meta.go).
	metaAt   time.Time
	metaFrom imap.UID // UIDNEXT when metaAt was taken: older messages were listed
	// pending are messages saved by APPEND whose UIDs the next refresh
	// finds (arrivals.go); settle is the refresh timer after the last.
	pending  []*arrival
	inflight []*arrival         // saves asked for and not answered yet
	savedAt  map[imap.UID]saved // arrivals placed, until their handles exist
	// unclaimed are UIDs that came in while arrivals were pending and
	// were not paired with one (a save answered after the refresh that
	// listed its message had started), with when they were first seen:
	// later refreshes may still pair them, until arrivalTTL.
	unclaimed map[imap.UID]time.Time
	settle    *time.Timer
	refs      int
	evict     *time.Timer // pending forget after the last release
	dropped   bool        // forgotten by the hub; acquire takes a new one
	stopPoll  chan struct{}
	gone      error // set when the folder vanished or its UIDs were renumbered
}

// refreshFlight is one refresh under way, which other callers can wait for.
type refreshFlight struct {
	light   bool // UIDs only (discover)
	started time.Time
	done    chan struct{}
	err     error
}

// message is the handle of one message of a mirror: what the bridge
// knows of it beyond its flags (which mb keeps). Its fields are guarded by
// the mirror's mu.
type message struct {
	uid      imap.UID
	meta     *directapi.MessageDetail // metadata, nil until loaded
	expunged bool                     // gone from the folder; a ghost
	saved    time.Time                // when this bridge saved it (APPEND), else zero
}

// maxGhosts bounds the handles of expunged messages kept for sessions
// that have not been told yet: past it, the oldest lose their metadata
// (such a session then gets NO [EXPUNGEISSUED] for what it asks of them).
const maxGhosts = 4096

// forgetLocked turns the handles of expunged messages into ghosts.
// Called with m.mu held.
func (m *mirror) forgetLocked(uids []imap.UID) {
	for _, u := range uids {
		if msg := m.byUID[u]; msg != nil && !msg.expunged {
			msg.expunged = true
			m.ghosts = append(m.ghosts, u)
		}
	}
	if over := len(m.ghosts) - maxGhosts; over > 0 {
		for _, u := range m.ghosts[:over] {
			if msg := m.byUID[u]; msg != nil && msg.expunged {
				delete(m.byUID, u)
			}
		}
		m.ghosts = slices.Delete(m.ghosts, 0, over)
	}
}

// live tells whether uid is a message of the folder (not expunged).
// Called with m.mu held.
func (m *mirror) live(uid imap.UID) bool {
	msg := m.byUID[uid]
	return msg != nil && !msg.expunged
}

// hasSeen tells whether flags hold \Seen.
func hasSeen(flags []imap.Flag) bool { return slices.Contains(flags, imap.FlagSeen) }

// keptOf is flags without \Seen: what the state store keeps.
func keptOf(flags []imap.Flag) []imap.Flag {
	return slices.DeleteFunc(slices.Clone(flags), func(f imap.Flag) bool { return f == imap.FlagSeen })
}

// withSeen is kept flags plus \Seen when read, as mb holds them.
func withSeen(keptFlags []imap.Flag, read bool) []imap.Flag {
	if read {
		return append(slices.Clone(keptFlags), imap.FlagSeen)
	}
	return keptFlags
}

// errFolderGone tells sessions that their selected folder no longer exists
// as they knew it.
var errFolderGone = errors.New("imapbackend: folder deleted or renumbered")

// maxUID is the largest UID IMAP can carry (RFC 9051 §2.3.1.1: 32 bits).
const maxUID = 0xFFFFFFFF

// errUIDTooLarge is a provider UID beyond 32 bits. It is refused
// explicitly rather than truncated into some other message's UID.
var errUIDTooLarge = errors.New("imapbackend: provider UID beyond 32 bits")

// sync refreshes the mirror with a refresh that starts now or later.
func (m *mirror) sync(ctx context.Context) error {
	return m.refresh(ctx, time.Now(), false)
}

// discover is a refresh that reads the UIDs only (one call): enough to
// find what this bridge just saved, whose read state it knows. A full
// refresh started later serves too.
func (m *mirror) discover(ctx context.Context) error {
	return m.refresh(ctx, time.Now(), true)
}

// awaitFlight waits for the refresh under way, if any, to end. A refresh
// that read the folder after a save was asked pairs that save's message
// (awaitSaves), so an APPEND that finds one under way may need no
// refresh of its own.
func (m *mirror) awaitFlight(ctx context.Context) {
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
func (m *mirror) syncIfOlder(ctx context.Context, maxAge time.Duration) error {
	return m.refresh(ctx, time.Now().Add(-maxAge), false)
}

// refresh makes sure a refresh that started at notBefore or later has
// succeeded: it returns at once if the last one did, waits for the one
// under way if that one qualifies, and otherwise (after any under way)
// makes one itself. Only one runs at a time, and nobody holds a lock that
// commands need while it talks to the provider. A light refresh (UIDs
// only, see discover) serves only callers that asked for no more.
func (m *mirror) refresh(ctx context.Context, notBefore time.Time, light bool) error {
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

		f.err = m.doRefresh(ctx, f.started, f.light)
		m.mu.Lock()
		m.flight = nil
		switch {
		case f.err != nil:
		case f.light:
			m.lastLight = f.started
		default:
			m.lastStart = f.started
		}
		m.mu.Unlock()
		close(f.done)
		return f.err
	}
}

// doRefresh reads the folder from the provider and merges it into the
// mirror, queueing the differences into the views. It costs two calls
// when nothing changed (GetUIDs and GetUnreadMessageCount) and one more
// (GetUnreadMessages) when the read state cannot be inferred: the provider
// reports read state only through the list of unread messages, so the
// bridge infers it when the unread count matches "old state plus new
// messages unread" and asks otherwise. A change that keeps the count (one
// message read and another unread between two polls, by another client)
// is seen at the next count change.
func (m *mirror) doRefresh(ctx context.Context, started time.Time, light bool) error {
	m.mu.Lock()
	auth, loaded, v0 := m.auth, m.loaded, m.version
	m.mu.Unlock()

	c := m.hub.cfg.Provider
	// The two reads go out together: a refresh costs one round trip of
	// time, not two. A light one reads the UIDs only.
	var unread int
	var unreadErr error
	counted := make(chan struct{})
	go func() {
		defer close(counted)
		if !light {
			unread, unreadErr = c.UnreadCount(ctx, auth, m.name)
		}
	}()
	pids, err := c.UIDs(ctx, auth, m.name)
	<-counted
	if err != nil {
		return err
	}
	// An APPEND whose save was asked before the listing came back may be
	// in it: its answer pairs it (arrivals.go).
	m.awaitSaves(ctx, time.Now())
	if unreadErr != nil {
		return unreadErr
	}
	uids := make([]imap.UID, 0, len(pids))
	for _, p := range pids {
		if p <= 0 || p > maxUID {
			return fmt.Errorf("%w: %d in %s", errUIDTooLarge, p, m.name)
		}
		uids = append(uids, imap.UID(p))
	}
	slices.Sort(uids)
	uids = slices.Compact(uids)

	if !loaded {
		return m.load(ctx, auth, uids, unread)
	}

	m.mu.Lock()
	stillUnread := 0
	var added []imap.UID
	for _, u := range uids {
		if fl, ok := m.mb.Flags(u); ok {
			if !hasSeen(fl) {
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
	m.mu.Unlock()
	// Messages this bridge saved (APPEND) get their flags now.
	placed := m.placeArrivals(ctx, candidates, started)
	m.noteUnclaimed(added, placed)

	var unreadSet map[imap.UID]bool
	// The count was read before the arrivals were marked read. A light
	// refresh has no count: known messages keep their state, new ones
	// are unread unless just marked read.
	if !light && !changed && unread != stillUnread+len(added) {
		if unreadSet, err = m.unreadUIDs(ctx, auth); err != nil {
			return err
		}
	}
	var kept map[uint32][]string
	if len(added) > 0 || len(placed) > 0 {
		// Flags stored for a UID before the mirror saw it (COPY, MOVE
		// and APPEND set them on the new UIDs) show at once. Read before
		// taking the lock: no store I/O under it.
		m.mu.Lock()
		validity := m.validity
		m.mu.Unlock()
		if kept, err = m.hub.cfg.Store.Flags(ctx, m.user, m.name, validity); err != nil {
			return err
		}
	}
	return m.apply(ctx, v0, uids, unreadSet, kept, placed)
}

// noteUnclaimed keeps the UIDs added that no arrival claimed while
// arrivals still wait, and forgets the claimed and the stale.
func (m *mirror) noteUnclaimed(added []imap.UID, placed map[imap.UID]bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := time.Now()
	for u, at := range m.unclaimed {
		if _, ok := placed[u]; ok || now.Sub(at) > arrivalTTL || len(m.pending) == 0 {
			delete(m.unclaimed, u)
		}
	}
	if len(m.pending) == 0 {
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
func (m *mirror) unreadUIDs(ctx context.Context, auth directapi.Authentication) (map[imap.UID]bool, error) {
	msgs, err := m.hub.cfg.Provider.Unread(ctx, auth, m.name)
	if err != nil {
		return nil, err
	}
	set := make(map[imap.UID]bool, len(msgs))
	for i := range msgs {
		if d := msgs[i]; d.UID > 0 && d.UID <= maxUID {
			set[imap.UID(d.UID)] = true
		}
	}
	m.fillMeta(msgs)
	return set, nil
}

// load builds the mirror the first time.
func (m *mirror) load(ctx context.Context, auth directapi.Authentication, uids []imap.UID, unread int) error {
	st, err := m.hub.cfg.Store.Folder(ctx, m.user, m.name)
	if err != nil {
		return err
	}
	kept, err := m.hub.cfg.Store.Flags(ctx, m.user, m.name, st.UIDValidity)
	if err != nil {
		return err
	}
	var unreadSet map[imap.UID]bool
	var details []directapi.MessageDetail
	switch {
	case unread >= len(uids):
		// Every message is unread: nothing to ask.
		unreadSet = make(map[imap.UID]bool, len(uids))
		for _, u := range uids {
			unreadSet[u] = true
		}
	case unread > 0 && m.inferFromMemo(st.UIDValidity, uids, unread, &unreadSet):
		// What the bridge knew before it forgot the folder agrees with
		// the counts (readmemo.go).
	case unread > 0:
		// Whole messages: kept as metadata below.
		if details, err = m.hub.cfg.Provider.Unread(ctx, auth, m.name); err != nil {
			return err
		}
		unreadSet = make(map[imap.UID]bool, len(details))
		for _, d := range details {
			if d.UID > 0 && d.UID <= maxUID {
				unreadSet[imap.UID(d.UID)] = true
			}
		}
	}
	// \Recent (RFC 3501 §2.3.2) starts at the UIDNEXT the state store
	// had before this process first loaded the folder, so messages that
	// arrived while the bridge was not looking are recent.
	mb := seqview.NewMailbox(seqview.Config{UIDValidity: st.UIDValidity, UIDNext: imap.UID(st.UIDNext), RecentFrom: imap.UID(max(st.UIDNext, 1))})
	byUID := make(map[imap.UID]*message, len(uids))
	add := make([]seqview.NewMessage, 0, len(uids))
	for _, u := range uids {
		byUID[u] = &message{uid: u}
		add = append(add, seqview.NewMessage{UID: u, Flags: withSeen(canonicalFlags(kept[uint32(u)]), !unreadSet[u])})
	}
	if err := mb.Add(add...); err != nil {
		return err
	}
	m.mu.Lock()
	m.syncedAt = time.Now()
	m.validity = st.UIDValidity
	m.uidNext = imap.UID(st.UIDNext)
	m.mb, m.byUID = mb, byUID
	// Messages that arrive from now on lack metadata and are found by
	// received date (loadMeta); the unread ones came with the load.
	m.metaAt = m.syncedAt
	m.loaded = true
	m.syncedAt = time.Now()
	largest := m.raiseUIDNextLocked(uids)
	m.metaFrom = m.uidNext
	m.mu.Unlock()
	m.fillMeta(details)
	return m.saveUIDNext(ctx, largest)
}

// inferFromMemo sets *set from the folder's read memo when it agrees with
// the provider's unread count.
func (m *mirror) inferFromMemo(validity uint32, uids []imap.UID, unread int, set *map[imap.UID]bool) bool {
	memo := m.hub.takeMemo(m.user, m.name, validity)
	if memo == nil {
		return false
	}
	*set = memo.infer(uids, unread)
	return *set != nil
}

// raiseUIDNextLocked keeps UIDNEXT above every UID seen (uids ascending).
// It returns the
// largest UID when that raised it (to be written to the state store after
// the lock is let go: saveUIDNext), else 0.
func (m *mirror) raiseUIDNextLocked(uids []imap.UID) uint32 {
	if n := len(uids); n > 0 && uids[n-1] >= m.uidNext {
		m.uidNext = uids[n-1] + 1
		m.mb.SetUIDNext(m.uidNext)
		return uint32(uids[n-1])
	}
	return 0
}

// saveUIDNext records the largest UID seen, so UIDNEXT never goes down
// across restarts.
func (m *mirror) saveUIDNext(ctx context.Context, largest uint32) error {
	if largest == 0 {
		return nil
	}
	return m.hub.cfg.Store.SeenUIDs(ctx, m.user, m.name, largest)
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
func (m *mirror) apply(ctx context.Context, v0 uint64, uids []imap.UID, unreadSet map[imap.UID]bool, keptFlags map[uint32][]string, placed map[imap.UID]bool) error {
	m.mu.Lock()
	changed := m.version != v0
	if changed {
		unreadSet = nil
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
	// the provider renumbered the folder: the old UIDs are void.
	for _, u := range uids {
		if msg := m.byUID[u]; keep[u] && (msg == nil || msg.expunged) && u < m.uidNext {
			next := m.renumberedLocked()
			m.mu.Unlock()
			if _, err := m.hub.cfg.Store.ResetFolder(ctx, m.user, m.name, uint32(next)); err != nil {
				return err
			}
			return errFolderGone
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
		m.mb.Expunge(gone...)
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
		m.byUID[u] = &message{uid: u, saved: sv.at, meta: sv.meta}
		delete(m.savedAt, u)
		read := placed[u] || unreadSet != nil && !unreadSet[u]
		add = append(add, seqview.NewMessage{UID: u, Flags: withSeen(canonicalFlags(keptFlags[uint32(u)]), read)})
	}
	m.mb.SetFlags(nil, changes...)
	if err := m.mb.Add(add...); err != nil {
		m.mu.Unlock()
		return err
	}
	m.syncedAt = time.Now()
	largest := m.raiseUIDNextLocked(uids)
	m.mu.Unlock()
	return m.saveUIDNext(ctx, largest)
}

// renumberedLocked gives the folder a new UIDVALIDITY: connections that
// have it selected are told BYE-worthy news (seqview.ErrGone) and must
// select it again.
// It returns the UIDNEXT to carry over, which the caller gives the state
// store (ResetFolder) after letting go of the lock.
func (m *mirror) renumberedLocked() imap.UID {
	m.markGoneLocked()
	m.loaded = false
	m.dropped = true
	m.hub.drop(m)
	return m.uidNext
}

// canonicalFlags turns stored flag texts into canonical IMAP flags: system
// flags in their RFC 9051 §2.3.2 spelling (mbsync and offlineimap undo
// lower-case ones), keywords as written, sorted, without duplicates or \Seen
// and \Recent, which the bridge never stores.
func canonicalFlags(fl []string) []imap.Flag {
	out := make([]imap.Flag, 0, len(fl))
	for _, f := range fl {
		c := canonicalFlag(imap.Flag(f))
		if c == imap.FlagSeen || c == "\\Recent" || c == "" {
			continue
		}
		out = append(out, c)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

var systemFlags = []imap.Flag{imap.FlagSeen, imap.FlagAnswered, imap.FlagFlagged, imap.FlagDeleted, imap.FlagDraft,
	imap.FlagForwarded, imap.FlagMDNSent, imap.FlagJunk, imap.FlagNotJunk, imap.FlagPhishing, imap.FlagImportant}

// canonicalFlag spells system flags and well-known keywords as the RFCs do.
func canonicalFlag(f imap.Flag) imap.Flag {
	for _, s := range systemFlags {
		if equalFold(string(s), string(f)) {
			return s
		}
	}
	return f
}

func equalFold(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		x, y := a[i], b[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

// markGoneLocked records that the folder was deleted or renumbered; the
// views learn it at once (an idling connection wakes, and the session
// says BYE). Called with m.mu held.
func (m *mirror) markGoneLocked() {
	m.gone = errFolderGone
	if m.mb != nil {
		m.mb.Gone()
	}
}
