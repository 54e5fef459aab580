package imapbackend

import (
	"slices"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapserver"

	"github.com/directbridge/directbridge/internal/mailstore"
)

// Expunge removes the messages marked \Deleted (EXPUNGE, RFC 9051
// §6.4.3), only those among uids for UID EXPUNGE (RFC 4315 §2.1), with one
// DeleteMessagesByUIDs call.
//
// Where the messages go: outside INBOX.Trash they go to INBOX.Trash
// (deleteForever=false) and can be recovered from there, as Gmail's IMAP
// does, unless Config.DeleteForever is set; inside INBOX.Trash they are
// removed for good (deleteForever=true: there is nowhere further to go).
// The flags the bridge kept for them are dropped; copies in INBOX.Trash
// start without them (the \Deleted flag in particular does not follow).
//
// The EXPUNGE responses come from the views of the folder, once to every
// connection, the acting one included at go-imap's poll right after the
// command; they are not also written through w.
//
// Messages this connection copied to another folder (COPY, then STORE
// \Deleted and EXPUNGE: how clients without MOVE move, and how Outlook
// and older clients delete, copying to the Trash) are removed for good
// instead: the copy is the message's one place, and a second in the Trash
// would be a duplicate the user never asked for.
//
// CLOSE (RFC 9051 §6.4.1) calls Expunge with a writer that writes nothing
// and then leaves the folder, which drops the queued responses of this
// connection: CLOSE expunges silently. On a folder opened with EXAMINE,
// CLOSE removes nothing and gives no error; EXPUNGE is refused.
func (s *session) Expunge(w *imapserver.ExpungeWriter, uids *imap.UIDSet) error {
	closing := w == nil || *w == (imapserver.ExpungeWriter{})
	if s.readOnly {
		if closing {
			return nil
		}
		return errReadOnly
	}
	m := s.sel
	ctx, cancel := s.ctx()
	defer cancel()

	gone, validity, mb := m.Gone(), m.Validity(), m.Mailbox()
	var only map[imap.UID]bool
	if uids != nil {
		ts, err := s.targets(*uids)
		if err != nil {
			return err
		}
		only = make(map[imap.UID]bool, len(ts))
		for _, t := range ts {
			only[t.msg.UID] = true
		}
	}
	var del []imap.UID
	for _, u := range mb.UIDs() {
		if fl, ok := mb.Flags(u); ok && slices.Contains(fl, imap.FlagDeleted) && (only == nil || only[u]) {
			del = append(del, u)
		}
	}
	if gone != nil {
		return imapError(gone)
	}
	if len(del) == 0 {
		return nil
	}

	var forever, toTrash []imap.UID
	if m.Name() == mailstore.TrashFolder || s.srv.cfg.DeleteForever {
		forever = del
	} else {
		// Copied elsewhere by this connection already: removed for
		// good, or the Trash would hold a second copy.
		forever, toTrash = s.takeCopiedAway(m.Name(), validity, del)
	}
	if _, failed, err := m.Expunge(ctx, s.auth, forever, toTrash); err != nil {
		if len(failed) > 0 {
			// Not removed, or not all: a retried EXPUNGE must still
			// remove them for good, not move them once more.
			s.noteCopiedAway(m.Name(), validity, failed)
		}
		return imapError(err)
	}
	return nil
}

// copiedAway are the UIDs of one folder (under one UIDVALIDITY) that a
// connection copied to another folder.
type copiedAway struct {
	validity uint32
	uids     map[imap.UID]bool
}

// maxCopiedAway bounds what a connection remembers per folder; past it
// the notes of that folder are dropped and it starts again, and an
// EXPUNGE of those forgotten moves them to the Trash (a second copy
// there; nothing is lost).
const maxCopiedAway = 100_000

// noteCopiedAway remembers messages of folder copied to another folder.
func (s *session) noteCopiedAway(folder string, validity uint32, uids []imap.UID) {
	if s.copiedAway == nil {
		s.copiedAway = map[string]*copiedAway{}
	}
	tc := s.copiedAway[folder]
	if tc == nil || tc.validity != validity || len(tc.uids)+len(uids) > maxCopiedAway {
		tc = &copiedAway{validity: validity, uids: map[imap.UID]bool{}}
		s.copiedAway[folder] = tc
	}
	for _, u := range uids {
		tc.uids[u] = true
	}
}

// takeCopiedAway splits del into the UIDs copied elsewhere and the rest,
// and forgets the former.
func (s *session) takeCopiedAway(folder string, validity uint32, del []imap.UID) (copied, rest []imap.UID) {
	tc := s.copiedAway[folder]
	if tc == nil || tc.validity != validity {
		return nil, del
	}
	for _, u := range del {
		if tc.uids[u] {
			copied = append(copied, u)
			delete(tc.uids, u)
		} else {
			rest = append(rest, u)
		}
	}
	if len(tc.uids) == 0 {
		delete(s.copiedAway, folder)
	}
	return copied, rest
}
