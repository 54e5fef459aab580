package imapbackend

import (
	"slices"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapserver"
)

// view is one connection's view of its selected folder: the messages the
// client has been told of, in sequence-number order, and the changes of
// the shared mirror it has not been told of yet. It replaces go-imap's
// MailboxTracker, which cannot say how many messages a client sees (so a
// sequence number beyond them could not be answered with BAD), forgets an
// expunged message the client still sees (so a FETCH of it could not be
// answered), announces new messages only one at a time, and has no notion
// of \Recent.
//
// Updates are queued by UID, not by sequence number, and turned into
// sequence numbers when they are written, from msgs; so every EXPUNGE
// number is right at the moment it is sent (RFC 9051 §7.5.1) whatever the
// order of the changes, and an update can be held back (EXPUNGE during
// FETCH, STORE and SEARCH) while later ones go out.
//
// Concurrency: queue and notify are guarded by the mirror's mu (every
// change to a mirror queues while holding it). msgs and recent belong to
// the connection, which runs one command at a time; they are read and
// changed with the mirror's mu held as well, so that message fields can
// be read alongside.
type view struct {
	m        *mirror
	readOnly bool

	queue  []viewUpdate
	notify chan struct{} // signalled (capacity 1) when queue grows or the folder goes

	msgs   []*message        // what the client sees, in sequence order (UID order)
	recent map[imap.UID]bool // \Recent in this session (RFC 3501 §2.3.2)
}

type updateKind int8

const (
	updExists       updateKind = iota + 1 // new messages (msgs)
	updExpunge                            // message uid is gone
	updFlags                              // flags of message uid changed
	updMailboxFlags                       // the folder's FLAGS changed
)

type viewUpdate struct {
	kind updateKind
	msgs []*message
	uid  imap.UID
}

// newViewLocked opens a view of m showing every message of the mirror.
// A read-write view takes the \Recent messages (those that arrived since
// the last session took them, RFC 3501 §2.3.2: "this session is the first
// session to have been notified"); a read-only one shows them as recent
// but leaves them to the next read-write session (EXAMINE changes no
// state). Called with m.mu held.
func (m *mirror) newViewLocked(readOnly bool) *view {
	v := &view{m: m, readOnly: readOnly, notify: make(chan struct{}, 1), recent: map[imap.UID]bool{}}
	v.msgs = slices.Clone(m.msgs)
	v.takeRecentLocked(v.msgs)
	if m.views == nil {
		m.views = map[*view]struct{}{}
	}
	m.views[v] = struct{}{}
	return v
}

// takeRecentLocked marks the messages of msgs that are still recent as
// recent in this view and, for a read-write view, takes them from the
// mirror. Called with m.mu held.
func (v *view) takeRecentLocked(msgs []*message) {
	m := v.m
	for _, msg := range msgs {
		if msg.uid >= m.recentFrom {
			v.recent[msg.uid] = true
		}
	}
	if !v.readOnly && len(msgs) > 0 && msgs[len(msgs)-1].uid >= m.recentFrom {
		m.recentFrom = msgs[len(msgs)-1].uid + 1
	}
}

// closeLocked detaches the view from its mirror. Called with m.mu held.
func (v *view) closeLocked() {
	delete(v.m.views, v)
	v.queue = nil
}

// queueLocked adds an update to every view of the mirror but except.
// Called with m.mu held.
func (m *mirror) queueLocked(u viewUpdate, except *view) {
	for v := range m.views {
		if v == except {
			continue
		}
		v.queue = append(v.queue, u)
		select {
		case v.notify <- struct{}{}:
		default:
		}
	}
}

func (m *mirror) queueExistsLocked(msgs []*message) {
	if len(msgs) > 0 {
		m.queueLocked(viewUpdate{kind: updExists, msgs: slices.Clone(msgs)}, nil)
	}
}

func (m *mirror) queueExpungeLocked(uid imap.UID) {
	m.queueLocked(viewUpdate{kind: updExpunge, uid: uid}, nil)
}

func (m *mirror) queueFlagsLocked(uid imap.UID, except *view) {
	m.queueLocked(viewUpdate{kind: updFlags, uid: uid}, except)
}

func (m *mirror) queueMailboxFlagsLocked() {
	m.queueLocked(viewUpdate{kind: updMailboxFlags}, nil)
}

// queueSelfFlagsLocked queues a FETCH FLAGS for this view only: the
// answer of a STORE, which goes out after any FLAGS response queued before
// it (a keyword must be announced in FLAGS before a FETCH shows it).
func (v *view) queueSelfFlagsLocked(uid imap.UID) {
	v.queue = append(v.queue, viewUpdate{kind: updFlags, uid: uid})
}

// markGoneLocked records that the folder was deleted or renumbered and
// wakes the views, so that an idling connection learns of it at once
// (session.Idle says BYE). Called with m.mu held.
func (m *mirror) markGoneLocked() {
	m.gone = errFolderGone
	for v := range m.views {
		select {
		case v.notify <- struct{}{}:
		default:
		}
	}
}

// seqOf returns the sequence number of a UID in the view, or 0.
func (v *view) seqOf(uid imap.UID) uint32 {
	i, ok := slices.BinarySearchFunc(v.msgs, uid, func(msg *message, u imap.UID) int { return compareUID(msg.uid, u) })
	if !ok {
		return 0
	}
	return uint32(i) + 1
}

