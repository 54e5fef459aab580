package imapbackend

import (
	"context"
	"fmt"

	"github.com/emersion/go-imap/v2"

	"github.com/directbridge/directbridge/restclient"
)

// target is one message a command names: its number in the mirror, its
// number in this connection's view (0 when the connection has not been
// told of it yet), and the message.
type target struct {
	seq     uint32
	sessSeq uint32
	msg     *message
}

// targets resolves a sequence or UID set against the selected folder.
// "*" is the last message or the largest UID in use; "$" is the saved
// SEARCHRES result (RFC 5182). Sequence numbers are this connection's,
// translated by its tracker, so pending EXPUNGEs do not shift them.
func (s *session) targets(numSet imap.NumSet) []target {
	m := s.sel
	m.mu.Lock()
	defer m.mu.Unlock()
	return s.targetsLocked(numSet)
}

func (s *session) targetsLocked(numSet imap.NumSet) []target {
	m := s.sel
	numSet = s.staticNumSet(numSet)
	var out []target
	for i, msg := range m.msgs {
		seq := uint32(i) + 1
		sessSeq := s.tracker.EncodeSeqNum(seq)
		var in bool
		switch ns := numSet.(type) {
		case imap.SeqSet:
			in = sessSeq != 0 && ns.Contains(sessSeq)
		case imap.UIDSet:
			in = ns.Contains(msg.uid)
		}
		if in {
			out = append(out, target{seq: seq, sessSeq: sessSeq, msg: msg})
		}
	}
	return out
}

// staticNumSet replaces "*" and "$". Called with the mirror locked.
func (s *session) staticNumSet(numSet imap.NumSet) imap.NumSet {
	if imap.IsSearchRes(numSet) {
		return s.searchRes
	}
	m := s.sel
	switch ns := numSet.(type) {
	case imap.SeqSet:
		last := uint32(0)
		for i := len(m.msgs); i > 0; i-- {
			if q := s.tracker.EncodeSeqNum(uint32(i)); q != 0 {
				last = q
				break
			}
		}
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
// messages if any lack it. One GetMessageMetaData call serves the whole
// folder: a round trip is the unit of cost, and listings want every
// message anyway.
func (s *session) ensureMeta(ctx context.Context, msgs []*message) error {
	m := s.sel
	m.mu.Lock()
	missing := false
	for _, msg := range msgs {
		if msg.meta == nil {
			missing = true
			break
		}
	}
	auth := m.auth
	m.mu.Unlock()
	if !missing {
		return nil
	}
	details, err := s.srv.cfg.Client.GetMessageMetaData(ctx, auth, m.name)
	if err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for i := range details {
		d := &details[i]
		if d.UID <= 0 || d.UID > maxUID {
			continue
		}
		if msg := m.byUID[imap.UID(d.UID)]; msg != nil {
			msg.meta = d
		}
	}
	for _, msg := range msgs {
		if msg.meta == nil {
			// Gone at the provider since the last refresh: answer with
			// what is known rather than fail the whole command.
			msg.meta = &restclient.MessageDetail{UID: int64(msg.uid), Size: -1}
		}
	}
	return nil
}

// raws returns the raw bytes of messages, from the cache or, for the rest,
// from GetRawMessagesByUIDs in batches (the client splits long lists).
func (s *session) raws(ctx context.Context, msgs []*message) (map[imap.UID][]byte, error) {
	m := s.sel
	m.mu.Lock()
	validity, auth := m.validity, m.auth
	m.mu.Unlock()
	out := make(map[imap.UID][]byte, len(msgs))
	var need []int64
	for _, msg := range msgs {
		if raw, ok := s.srv.cache.get(rawKey{m.user, m.name, validity, msg.uid}); ok {
			out[msg.uid] = raw
		} else {
			need = append(need, int64(msg.uid))
		}
	}
	if len(need) == 0 {
		return out, nil
	}
	got, err := s.srv.cfg.Client.GetRawMessagesByUIDs(ctx, auth, m.name, need)
	if err != nil {
		return nil, err
	}
	for _, r := range got {
		if r.UID <= 0 || r.UID > maxUID {
			continue
		}
		raw, err := r.Bytes()
		if err != nil {
			return nil, fmt.Errorf("raw message %d: %w", r.UID, err)
		}
		uid := imap.UID(r.UID)
		out[uid] = raw
		s.srv.cache.put(rawKey{m.user, m.name, validity, uid}, raw)
	}
	return out, nil
}
