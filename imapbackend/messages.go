package imapbackend

import (
	"context"

	"github.com/emersion/go-imap/v2"

	"github.com/directbridge/directbridge/directapi"
	"github.com/directbridge/directbridge/mailstore"
	"github.com/directbridge/directbridge/upstream"
)

// target is one message a command names: its sequence number in this
// connection's view (0 when the connection has not been told of it yet,
// which only a UID set can name), the message, and whether it is still in
// the folder (false: expunged, and the client not told yet).
type target struct {
	seq  uint32
	msg  *message
	live bool
}

// targets resolves a sequence or UID set against the selected folder, as
// this connection sees it. "*" is the last message or the largest UID;
// "$" is the saved SEARCHRES result (RFC 5182). A sequence set that names
// a number beyond the messages the client has been told of, or any number
// when it has been told of none ("*" included), is BAD (RFC 3501 §9,
// seq-number; Dovecot does the same). A UID set may name UIDs that do not
// exist; they are ignored.
func (s *session) targets(numSet imap.NumSet) ([]target, error) {
	m := s.sel
	m.mu.Lock()
	defer m.mu.Unlock()
	return s.targetsLocked(numSet)
}

func (s *session) targetsLocked(numSet imap.NumSet) ([]target, error) {
	m, v := s.sel, s.view
	if seqs, ok := numSet.(imap.SeqSet); ok && !imap.IsSearchRes(numSet) {
		if !validSeqSet(seqs, uint32(len(v.msgs))) {
			return nil, errBadSeqNum
		}
	}
	numSet = s.staticNumSet(numSet)
	var out []target
	for i, msg := range v.msgs {
		var in bool
		switch ns := numSet.(type) {
		case imap.SeqSet:
			in = ns.Contains(uint32(i) + 1)
		case imap.UIDSet:
			in = ns.Contains(msg.uid)
		}
		if in {
			out = append(out, target{seq: uint32(i) + 1, msg: msg, live: m.byUID[msg.uid] == msg})
		}
	}
	// Messages of the folder the client has not been told of yet: a UID
	// set can name them (the client may know a UID from APPENDUID or
	// COPYUID before the EXISTS).
	if uids, ok := numSet.(imap.UIDSet); ok {
		var last imap.UID
		if n := len(v.msgs); n > 0 {
			last = v.msgs[n-1].uid
		}
		for _, msg := range m.msgs {
			if msg.uid > last && uids.Contains(msg.uid) {
				out = append(out, target{msg: msg, live: true})
			}
		}
	}
	return out, nil
}

// validSeqSet checks a sequence set against the n messages the client sees.
func validSeqSet(set imap.SeqSet, n uint32) bool {
	if n == 0 {
		return false
	}
	for _, r := range set {
		if r.Start > n || r.Stop > n {
			return false
		}
	}
	return true
}

// staticNumSet replaces "*" and "$". Called with the mirror locked.
func (s *session) staticNumSet(numSet imap.NumSet) imap.NumSet {
	if imap.IsSearchRes(numSet) {
		return s.searchRes
	}
	m, v := s.sel, s.view
	switch ns := numSet.(type) {
	case imap.SeqSet:
		last := uint32(len(v.msgs))
		out := make(imap.SeqSet, len(ns))
		copy(out, ns)
		for i := range out {
			staticRange(&out[i].Start, &out[i].Stop, last)
		}
		return out
	case imap.UIDSet:
		last := uint32(0)
		if n := len(m.msgs); n > 0 {
			last = uint32(m.msgs[n-1].uid)
		}
		if n := len(v.msgs); n > 0 {
			last = max(last, uint32(v.msgs[n-1].uid))
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

// ensureMeta loads the metadata (size, dates, headers) of the given
// messages of the selected folder if any lack it (see mirror.loadMeta). A
// message the provider no longer lists gets a placeholder, so the command
// answers with what is known rather than fail as a whole.
func (s *session) ensureMeta(ctx context.Context, msgs []*message) error {
	missed, err := s.sel.loadMeta(ctx, s.srv.cfg.Provider, msgs)
	if err != nil {
		return err
	}
	s.sel.mu.Lock()
	defer s.sel.mu.Unlock()
	for _, msg := range missed {
		if msg.meta == nil {
			msg.meta = &directapi.MessageDetail{UID: int64(msg.uid), Size: -1}
		}
	}
	return nil
}

// loadMeta fills in the metadata of msgs (of every message when msgs is
// nil) that lack it, or have only a placeholder, with one
// GetMessageMetaData call for the whole folder: a round trip is the unit
// of cost, and listings want every message anyway. It returns the messages
// the answer did not list (gone at the provider since the last refresh).
func (m *mirror) loadMeta(ctx context.Context, c upstream.Provider, msgs []*message) ([]*message, error) {
	m.mu.Lock()
	if msgs == nil {
		msgs = m.msgs
	}
	missing := false
	for _, msg := range msgs {
		if !metaKnown(msg.meta) {
			missing = true
			break
		}
	}
	auth := m.auth
	m.mu.Unlock()
	if !missing {
		return nil, nil
	}
	details, err := c.Metadata(ctx, auth, m.name)
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for i := range details {
		d := &details[i]
		if d.UID <= 0 || d.UID > maxUID {
			continue
		}
		if msg := m.byUID[imap.UID(d.UID)]; msg != nil && !metaKnown(msg.meta) {
			msg.meta = metaOnly(d)
		}
	}
	var missed []*message
	for _, msg := range msgs {
		if !metaKnown(msg.meta) {
			missed = append(missed, msg)
		}
	}
	return missed, nil
}

// raws returns the raw bytes of messages, from memory or from the
// provider (mailstore.Bodies: batches, read-ahead for sequential readers).
// Messages the provider no longer has are missing from the answer.
func (s *session) raws(ctx context.Context, msgs []*message) (map[imap.UID][]byte, error) {
	m := s.sel
	m.mu.Lock()
	ref, auth := m.ref(), m.auth
	m.mu.Unlock()
	uids := make([]imap.UID, len(msgs))
	for i, msg := range msgs {
		uids[i] = msg.uid
	}
	return s.srv.bodies.Get(ctx, auth, ref, uids, m)
}

// ref names the mirror's folder for the raw-message cache. Called with
// m.mu held.
func (m *mirror) ref() mailstore.FolderRef {
	return mailstore.FolderRef{User: m.user, Folder: m.name, Validity: m.validity}
}

// After returns up to n UIDs of the folder that follow uid, for
// read-ahead (mailstore.Order).
func (m *mirror) After(uid imap.UID, n int) []imap.UID {
	m.mu.Lock()
	defer m.mu.Unlock()
	i, found := m.index(uid)
	if found {
		i++
	}
	out := make([]imap.UID, 0, n)
	for _, msg := range m.msgs[i:min(i+n, len(m.msgs))] {
		out = append(out, msg.uid)
	}
	return out
}
