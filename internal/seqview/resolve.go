package seqview

import (
	"cmp"
	"errors"
	"slices"

	"github.com/emersion/go-imap/v2"
)

var (
	// ErrBadSeqNum is a sequence set naming a number beyond the messages
	// the client has been told of, or any number when it has been told of
	// none ("*" included). The front answers BAD (RFC 3501 §9, seq-number:
	// "the largest number in use"; Dovecot does the same).
	ErrBadSeqNum = errors.New("seqview: message sequence number beyond the messages the client was told of")
	// ErrSearchRes is "$" (RFC 5182) given to Resolve: the front keeps the
	// saved result and passes it as the UID set it is.
	ErrSearchRes = errors.New("seqview: the front resolves $ (SEARCHRES) to its saved UID set")
)

// Target is one message a command names.
type Target struct {
	// Seq is the message's sequence number in this session, or 0 for a
	// message of the folder the client has not been told of yet (only a UID
	// set can name one: the client may know its UID from APPENDUID or
	// COPYUID before the EXISTS). A FETCH has no number to answer with for
	// it; go-imap writes responses by sequence number.
	Seq uint32
	UID imap.UID
	// Live is false for a message another session (or the provider)
	// expunged that this session still shows: it can be fetched (its last
	// flags, and by UID whatever mailstore still has) but not changed (RFC
	// 2180 §4.2.1, §4.1.1).
	Live bool
	// Flags are the message's stored flags when resolved (canonical, \Seen
	// included, no \Recent; for an expunged message its last flags), for
	// commands that compute with them (SEARCH, STORE). Shared: do not
	// change. A FETCH shows FetchFlags instead.
	Flags []imap.Flag
	// Recent is \Recent in this session (never under IMAP4rev2).
	Recent bool
}

// Resolve returns the messages a sequence set (imap.SeqSet) or UID set
// (imap.UIDSet) names in this session, in ascending order: those the client
// was told of, by sequence number, then (UID sets only) the folder's newer
// messages it was not told of yet. "*" is the last message the client was
// told of, or for UIDs the largest UID of the folder or of the messages
// shown; ranges are unordered (RFC 9051 §9, seq-range: 10:* names the last
// message when there are fewer than ten). A UID set may name UIDs that do
// not exist; they are left out (RFC 9051 §6.4.9). A sequence number beyond
// what the client was told is ErrBadSeqNum.
//
// SEARCHRES: the front saves a SEARCH result as the UIDs it matched (RFC
// 5182 §2.1) and passes that imap.UIDSet here for "$"; "$" itself is
// ErrSearchRes.
func (v *View) Resolve(set imap.NumSet) ([]Target, error) {
	if imap.IsSearchRes(set) {
		return nil, ErrSearchRes
	}
	mb := v.mb
	mb.mu.Lock()
	defer mb.mu.Unlock()
	if v.closed {
		return nil, ErrClosed
	}
	n := uint32(len(v.shown))
	var idx []int
	var extra []Target
	switch s := set.(type) {
	case imap.SeqSet:
		if n == 0 {
			return nil, ErrBadSeqNum
		}
		for _, r := range s {
			lo, hi := static(r.Start, r.Stop, n)
			if hi > n {
				return nil, ErrBadSeqNum
			}
			for i := lo; i <= hi; i++ {
				idx = append(idx, int(i)-1)
			}
		}
	case imap.UIDSet:
		var last imap.UID
		if len(v.shown) > 0 {
			last = v.shown[len(v.shown)-1].uid
		}
		top := last
		if k := len(mb.msgs); k > 0 {
			top = max(top, mb.msgs[k-1].uid)
		}
		// The folder's messages above the last one shown are new to the
		// client.
		j, found := index(mb.msgs, last)
		if found {
			j++
		}
		unshown := mb.msgs[j:]
		for _, r := range s {
			lo, hi := static(uint32(r.Start), uint32(r.Stop), uint32(top))
			a, _ := index(v.shown, imap.UID(lo))
			for i := a; i < len(v.shown) && v.shown[i].uid <= imap.UID(hi); i++ {
				idx = append(idx, i)
			}
			a, _ = index(unshown, imap.UID(lo))
			for i := a; i < len(unshown) && unshown[i].uid <= imap.UID(hi); i++ {
				extra = append(extra, Target{UID: unshown[i].uid, Live: true, Flags: unshown[i].flags})
			}
		}
	default:
		return nil, errors.New("seqview: unknown kind of number set")
	}
	if len(idx) > 1 {
		slices.Sort(idx)
		idx = slices.Compact(idx)
	}
	out := make([]Target, 0, len(idx)+len(extra))
	for _, i := range idx {
		m := v.shown[i]
		out = append(out, Target{Seq: uint32(i) + 1, UID: m.uid, Live: !m.expunged, Flags: m.flags,
			Recent: !v.rev2 && v.isRecentLocked(m.uid)})
	}
	if len(extra) > 1 {
		slices.SortFunc(extra, func(a, b Target) int { return cmp.Compare(a.UID, b.UID) })
		extra = slices.CompactFunc(extra, func(a, b Target) bool { return a.UID == b.UID })
	}
	return append(out, extra...), nil
}

