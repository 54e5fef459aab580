package seqview

import (
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/emersion/go-imap/v2"
)

var (
	// ErrGone is returned once the folder was deleted or renumbered (a new
	// UIDVALIDITY): its UIDs mean nothing any more, so a session that has it
	// selected says BYE (RFC 9051 §7.1.5) and the client selects it again.
	ErrGone = errors.New("seqview: folder deleted or renumbered")
	// ErrUIDOrder is returned by Mailbox.Add for a UID that is zero, not
	// ascending, or not above every UID the mailbox has known: UIDs are
	// assigned in ascending order and never reused (RFC 9051 §2.3.1.1). A
	// provider that breaks this has renumbered the folder.
	ErrUIDOrder = errors.New("seqview: new UIDs must ascend above every known UID")
)

// DefaultLogSize is the number of flag changes a Mailbox remembers when
// Config.LogSize is zero. A view further behind compares modification
// numbers over its whole message list instead, which is correct but costs
// a walk over the folder.
const DefaultLogSize = 1024

// Config is what the caller knows of a folder when it creates its Mailbox.
type Config struct {
	// UIDValidity of the folder (RFC 9051 §2.3.1.1), as the caller keeps it.
	UIDValidity uint32
	// UIDNext as the caller keeps it. The Mailbox reports at least one more
	// than the largest UID it has seen.
	UIDNext imap.UID
	// RecentFrom is the first UID that is still \Recent: messages from it on
	// have not been shown to any read-write session (RFC 3501 §2.3.2). A
	// caller that persists UIDNEXT passes the value it had before this
	// process first loaded the folder, so mail that arrived while nobody
	// looked is recent. Zero means 1: every message is recent.
	RecentFrom imap.UID
	// LogSize bounds the change log (DefaultLogSize when zero).
	LogSize int
}

// NewMessage is a message to add to a Mailbox.
type NewMessage struct {
	UID   imap.UID
	Flags []imap.Flag // made canonical (CanonicalFlags); \Seen included when read
}

// FlagChange changes the flags of one message, as STORE does (RFC 9051
// §6.4.6): Op replaces, adds or removes Flags.
type FlagChange struct {
	UID   imap.UID
	Op    imap.StoreFlagsOp
	Flags []imap.Flag
}

// Status is the folder as STATUS reports it (RFC 9051 §6.3.11).
type Status struct {
	Messages    uint32
	Recent      uint32 // not yet shown to a read-write session
	Unseen      uint32
	Deleted     uint32 // carrying \Deleted
	UIDNext     imap.UID
	UIDValidity uint32
}

// message is one message of a Mailbox. Its fields change only under the
// mailbox's mutex, and never after it was expunged: a view still showing an
// expunged message reads its last flags here.
type message struct {
	uid      imap.UID
	expunged bool
	flags    []imap.Flag // canonical; replaced, never changed in place
	mod      uint64      // modification number of the last flag change
}

func (m *message) seen() bool { return slices.Contains(m.flags, imap.FlagSeen) }

// logEntry is one flag change: message msg got new flags at modification
// number mod, and the view with id except (0: none) answers for it itself.
type logEntry struct {
	mod    uint64
	msg    *message
	except uint64
}

// Mailbox is the shared in-memory truth of one folder of one user as IMAP
// sessions see it. The caller (mailstore) keeps one per (user, folder,
// UIDVALIDITY), feeds it what the provider says, and opens a View on it for
// each session that selects the folder. See the package documentation for
// the concurrency rules.
type Mailbox struct {
	mu sync.Mutex

	validity uint32
	uidNext  imap.UID
	maxUID   imap.UID // largest UID ever added
	// msgs is the current snapshot, in UID order. Views hold capped slices
	// of snapshots; Add appends in place past their ends, Expunge makes a
	// new slice, nothing else writes to it.
	msgs     []*message
	expunges uint64 // counts Expunge calls that removed something
	unseen   int
	// recentFrom: messages from this UID on were not shown to a read-write
	// session yet (RFC 3501 §2.3.2).
	recentFrom imap.UID

	// kw holds every keyword of the messages, and of messages expunged
	// while sessions were open: it only grows while views are open (see
	// View.Updates); kwStale asks for a recount when the last one closes.
	kw      *keywords
	kwStale bool

	mod     uint64 // modification number of the last flag change
	log     []logEntry
	logSize int

	views   int
	lastID  uint64
	changed chan struct{} // closed and replaced at every change
	gone    bool
}

// NewMailbox returns an empty Mailbox; Add fills it.
func NewMailbox(cfg Config) *Mailbox {
	mb := &Mailbox{
		validity:   cfg.UIDValidity,
		uidNext:    max(cfg.UIDNext, 1),
		recentFrom: max(cfg.RecentFrom, 1),
		kw:         &keywords{},
		logSize:    cfg.LogSize,
		changed:    make(chan struct{}),
	}
	if mb.logSize <= 0 {
		mb.logSize = DefaultLogSize
	}
	return mb
}

// changedLocked wakes every view waiting for changes (View.Wait).
func (mb *Mailbox) changedLocked() {
	close(mb.changed)
	mb.changed = make(chan struct{})
}

