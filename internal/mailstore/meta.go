package mailstore

import (
	"context"
	"time"

	"github.com/emersion/go-imap/v2"

	"github.com/directbridge/directbridge/upstream/directapi"
)

// LoadMeta fills in the metadata of msgs (of every message when msgs is
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
func (m *Folder) LoadMeta(ctx context.Context, msgs []*Message) ([]*Message, error) {
	m.metaFromHolders(ctx, msgs)
	c := m.store.cfg.Provider
	m.mu.Lock()
	if msgs == nil {
		msgs = make([]*Message, 0, len(m.byUID))
		for _, msg := range m.byUID {
			if !msg.expunged {
				msgs = append(msgs, msg)
			}
		}
	}
	var missing []int64
	var newer []imap.UID // missing, and arrived since the last listing
	for _, msg := range msgs {
		if !MetaKnown(msg.meta) && !msg.expunged {
			missing = append(missing, int64(msg.UID))
			if msg.UID >= m.metaFrom {
				newer = append(newer, msg.UID)
			}
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
	if len(newer) > 0 {
		// The seconds since the last listing, in the provider's clock
		// when the bridge knows it (provclock.go), else widened by
		// metaSkew: on a busy folder the wide search answered every
		// message of the last minutes, for each FETCH of a new one.
		// Mail a poll found after the last listing may have arrived up
		// to a poll before it (two, for the poll's own call): the narrow
		// window starts that much earlier, so that it is not missed and
		// searched for again wide.
		lag := 2 * m.store.cfg.PollInterval
		if _, err := m.receivedSince(ctx, auth, since.Add(-lag), newer); err != nil {
			return nil, err
		}
		m.mu.Lock()
		if start.After(m.metaAt) {
			m.metaAt, m.metaFrom = start, next
		}
		m.mu.Unlock()
	}
	var still []int64
	m.mu.Lock()
	for _, u := range missing {
		if msg := m.byUID[imap.UID(u)]; msg != nil && !MetaKnown(msg.meta) && !msg.expunged {
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

// metaFromHolders takes the metadata of msgs (every message when nil)
// that lack it from the replicas that said they hold them (held.go),
// with their bytes: a client fetching what another replica's client
// just appended costs no provider call.
func (m *Folder) metaFromHolders(ctx context.Context, msgs []*Message) {
	if m.store.bodies.holders == nil {
		return
	}
	m.mu.Lock()
	var uids []imap.UID
	if msgs == nil {
		for _, msg := range m.byUID {
			if !msg.expunged && !MetaKnown(msg.meta) {
				uids = append(uids, msg.UID)
			}
		}
	} else {
		for _, msg := range msgs {
			if !msg.expunged && !MetaKnown(msg.meta) {
				uids = append(uids, msg.UID)
			}
		}
	}
	ref := m.ref()
	m.mu.Unlock()
	if len(uids) > 0 {
		m.store.bodies.fromHolders(ctx, ref, uids)
	}
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
func (m *Folder) missedMeta(msgs []*Message) []*Message {
	m.mu.Lock()
	defer m.mu.Unlock()
	var missed []*Message
	for _, msg := range msgs {
		if !MetaKnown(msg.meta) {
			missed = append(missed, msg)
		}
	}
	return missed
}

// ref names the mirror's folder for the raw-message cache. Called with
// m.mu held.
func (m *Folder) ref() FolderRef {
	return FolderRef{User: m.user, Folder: m.name, Validity: m.validity}
}

// fillMeta keeps metadata read for another purpose, so that a later FETCH
// of these messages needs no call.
//
// Whole messages (GetUnreadMessages answers) are kept without their body
// and attachments: the raw bytes are the cache's business, and the
// metadata of a large folder must stay small.
func (m *Folder) fillMeta(details []directapi.MessageDetail) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.fillMetaLocked(details)
}

// fillMetaUnder keeps details if the mirror is still under validity
// (checked in the same hold of m.mu: metadata of one UIDVALIDITY never
// lands on a UID of the next).
func (m *Folder) fillMetaUnder(validity uint32, details []directapi.MessageDetail) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.validity == validity {
		m.fillMetaLocked(details)
	}
}

func (m *Folder) fillMetaLocked(details []directapi.MessageDetail) {
	for i := range details {
		d := &details[i]
		if d.UID <= 0 || d.UID > MaxUID {
			continue
		}
		if msg := m.byUID[imap.UID(d.UID)]; msg != nil && msg.meta == nil && !msg.expunged {
			msg.meta = metaOnly(d)
			if !msg.received.IsZero() {
				// The INTERNALDATE the replica that added it shows
				// (peers.go): every replica shows one.
				msg.meta.ReceivedDate = directapi.NewDate(msg.received)
			}
		}
	}
}

// metaOnly is a copy of d without body and attachments, which does not
// keep the answer it came from in memory.
func metaOnly(d *directapi.MessageDetail) *directapi.MessageDetail {
	c := *d
	c.Body, c.AttachmentList = "", nil
	return &c
}

// MetaKnown reports metadata the provider gave. EnsureMeta leaves a
// placeholder (UID and size -1, nothing else) for a message the provider
// did not list, that is, one deleted there since the last refresh.
func MetaKnown(d *directapi.MessageDetail) bool {
	if d == nil {
		return false
	}
	return !(d.Size < 0 && d.ReceivedDate.IsZero() && d.SentDate.IsZero() && len(d.Headers) == 0 &&
		d.Subject == "" && d.Sender == "" && d.MsgNum == 0 && d.MsgID == "")
}
