package seqview

import (
	"errors"
	"slices"

	"github.com/emersion/go-imap/v2"
)

// ErrClosed is returned by the methods of a View after Close.
var ErrClosed = errors.New("seqview: view closed")

// ViewOptions says how a session opens a folder.
type ViewOptions struct {
	// ReadOnly is EXAMINE (or a read-only SELECT): the session sees \Recent
	// but does not take it (RFC 3501 §2.3.2), and PERMANENTFLAGS is empty
	// (RFC 9051 §7.1).
	ReadOnly bool
	// Rev2 is a session that enabled IMAP4rev2, which has no \Recent and no
	// RECENT response (RFC 9051 Appendix E). ENABLE comes before SELECT
	// (RFC 5161 §3.1), so this is known when the view opens.
	Rev2 bool
}

// View is one connection's view of its selected folder: the messages the
// client has been told of, in sequence-number order, and what it has not
// been told yet. The IMAP front opens one per SELECT or EXAMINE, resolves
// the sets of its commands through it, writes what Updates returns after
// each command and while idling, and closes it on UNSELECT, CLOSE, another
// SELECT or logout.
//
// Its state is guarded by its Mailbox's mutex (see the package
// documentation): a View costs a few hundred bytes, because what it shows
// is a snapshot shared with the Mailbox and the other views.
type View struct {
	mb       *Mailbox
	id       uint64 // names the view in the change log; never 0
	readOnly bool
	rev2     bool
	closed   bool

	// shown is what the client has been told of, in sequence order: a
	// capped slice of a Mailbox snapshot, or a private copy while an
	// EXPUNGE is withheld and new messages were announced. Never appended
	// to in place.
	shown []*message
	// expSeen is mb.expunges when shown was last a prefix of the
	// Mailbox's list; while they differ, shown may hold expunged messages
	// the client has not been told of.
	expSeen uint64
	// flagsMod is the modification number up to which flag changes were
	// sent (or not needed).
	flagsMod uint64
	// kw is the keyword set last announced in FLAGS. It is always a set the
	// Mailbox had, and the Mailbox's set only grows while views are open,
	// so what a session was told only grows (RFC 9051 §7.3.5).
	kw *keywords
	// recent holds the UIDs that are \Recent in this session, as ascending
	// ranges of messages taken together. Ranges are merged across UID gaps
	// when nothing lies between them, so a session that takes every new
	// message keeps one range however sparse the provider's UIDs are.
	recent []imap.UIDRange
	// self are messages whose FETCH FLAGS this session owes itself: the
	// answer of a STORE (QueueFetch), or a FETCH that had to leave out a
	// keyword not yet announced (FetchFlags).
	self []imap.UID
	// wait is the Mailbox's change channel as of the last Updates.
	wait chan struct{}
}

// Open opens a view for a session that selects the folder (SELECT or
// EXAMINE), showing every message of the folder, and returns the data of
// the SELECT answer (RFC 9051 §6.3.2; go-imap writes RECENT and UNSEEN only
// to IMAP4rev1 clients). A read-write view takes the messages that are
// still \Recent (RFC 3501 §2.3.2). It fails with ErrGone after Gone.
func (mb *Mailbox) Open(opts ViewOptions) (*View, *imap.SelectData, error) {
	mb.mu.Lock()
	defer mb.mu.Unlock()
	if mb.gone {
		return nil, nil, ErrGone
	}
	if mb.views == 0 && mb.kwStale {
		// Nobody can be showing an old keyword: forget unused ones.
		mb.recountKeywordsLocked()
	}
	mb.views++
	mb.lastID++
	n := len(mb.msgs)
	v := &View{
		mb:       mb,
		id:       mb.lastID,
		readOnly: opts.ReadOnly,
		rev2:     opts.Rev2,
		shown:    mb.msgs[:n:n],
		expSeen:  mb.expunges,
		flagsMod: mb.mod,
		kw:       mb.kw,
		wait:     mb.changed,
	}
	v.takeRecentLocked(v.shown)
	data := &imap.SelectData{
		Flags:             v.kw.mailboxFlags(),
		NumMessages:       uint32(n),
		FirstUnseenSeqNum: firstUnseen(v.shown),
		NumRecent:         v.numRecentLocked(),
		UIDNext:           mb.uidNext,
		UIDValidity:       mb.validity,
	}
	if !v.readOnly {
		data.PermanentFlags = append(v.kw.mailboxFlags(), imap.FlagWildcard)
	}
	return v, data, nil
}

