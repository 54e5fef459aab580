package imapbackend

import (
	"context"
	"errors"
	"slices"

	"github.com/emersion/go-imap/v2"

	"github.com/directbridge/directbridge/internal/mailstore"
	"github.com/directbridge/directbridge/upstream"
)

// Status answers STATUS (RFC 9051 §6.3.11) from the folder's shared mirror,
// the same one SELECT and the poller use: a STATUS of MESSAGES UNSEEN
// UIDNEXT UIDVALIDITY on a folder nobody watches costs GetUIDs and
// GetUnreadMessageCount (and GetUnreadMessages when something is unread),
// and a repeat within the mirror's freshness costs nothing. STATUS of the
// selected folder is allowed; it reports the shared state, which may be
// ahead of what this connection has been told so far (RFC 9051 §6.3.11
// warns clients of exactly that).
func (s *session) Status(name string, options *imap.StatusOptions) (*imap.StatusData, error) {
	folder, err := s.folderName(name)
	if err != nil {
		return nil, err
	}
	ctx, cancel := s.ctx()
	defer cancel()
	data, err := s.statusOf(ctx, folder, options)
	if err != nil {
		return nil, err
	}
	// The reply names the mailbox as the client wrote it: clients match
	// STATUS replies to their commands by name ("Inbox.Sent" stays so).
	data.Mailbox = name
	return data, nil
}

// statusOf computes the STATUS items of a folder; LIST-STATUS shares it.
// Every item asked for is filled in: go-imap writes each requested item
// and dereferences its pointer.
//
//   - RECENT counts the messages no read-write session has been shown yet
//     (RFC 3501 §2.3.2; see seqview).
//   - SIZE (RFC 8438) is the sum of the provider's message sizes, which
//     needs the folder's metadata: one GetMessageMetaData call, kept in the
//     mirror for FETCH RFC822.SIZE afterwards.
//   - DELETED counts messages with a kept \Deleted flag (RFC 9051 §6.3.11);
//     DELETED-STORAGE (RFC 9208), which go-imap parses whether or not it is
//     advertised, is their size.
//   - APPENDLIMIT is the bridge's limit (RFC 7889).
func (s *session) statusOf(ctx context.Context, folder string, o *imap.StatusOptions) (*imap.StatusData, error) {
	m, err := s.acquireFolder(ctx, folder)
	if err != nil {
		return nil, err
	}
	defer s.srv.store.Release(m)
	if err := m.ShowArrivals(ctx); err != nil {
		return nil, imapError(err)
	}
	if o.Size || o.DeletedStorage {
		// No placeholders here: a later FETCH asks again for what is missing.
		if _, err := m.LoadMeta(ctx, nil); err != nil {
			return nil, imapError(err)
		}
	}

	mb := m.Mailbox()
	st := mb.Status()
	unseen, deleted, recent := st.Unseen, st.Deleted, st.Recent
	var size, deletedSize int64
	if o.Size || o.DeletedStorage {
		uids := mb.UIDs()
		for i, msg := range m.Handles(uids) {
			var sz int64
			if meta, _ := m.MetaOf(msg); meta != nil && meta.Size > 0 {
				sz = int64(meta.Size)
			}
			size += sz
			if fl, _ := mb.Flags(uids[i]); slices.Contains(fl, imap.FlagDeleted) {
				deletedSize += sz
			}
		}
	}
	shown, _ := s.srv.cfg.Layout.imapName(folder)
	d := &imap.StatusData{Mailbox: shown}
	if o.NumMessages {
		n := st.Messages
		d.NumMessages = &n
	}
	if o.NumUnseen {
		d.NumUnseen = &unseen
	}
	if o.UIDNext {
		d.UIDNext = max(st.UIDNext, 1)
	}
	if o.UIDValidity {
		d.UIDValidity = st.UIDValidity
	}
	if o.NumRecent {
		d.NumRecent = &recent
	}
	if o.NumDeleted {
		d.NumDeleted = &deleted
	}
	if o.Size {
		d.Size = &size
	}
	if o.DeletedStorage {
		d.DeletedStorage = &deletedSize
	}
	if o.AppendLimit {
		limit := s.srv.cfg.AppendLimit
		d.AppendLimit = &limit
	}
	return d, nil
}

// acquireFolder is mailstore.Store.Acquire for a folder named in a command, with the
// provider's refusals turned into IMAP answers: a folder the provider does
// not know is NO [NONEXISTENT]. The provider answers an unknown folder with
// a generic code, so the folder list decides whether that is what it meant.
// A folder found renumbered gets a fresh mirror (and UIDVALIDITY) at once.
// The caller releases the mirror.
func (s *session) acquireFolder(ctx context.Context, folder string) (*mailstore.Folder, error) {
	for attempt := 0; ; attempt++ {
		m, err := s.srv.store.Acquire(ctx, s.auth, folder)
		if err == nil {
			return m, nil
		}
		if errors.Is(err, mailstore.ErrFolderGone) && attempt == 0 {
			continue
		}
		if upstream.IsRefusal(err) {
			if fs, ferr := s.srv.store.Folders(ctx, s.auth, 0); ferr == nil && !fs.Exists(folder) {
				return nil, errNoSuchMailbox
			}
		}
		return nil, imapError(err)
	}
}
