package imapbackend

import (
	"context"
	"errors"
	"slices"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapserver"

	"github.com/directbridge/directbridge/directapi"
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
	prev, dm, err := s.destMax(ctx, dest)
	if err != nil {
		return nil, err
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
	done, err := m.MutateExisting(ctx, uids, func(u []int64) error { return op(ctx, s.auth, m.Name(), dest, u) })
	if errors.Is(err, upstream.ErrUnknownOutcome) && s.landed(m, dest, prev, msgs, move && !sameFolder) {
		// The answer was lost but the work is done: a NO would make the
		// client copy them again, and the messages would be there twice.
		s.srv.cfg.Logger.Info("imap copy: answer lost, the messages are at the destination", "user", s.auth.Username)
		done, err = uids, nil
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

	data := s.placeCopies(ctx, dest, prev, dm, src)
	if move && data != nil {
		if err := w.WriteCopyData(data); err != nil {
			return nil, imapError(err)
		}
	}
	return data, nil
}

// placeCopies finds the new UIDs of messages copied or moved to dest
// (whose largest UID was prev before) with one GetUIDs, gives them the
// kept flags of their sources and returns the COPYUID data, or nil when
// the new UIDs cannot be told for certain. The messages are in dest
// already: failures here are logged, never answered as NO (a client would
// copy them again).
//
// Pairing: when exactly as many UIDs appeared above prev as messages were
// copied, they are the copies, in the order of the source UIDs: the
// provider's UIDs follow the order messages arrive in a folder, and a copy
// files them in the order of the request (the sandbox does; COPYUID, RFC
// 4315 §3, pairs the same way). Anything else, such as a message delivered
// to the destination at the same moment, gets a plain OK: UIDPLUS lets a
// server leave COPYUID out, and a wrong COPYUID would make a client attach
// its local copies and flags to the wrong messages.
//
// When the destination has a mirror, the copies are put into it directly
// (flags and metadata known), so connections watching it see them at
// once without another refresh.
func (s *session) placeCopies(ctx context.Context, dest string, prev int64, dm *mailstore.Folder, src []mailstore.Copied) *imap.CopyData {
	log := s.srv.cfg.Logger
	pids, err := s.srv.cfg.Provider.UIDs(ctx, s.auth, dest)
	if err != nil {
		log.Warn("imap copy: reading the new UIDs failed", "user", s.auth.Username, "err", err)
		return nil
	}
	var newUIDs []imap.UID
	var top int64
	for _, p := range pids {
		top = max(top, p)
		if p > prev && p <= mailstore.MaxUID {
			newUIDs = append(newUIDs, imap.UID(p))
		}
	}
	slices.Sort(newUIDs)
	if top > 0 && top <= mailstore.MaxUID {
		// The next COPY into an unwatched folder knows where it stood.
		if err := s.srv.cfg.Store.SeenUIDs(ctx, s.auth.Username, dest, uint32(top)); err != nil {
			log.Warn("imap copy: state store", "err", err)
		}
	}
	if len(newUIDs) != len(src) {
		log.Info("imap copy: new UIDs not paired", "user", s.auth.Username, "copied", len(src), "new", len(newUIDs))
		if dm != nil {
			dm.Sync(ctx)
		}
		return nil
	}
	validity, err := s.folderValidity(ctx, dest, dm)
	if err != nil {
		log.Warn("imap copy: state store", "err", err)
		return nil
	}
	kept := map[uint32][]string{}
	for i, cp := range src {
		if len(cp.Flags) > 0 {
			kept[uint32(newUIDs[i])] = mailstore.FlagStrings(cp.Flags)
		}
	}
	if len(kept) > 0 {
		if err := s.srv.cfg.Store.SetFlags(ctx, s.auth.Username, dest, validity, kept); err != nil {
			log.Warn("imap copy: carrying flags failed", "user", s.auth.Username, "err", err)
		}
	}
	if dm != nil {
		dm.AddCopies(ctx, newUIDs, src)
	}
	data := &imap.CopyData{UIDValidity: validity}
	for i, cp := range src {
		data.SourceUIDs.AddNum(cp.UID)
		data.DestUIDs.AddNum(newUIDs[i])
	}
	return data
}

// destMax returns the largest UID a destination folder is known to have
// had, without asking the provider when the bridge knows: from the
// folder's mirror, or from the state store's record of the largest UID
// seen (which placeCopies keeps up to date). Only a folder the bridge has
// never looked at costs a GetUIDs; one that does not exist is NO
// [TRYCREATE] (RFC 9051 §6.4.7).
func (s *session) destMax(ctx context.Context, folder string) (int64, *mailstore.Folder, error) {
	if dm := s.srv.store.Peek(s.auth.Username, folder); dm != nil {
		if next, ok := dm.Next(); ok {
			return int64(next) - 1, dm, nil
		}
	}
	st, err := s.srv.cfg.Store.Folder(ctx, s.auth.Username, folder)
	if err != nil {
		return 0, nil, imapError(err)
	}
	if st.UIDNext > 1 {
		return int64(st.UIDNext) - 1, nil, nil
	}
	pids, err := s.srv.cfg.Provider.UIDs(ctx, s.auth, folder)
	if err != nil {
		if noFolder(err) {
			return 0, nil, errTryCreate
		}
		return 0, nil, imapError(err)
	}
	var top int64
	for _, p := range pids {
		top = max(top, p)
	}
	return top, nil, nil
}

// folderValidity is a folder's UIDVALIDITY: its mirror's, or the state
// store's (which a later SELECT uses too).
func (s *session) folderValidity(ctx context.Context, folder string, dm *mailstore.Folder) (uint32, error) {
	if dm != nil {
		if _, ok := dm.Next(); ok {
			return dm.Validity(), nil
		}
	}
	st, err := s.srv.cfg.Store.Folder(ctx, s.auth.Username, folder)
	return st.UIDValidity, err
}

// noFolder reports a provider refusal of a folder operation: the folder
// does not exist (the same reading as SELECT's).
func noFolder(err error) bool {
	return upstream.IsRefusal(err)
}

// landed reports whether a COPY or MOVE of msgs whose answer was lost
// took place: exactly as many messages appeared in dest above prev (its
// largest UID before), and, for a copy, each with the size and
// Message-ID of its source in order; for a move, none of the sources is
// left in the source folder. Anything less certain is false, and the
// command is answered NO as before.
func (s *session) landed(m *mailstore.Folder, dest string, prev int64, msgs []*mailstore.Message, move bool) bool {
	ctx, cancel := s.ctx()
	defer cancel()
	c := s.srv.cfg.Provider
	pids, err := c.UIDs(ctx, s.auth, dest)
	if err != nil {
		return false
	}
	var added []int64
	for _, p := range pids {
		if p > prev {
			added = append(added, p)
		}
	}
	if len(added) != len(msgs) {
		return false
	}
	slices.Sort(added)
	if move {
		left, err := c.UIDs(ctx, s.auth, m.Name())
		if err != nil {
			return false
		}
		for _, msg := range msgs {
			if slices.Contains(left, int64(msg.UID)) {
				return false
			}
		}
		return true
	}
	if err := s.ensureMeta(ctx, msgs); err != nil {
		return false
	}
	copies, err := c.Messages(ctx, s.auth, dest, added) // rare: a lost answer
	if err != nil || len(copies) != len(added) {
		return false
	}
	byUID := make(map[int64]directapi.MessageDetail, len(copies))
	for _, d := range copies {
		byUID[d.UID] = d
	}
	for i, msg := range msgs {
		d, ok := byUID[added[i]]
		meta, _ := m.MetaOf(msg)
		if !ok || !mailstore.MetaKnown(meta) || d.Size != meta.Size || d.MsgID != meta.MsgID {
			return false
		}
	}
	return true
}