// Close detaches the view from its Mailbox. It is idempotent.
func (v *View) Close() {
	mb := v.mb
	mb.mu.Lock()
	defer mb.mu.Unlock()
	if v.closed {
		return
	}
	v.closed = true
	mb.views--
	v.shown, v.self, v.recent = nil, nil, nil
}

// Mailbox returns the Mailbox the view was opened on.
func (v *View) Mailbox() *Mailbox { return v.mb }

// ReadOnly reports a view opened with ViewOptions.ReadOnly.
func (v *View) ReadOnly() bool { return v.readOnly }

// takeRecentLocked handles messages being shown to the session for the
// first time (msgs: the tail of v.shown, just added to it): those still
// \Recent become recent in this session and, for a read-write session,
// stop being recent for every later one (RFC 3501 §2.3.2: "this session
// is the first session to have been notified about this message").
func (v *View) takeRecentLocked(msgs []*message) {
	mb := v.mb
	i, _ := index(msgs, mb.recentFrom)
	if i == len(msgs) {
		return
	}
	first, last := msgs[i].uid, msgs[len(msgs)-1].uid
	// msgs follow the messages shown before them directly: when the
	// previous range ends with the last of those, and the whole batch is
	// recent, no message lies between and the range grows.
	if k := len(v.recent); k > 0 && i == 0 && len(v.shown) > len(msgs) &&
		v.recent[k-1].Stop == v.shown[len(v.shown)-len(msgs)-1].uid {
		v.recent[k-1].Stop = last
	} else {
		v.recent = append(v.recent, imap.UIDRange{Start: first, Stop: last})
	}
	if !v.readOnly {
		mb.recentFrom = last + 1
	}
}

// numRecentLocked counts the shown messages that are recent in this
// session.
func (v *View) numRecentLocked() uint32 {
	n := 0
	for _, r := range v.recent {
		lo, _ := index(v.shown, r.Start)
		hi, found := index(v.shown, r.Stop)
		if found {
			hi++
		}
		n += max(hi-lo, 0)
	}
	return uint32(n)
}

// isRecentLocked reports a message recent in this session.
func (v *View) isRecentLocked(uid imap.UID) bool {
	_, found := slices.BinarySearchFunc(v.recent, uid, func(r imap.UIDRange, u imap.UID) int {
		switch {
		case r.Stop < u:
			return -1
		case r.Start > u:
			return 1
		}
		return 0
	})
	return found
}

// showFlagsLocked is the FLAGS of a message as this session shows them:
// \Recent added where it is recent here, except under IMAP4rev2.
func (v *View) showFlagsLocked(m *message) []imap.Flag {
	if v.rev2 || !v.isRecentLocked(m.uid) {
		return m.flags
	}
	return append(slices.Clone(m.flags), FlagRecent)
}

// Updates returns the responses this session has not been told yet, in
// the order to write them, and records them as told:
//
//  1. FLAGS, when the folder's keywords grew: it comes before any FETCH
//     that could show a new keyword (RFC 9051 §7.3.5).
//  2. EXPUNGE for each message expunged since, highest first, numbered as
//     the client counts at the moment each is sent (RFC 9051 §7.5.1). With
//     allowExpunge false (during FETCH, STORE and SEARCH, RFC 9051 §7.4.1
//     and §7.5.1) they are withheld: the messages keep their numbers and
//     remain resolvable with their last flags.
//  3. EXISTS, once for any number of new messages, followed by RECENT for
//     IMAP4rev1. New messages are announced even while an EXPUNGE is
//     withheld: they are numbered after the withheld messages, which the
//     client still counts, and EXISTS counts those too, so the numbers the
//     client holds stay right; the EXPUNGEs follow at the next Updates
//     with allowExpunge.
//  4. FETCH (UID FLAGS) once per message whose flags changed (by another
//     session or the provider), with its current flags, and for the
//     messages queued by QueueFetch or FetchFlags.
//
// It returns ErrGone when the folder was deleted or renumbered (the
// session says BYE), ErrClosed after Close.
func (v *View) Updates(allowExpunge bool) ([]Response, error) {
	mb := v.mb
	mb.mu.Lock()
	defer mb.mu.Unlock()
	if v.closed {
		return nil, ErrClosed
	}
	if mb.gone {
		return nil, ErrGone
	}
	v.wait = mb.changed
	var out []Response
	if v.kw != mb.kw {
		v.kw = mb.kw
		out = append(out, Response{Kind: MailboxFlags, Flags: v.kw.mailboxFlags()})
	}
	out, firstNew := v.catchUpListLocked(out, allowExpunge)
	return v.changedFlagsLocked(out, firstNew), nil
}

