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
)

// mirror is the bridge's view of one provider folder of one user, shared by
// every connection that selects it: the UIDs, the read state, the flags the
// bridge keeps, message metadata loaded when first needed, and go-imap's
// MailboxTracker, which hands each connection the EXISTS, EXPUNGE and FETCH
// FLAGS updates it has not seen yet. One poller per mirror refreshes it
// while any connection watches it, so a hundred idle connections on one
// folder cost one poll per interval.
//
// Concurrency: mu guards every field below it. REST calls are made without
// holding mu where they can be; sync holds syncMu so that only one refresh
// runs at a time.
type mirror struct {
	hub  *hub
	user string // lower-case Direct address
	name string // provider folder name, also the IMAP name

	syncMu sync.Mutex

	mu          sync.Mutex
	auth        directapi.Authentication // latest credentials of a watcher: polling needs some
	validity    uint32
	uidNext     imap.UID // one more than the largest UID ever seen
	msgs        []*message
	byUID       map[imap.UID]*message
	unreadCount int
	views       map[*view]struct{} // of the connections that have the folder selected
	// recentFrom is the first UID that is still \Recent (RFC 3501
	// §2.3.2): messages from it on have not been shown to a read-write
	// session yet. It starts at the UIDNEXT the state store had before
	// this process first loaded the folder, so messages that arrived
	// while the bridge was not looking are recent.
	recentFrom imap.UID
	loaded     bool
	syncedAt   time.Time
	refs       int
	evict      *time.Timer // pending forget after the last release
	dropped    bool        // forgotten by the hub; acquire takes a new one
	stopPoll   chan struct{}
	gone       error // set when the folder vanished or its UIDs were renumbered
}

// message is one message of a mirror.
type message struct {
	uid   imap.UID
	seen  bool
	flags []imap.Flag // kept by the bridge: every flag but \Seen, canonical, sorted
	meta  *directapi.MessageDetail
}

// flagList is the message's flags as IMAP shows them.
func (m *message) flagList() []imap.Flag {
	out := make([]imap.Flag, 0, len(m.flags)+1)
	if m.seen {
		out = append(out, imap.FlagSeen)
	}
	return append(out, m.flags...)
}

func (m *message) has(f imap.Flag) bool {
	if f == imap.FlagSeen {
		return m.seen
	}
	return slices.Contains(m.flags, f)
}

// errFolderGone tells sessions that their selected folder no longer exists
// as they knew it.
var errFolderGone = errors.New("imapbackend: folder deleted or renumbered")

// maxUID is the largest UID IMAP can carry (RFC 9051 §2.3.1.1: 32 bits).
const maxUID = 0xFFFFFFFF

// errUIDTooLarge is a provider UID beyond 32 bits. It is refused
// explicitly rather than truncated into some other message's UID.
var errUIDTooLarge = errors.New("imapbackend: provider UID beyond 32 bits")

// sync refreshes the mirror from the provider and queues the differences
// into the tracker. It costs two calls when nothing changed (GetUIDs and
// GetUnreadMessageCount) and one more (GetUnreadMessages) when the read
// state cannot be inferred: the provider reports read state only through
// the list of unread messages, so the bridge infers it when the unread
// count matches "old state plus new messages unread" and asks otherwise.
// A change that keeps the count (one message read and another unread
// between two polls, by another client) is seen at the next count change.
func (m *mirror) sync(ctx context.Context) error {
	return m.syncIfOlder(ctx, 0)
}

