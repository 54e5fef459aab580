package imapbackend

import (
	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapserver"
)

// COPY and MOVE are one engine operation each (mailstore.Folder.Transfer,
// which says how the new UIDs are found and when COPYUID is given).

// Copy copies messages (COPY and UID COPY, RFC 9051 §6.4.7).
func (s *session) Copy(numSet imap.NumSet, dest string) (*imap.CopyData, error) {
	return s.transfer(nil, numSet, dest)
}

// Move moves messages (MOVE and UID MOVE, RFC 6851). COPYUID is written
// as an untagged OK before the EXPUNGEs (RFC 6851 §4.3). The EXPUNGEs are
// queued in the folder's views, which reach every connection, this
// one included, exactly once: go-imap polls this connection right after
// the command, so they are not also written through w (that would show
// each one twice).
func (s *session) Move(w *imapserver.MoveWriter, numSet imap.NumSet, dest string) error {
	if s.readOnly {
		return errReadOnly
	}
	_, err := s.transfer(w, numSet, dest)
	return err
}

// transfer is COPY (w nil) or MOVE.
func (s *session) transfer(w *imapserver.MoveWriter, numSet imap.NumSet, destName string) (*imap.CopyData, error) {
	move := w != nil
	dest, err := s.folderName(destName)
	if err != nil {
		return nil, err
	}
	m := s.sel
	ctx, cancel := s.ctx()
	defer cancel()
	ts, err := s.targets(numSet)
	if err != nil {
		return nil, err
	}
	// Messages expunged meanwhile (the client not told yet) are not
	// copied: there is nothing left to copy (RFC 2180 §4.4.1 lets the
	// server go on with the others).
	var uids []imap.UID
	for _, t := range ts {
		if t.live {
			uids = append(uids, t.msg.UID)
		}
	}
	if len(uids) == 0 {
		if err := m.Gone(); err != nil {
			return nil, imapError(err)
		}
		return nil, nil
	}
	res, err := m.Transfer(ctx, s.auth, uids, dest, move)
	if err != nil {
		return nil, imapError(err)
	}
	if !move && dest != m.Name() {
		// COPY then EXPUNGE is how older clients move (expunge.go).
		s.noteCopiedAway(m.Name(), m.Validity(), res.Done)
	}
	if move && res.Data != nil {
		if err := w.WriteCopyData(res.Data); err != nil {
			return nil, imapError(err)
		}
	}
	return res.Data, nil
}