// flagsOf is the FLAGS of a message as this session shows them: \Recent
// is added for the messages recent in this session, except under
// IMAP4rev2, which has no \Recent. Called with m.mu held.
func (v *view) flagsOf(msg *message, rev2 bool) []imap.Flag {
	fl := msg.flagList()
	if v.recent[msg.uid] && !rev2 {
		fl = append(fl, flagRecent)
	}
	return fl
}

// flagRecent is IMAP4rev1's \Recent, which go-imap v2 does not name.
const flagRecent imap.Flag = `\Recent`

// numRecent counts the view's recent messages.
func (v *view) numRecent() uint32 {
	n := 0
	for _, msg := range v.msgs {
		if v.recent[msg.uid] {
			n++
		}
	}
	return uint32(n)
}

// pendingResp is one response of a flush, computed under the lock and
// written after it.
type pendingResp struct {
	kind   updateKind
	seq    uint32 // EXPUNGE, FETCH
	n      uint32 // EXISTS
	recent uint32 // RECENT with EXISTS
	uid    imap.UID
	flags  []imap.Flag
}

// flush writes the queued updates: EXPUNGE (unless allowExpunge is false:
// during FETCH, STORE and SEARCH, RFC 9051 §7.5.1; they stay queued and
// the other updates go out), EXISTS with RECENT (one for any number of new
// messages), FETCH FLAGS (once per message, with its current flags) and
// FLAGS. rev2 leaves out what IMAP4rev2 dropped.
func (v *view) flush(w *imapserver.UpdateWriter, allowExpunge, rev2 bool) error {
	m := v.m
	m.mu.Lock()
	var out []pendingResp
	var held []viewUpdate
	existsPending := false
	flushExists := func() {
		if existsPending {
			out = append(out, pendingResp{kind: updExists, n: uint32(len(v.msgs)), recent: v.numRecent()})
			existsPending = false
		}
	}
	flagged := map[imap.UID]bool{}
	if allowExpunge {
		// A message whose EXPUNGE goes out now needs no FETCH FLAGS first.
		for _, u := range v.queue {
			if u.kind == updExpunge {
				flagged[u.uid] = true
			}
		}
	}
	mailboxFlags := false
	for _, u := range v.queue {
		switch u.kind {
		case updExists:
			// Messages may be in the view already when an update raced
			// with the view's creation; only new ones count.
			var add []*message
			last := imap.UID(0)
			if n := len(v.msgs); n > 0 {
				last = v.msgs[n-1].uid
			}
			for _, msg := range u.msgs {
				if msg.uid > last {
					add = append(add, msg)
				}
			}
			if len(add) > 0 {
				v.msgs = append(v.msgs, add...)
				v.takeRecentLocked(add)
				existsPending = true
			}
		case updExpunge:
			if !allowExpunge {
				held = append(held, u)
				continue
			}
			seq := v.seqOf(u.uid)
			if seq == 0 {
				continue // never shown to this client
			}
			flushExists()
			v.msgs = slices.Delete(v.msgs, int(seq-1), int(seq))
			delete(v.recent, u.uid)
			out = append(out, pendingResp{kind: updExpunge, seq: seq})
		case updFlags:
			seq := v.seqOf(u.uid)
			if seq == 0 || flagged[u.uid] {
				continue
			}
			flushExists()
			flagged[u.uid] = true
			msg := v.msgs[seq-1]
			out = append(out, pendingResp{kind: updFlags, seq: seq, uid: u.uid, flags: v.flagsOf(msg, rev2)})
		case updMailboxFlags:
			if mailboxFlags {
				continue
			}
			flushExists()
			mailboxFlags = true
			out = append(out, pendingResp{kind: updMailboxFlags, flags: mailboxFlagList(m.msgs, v.msgs)})
		}
	}
	flushExists()
	v.queue = held
	m.mu.Unlock()

	for _, r := range out {
		var err error
		switch r.kind {
		case updExists:
			if err = w.WriteNumMessages(r.n); err == nil {
				err = w.WriteNumRecent(r.recent)
			}
		case updExpunge:
			err = w.WriteExpunge(r.seq)
		case updFlags:
			err = w.WriteMessageFlags(r.seq, r.uid, r.flags)
		case updMailboxFlags:
			err = w.WriteMailboxFlags(r.flags)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// idle writes updates as they come until stop closes, or until the
// folder is gone (gone is then called and its error returned).
func (v *view) idle(w *imapserver.UpdateWriter, stop <-chan struct{}, rev2 bool, gone func() error) error {
	for {
		if err := gone(); err != nil {
			return err
		}
		if err := v.flush(w, true, rev2); err != nil {
			return err
		}
		select {
		case <-stop:
			return nil
		case <-v.notify:
		}
	}
}

// mailboxFlagList is the FLAGS of a folder for a view: the system flags
// and every keyword of the folder's messages and of the messages the view
// still shows (an expunged message the client has not been told of may
// still carry a keyword it will FETCH).
func mailboxFlagList(msgs, shown []*message) []imap.Flag {
	out := mailboxFlags(msgs)
	for _, msg := range shown {
		for _, f := range msg.flags {
			if !slices.Contains(out, f) {
				out = append(out, f)
			}
		}
	}
	return out
}
