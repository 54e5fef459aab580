package imapbackend

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapserver"

	"github.com/directbridge/directbridge/directapi"
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
	sameFolder := move && dest == m.name
	ctx, cancel := s.ctx()
	defer cancel()
	c := s.srv.cfg.Provider

	m.mu.Lock()
	gone, srcValidity := m.gone, m.validity
	m.mu.Unlock()
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
	var msgs []*message
	for _, t := range ts {
		if t.live {
			msgs = append(msgs, t.msg)
		}
	}
	if len(msgs) == 0 {
		return nil, nil
	}
	// Before taking the refresh lock, so that other commands on this
	// folder need not wait for them: the Message-IDs (after a MOVE the
	// source has no metadata for them; a failure costs only the COPYUID)
	// and the destination's largest UID.
	metaErr := s.ensureMeta(ctx, msgs)
	prev, err := s.folderMax(ctx, dest)
	if err != nil {
		return nil, err
	}

	// A refresh may have removed some meanwhile; copy what is left.
	m.mu.Lock()
	var uids []imap.UID
	left := msgs[:0]
	for _, msg := range msgs {
		if m.live(msg.uid) {
			left, uids = append(left, msg), append(uids, msg.uid)
		}
	}
	msgs = left
	m.mu.Unlock()
	if len(msgs) == 0 {
		return nil, nil
	}

	op := c.Copy
	if move && !sameFolder {
		op = c.Move
	}
	done, err := s.mutateExisting(ctx, m, uids, func(u []int64) error { return op(ctx, s.auth, m.name, dest, u) })
	if err != nil {
		if uidMissing(err) {
			// Every source message exists, so it is the destination
			// that is gone.
			if _, gerr := c.UIDs(ctx, s.auth, dest); noFolder(gerr) {
				return nil, errTryCreate
			}
		}
		// Part may have been done (a later batch failed, or no answer
		// came): show what the provider now has.
		if move {
			m.sync(ctx)
		}
		if dm := s.srv.hub.peek(s.auth.Username, dest); dm != nil {
			dm.sync(ctx)
		}
		return nil, imapError(err)
	}
	if len(done) == 0 {
		return nil, nil // every message vanished meanwhile: nothing to copy
	}

	// What travels: the kept flags and the Message-IDs, in UID order.
	m.mu.Lock()
	src := make([]copied, 0, len(done))
	for _, msg := range msgs {
		if slices.Contains(done, msg.uid) {
			cp := copied{uid: msg.uid, flags: keptOf(s.flagsOf(msg.uid))}
			if metaErr == nil && metaKnown(msg.meta) {
				cp.print = fingerprint(msg.meta)
			}
			src = append(src, cp)
		}
	}
	m.mu.Unlock()
	if sameFolder {
		if err := c.Delete(ctx, s.auth, m.name, uidList(done), true); err != nil {
			// The copies are made and the originals still there: the
			// client sees both after the refresh.
			m.sync(ctx)
			return nil, imapError(err)
		}
	}
	if move {
		s.removeMessages(ctx, m, srcValidity, done)
	}

	data := s.placeCopies(ctx, dest, prev, src)
	if move && data != nil {
		if err := w.WriteCopyData(data); err != nil {
			return nil, imapError(err)
		}
	}
	return data, nil
}

// copied is one message that went to another folder.
type copied struct {
	uid   imap.UID
	print string // fingerprint of its metadata, "" when unknown
	flags []imap.Flag
}

// placeCopies finds the new UIDs of messages copied or moved to dest
// (whose largest UID was prev before), gives them the kept flags of their
// sources and returns the COPYUID data, or nil when the new UIDs cannot be
// told for certain. The messages are in dest already: failures here are
// logged, never answered as NO (a client would copy them again).
func (s *session) placeCopies(ctx context.Context, dest string, prev int64, src []copied) *imap.CopyData {
	newUIDs, dm, err := s.uidsAbove(ctx, dest, prev)
	if err != nil {
		s.srv.cfg.Logger.Warn("imap copy: reading the new UIDs failed", "user", s.auth.Username, "err", err)
		return nil
	}
	pairs := s.matchByMessageID(ctx, dest, dm, src, newUIDs)
	if pairs == nil {
		return nil
	}
	validity, err := s.folderValidity(ctx, dest, dm)
	if err != nil {
		s.srv.cfg.Logger.Warn("imap copy: state store", "err", err)
		return nil
	}
	var ups []flagUpdate
	for i, cp := range src {
		if len(cp.flags) > 0 {
			ups = append(ups, flagUpdate{uid: pairs[i], kept: cp.flags, setKept: true})
		}
	}
	if len(ups) > 0 {
		_, err := s.applyFlags(ctx, dest, validity, dm, ups, nil)
		if err != nil {
			s.srv.cfg.Logger.Warn("imap copy: carrying flags failed", "user", s.auth.Username, "err", err)
		}
	}
	data := &imap.CopyData{UIDValidity: validity}
	for i, cp := range src {
		data.SourceUIDs.AddNum(cp.uid)
		data.DestUIDs.AddNum(pairs[i])
	}
	return data
}

