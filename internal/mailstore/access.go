package mailstore

import (
	"context"
	"time"

	"github.com/emersion/go-imap/v2"

	"github.com/directbridge/directbridge/internal/seqview"
	"github.com/directbridge/directbridge/upstream/directapi"
)

// This file holds what a front reads of a Folder. Each accessor takes the
// folder's lock for a moment and never makes a provider call.

// Name is the provider's name of the folder (also its IMAP name).
func (m *Folder) Name() string { return m.name }

// Validity is the folder's UIDVALIDITY (RFC 9051 §2.3.1.1).
func (m *Folder) Validity() uint32 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.validity
}

// Gone is ErrFolderGone once the folder was deleted or renumbered, else nil.
func (m *Folder) Gone() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.gone
}

// Mailbox is what sessions see of the folder: UIDs, flags, and the views
// of the connections that have it selected. Nil until the first load.
func (m *Folder) Mailbox() *seqview.Mailbox {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.mb
}

// Ref names the folder in the raw-message cache.
func (m *Folder) Ref() FolderRef {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.ref()
}

// isLive reports whether uid is a message of the folder (not expunged).
func (m *Folder) isLive(uid imap.UID) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.live(uid)
}

// Handles returns the handle of each UID; a UID whose handle was let go
// (an expunged message past maxGhosts) gets a fresh expunged handle: its
// UID and flags are all there is.
func (m *Folder) Handles(uids []imap.UID) []*Message {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]*Message, len(uids))
	for i, u := range uids {
		msg := m.byUID[u]
		if msg == nil {
			msg = &Message{UID: u, expunged: true}
		}
		out[i] = msg
	}
	return out
}

// MetaOf is a message's metadata (nil until loaded; a placeholder, see
// MetaKnown, when the provider did not list it), and when this bridge
// saved it (APPEND), else zero. The metadata is never changed in place:
// the caller may keep it.
func (m *Folder) MetaOf(msg *Message) (meta *directapi.MessageDetail, saved time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return msg.meta, msg.saved
}

// knownMeta is the metadata of every message of the folder that has it.
func (m *Folder) knownMeta() []directapi.MessageDetail {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []directapi.MessageDetail
	for _, msg := range m.byUID {
		if msg.meta != nil && !msg.expunged {
			out = append(out, *msg.meta)
		}
	}
	return out
}

// Next is the folder's UIDNEXT, and whether the mirror is loaded and
// current (not gone): only then does it say what the provider has.
func (m *Folder) Next() (next imap.UID, ok bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.uidNext, m.loaded && m.gone == nil
}

// EnsureMeta loads the metadata of msgs that lack it (LoadMeta); a
// message the provider no longer lists gets a placeholder (MetaKnown
// false), so that a command answers with what is known rather than fail
// as a whole.
func (m *Folder) EnsureMeta(ctx context.Context, msgs []*Message) error {
	missed, err := m.LoadMeta(ctx, msgs)
	if err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, msg := range missed {
		if msg.meta == nil {
			msg.meta = &directapi.MessageDetail{UID: int64(msg.UID), Size: -1}
		}
	}
	return nil
}

// markGone tells the sessions that have the folder selected that it is
// gone (BYE at their next command) and forgets the mirror.
func (m *Folder) markGone() {
	m.mu.Lock()
	m.markGoneLocked()
	m.mu.Unlock()
	m.store.drop(m)
}
