package imapbackend

import (
	"slices"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapserver"
)

// trashFolder is the provider's trash folder.
const trashFolder = "INBOX.Trash"

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

	forever := m.Name() == trashFolder || s.srv.cfg.DeleteForever
	c := s.srv.cfg.Provider
	done, err := m.MutateExisting(ctx, del, func(u []int64) error {
		return c.Delete(ctx, s.auth, m.Name(), u, forever)
	})
	if err != nil {
		// Part may be done (a later batch failed, or no answer came):
		// show what the provider has now.
		m.Sync(ctx)
		return imapError(err)
	}
	m.Remove(ctx, validity, done)
	if !forever && len(done) > 0 {
		// Connections watching the Trash see the messages arrive.
		if tm := s.srv.store.Peek(s.auth.Username, trashFolder); tm != nil {
			tm.Sync(ctx)
		}
	}
	return nil
}
