package imapbackend

import (
	"slices"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapserver"

	"github.com/directbridge/directbridge/mailstore"
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
// Messages this connection copied to INBOX.Trash (COPY, then STORE
// \Deleted and EXPUNGE: how Outlook and older clients delete) are removed
// for good instead: the copy is the Trash's one copy.
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
		// Copied to the Trash by this connection already: removed for
		// good, or the Trash would hold them twice.
		forever, toTrash = s.takeTrashCopies(m.Name(), validity, del)
	}
	if _, failed, err := m.Expunge(ctx, s.auth, forever, toTrash); err != nil {
		if len(failed) > 0 {
			// Not removed, or not all: a retried EXPUNGE must still
			// remove them for good, not move them once more.
			s.noteTrashCopies(m.Name(), validity, failed)
		}
		return imapError(err)
	}
	return nil
}

// trashCopies are the UIDs of one folder (under one UIDVALIDITY) that a
// connection copied to the Trash.
type trashCopies struct {
	validity uint32
	uids     map[imap.UID]bool
}

// maxTrashCopies bounds what a connection remembers per folder; past
// it the notes of that folder are dropped and it starts again, and an
// EXPUNGE of those forgotten moves them to the Trash once more (a second
// copy there; nothing is lost).
const maxTrashCopies = 100_000

// noteTrashCopies remembers messages of folder copied to the Trash.
func (s *session) noteTrashCopies(folder string, validity uint32, uids []imap.UID) {
	if s.inTrash == nil {
		s.inTrash = map[string]*trashCopies{}
	}
	tc := s.inTrash[folder]
	if tc == nil || tc.validity != validity || len(tc.uids)+len(uids) > maxTrashCopies {
		tc = &trashCopies{validity: validity, uids: map[imap.UID]bool{}}
		s.inTrash[folder] = tc
	}
	for _, u := range uids {
		tc.uids[u] = true
	}
}

// takeTrashCopies splits del into the UIDs copied to the Trash and the
// rest, and forgets the former.
func (s *session) takeTrashCopies(folder string, validity uint32, del []imap.UID) (copied, rest []imap.UID) {
	tc := s.inTrash[folder]
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
		delete(s.inTrash, folder)
	}
	return copied, rest
}
