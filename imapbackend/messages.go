package imapbackend

import (
	"context"
	"errors"
	"time"

	"github.com/emersion/go-imap/v2"

	"github.com/directbridge/directbridge/directapi"
	"github.com/directbridge/directbridge/mailstore"
	"github.com/directbridge/directbridge/seqview"
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
	m := s.sel
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]target, 0, len(ts))
	for _, t := range ts {
		msg := m.byUID[t.UID]
		if msg == nil {
			// An expunged message whose handle was let go (maxGhosts):
			// its UID and flags are all there is.
			msg = &message{uid: t.UID, expunged: true}
		}
		out = append(out, target{seq: t.Seq, msg: msg, live: t.Live})
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
// nil) that lack it, or have only a placeholder. It returns the messages
// the provider's answers did not list (gone at the provider since the
// last refresh).
//
// Cost: the first time, one GetMessageMetaData for the whole folder (a
// round trip is the unit of cost, and listings want every message
// anyway). Afterwards, when only a few messages lack metadata, the folder
// is never listed again: messages that arrived since the last listing
// (new mail, APPENDs) are found with one SearchMessagesMetadataByReceivedDate
// over the time since then (less metaSkew, for the provider's clock), and
// the few left, such as copies, which keep the received date of their
// original, or old messages the unread list at SELECT did not bring, by
// GetMessagesByUIDs.
func (m *mirror) loadMeta(ctx context.Context, c upstream.Provider, msgs []*message) ([]*message, error) {
	m.mu.Lock()
	if msgs == nil {
		msgs = make([]*message, 0, len(m.byUID))
		for _, msg := range m.byUID {
			if !msg.expunged {
				msgs = append(msgs, msg)
			}
		}
	}
	var missing []int64
	newer := false
	for _, msg := range msgs {
		if !metaKnown(msg.meta) && !msg.expunged {
			missing = append(missing, int64(msg.uid))
			newer = newer || msg.uid >= m.metaFrom
		}
	}
	auth, since, total := m.auth, m.metaAt, len(m.byUID)
	next := m.uidNext
	m.mu.Unlock()
	if len(missing) == 0 {
		return m.missedMeta(msgs), nil
	}
	start := time.Now()
	listAll := func() error {
		details, err := c.Metadata(ctx, auth, m.name)
		if err != nil {
			return err
		}
		m.fillMeta(details)
		m.mu.Lock()
		if start.After(m.metaAt) {
			m.metaAt, m.metaFrom = start, next
		}
		m.mu.Unlock()
		return nil
	}
	if since.IsZero() || len(missing) > fewMissingMeta || 4*len(missing) > total {
		if err := listAll(); err != nil {
			return nil, err
		}
		return m.missedMeta(msgs), nil
	}
	if newer {
		details, err := c.MetadataReceived(ctx, auth, m.name, since.Add(-metaSkew), start.Add(metaSkew))
		if err != nil {
			return nil, err
		}
		m.fillMeta(details)
		m.mu.Lock()
		if start.After(m.metaAt) {
			m.metaAt, m.metaFrom = start, next
		}
		m.mu.Unlock()
	}
	var still []int64
	m.mu.Lock()
	for _, u := range missing {
		if msg := m.byUID[imap.UID(u)]; msg != nil && !metaKnown(msg.meta) && !msg.expunged {
			still = append(still, u)
		}
	}
	m.mu.Unlock()
	switch {
	case len(still) == 0:
	case len(still) > fewByUID:
		// GetMessagesByUIDs answers whole messages: many are cheaper
		// listed.
		if err := listAll(); err != nil {
			return nil, err
		}
	default:
		details, err := c.Messages(ctx, auth, m.name, still)
		if err != nil {
			return nil, err
		}
		m.fillMeta(details)
	}
	return m.missedMeta(msgs), nil
}

// Limits of loading metadata by received date rather than listing the
// folder: more missing than this (or than a quarter of the folder) is
// listed whole; metaSkew widens the window for the provider's clock.
// fewByUID bounds the messages asked by UID (whole messages, bodies and
// attachments included).
const (
	fewMissingMeta = 200
	fewByUID       = 20
	metaSkew       = 5 * time.Minute
)

// missedMeta returns the messages of msgs still without metadata.
func (m *mirror) missedMeta(msgs []*message) []*message {
	m.mu.Lock()
	defer m.mu.Unlock()
	var missed []*message
	for _, msg := range msgs {
		if !metaKnown(msg.meta) {
			missed = append(missed, msg)
		}
	}
	return missed
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
	return s.srv.bodies.Get(ctx, auth, ref, uids, viewOrder{s.view})
}

// ref names the mirror's folder for the raw-message cache. Called with
// m.mu held.
func (m *mirror) ref() mailstore.FolderRef {
	return mailstore.FolderRef{User: m.user, Folder: m.name, Validity: m.validity}
}