// matchByMessageID pairs source messages with the new UIDs of their
// copies: only when there are exactly as many new UIDs as sources, the
// metadata of every source is known, and the destination's metadata (one
// GetMessageMetaData call) shows, in order, messages with the same
// fingerprint (size and header fields, Message-ID included). Otherwise
// nil.
func (s *session) matchByMessageID(ctx context.Context, dest string, dm *mirror, src []copied, newUIDs []int64) []imap.UID {
	if len(newUIDs) != len(src) {
		return nil
	}
	for _, cp := range src {
		if cp.print == "" {
			return nil
		}
	}
	for _, u := range newUIDs {
		if u <= 0 || u > maxUID {
			return nil
		}
	}
	details, err := s.srv.cfg.Provider.Metadata(ctx, s.auth, dest)
	if err != nil {
		s.srv.cfg.Logger.Warn("imap copy: reading destination metadata failed", "user", s.auth.Username, "err", err)
		return nil
	}
	if dm != nil {
		dm.fillMeta(details)
	}
	byUID := make(map[int64]string, len(details))
	for i := range details {
		byUID[details[i].UID] = fingerprint(&details[i])
	}
	out := make([]imap.UID, len(src))
	for i, cp := range src {
		if byUID[newUIDs[i]] != cp.print {
			return nil
		}
		out[i] = imap.UID(newUIDs[i])
	}
	return out
}

// fingerprint sums up what metadata tells of a message's content: its
// size and its header fields as the provider lists them.
func fingerprint(d *directapi.MessageDetail) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d\x00%s\x00%s\x00%s", d.Size, d.MsgID, d.Subject, d.Sender)
	for _, h := range d.Headers {
		b.WriteString("\x00" + h.Name + ":" + h.Value)
	}
	return b.String()
}

// folderMax returns the largest UID a folder has had: from its mirror
// when that was refreshed a moment ago, else with GetUIDs. A folder that
// does not exist is NO [TRYCREATE] (RFC 9051 §6.4.7, §6.3.12).
func (s *session) folderMax(ctx context.Context, folder string) (int64, error) {
	if dm := s.srv.hub.peek(s.auth.Username, folder); dm != nil {
		dm.mu.Lock()
		fresh := dm.loaded && dm.gone == nil && time.Since(dm.syncedAt) <= freshness
		newest := int64(dm.uidNext) - 1
		dm.mu.Unlock()
		if fresh {
			return newest, nil
		}
	}
	pids, err := s.srv.cfg.Provider.UIDs(ctx, s.auth, folder)
	if err != nil {
		if noFolder(err) {
			return 0, errTryCreate
		}
		return 0, imapError(err)
	}
	var top int64
	for _, p := range pids {
		top = max(top, p)
	}
	return top, nil
}

// uidsAbove returns a folder's UIDs above prev, in order. When the folder
// has a mirror, the mirror is refreshed and read, so connections that
// have the folder selected see the new messages at once (and it costs no
// extra call); the mirror is returned then.
func (s *session) uidsAbove(ctx context.Context, folder string, prev int64) ([]int64, *mirror, error) {
	var out []int64
	if dm := s.srv.hub.peek(s.auth.Username, folder); dm != nil {
		if err := dm.sync(ctx); err == nil {
			dm.mu.Lock()
			ok := dm.loaded && dm.gone == nil
			if ok {
				for _, u := range dm.mb.UIDs() {
					if int64(u) > prev {
						out = append(out, int64(u))
					}
				}
			}
			dm.mu.Unlock()
			if ok {
				return out, dm, nil
			}
		}
	}
	pids, err := s.srv.cfg.Provider.UIDs(ctx, s.auth, folder)
	if err != nil {
		return nil, nil, err
	}
	for _, p := range pids {
		if p > prev {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return slices.Compact(out), nil, nil
}

// folderValidity is a folder's UIDVALIDITY: its mirror's, or the state
// store's (which a later SELECT uses too).
func (s *session) folderValidity(ctx context.Context, folder string, dm *mirror) (uint32, error) {
	if dm != nil {
		dm.mu.Lock()
		v, ok := dm.validity, dm.loaded && dm.gone == nil
		dm.mu.Unlock()
		if ok {
			return v, nil
		}
	}
	st, err := s.srv.cfg.Store.Folder(ctx, s.auth.Username, folder)
	return st.UIDValidity, err
}

// fillMeta keeps metadata read for another purpose, so that a later FETCH
// of these messages needs no call.
//
// Whole messages (GetUnreadMessages answers) are kept without their body
// and attachments: the raw bytes are the cache's business, and the
// metadata of a large folder must stay small.
func (m *mirror) fillMeta(details []directapi.MessageDetail) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for i := range details {
		d := &details[i]
		if d.UID <= 0 || d.UID > maxUID {
			continue
		}
		if msg := m.byUID[imap.UID(d.UID)]; msg != nil && msg.meta == nil && !msg.expunged {
			msg.meta = metaOnly(d)
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

// noFolder reports a provider refusal of a folder operation: the folder
// does not exist (the same reading as SELECT's).
func noFolder(err error) bool {
	return upstream.IsRefusal(err)
}