// index finds uid in msgs (UID order).
func index(msgs []*message, uid imap.UID) (int, bool) {
	return slices.BinarySearchFunc(msgs, uid, func(m *message, u imap.UID) int {
		switch {
		case m.uid < u:
			return -1
		case m.uid > u:
			return 1
		}
		return 0
	})
}

// Add adds new messages with their initial flags. Their UIDs must ascend
// and be above every UID the mailbox has known (ErrUIDOrder otherwise,
// and nothing is added). Sessions learn of them as EXISTS at their next
// Updates.
func (mb *Mailbox) Add(msgs ...NewMessage) error {
	mb.mu.Lock()
	defer mb.mu.Unlock()
	if mb.gone {
		return ErrGone
	}
	last := mb.maxUID
	for _, n := range msgs {
		if n.UID <= last {
			return fmt.Errorf("%w: %d after %d", ErrUIDOrder, n.UID, last)
		}
		last = n.UID
	}
	if len(msgs) == 0 {
		return nil
	}
	for _, n := range msgs {
		m := &message{uid: n.UID, flags: CanonicalFlags(n.Flags)}
		if !m.seen() {
			mb.unseen++
		}
		mb.kw = mb.kw.with(m.flags)
		// In place beyond the end of every slice a view holds.
		mb.msgs = append(mb.msgs, m)
	}
	mb.maxUID = last
	mb.uidNext = max(mb.uidNext, last+1)
	mb.changedLocked()
	return nil
}

// Expunge removes the messages with the given UIDs (unknown ones are
// ignored) and returns how many it removed. Sessions that still show them
// keep resolving them, with their last flags, until they are told of the
// EXPUNGE (View.Updates with allowExpunge). Each call that removes
// something makes a new snapshot of the list (views keep the old one), so
// a batch is one call.
func (mb *Mailbox) Expunge(uids ...imap.UID) int {
	mb.mu.Lock()
	defer mb.mu.Unlock()
	if mb.gone {
		return 0
	}
	n := 0
	for _, u := range uids {
		if i, ok := index(mb.msgs, u); ok && !mb.msgs[i].expunged {
			mb.msgs[i].expunged = true
			n++
		}
	}
	if n == 0 {
		return 0
	}
	live := make([]*message, 0, len(mb.msgs)-n)
	for _, m := range mb.msgs {
		if m.expunged {
			if !m.seen() {
				mb.unseen--
			}
			continue
		}
		live = append(live, m)
	}
	mb.msgs = live
	mb.expunges++
	mb.kwStale = true
	mb.changedLocked()
	return n
}

// SetFlags changes the flags of messages (unknown UIDs are ignored) and
// returns how many messages' flags changed. Every session that has the
// folder selected gets a FETCH FLAGS for each changed message at its next
// Updates, except the view except (nil: none), whose command answers for
// itself: a STORE calls View.QueueFetch unless .SILENT (RFC 9051 §6.4.6),
// a FETCH that sets \Seen shows the new flags in its own answer. New
// keywords go out in FLAGS first.
func (mb *Mailbox) SetFlags(except *View, changes ...FlagChange) int {
	mb.mu.Lock()
	defer mb.mu.Unlock()
	if mb.gone {
		return 0
	}
	var ex uint64
	if except != nil && except.mb == mb {
		ex = except.id
	}
	n := 0
	for _, c := range changes {
		i, ok := index(mb.msgs, c.UID)
		if !ok {
			continue
		}
		m := mb.msgs[i]
		fl := applyOp(m.flags, c.Op, CanonicalFlags(c.Flags))
		if slices.Equal(fl, m.flags) {
			continue
		}
		switch was, is := m.seen(), slices.Contains(fl, imap.FlagSeen); {
		case was && !is:
			mb.unseen++
		case !was && is:
			mb.unseen--
		}
		for _, f := range m.flags {
			if !slices.Contains(fl, f) {
				mb.kwStale = true // a keyword may be out of use now
				break
			}
		}
		mb.mod++
		m.flags, m.mod = fl, mb.mod
		mb.kw = mb.kw.with(fl)
		mb.appendLogLocked(logEntry{mod: mb.mod, msg: m, except: ex})
		n++
	}
	if n > 0 {
		mb.changedLocked()
	}
	return n
}

// appendLogLocked adds a change to the log, dropping the oldest half when
// it reaches twice its size (amortised: no copy per change).
func (mb *Mailbox) appendLogLocked(e logEntry) {
	if len(mb.log) >= 2*mb.logSize {
		k := copy(mb.log, mb.log[len(mb.log)-mb.logSize:])
		clear(mb.log[k:])
		mb.log = mb.log[:k]
	}
	mb.log = append(mb.log, e)
}

// Gone records that the folder was deleted or renumbered: every view's
// next Updates returns ErrGone (a waiting one wakes at once) and the
// Mailbox accepts no more changes. The caller makes a new Mailbox for the
// new UIDVALIDITY.
func (mb *Mailbox) Gone() {
	mb.mu.Lock()
	defer mb.mu.Unlock()
	if !mb.gone {
		mb.gone = true
		mb.changedLocked()
	}
}

