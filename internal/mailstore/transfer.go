package mailstore

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/emersion/go-imap/v2"

	"github.com/directbridge/directbridge/internal/state"
	"github.com/directbridge/directbridge/upstream"
	"github.com/directbridge/directbridge/upstream/directapi"
)

// COPY and MOVE (RFC 9051 §6.4.7, RFC 6851) are one operation of the
// engine, Transfer. The provider answers Copy and Move without the new
// UIDs, so the engine finds them (placeCopies, copies.go): the
// destination's largest UID is known before, the new ones are those above
// it, and only a certain pairing gives COPYUID (RFC 4315 §3 lets a server
// leave it out; a wrong one would make a client attach its local copies
// and flags to the wrong messages).
//
// \Seen travels at the provider. The flags the bridge keeps travel to the
// new UIDs when the pairing is known; they are written down before the
// call (notePendingFlags), so that a bridge killed during it finds them
// again.

// ErrDestMissing is a COPY or MOVE whose destination folder does not
// exist (IMAP's [TRYCREATE], RFC 9051 §6.4.7).
var ErrDestMissing = errors.New("mailstore: the destination folder does not exist")

// Transferred is what a COPY or MOVE did.
type Transferred struct {
	// Done are the source UIDs copied or moved; messages that vanished
	// meanwhile are left out (RFC 2180 §4.4.1).
	Done []imap.UID
	// Data is the COPYUID data, nil when the new UIDs are not certain.
	Data *imap.CopyData
}