// syncIfOlder refreshes the mirror unless a refresh that finished less
// than maxAge ago already did: connections that ask at once wait for one
// refresh and share it, instead of each making its own in turn.
func (m *mirror) syncIfOlder(ctx context.Context, maxAge time.Duration) error {
	m.syncMu.Lock()
	defer m.syncMu.Unlock()
	m.mu.Lock()
	auth, loaded := m.auth, m.loaded
	fresh := loaded && maxAge > 0 && time.Since(m.syncedAt) <= maxAge
	m.mu.Unlock()
	if fresh {
		return nil
	}

	c := m.hub.cfg.Provider
	pids, err := c.UIDs(ctx, auth, m.name)
	if err != nil {
		return err
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
	unread, err := c.UnreadCount(ctx, auth, m.name)
	if err != nil {
		return err
	}

	if !loaded {
		if err := m.load(ctx, auth, uids, unread); err != nil {
			return err
		}
		return nil
	}

	m.mu.Lock()
	stillUnread, added := 0, 0
	for _, u := range uids {
		if msg := m.byUID[u]; msg != nil {
			if !msg.seen {
				stillUnread++
			}
		} else {
			added++
		}
	}
	m.mu.Unlock()

	var unreadSet map[imap.UID]bool
	if unread != stillUnread+added {
		if unreadSet, err = m.unreadUIDs(ctx, auth); err != nil {
			return err
		}
	}
	return m.apply(ctx, uids, unread, unreadSet)
}

// holdSync takes the refresh lock for a command that changes messages at
// the provider (see store.go) and returns an idempotent release, so the
// command can let go early, before it refreshes the mirror itself.
func (m *mirror) holdSync() (release func()) {
	m.syncMu.Lock()
	var once sync.Once
	return func() { once.Do(m.syncMu.Unlock) }
}

// unreadUIDs asks the provider which messages are unread.
func (m *mirror) unreadUIDs(ctx context.Context, auth directapi.Authentication) (map[imap.UID]bool, error) {
	msgs, err := m.hub.cfg.Provider.Unread(ctx, auth, m.name)
	if err != nil {
		return nil, err
	}
	set := make(map[imap.UID]bool, len(msgs))
	for _, d := range msgs {
		if d.UID > 0 && d.UID <= maxUID {
			set[imap.UID(d.UID)] = true
		}
	}
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
	if unread > 0 {
		if unreadSet, err = m.unreadUIDs(ctx, auth); err != nil {
			return err
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.validity = st.UIDValidity
	m.uidNext = imap.UID(st.UIDNext)
	m.msgs = make([]*message, 0, len(uids))
	m.byUID = make(map[imap.UID]*message, len(uids))
	for _, u := range uids {
		msg := &message{uid: u, seen: !unreadSet[u], flags: canonicalFlags(kept[uint32(u)])}
		m.msgs = append(m.msgs, msg)
		m.byUID[u] = msg
	}
	m.unreadCount = unread
	m.recentFrom = imap.UID(max(st.UIDNext, 1))
	m.loaded = true
	m.syncedAt = time.Now()
	return m.raiseUIDNextLocked(ctx)
}

// raiseUIDNextLocked keeps UIDNEXT above every UID seen, in memory and in
// the state store, so it never goes down across restarts.
func (m *mirror) raiseUIDNextLocked(ctx context.Context) error {
	if n := len(m.msgs); n > 0 && m.msgs[n-1].uid >= m.uidNext {
		m.uidNext = m.msgs[n-1].uid + 1
		return m.hub.cfg.Store.SeenUIDs(ctx, m.user, m.name, uint32(m.msgs[n-1].uid))
	}
	return nil
}

// apply merges a fresh UID list and read state into the mirror, queueing
// EXPUNGE, EXISTS, FETCH FLAGS and, when new messages bring keywords the
// folder did not have, FLAGS updates (before the EXISTS: a client must
// learn a keyword from FLAGS before a FETCH shows it). unreadSet nil means "infer": messages
// already known keep their state, new ones are unread.
func (m *mirror) apply(ctx context.Context, uids []imap.UID, unread int, unreadSet map[imap.UID]bool) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	keep := make(map[imap.UID]bool, len(uids))
	for _, u := range uids {
		keep[u] = true
	}
	// A UID the mirror never knew, below the largest one it knows, means
	// the provider renumbered the folder: the old UIDs are void.
	var newest imap.UID
	if n := len(m.msgs); n > 0 {
		newest = m.msgs[n-1].uid
	}
	for _, u := range uids {
		if m.byUID[u] == nil && (u <= newest || u < m.uidNext) {
			return m.renumberedLocked(ctx)
		}
	}
	for i := len(m.msgs) - 1; i >= 0; i-- {
		if msg := m.msgs[i]; !keep[msg.uid] {
			m.queueExpungeLocked(msg.uid)
			delete(m.byUID, msg.uid)
			m.msgs = slices.Delete(m.msgs, i, i+1)
		}
	}
	for _, msg := range m.msgs {
		if unreadSet == nil {
			continue
		}
		if seen := !unreadSet[msg.uid]; seen != msg.seen {
			msg.seen = seen
			m.queueFlagsLocked(msg.uid, nil)
		}
	}
	before := len(m.msgs)
	flagsBefore := mailboxFlags(m.msgs)
	var kept map[uint32][]string
	for _, u := range uids {
		if m.byUID[u] != nil {
			continue
		}
		if kept == nil {
			// Flags stored for a UID before the mirror saw it (COPY,
			// MOVE and APPEND set them on the new UIDs) show at once.
			var err error
			if kept, err = m.hub.cfg.Store.Flags(ctx, m.user, m.name, m.validity); err != nil {
				return err
			}
		}
		msg := &message{uid: u, seen: unreadSet != nil && !unreadSet[u], flags: canonicalFlags(kept[uint32(u)])}
		m.msgs = append(m.msgs, msg)
		m.byUID[u] = msg
	}
	if gainedFlags(flagsBefore, mailboxFlags(m.msgs)) {
		m.queueMailboxFlagsLocked()
	}
	m.queueExistsLocked(m.msgs[before:])
	m.unreadCount = unread
	m.syncedAt = time.Now()
	return m.raiseUIDNextLocked(ctx)
}

// renumberedLocked gives the folder a new UIDVALIDITY: connections that
// have it selected are told BYE-worthy news and must select it again.
func (m *mirror) renumberedLocked(ctx context.Context) error {
	m.markGoneLocked()
	m.loaded = false
	if _, err := m.hub.cfg.Store.ResetFolder(ctx, m.user, m.name, uint32(m.uidNext)); err != nil {
		return err
	}
	m.dropped = true
	m.hub.drop(m)
	return errFolderGone
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

// gainedFlags reports a flag in after that is not in before.
func gainedFlags(before, after []imap.Flag) bool {
	for _, f := range after {
		if !slices.Contains(before, f) {
			return true
		}
	}
	return false
}