// NumViews is the number of sessions that have the folder selected: a
// folder someone watches is worth polling more often.
func (mb *Mailbox) NumViews() int {
	mb.mu.Lock()
	defer mb.mu.Unlock()
	return mb.views
}

// IsGone reports whether Gone was called.
func (mb *Mailbox) IsGone() bool {
	mb.mu.Lock()
	defer mb.mu.Unlock()
	return mb.gone
}

// SetUIDNext records the caller's UIDNEXT; it never goes below one more
// than the largest UID added.
func (mb *Mailbox) SetUIDNext(next imap.UID) {
	mb.mu.Lock()
	defer mb.mu.Unlock()
	mb.uidNext = max(next, mb.maxUID+1, 1)
}

// UIDNext is the folder's UIDNEXT (RFC 9051 §2.3.1.1).
func (mb *Mailbox) UIDNext() imap.UID {
	mb.mu.Lock()
	defer mb.mu.Unlock()
	return mb.uidNext
}

// UIDValidity is the folder's UIDVALIDITY.
func (mb *Mailbox) UIDValidity() uint32 { return mb.validity }

// Flags returns the flags of a message of the folder (not one already
// expunged), canonical, \Seen included, \Recent never.
func (mb *Mailbox) Flags(uid imap.UID) ([]imap.Flag, bool) {
	mb.mu.Lock()
	defer mb.mu.Unlock()
	if i, ok := index(mb.msgs, uid); ok {
		return mb.msgs[i].flags, true
	}
	return nil, false
}

// UIDs returns the UIDs of the folder's messages in ascending order (a
// copy).
func (mb *Mailbox) UIDs() []imap.UID {
	mb.mu.Lock()
	defer mb.mu.Unlock()
	out := make([]imap.UID, len(mb.msgs))
	for i, m := range mb.msgs {
		out[i] = m.uid
	}
	return out
}

// NumMessages is the number of messages in the folder.
func (mb *Mailbox) NumMessages() uint32 {
	mb.mu.Lock()
	defer mb.mu.Unlock()
	return uint32(len(mb.msgs))
}

// NumUnseen is the number of messages without \Seen.
func (mb *Mailbox) NumUnseen() uint32 {
	mb.mu.Lock()
	defer mb.mu.Unlock()
	return uint32(mb.unseen)
}

// FirstUnseen is the position (1-based, in UID order) of the first message
// without \Seen in the folder, or 0. A session's own numbering may differ:
// see View.FirstUnseen.
func (mb *Mailbox) FirstUnseen() uint32 {
	mb.mu.Lock()
	defer mb.mu.Unlock()
	return firstUnseen(mb.msgs)
}

func firstUnseen(msgs []*message) uint32 {
	for i, m := range msgs {
		if !m.seen() {
			return uint32(i) + 1
		}
	}
	return 0
}

// NotRecent makes the messages up to uid not \Recent for any session
// that has not been shown them: sessions elsewhere (another replica's)
// were told of them first.
func (mb *Mailbox) NotRecent(uid imap.UID) {
	mb.mu.Lock()
	defer mb.mu.Unlock()
	mb.recentFrom = max(mb.recentFrom, uid+1)
}

// Status counts the folder for STATUS (RFC 9051 §6.3.11). Recent counts the
// messages no read-write session has been shown (RFC 3501 §2.3.2).
func (mb *Mailbox) Status() Status {
	mb.mu.Lock()
	defer mb.mu.Unlock()
	st := Status{Messages: uint32(len(mb.msgs)), Unseen: uint32(mb.unseen), UIDNext: mb.uidNext, UIDValidity: mb.validity}
	i, _ := index(mb.msgs, mb.recentFrom)
	st.Recent = uint32(len(mb.msgs) - i)
	for _, m := range mb.msgs {
		if slices.Contains(m.flags, imap.FlagDeleted) {
			st.Deleted++
		}
	}
	return st
}

// MailboxFlags is the FLAGS of the folder (RFC 9051 §7.3.5): the system
// flags and every keyword in use. A session shows its own announced list
// (View.MailboxFlags), which may hold more.
func (mb *Mailbox) MailboxFlags() []imap.Flag {
	mb.mu.Lock()
	defer mb.mu.Unlock()
	return mb.kw.mailboxFlags()
}

// PermanentFlags is the PERMANENTFLAGS of the folder for a read-write
// session (RFC 9051 §7.1): every flag of FLAGS is kept, and new keywords
// may be made (\*).
func (mb *Mailbox) PermanentFlags() []imap.Flag {
	return append(mb.MailboxFlags(), imap.FlagWildcard)
}

// recountKeywordsLocked sets kw to the keywords in use. Only called when
// no view is open: while one is, the set only grows.
func (mb *Mailbox) recountKeywordsLocked() {
	kw := &keywords{}
	for _, m := range mb.msgs {
		kw = kw.with(m.flags)
	}
	mb.kw, mb.kwStale = kw, false
}
