package mailstore

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"time"

	"github.com/emersion/go-imap/v2"

	"github.com/directbridge/directbridge/internal/seqview"
)

// Replicas of the bridge that share a PostgreSQL state store (issue 21)
// keep their mirrors of one folder alike without asking the provider:
// every change a replica shows in a mirror (messages added or expunged,
// flags changed, a refresh that found the folder as it is) goes to the
// others as a message (Peers.Publish), which they show in theirs, IDLE
// clients included. What a message carries is the change itself (UIDs,
// \Seen), never content; kept flags are read from the shared state
// store, which holds them before the message leaves, so that two
// replicas changing one message's keywords at once end alike whatever
// order the messages arrive in. Folder list changes (CREATE, DELETE,
// RENAME, subscriptions) travel the same way.
//
// One replica at a time polls a folder (Peers.Lease); the others learn
// from its messages that their mirror is as fresh as its poll, so that
// their own commands do not refresh it either. A replica that may have
// missed messages (Store.Missed) refreshes what its sessions hold.

// Peers is the cluster of replicas as the engine uses it
// (internal/cluster; bridge wires it). Nil runs alone.
type Peers interface {
	// ID names this replica: the owner of its attempts.
	ID() string
	// Live reports whether the replica id is alive now (a replica
	// killed a moment ago is not).
	Live(ctx context.Context, id string) bool
	// DiedBy tells when a replica not alive died at the latest, if known.
	DiedBy(ctx context.Context, id string) (time.Time, bool)
	// Publish sends payload on topic to the other replicas, in order,
	// without waiting.
	Publish(topic string, payload []byte)
	// Lease reports whether this replica may poll key now; Release lets
	// go of it.
	Lease(ctx context.Context, key string) bool
	Release(key string)
}

// Topic is the cluster topic of the engine's messages.
const Topic = "mail"

// maxUIDsPerMessage keeps a message under the cluster's payload bound
// (cluster.MaxPayload, 7,600 bytes): an added message takes at most 36
// bytes ([uid,seen,date], commas), a \Seen change 15 and a kept one 11,
// with the user's address and the folder's name around them. A message
// the cluster finds too large anyway is not sent, and the others are told
// to catch up.
const maxUIDsPerMessage = 150

// change is one message between replicas about one folder (U, F) under
// UIDVALIDITY V, or about a user's folder list.
type change struct {
	U string `json:"u"`
	F string `json:"f,omitempty"`
	V uint32 `json:"v,omitempty"`
	// Add are new messages, [uid, 1 if \Seen, INTERNALDATE in Unix
	// seconds or 0, 1 if the sender holds its bytes]; their kept flags
	// are in the state store. The date is the one the sender shows, which
	// a receiver that has not loaded the message's metadata yet shows
	// too: clients see one INTERNALDATE whichever replica they ask. A
	// message the sender holds is asked of it, not of the provider
	// (held.go). (A replica before the fourth field sent three: read as
	// not held.)
	Add [][4]int64 `json:"a,omitempty"`
	// O is the sender, when it holds messages of Add.
	O string `json:"o,omitempty"`
	// Gone are expunged messages.
	Gone []uint32 `json:"x,omitempty"`
	// Seen are \Seen changes, [uid, 1 if \Seen].
	Seen [][2]uint32 `json:"s,omitempty"`
	// Kept are messages whose kept flags changed (read them from the
	// state store).
	Kept []uint32 `json:"k,omitempty"`
	// Synced tells that a refresh of the folder just ended: the
	// receiver's mirror, with the changes before, is as fresh.
	Synced bool `json:"n,omitempty"`
	// Folders: the user's folder list changed (Subs: only the
	// subscriptions).
	Folders bool `json:"l,omitempty"`
	Subs    bool `json:"b,omitempty"`
	// Drop: the mirror of F is void (deleted, renamed, renumbered); Tree
	// takes the folders below too.
	Drop bool `json:"d,omitempty"`
	Tree bool `json:"t,omitempty"`
}

// shared reports whether changes go to other replicas.
func (st *Store) shared() bool { return st.cfg.Peers != nil }

// publish sends c to the other replicas.
func (st *Store) publish(c change) {
	if !st.shared() {
		return
	}
	b, err := json.Marshal(c)
	if err != nil {
		return // plain data: cannot fail
	}
	st.cfg.Peers.Publish(Topic, b)
}

