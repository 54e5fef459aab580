package seqview

import (
	"errors"
	"fmt"

	"github.com/emersion/go-imap/v2/imapserver"
)

// This file is the only one that knows go-imap's server: the rest of the
// package is testable without a connection.

// Write writes responses, in order, to a go-imap update writer.
func Write(w *imapserver.UpdateWriter, rs []Response) error {
	for _, r := range rs {
		var err error
		switch r.Kind {
		case Expunge:
			err = w.WriteExpunge(r.Num)
		case Exists:
			err = w.WriteNumMessages(r.Num)
		case Recent:
			err = w.WriteNumRecent(r.Num)
		case Fetch:
			err = w.WriteMessageFlags(r.Num, r.UID, r.Flags)
		case MailboxFlags:
			err = w.WriteMailboxFlags(r.Flags)
		default:
			err = fmt.Errorf("seqview: unknown response kind %d", r.Kind)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// Poll writes the session's pending updates (imapserver.Session.Poll). It
// returns ErrGone when the folder was deleted or renumbered: the front then
// says BYE.
func (v *View) Poll(w *imapserver.UpdateWriter, allowExpunge bool) error {
	rs, err := v.Updates(allowExpunge)
	if err != nil {
		return err
	}
	return Write(w, rs)
}

// Idle writes updates as they come (imapserver.Session.Idle) until stop is
// closed, the view is closed (nil), or the folder is gone (ErrGone).
func (v *View) Idle(w *imapserver.UpdateWriter, stop <-chan struct{}) error {
	for {
		rs, err := v.Updates(true)
		if errors.Is(err, ErrClosed) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := Write(w, rs); err != nil {
			return err
		}
		// Updates took the change channel under the lock: a change made
		// since has closed it already.
		select {
		case <-stop:
			return nil
		case <-v.Wait():
		}
	}
}