// static resolves "*" (0) to last and orders a range: ranges are
// unordered (RFC 9051 §9, seq-range).
func static(start, stop, last uint32) (lo, hi uint32) {
	if start == 0 {
		start = last
	}
	if stop == 0 {
		stop = last
	}
	return min(start, stop), max(start, stop)
}

// lookupLocked finds a message this session may name by UID: one it was
// told of (expunged or not), or a newer one of the folder.
func (v *View) lookupLocked(uid imap.UID) (m *message, seq uint32) {
	if i, ok := index(v.shown, uid); ok {
		return v.shown[i], uint32(i) + 1
	}
	if n := len(v.shown); n == 0 || uid > v.shown[n-1].uid {
		if i, ok := index(v.mb.msgs, uid); ok {
			return v.mb.msgs[i], 0
		}
	}
	return nil, 0
}

// SeqOf returns the sequence number of a UID in this session, or 0 when
// the client was not told of it.
func (v *View) SeqOf(uid imap.UID) uint32 {
	v.mb.mu.Lock()
	defer v.mb.mu.Unlock()
	if i, ok := index(v.shown, uid); ok {
		return uint32(i) + 1
	}
	return 0
}

// UIDOf returns the UID of a sequence number in this session.
func (v *View) UIDOf(seq uint32) (imap.UID, bool) {
	v.mb.mu.Lock()
	defer v.mb.mu.Unlock()
	if seq == 0 || seq > uint32(len(v.shown)) {
		return 0, false
	}
	return v.shown[seq-1].uid, true
}

// NumMessages is the number of messages the client was told of (the last
// EXISTS minus the EXPUNGEs since).
func (v *View) NumMessages() uint32 {
	v.mb.mu.Lock()
	defer v.mb.mu.Unlock()
	return uint32(len(v.shown))
}

// FirstUnseen is the sequence number of the first message without \Seen
// this session shows, or 0.
func (v *View) FirstUnseen() uint32 {
	v.mb.mu.Lock()
	defer v.mb.mu.Unlock()
	return firstUnseen(v.shown)
}

// NumRecent is the number of messages shown that are \Recent in this
// session (RFC 3501 §2.3.2).
func (v *View) NumRecent() uint32 {
	v.mb.mu.Lock()
	defer v.mb.mu.Unlock()
	return v.numRecentLocked()
}

// IsRecent reports a message that is \Recent in this session (SEARCH
// RECENT, NEW and OLD, RFC 3501 §6.4.4). Under IMAP4rev2 nothing is.
func (v *View) IsRecent(uid imap.UID) bool {
	v.mb.mu.Lock()
	defer v.mb.mu.Unlock()
	return !v.rev2 && v.isRecentLocked(uid)
}

// Flags returns the stored flags of a message this session may name (see
// Resolve; for an expunged one, its last flags), without \Recent and
// without announcing anything: for computing (SEARCH, STORE), not for
// showing. Use FetchFlags for what goes into a FETCH response.
func (v *View) Flags(uid imap.UID) ([]imap.Flag, bool) {
	v.mb.mu.Lock()
	defer v.mb.mu.Unlock()
	if m, _ := v.lookupLocked(uid); m != nil {
		return m.flags, true
	}
	return nil, false
}

// FetchFlags returns the FLAGS to answer a FETCH with, one slice per UID
// (nil for a UID the session cannot name), canonical, with \Recent where
// the message is recent in this session (IMAP4rev1 only).
//
// A FETCH must not show a keyword the client has not seen in FLAGS (RFC
// 9051 §7.3.5), and go-imap gives a FETCH no way to write FLAGS before its
// responses. So a keyword added since this session's last Updates (by
// another session, between its NOOP and this FETCH) is left out here, and
// the message is queued: the Updates that go-imap's poll makes right after
// the command writes FLAGS and then a FETCH with the full flags, before
// the tagged OK. The client ends the command knowing both.
func (v *View) FetchFlags(uids ...imap.UID) [][]imap.Flag {
	v.mb.mu.Lock()
	defer v.mb.mu.Unlock()
	out := make([][]imap.Flag, len(uids))
	if v.closed {
		return out
	}
	for i, u := range uids {
		m, _ := v.lookupLocked(u)
		if m == nil {
			continue
		}
		fl := v.showFlagsLocked(m)
		if !v.kw.covers(m.flags) {
			fl = slices.DeleteFunc(slices.Clone(fl), func(f imap.Flag) bool {
				return f != FlagRecent && !isBase(f) && !v.kw.has(f)
			})
			v.self = append(v.self, u)
		}
		out[i] = fl
	}
	return out
}

// MailboxFlags is the FLAGS list this session was last told (RFC 9051
// §7.3.5): the system flags and the keywords announced to it.
func (v *View) MailboxFlags() []imap.Flag {
	v.mb.mu.Lock()
	defer v.mb.mu.Unlock()
	return v.kw.mailboxFlags()
}

// PermanentFlags is the PERMANENTFLAGS list for this session (RFC 9051
// §7.1): the FLAGS list and \* for a read-write session, none for a
// read-only one.
func (v *View) PermanentFlags() []imap.Flag {
	if v.readOnly {
		return nil
	}
	return append(v.MailboxFlags(), imap.FlagWildcard)
}