// publishLocked sends what a mirror just showed: new messages, expunged
// ones and flag changes, split to fit the cluster's message bound.
// Called with m.mu held (so that the order of the messages is the order
// of the changes).
func (m *Folder) publishLocked(add []seqview.NewMessage, gone []imap.UID, flags []seqview.FlagChange) {
	st := m.store
	if !st.shared() || (len(add) == 0 && len(gone) == 0 && len(flags) == 0) {
		return
	}
	base := change{U: m.user, F: m.name, V: m.validity}
	for len(add) > 0 {
		n := min(len(add), maxUIDsPerMessage)
		c := base
		for _, a := range add[:n] {
			var at int64
			if msg := m.byUID[a.UID]; msg != nil && msg.meta != nil && !msg.meta.ReceivedDate.IsZero() {
				at = msg.meta.ReceivedDate.Unix()
			} else if sv, ok := m.savedAt[a.UID]; ok && sv.meta != nil && !sv.meta.ReceivedDate.IsZero() {
				at = sv.meta.ReceivedDate.Unix()
			}
			held := false
			if st.cfg.Holders != nil { // this replica serves what it holds
				_, held = st.bodies.cache.peek(rawKey{m.user, m.name, m.validity, a.UID})
			}
			if held {
				c.O = st.cfg.Peers.ID()
			}
			c.Add = append(c.Add, [4]int64{int64(a.UID), int64(b2u(HasSeen(a.Flags))), at, int64(b2u(held))})
		}
		st.publish(c)
		add = add[n:]
	}
	for len(gone) > 0 {
		n := min(len(gone), maxUIDsPerMessage)
		c := base
		for _, u := range gone[:n] {
			c.Gone = append(c.Gone, uint32(u))
		}
		st.publish(c)
		gone = gone[n:]
	}
	// Flag changes: the \Seen each message has now, and which kept sets
	// changed; one entry per message.
	seen := map[imap.UID]bool{}
	kept := map[imap.UID]bool{}
	var order []imap.UID
	for _, f := range flags {
		if _, ok := seen[f.UID]; !ok {
			order = append(order, f.UID)
		}
		fl, _ := m.mb.Flags(f.UID)
		seen[f.UID] = HasSeen(fl)
		if f.Op == imap.StoreFlagsSet || slices.ContainsFunc(f.Flags, func(x imap.Flag) bool { return x != imap.FlagSeen }) {
			kept[f.UID] = true
		}
	}
	for len(order) > 0 {
		n := min(len(order), maxUIDsPerMessage)
		c := base
		for _, u := range order[:n] {
			c.Seen = append(c.Seen, [2]uint32{uint32(u), b2u(seen[u])})
			if kept[u] {
				c.Kept = append(c.Kept, uint32(u))
			}
		}
		st.publish(c)
		order = order[n:]
	}
}

func b2u(b bool) uint32 {
	if b {
		return 1
	}
	return 0
}

// showAddLocked, showExpungeLocked and showFlagsLocked show a change in
// the mirror's sessions (seqview) and send it to the other replicas.
// Called with m.mu held.
func (m *Folder) showAddLocked(add []seqview.NewMessage) error {
	if err := m.mb.Add(add...); err != nil {
		return err
	}
	m.publishLocked(add, nil, nil)
	return nil
}

func (m *Folder) showExpungeLocked(uids []imap.UID) {
	m.mb.Expunge(uids...)
	m.publishLocked(nil, uids, nil)
}

func (m *Folder) showFlagsLocked(source *seqview.View, changes []seqview.FlagChange) {
	m.mb.SetFlags(source, changes...)
	m.publishLocked(nil, nil, changes)
}

// publishSyncedLocked tells the other replicas that a refresh of the
// mirror just ended. Called with m.mu held.
func (m *Folder) publishSyncedLocked() {
	if m.store.shared() {
		m.store.publish(change{U: m.user, F: m.name, V: m.validity, Synced: true})
	}
}

// foldersChanged forgets the user's folder lists (all of them, or the
// subscriptions only) here and on the other replicas.
func (st *Store) foldersChanged(user string, subscribedOnly bool) {
	st.folders.invalidate(user, subscribedOnly)
	st.publish(change{U: strings.ToLower(user), Folders: !subscribedOnly, Subs: subscribedOnly})
}

