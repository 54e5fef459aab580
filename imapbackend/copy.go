package imapbackend

import (
	"errors"
	"slices"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapserver"

	"github.com/directbridge/directbridge/mailstore"
	"github.com/directbridge/directbridge/upstream"
)

// COPY and MOVE map to Copy and Move. The
// provider answers without the new UIDs, so the bridge finds them: the
// destination's UIDs are read before and after, the new ones are those
// above the previous maximum (the provider's UIDs grow and are never
// reused), and when there are exactly as many as messages copied, the
// pairing (new UIDs follow the order of the source UIDs) is confirmed with
// the destination's metadata: each new message must have the size and the
// header fields (Message-ID among them) of its source, in order. Anything
// less certain, such as a message delivered to the destination at the
// same moment, gets a plain OK: UIDPLUS (RFC 4315 §3) lets a server leave
// COPYUID out, and a wrong COPYUID would make a client attach its local
// copies and flags to the wrong messages. Messages that look the same in
// every one of these respects are paired in the provider's order, which
// is all there is to tell them apart by (imaptest's copy copies two such
// messages with different flags and expects them to keep them).
//
// \Seen travels at the provider. The flags the bridge keeps travel to the
// new UIDs when the pairing is known; otherwise the copies start without
// them.

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
	// MOVE into the folder itself gives the messages new UIDs (imaptest's
	// move does it; RFC 6851 does not forbid it): a copy, then the
	// originals removed for good, since the copies are there.
	sameFolder := move && dest == m.Name()
	ctx, cancel := s.ctx()
	defer cancel()
	c := s.srv.cfg.Provider

	gone, srcValidity := m.Gone(), m.Validity()
	ts, err := s.targets(numSet)
	if err != nil {
		return nil, err
	}
	if gone != nil {
		return nil, imapError(gone)
	}
	// Messages expunged meanwhile (the client not told yet) are not
	// copied: there is nothing left to copy (RFC 2180 §4.4.1 lets the
	// server go on with the others).
	var msgs []*mailstore.Message
	for _, t := range ts {
		if t.live {
			msgs = append(msgs, t.msg)
		}
	}
	if len(msgs) == 0 {
		return nil, nil
	}
	// The destination's largest UID, from what the bridge knows of it.
	prev, dm, err := s.srv.store.DestTop(ctx, s.auth, dest)
	if noFolder(err) {
		return nil, errTryCreate // RFC 9051 §6.4.7
	}
	if err != nil {
		return nil, imapError(err)
	}

	// A refresh may have removed some meanwhile; copy what is left.
	var uids []imap.UID
	left := msgs[:0]
	for _, msg := range msgs {
		if m.Live(msg.UID) {
			left, uids = append(left, msg), append(uids, msg.UID)
		}
	}
	msgs = left
	if len(msgs) == 0 {
		return nil, nil
	}

	op := c.Copy
	if move && !sameFolder {
		op = c.Move
	}
	// The flags go down before the call, under the destination: a bridge
	// killed during it finds them again (mailstore.Store.NotePendingFlags).
	var pending []int64
	if !sameFolder {
		pending = s.srv.store.NotePendingFlags(ctx, dest, m, msgs)
	}
	done, err := m.MutateExisting(ctx, s.auth, uids, func(u []int64) error { return op(ctx, s.auth, m.Name(), dest, u) })
	if errors.Is(err, upstream.ErrUnknownOutcome) && s.srv.store.Landed(s.auth, m, dest, prev, msgs, move && !sameFolder) {
		// The answer was lost but the work is done: a NO would make the
		// client copy them again, and the messages would be there twice.
		s.srv.cfg.Logger.Info("imap copy: answer lost, the messages are at the destination", "user", s.auth.Username)
		done, err = uids, nil
	}
	if err != nil && !errors.Is(err, upstream.ErrUnknownOutcome) {
		// Certainly not copied: nothing will arrive for those flags.
		s.srv.store.DropPendingFlags(ctx, pending)
	}
	if err != nil {
		if mailstore.UIDMissing(err) {
			// Every source message exists, so it is the destination
			// that is gone.
			if _, gerr := c.UIDs(ctx, s.auth, dest); noFolder(gerr) {
				return nil, errTryCreate
			}
		}
		// Part may have been done (a later batch failed, or no answer
		// came): show what the provider now has.
		if move {
			m.Sync(ctx)
		}
		if dm := s.srv.store.Peek(s.auth.Username, dest); dm != nil {
			dm.Sync(ctx)
		}
		return nil, imapError(err)
	}
	if len(done) == 0 {
		return nil, nil // every message vanished meanwhile: nothing to copy
	}

	// What travels: the flags, and the metadata when known, in UID order.
	src := make([]mailstore.Copied, 0, len(done))
	for _, msg := range msgs {
		if slices.Contains(done, msg.UID) {
			fl := s.flagsOf(msg.UID)
			cp := mailstore.Copied{UID: msg.UID, Flags: mailstore.KeptOf(fl), Seen: mailstore.HasSeen(fl)}
			if meta, _ := m.MetaOf(msg); mailstore.MetaKnown(meta) {
				cp.Meta = meta
			}
			src = append(src, cp)
		}
	}
	if sameFolder {
		if err := c.Delete(ctx, s.auth, m.Name(), mailstore.UIDList(done), true); err != nil {
			// The copies are made and the originals still there: the
			// client sees both after the refresh.
			m.Sync(ctx)
			return nil, imapError(err)
		}
	}
	if move {
		m.Remove(ctx, srcValidity, done)
	}

	if !move && dest == trashFolder && m.Name() != trashFolder {
		s.noteTrashCopies(m.Name(), srcValidity, done)
	}
	data := s.srv.store.PlaceCopies(ctx, s.auth, dest, prev, dm, src)
	if data != nil {
		s.srv.store.DropPendingFlags(ctx, pending)
	}
	if move && data != nil {
		if err := w.WriteCopyData(data); err != nil {
			return nil, imapError(err)
		}
	}
	return data, nil
}

// noFolder reports a provider refusal of a folder operation: the folder
// does not exist (the same reading as SELECT's).
func noFolder(err error) bool {
	return upstream.IsRefusal(err)
}