// catchUpListLocked appends the EXPUNGE, EXISTS and RECENT responses that
// bring shown up to the Mailbox's list (see Updates) and returns the index
// in shown of the first message new to the client.
func (v *View) catchUpListLocked(out []Response, allowExpunge bool) ([]Response, int) {
	mb := v.mb
	cur := mb.msgs
	var add []*message
	if v.expSeen == mb.expunges {
		// Nothing was expunged since shown was a prefix of cur.
		add = cur[len(v.shown):]
	} else {
		ghosts := 0
		for _, m := range v.shown {
			if m.expunged {
				ghosts++
			}
		}
		if ghosts == 0 || allowExpunge {
			// Highest first, as Dovecot sends them: each number is then
			// the message's position as the client counts it, with no
			// shift from the EXPUNGEs before it.
			for i := len(v.shown) - 1; i >= 0; i-- {
				if v.shown[i].expunged {
					out = append(out, Response{Kind: Expunge, Num: uint32(i + 1)})
				}
			}
			// The live messages shown are exactly those of cur up to the
			// last UID shown: every message added since was above it.
			kept := len(v.shown) - ghosts
			v.shown = cur[:kept:kept]
			v.expSeen = mb.expunges
			add = cur[kept:]
		} else {
			// EXPUNGE withheld: keep the expunged messages, announce the
			// new ones after them, in a private copy.
			var last imap.UID
			if n := len(v.shown); n > 0 {
				last = v.shown[n-1].uid
			}
			j, found := index(cur, last)
			if found {
				j++
			}
			if add = cur[j:]; len(add) > 0 {
				v.shown = slices.Concat(v.shown, add)
			}
		}
	}
	if len(add) == 0 {
		return out, len(v.shown)
	}
	if v.expSeen == mb.expunges {
		v.shown = cur[:len(cur):len(cur)] // shared again
	}
	v.takeRecentLocked(add)
	out = append(out, Response{Kind: Exists, Num: uint32(len(v.shown))})
	if !v.rev2 {
		out = append(out, Response{Kind: Recent, Num: v.numRecentLocked()})
	}
	return out, len(v.shown) - len(add)
}

// changedFlagsLocked appends a FETCH (UID FLAGS) for every message shown
// before firstNew whose flags changed since flagsMod, except by this
// view's own commands, and for the messages queued in self; once each, in
// sequence order. Messages new to the client need none: it fetches them.
func (v *View) changedFlagsLocked(out []Response, firstNew int) []Response {
	mb := v.mb
	var fetch []int
	if v.flagsMod != mb.mod {
		if behind := mb.mod - v.flagsMod; behind <= uint64(len(mb.log)) {
			for _, e := range mb.log[len(mb.log)-int(behind):] {
				if e.except == v.id {
					continue
				}
				if i, ok := index(v.shown[:firstNew], e.msg.uid); ok {
					fetch = append(fetch, i)
				}
			}
		} else {
			// Fell behind the log: compare every message shown.
			for i, m := range v.shown[:firstNew] {
				if m.mod > v.flagsMod {
					fetch = append(fetch, i)
				}
			}
		}
		v.flagsMod = mb.mod
	}
	for _, u := range v.self {
		if i, ok := index(v.shown, u); ok {
			fetch = append(fetch, i)
		}
	}
	v.self = nil
	slices.Sort(fetch)
	for _, i := range slices.Compact(fetch) {
		m := v.shown[i]
		out = append(out, Response{Kind: Fetch, Num: uint32(i) + 1, UID: m.uid, Flags: v.showFlagsLocked(m)})
	}
	return out
}

// Wait returns a channel that is closed when there may be something for
// Updates: the folder changed since the last Updates, something is queued
// for this session, or the folder is gone. An IDLE loop calls Updates,
// writes, then waits on Wait (see Idle).
func (v *View) Wait() <-chan struct{} {
	mb := v.mb
	mb.mu.Lock()
	defer mb.mu.Unlock()
	if v.closed || mb.gone || len(v.self) > 0 || v.kw != mb.kw {
		return closedChan
	}
	return v.wait
}

var closedChan = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

// QueueFetch queues a FETCH (UID FLAGS) of the given messages for this
// session's next Updates, after any FLAGS response it needs first: the
// answer of a STORE without .SILENT (RFC 9051 §6.4.6), whose changes the
// STORE gave to Mailbox.SetFlags with this view as except. go-imap writes
// the updates right after the command, before its tagged OK.
func (v *View) QueueFetch(uids ...imap.UID) {
	mb := v.mb
	mb.mu.Lock()
	defer mb.mu.Unlock()
	if !v.closed {
		v.self = append(v.self, uids...)
	}
}