// Receive shows a change another replica published (Topic): the
// cluster's handler, called for one message at a time in the order they
// were sent. A change to a folder this replica has no mirror of is
// nothing to it: a mirror made later reads the provider and the state
// store. It asks the state store, never the provider, unless the
// mirror lacks messages the change skips over (then it refreshes, as a
// poll would).
func (st *Store) Receive(payload []byte) {
	var c change
	if err := json.Unmarshal(payload, &c); err != nil || c.U == "" {
		st.cfg.Logger.Warn("mailstore: a message from another replica could not be read", "err", err)
		return
	}
	switch {
	case c.Folders || c.Subs:
		st.folders.invalidate(c.U, !c.Folders)
		return
	case c.Drop && c.Tree:
		st.dropFolder(c.U, c.F)
		return
	case c.Drop:
		st.dropMirror(c.U, c.F)
		return
	}
	m := st.peek(c.U, c.F)
	if m == nil {
		return
	}
	// Bounded well below a call timeout: the listener that called waits,
	// and every later message with it.
	ctx, cancel := context.WithTimeout(context.Background(), receiveTimeout)
	defer cancel()
	m.receive(ctx, c)
}

// receiveTimeout bounds the state-store read of one peer's change.
const receiveTimeout = 10 * time.Second

// receive shows c in the mirror.
func (m *Folder) receive(ctx context.Context, c change) {
	m.mu.Lock()
	ok := m.loaded && !m.dropped && m.gone == nil && m.validity == c.V
	m.mu.Unlock()
	if !ok {
		return
	}
	if len(c.Add) > 0 || len(c.Kept) > 0 {
		// In order with this replica's own kept-flag writes and their
		// showing (flagMu): a set read here before a local STORE's write
		// must not be shown after it.
		m.flagMu.Lock()
		defer m.flagMu.Unlock()
	}
	// Kept flags of the messages the change names, from the state store
	// (written before the change was sent).
	var kept map[uint32][]string
	if len(c.Add) > 0 || len(c.Kept) > 0 {
		lo, hi := uint32(MaxUID), uint32(0)
		for _, a := range c.Add {
			lo, hi = min(lo, uint32(a[0])), max(hi, uint32(a[0]))
		}
		for _, u := range c.Kept {
			lo, hi = min(lo, u), max(hi, u)
		}
		var err error
		kept, err = m.store.cfg.State.FlagsBetween(ctx, m.user, m.name, c.V, lo, hi)
		if err != nil {
			m.store.cfg.Logger.Warn("mailstore: reading flags another replica changed", "user", m.user, "err", err)
			m.staleAfterMissed()
			return
		}
	}
	m.mu.Lock()
	m.readInferredLocked() // another replica's view of the read state
	if !m.loaded || m.dropped || m.gone != nil || m.validity != c.V {
		m.mu.Unlock()
		return
	}
	m.version++
	refresh := false
	if len(c.Gone) > 0 {
		if m.removed == nil {
			m.removed = map[imap.UID]uint64{}
		}
		var gone []imap.UID
		for _, u := range c.Gone {
			uid := imap.UID(u)
			m.removed[uid] = m.version
			if m.live(uid) {
				gone = append(gone, uid)
			}
		}
		m.mb.Expunge(gone...)
		m.forgetLocked(gone)
	}
	if len(c.Add) > 0 {
		if m.added == nil {
			m.added = map[imap.UID]uint64{}
		}
		var add []seqview.NewMessage
		var uids []imap.UID
		received := map[imap.UID]time.Time{}
		for _, a := range c.Add {
			uid := imap.UID(a[0])
			if a[0] <= 0 || a[0] > MaxUID {
				continue
			}
			if msg := m.byUID[uid]; msg != nil {
				// Shown here already (this replica's poll found it
				// first): the sender's INTERNALDATE, unless this one
				// showed the provider's already.
				if msg.meta == nil && a[2] > 0 {
					msg.received = time.Unix(a[2], 0).UTC()
				}
				if a[3] == 1 && c.O != "" && !msg.expunged {
					if _, cached := m.store.bodies.cache.peek(rawKey{m.user, m.name, m.validity, uid}); !cached {
						m.store.bodies.hints.note(rawKey{m.user, m.name, m.validity, uid}, c.O)
					}
				}
				continue
			}
			if _, gone := m.removed[uid]; gone {
				continue
			}
			uids = append(uids, uid)
			if a[3] == 1 && c.O != "" {
				m.store.bodies.hints.note(rawKey{m.user, m.name, m.validity, uid}, c.O)
			}
			if a[2] > 0 {
				received[uid] = time.Unix(a[2], 0).UTC()
			}
			add = append(add, seqview.NewMessage{UID: uid, Flags: withSeen(canonicalFlags(kept[uint32(a[0])]), a[1] == 1)})
		}
		// The mirror must not pass over a message it has not seen: one
		// between its UIDNEXT and these (its message lost, say) sends
		// it to the provider.
		if len(uids) > 0 {
			ours := map[imap.UID]bool{}
			for _, u := range uids {
				ours[u] = true
			}
			for u := m.uidNext; u < uids[len(uids)-1] && !refresh; u++ {
				refresh = !ours[u] && m.byUID[u] == nil
			}
		}
		if !refresh && len(add) > 0 {
			for _, u := range uids {
				m.byUID[u] = &Message{UID: u, received: received[u]}
				m.added[u] = m.version
				delete(m.unclaimed, u)
			}
			if err := m.mb.Add(add...); err != nil {
				refresh = true
			} else {
				m.raiseUIDNextLocked(uids) // the publisher wrote UIDNEXT
				// \Recent is the publisher's sessions' (RFC 3501 §2.3.2:
				// the first session told of the message): none here.
				m.mb.NotRecent(uids[len(uids)-1])
			}
		}
	}
	if len(c.Seen) > 0 {
		keptSet := map[uint32]bool{}
		for _, u := range c.Kept {
			keptSet[u] = true
		}
		var changes []seqview.FlagChange
		for _, s := range c.Seen {
			uid := imap.UID(s[0])
			fl, ok := m.mb.Flags(uid)
			if !ok {
				continue
			}
			k := KeptOf(fl)
			if keptSet[s[0]] {
				k = canonicalFlags(kept[s[0]])
			}
			changes = append(changes, seqview.FlagChange{UID: uid, Op: imap.StoreFlagsSet, Flags: withSeen(k, s[1] == 1)})
		}
		m.mb.SetFlags(nil, changes...)
	}
	if c.Synced {
		// As fresh as the publisher's refresh: the commands here need
		// not refresh, nor the poller poll (it holds no lease anyway).
		m.syncedAt = time.Now()
		m.lastStart = m.syncedAt
	}
	m.mu.Unlock()
	if refresh {
		m.refreshSoon()
	}
}