// Transfer copies (move false) or moves the messages uids of the folder to
// dest, in one engine operation: the provider's Copy or Move (MOVE within
// the folder itself is a copy, then the originals removed for good: the
// messages get new UIDs, as imaptest's move expects), the removal of moved
// messages from this mirror (their EXPUNGE reaches every view), and the
// copies placed in the destination's mirror with their flags.
//
// A lost answer is checked (landed): when the work is done the command
// succeeds, for a NO would make the client copy the messages again. On
// any other failure the mirrors are refreshed so that they show what the
// provider now has (part of a batched request may have gone through).
func (m *Folder) Transfer(ctx context.Context, auth upstream.Auth, uids []imap.UID, dest string, move bool) (Transferred, error) {
	st := m.store
	log := st.cfg.Logger
	sameFolder := move && dest == m.name
	if err := m.Gone(); err != nil {
		return Transferred{}, err
	}
	// A copy that a transfer under way into this folder made is moved
	// on with its flags: that transfer writes them first.
	if err := st.awaitTransfersInto(ctx, m.user, m.name, slices.Sorted(slices.Values(uids))); err != nil {
		return Transferred{}, err
	}
	srcValidity := m.Validity()
	began := time.Now()
	// The destination's largest UID, from what the bridge knows of it.
	prev, dm, err := st.destTop(ctx, auth, dest)
	if upstream.IsRefusal(err) {
		return Transferred{}, ErrDestMissing
	}
	if err != nil {
		return Transferred{}, err
	}
	leave, mark := st.transferInto(m.user, dest, prev)
	defer leave()
	// What the mirror still has, in UID order (a refresh may have taken
	// some away since the command began).
	msgs := m.liveHandles(uids)
	if len(msgs) == 0 {
		return Transferred{}, nil
	}
	uids = make([]imap.UID, len(msgs))
	for i, msg := range msgs {
		uids[i] = msg.UID
	}
	c := st.cfg.Provider
	op := c.Copy
	if move && !sameFolder {
		op = c.Move
	}
	// The sources' metadata confirms the copies' UIDs (findCopies);
	// loaded now if the bridge lacks it (one call at most).
	if err := m.EnsureMeta(ctx, msgs); err != nil {
		log.Warn("imap copy: loading the sources' metadata failed", "user", m.user, "err", err)
	}
	metas := make([]*directapi.MessageDetail, len(msgs))
	for i, msg := range msgs {
		metas[i], _ = m.MetaOf(msg)
	}
	st.transferSources(mark, metas)
	// A COPY is journaled (attempts.go): a retry of one whose answer was
	// lost is answered from the destination. A MOVE needs no journal: a
	// retry finds its sources gone, or moves them itself and the late
	// one finds nothing to move.
	var attempt int64
	if !move || sameFolder {
		key := st.copyKey(m.name, srcValidity, dest, uids)
		var u undecided
		if attempt, u, err = st.beginAttempt(ctx, m.user, key, prev); err != nil {
			return Transferred{}, err // without the journal a lost answer could not be told
		}
		if attempt == 0 {
			if res, done, err := m.resolveCopy(ctx, auth, u, dest, dm, msgs, uids, leave, mark); done {
				return res, err
			}
			if attempt, err = st.beginAgain(ctx, m.user, key, prev); err != nil {
				return Transferred{}, err
			}
		}
	}
	// \Seen travels at the provider: an appended message asked \Seen
	// whose read marking still waits gets it first, or its copy would be
	// unread (arrivals.go).
	m.markAppendedReadOf(ctx, uids)
	var pending []int64
	if !sameFolder {
		pending = st.notePendingFlags(ctx, dest, m, msgs)
		// Whatever happens, the entries left are for a refresh to
		// recover (copies not paired, an answer lost): from now on, or
		// from the hold on when the outcome is unknown (releasePending).
		defer func() { st.holdPending(pending, false) }()
	}
	// The provider's copies are read as their sources are when it makes
	// them: the call is one step with the folder's \Seen changes
	// (seenMu), so that the read state the copies are shown with
	// (before) is the one it copied. before also keeps the flags of
	// moved messages a refresh may take out of the mirror meanwhile.
	if answerLost(ctx) {
		st.dropPendingFlags(context.WithoutCancel(ctx), pending) // nothing copied
		if attempt != 0 {
			st.endAttempts(context.WithoutCancel(ctx), []state.Attempt{{ID: attempt}})
		}
		return Transferred{}, ErrAnswerLost
	}
	if err := m.seenMu.Lock(ctx); err != nil {
		st.dropPendingFlags(context.WithoutCancel(ctx), pending) // nothing copied
		return Transferred{}, err
	}
	before := m.flagsOf(uids)
	done, err := m.mutateExisting(ctx, auth, uids, func(u []int64) error { return op(ctx, auth, m.name, dest, u) })
	m.seenMu.Unlock()
	if errors.Is(err, upstream.ErrUnknownOutcome) && st.landed(auth, m, dest, prev, msgs, move && !sameFolder) {
		log.Info("imap copy: answer lost, the messages are at the destination", "user", m.user)
		done, err = uids, nil
	}
	if errors.Is(err, upstream.ErrUnknownOutcome) {
		// The provider may still make the copies, late: the flags
		// written down wait for them through the hold.
		st.releasePending(pending, time.Now().Add(st.cfg.AttemptHold))
	}
	if attempt != 0 && err == nil {
		// Done: the entry stays until the answer was written
		// (endAnswered), so that a retry after the bridge was killed
		// before the client read it is answered from the destination,
		// not copied again.
		defer st.endAnswered(attempt)
	} else if attempt != 0 {
		if err = st.decideAttempt(ctx, attempt, err); errors.Is(err, ErrOutcomeUnknown) {
			// Not at the destination yet: the provider may still make
			// the copies; the flags written down wait for them.
			log.Warn("imap copy: outcome unknown and the copies not found; a retry is answered from the destination", "user", m.user)
			leave() // the refresh shows what it holds back for the transfer
			if dm := st.peek(m.user, dest); dm != nil {
				dm.resync(ctx, "after a copy whose answer was lost")
			}
			return Transferred{}, err
		}
	}
	if err != nil && !errors.Is(err, upstream.ErrUnknownOutcome) {
		// Certainly not copied: nothing will arrive for those flags.
		st.dropPendingFlags(ctx, pending)
	}
	if err != nil {
		if uidMissing(err) {
			// Every source message exists, so it is the destination
			// that is gone.
			if _, gerr := c.UIDs(ctx, auth, dest); upstream.IsRefusal(gerr) {
				return Transferred{}, ErrDestMissing
			}
		}
		// Part may have been done: show what the provider now has.
		leave() // the refreshes show what they held back for it
		if move {
			m.resync(ctx, "after a failed move")
		}
		if dm := st.peek(m.user, dest); dm != nil {
			dm.resync(ctx, "after a failed copy")
		}
		return Transferred{}, err
	}
	if len(done) == 0 {
		// Every message vanished meanwhile: nothing will arrive for the
		// flags written down.
		st.dropPendingFlags(ctx, pending)
		return Transferred{}, nil
	}
	// What travels: the flags as the mirror holds them now, and the
	// metadata when known, in UID order.
	src := m.copiedOf(msgs, done, before)
	if sameFolder {
		if err := c.Delete(ctx, auth, m.name, uidList(done), true); err != nil {
			// The copies are made and the originals still there: the
			// client sees both after the refresh.
			leave()
			m.resync(ctx, "after a failed move within the folder")
			return Transferred{}, err
		}
	}
	if move {
		m.remove(ctx, srcValidity, done)
	}
	if m.ReadUnsure() {
		// A read marking of the sources failed (the one above, say):
		// the \Seen the copies are shown with may not be the provider's,
		// so the destination reads its unread list again too.
		if dm := st.peek(m.user, dest); dm != nil {
			dm.readUnsureNow()
		}
	}
	data := st.placeCopies(ctx, auth, dest, prev, dm, src, began, pending, leave, mark, true)
	if data != nil {
		st.dropPendingFlags(ctx, pending)
	}
	// What refreshes held back for this transfer (other mail, another
	// transfer's copies) shows now rather than at the next poll.
	leave()
	if dm := st.peek(m.user, dest); dm != nil && dm.holding() {
		dm.resync(ctx, "after a copy, for what was held back")
	}
	return Transferred{Done: done, Data: data}, nil
}

