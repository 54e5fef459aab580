package imapbackend

import (
	"context"
	"errors"

	"github.com/emersion/go-imap/v2"

	"github.com/directbridge/directbridge/internal/mailstore"
	"github.com/directbridge/directbridge/internal/seqview"
)

// target is one message a command names: its sequence number in this
// connection's view (0 when the connection has not been told of it yet,
// which only a UID set can name), the message, and whether it is still in
// the folder (false: expunged, and the client not told yet).
type target struct {
	seq  uint32
	msg  *mailstore.Message
	live bool
}

// targets resolves a sequence or UID set against the selected folder, as
// this connection sees it (seqview.View.Resolve): "*" is the last message
// or the largest UID; "$" is the saved SEARCHRES result (RFC 5182). A
// sequence set that names a number beyond the messages the client has
// been told of, or any number when it has been told of none ("*"
// included), is BAD (RFC 3501 §9, seq-number; Dovecot does the same). A
// UID set may name UIDs that do not exist; they are ignored.
func (s *session) targets(numSet imap.NumSet) ([]target, error) {
	if imap.IsSearchRes(numSet) {
		numSet = s.searchRes
	}
	ts, err := s.view.Resolve(numSet)
	if errors.Is(err, seqview.ErrBadSeqNum) {
		return nil, errBadSeqNum
	}
	if err != nil {
		return nil, imapError(s.byeIfGone(err))
	}
	uids := make([]imap.UID, len(ts))
	for i, t := range ts {
		uids[i] = t.UID
	}
	msgs := s.sel.Handles(uids)
	out := make([]target, len(ts))
	for i, t := range ts {
		out[i] = target{seq: t.Seq, msg: msgs[i], live: t.Live}
	}
	return out, nil
}

// staticNumSet replaces "*" and "$" in a set by what they stand for now
// in this session: "*" is the last message the client was told of, or
// for UIDs the largest UID of the folder or of the messages shown; a range
// is unordered (RFC 9051 §9, seq-range).
func (s *session) staticNumSet(numSet imap.NumSet) imap.NumSet {
	if imap.IsSearchRes(numSet) {
		return s.searchRes
	}
	n := s.view.NumMessages()
	switch ns := numSet.(type) {
	case imap.SeqSet:
		out := make(imap.SeqSet, len(ns))
		copy(out, ns)
		for i := range out {
			staticRange(&out[i].Start, &out[i].Stop, n)
		}
		return out
	case imap.UIDSet:
		var last uint32
		if u, ok := s.view.UIDOf(n); ok {
			last = uint32(u)
		}
		if uids := s.view.Mailbox().UIDs(); len(uids) > 0 {
			last = max(last, uint32(uids[len(uids)-1]))
		}
		out := make(imap.UIDSet, len(ns))
		copy(out, ns)
		for i := range out {
			staticRange((*uint32)(&out[i].Start), (*uint32)(&out[i].Stop), last)
		}
		return out
	}
	return numSet
}

// staticRange resolves 0 ("*") to last; a range is unordered (RFC 9051 §9,
// seq-range), so 10:* with fewer than 10 messages names the last one.
func staticRange(start, stop *uint32, last uint32) {
	if *start == 0 {
		*start = last
	}
	if *stop == 0 {
		*stop = last
	}
	if *start > *stop {
		*start, *stop = *stop, *start
	}
}

// flagsOf returns the flags of a message this session can name, \Seen
// included and \Recent not (for computing, not for showing).
func (s *session) flagsOf(uid imap.UID) []imap.Flag {
	fl, _ := s.view.Flags(uid)
	return fl
}

// viewOrder walks the folder in this session's order for read-ahead
// (mailstore.Order), without copying the folder's UID list.
type viewOrder struct{ v *seqview.View }

func (o viewOrder) After(uid imap.UID, n int) []imap.UID {
	seq := o.v.SeqOf(uid)
	if seq == 0 {
		return nil
	}
	out := make([]imap.UID, 0, n)
	for i := seq + 1; len(out) < n; i++ {
		u, ok := o.v.UIDOf(i)
		if !ok {
			break
		}
		out = append(out, u)
	}
	return out
}

// ensureMeta loads the metadata (size, dates, headers) of the given
// messages of the selected folder if any lack it (mailstore.Folder.EnsureMeta).
func (s *session) ensureMeta(ctx context.Context, msgs []*mailstore.Message) error {
	return s.sel.EnsureMeta(ctx, msgs)
}

// raws returns the raw bytes of messages, from memory or from the
// provider (mailstore.Bodies: batches, read-ahead for sequential readers).
// Messages the provider no longer has are missing from the answer.
func (s *session) raws(ctx context.Context, msgs []*mailstore.Message) (map[imap.UID][]byte, error) {
	uids := make([]imap.UID, len(msgs))
	for i, msg := range msgs {
		uids[i] = msg.UID
	}
	return s.srv.bodies.Get(ctx, s.auth, s.sel.Ref(), uids, viewOrder{s.view})
}