// seenElsewhere takes \Recent from the UIDs below uidNextBefore, which
// the state store's UIDNEXT mark shows another replica saw first (its
// sessions have them \Recent; RFC 3501 §2.3.2 gives it to one session).
// Called before the refresh shows them; nothing when alone. A mark no
// higher than this mirror's own UIDNEXT is this mirror's own doing (the
// UIDs its refreshes and APPENDs placed): those stay \Recent here, where
// imaptest's compliance saw them lose it on PostgreSQL.
func (m *Folder) seenElsewhere(uidNextBefore uint32) {
	if !m.store.shared() || uidNextBefore == 0 {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.mb != nil && imap.UID(uidNextBefore) > m.uidNext {
		m.mb.NotRecent(imap.UID(uidNextBefore - 1))
	}
}

// refreshSoon refreshes the mirror in the background, as a poll would.
func (m *Folder) refreshSoon() {
	st := m.store
	st.bg.Go(func(life context.Context) {
		ctx, cancel := context.WithTimeout(life, st.cfg.CallTimeout)
		defer cancel()
		if err := m.Sync(ctx); err != nil {
			st.cfg.Logger.Warn("mailstore: refresh after another replica's change failed", "user", m.user, "err", err)
		}
	})
}

// staleAfterMissed makes the mirror's next command refresh it, and
// refreshes it now if sessions hold it.
func (m *Folder) staleAfterMissed() {
	m.mu.Lock()
	held := m.refs > 0 && m.loaded && !m.dropped
	m.syncedAt, m.lastStart = time.Time{}, time.Time{}
	m.mu.Unlock()
	if held {
		m.refreshSoon()
	}
}

// Missed is told that messages from other replicas may have been lost
// (the cluster's listening connection broke): every mirror refreshes
// before it is trusted again, and every folder list is read again.
func (st *Store) Missed() {
	st.mu.Lock()
	folders := make([]*Folder, 0, len(st.mirrors))
	for _, m := range st.mirrors {
		folders = append(folders, m)
	}
	st.mu.Unlock()
	st.folders.invalidateAll()
	for _, m := range folders {
		m.staleAfterMissed()
	}
}

// leaseKey names a folder's poll lease.
func pollLeaseKey(user, folder string) string {
	return "poll\x00" + strings.ToLower(user) + "\x00" + folder
}