// liveHandles returns the handles of uids that are messages of the folder,
// in UID order.
func (m *Folder) liveHandles(uids []imap.UID) []*Message {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []*Message
	for _, u := range uids {
		if m.live(u) {
			out = append(out, m.byUID[u])
		}
	}
	slices.SortFunc(out, func(a, b *Message) int { return int(a.UID) - int(b.UID) })
	return out
}

// flagsOf is the flags the mirror shows for uids now.
func (m *Folder) flagsOf(uids []imap.UID) map[imap.UID][]imap.Flag {
	m.mu.Lock()
	mb := m.mb
	m.mu.Unlock()
	out := make(map[imap.UID][]imap.Flag, len(uids))
	if mb == nil {
		return out
	}
	for _, u := range uids {
		if fl, ok := mb.Flags(u); ok {
			out[u] = fl
		}
	}
	return out
}

// copiedOf is what travels with the messages of msgs that done names:
// their kept flags as the mirror shows them now (a STORE during the copy
// counts), or as they were when the request began (before) for messages
// the mirror no longer has (moved, and taken out by a refresh); \Seen as
// it was when the provider copied them (before).
func (m *Folder) copiedOf(msgs []*Message, done []imap.UID, before map[imap.UID][]imap.Flag) []copied {
	m.mu.Lock()
	mb := m.mb
	m.mu.Unlock()
	out := make([]copied, 0, len(done))
	for _, msg := range msgs {
		if !slices.Contains(done, msg.UID) {
			continue
		}
		fl := before[msg.UID]
		if mb != nil {
			if now, live := mb.Flags(msg.UID); live {
				fl = now
			}
		}
		cp := copied{UID: msg.UID, Flags: KeptOf(fl), Seen: HasSeen(before[msg.UID])}
		if meta, _ := m.MetaOf(msg); MetaKnown(meta) {
			cp.Meta = meta
		}
		out = append(out, cp)
	}
	return out
}

// resync refreshes the mirror after a command failed part way, so that
// sessions see what the provider now has. It runs in a command, never in
// a refresh. A failure is logged: the command's own error is what the
// client gets, and the poller tries again.
func (m *Folder) resync(ctx context.Context, why string) {
	if err := m.Sync(ctx); err != nil {
		m.store.cfg.Logger.Warn("imap refresh "+why+" failed", "user", m.user, "err", err)
	}
}
