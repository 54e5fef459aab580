package mailstore

import (
	"cmp"
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/emersion/go-imap/v2"

	"github.com/directbridge/directbridge/internal/state"
	"github.com/directbridge/directbridge/upstream"
	"github.com/directbridge/directbridge/upstream/directapi"
)

// This file holds what the bridge learns after a COPY or MOVE: the
// provider answers without the new UIDs.

// placeCopies finds the new UIDs of messages copied or moved to dest
// (whose largest UID was prev before) by their metadata (findCopies: one
// SearchMessagesMetadataByReceivedDate), adds the kept flags of their
// sources to them and returns the COPYUID data, or nil when the new UIDs
// cannot be told for certain: UIDPLUS (RFC 4315 §3) lets a server leave
// COPYUID out, and a wrong COPYUID would make a client attach its local
// copies and flags to the wrong messages. The messages are in dest
// already: failures here are logged, never answered as NO (a client would
// copy them again).
//
// When the destination has a mirror, the copies are put into it directly
// (flags and metadata known), so connections watching it see them at
// once without another refresh.
//
// pending are the transfer's pending-flag entries: when the copies are not
// found, they are handed to the destination's refresh (no longer held)
// before it runs, so that it gives the copies their flags.
//
// leave ends the transfer's claim on the destination's new UIDs
// (transferInto) before a refresh that is to pair them by the entries.
func (st *Store) placeCopies(ctx context.Context, auth upstream.Auth, dest string, prev int64, dm *Folder, src []copied, began time.Time, pending []int64, leave func(), self *intoMark, fresh bool) *imap.CopyData {
	log := st.cfg.Logger
	newUIDs, top := st.findCopies(ctx, auth, dest, prev, src, began, dm, self, fresh)
	if top > 0 && top <= MaxUID {
		// The next COPY into an unwatched folder knows where it stood.
		if err := st.cfg.State.SeenUIDs(ctx, auth.Username, dest, uint32(top)); err != nil {
			log.Warn("imap copy: state store", "err", err)
		}
	}
	if newUIDs == nil {
		log.Info("imap copy: new UIDs not paired", "user", auth.Username, "copied", len(src))
		leave()
		st.holdPending(pending, false)
		if dm != nil {
			dm.resync(ctx, "after a copy")
		}
		return nil
	}
	validity, err := st.folderValidity(ctx, auth, dest, dm)
	if err != nil {
		log.Warn("imap copy: state store", "err", err)
		return nil // not claimed: the pending entries pair the copies
	}
	// From here the transfer places its copies' flags itself.
	st.claim(auth.Username, dest, newUIDs)
	// The flags travel as changes added to whatever the new UIDs hold
	// by now (a session that saw a copy through a refresh may have
	// stored a flag on it already), and the mirror shows the sets the
	// store made, in the order of the store's writes (flagMu, flags.go).
	var changes []state.FlagChange
	for i, cp := range src {
		if len(cp.Flags) > 0 {
			changes = append(changes, state.FlagChange{UID: uint32(newUIDs[i]), Add: flagStrings(cp.Flags)})
		}
	}
	shown := func() bool {
		if dm == nil {
			dm = st.peek(auth.Username, dest)
		}
		if dm != nil {
			dm.flagMu.Lock()
			defer dm.flagMu.Unlock()
		}
		st.carryFlags(ctx, auth, dest, validity, changes, newUIDs, src)
		if dm == nil {
			// No mirror when the flags were written. One made since may
			// have read the state store before the write: it shows the
			// flags the store holds now (a session that saw a copy may
			// have stored on it already), in order with STOREs (flagMu).
			if dm = st.peek(auth.Username, dest); dm == nil {
				return true
			}
			dm.flagMu.Lock()
			defer dm.flagMu.Unlock()
			st.rereadKept(ctx, auth, dest, validity, newUIDs, src)
		}
		return dm.addCopies(ctx, newUIDs, src)
	}()
	if !shown {
		// The refresh shows the copies with the flags written above,
		// and what it held back for the transfer (holdBackLocked).
		leave()
		dm.resync(ctx, "after a copy")
	}
	data := &imap.CopyData{UIDValidity: validity}
	for i, cp := range src {
		data.SourceUIDs.AddNum(cp.UID)
		data.DestUIDs.AddNum(newUIDs[i])
	}
	return data
}

// carryFlags adds the sources' kept flags (changes) to the copies newUIDs
// in the state store, and sets src's flags to the sets the store made.
// A failure is logged: the copies are made, and a NO would make the
// client copy them again.
func (st *Store) carryFlags(ctx context.Context, auth upstream.Auth, dest string, validity uint32, changes []state.FlagChange, newUIDs []imap.UID, src []copied) {
	if len(changes) == 0 {
		return
	}
	kept, err := st.cfg.State.ChangeFlags(ctx, strings.ToLower(auth.Username), dest, validity, changes)
	if err != nil {
		st.cfg.Logger.Warn("imap copy: carrying flags failed", "user", auth.Username, "err", err)
	}
	for i := range src {
		if fl, ok := kept[uint32(newUIDs[i])]; ok {
			src[i].Flags, src[i].Stored = canonicalFlags(fl), true
		}
	}
}

// rereadKept sets src's flags to what the state store holds for the
// copies newUIDs (ascending) now.
func (st *Store) rereadKept(ctx context.Context, auth upstream.Auth, dest string, validity uint32, newUIDs []imap.UID, src []copied) {
	kept, err := st.cfg.State.FlagsFrom(ctx, strings.ToLower(auth.Username), dest, validity, uint32(newUIDs[0]))
	if err != nil {
		st.cfg.Logger.Warn("imap copy: state store", "err", err)
		return
	}
	for i := range src {
		src[i].Flags, src[i].Stored = canonicalFlags(kept[uint32(newUIDs[i])]), true
	}
}

// findCopies finds the UIDs the copies of src got in dest (whose largest
// UID was prev before), by their metadata: in the order of src, each is
// the next message above prev with its source's size and Message-ID (the
// provider files copies in the order of the request). Counting the UIDs
// that appeared is not enough: a message delivered to the destination at
// the same moment, while another client removed one of the copies, gives
// the same count, and a wrong COPYUID would make the client attach its
// copies and flags to the wrong messages. The provider numbers the copies
// of one request one after another (the sandbox does; a provider that did
// not would get no COPYUID). The metadata comes from one
// SearchMessagesMetadataByReceivedDate over the sources' received dates
// (the provider keeps them on a copy, as the sandbox does), or, should
// the copies not be among the answer (a provider that dates copies when
// made), over the time of the transfer. Sources whose metadata the bridge
// lacks cannot be found: nil then. top is the largest UID seen.
//
// fresh: the copies are the ones the caller's own request just made, so
// UIDs another transfer of this process paired (claimed) are not theirs,
// and a twin another transfer under way copies makes the match unsure; a
// retry that looks for an earlier attempt's copies (resolveCopy) is not
// fresh, since that attempt may have paired them itself before its
// answer was lost, or still run.
func (st *Store) findCopies(ctx context.Context, auth upstream.Auth, dest string, prev int64, src []copied, began time.Time, dm *Folder, self *intoMark, fresh bool) (newUIDs []imap.UID, top int64) {
	var from, to time.Time
	for _, cp := range src {
		if !MetaKnown(cp.Meta) || cp.Meta.Size < 0 || cp.Meta.ReceivedDate.IsZero() {
			return nil, 0
		}
		r := cp.Meta.ReceivedDate.Time
		if from.IsZero() || r.Before(from) {
			from = r
		}
		if r.After(to) {
			to = r
		}
	}
	ranges := [][2]time.Time{{from.Add(-metaSkew), to.Add(metaSkew)}, {began.Add(-metaSkew), time.Now().Add(metaSkew)}}
	for _, rg := range ranges {
		details, err := st.cfg.Provider.MetadataReceived(ctx, auth, dest, rg[0], rg[1])
		if err != nil {
			st.cfg.Logger.Warn("imap copy: reading the new messages failed", "user", auth.Username, "err", err)
			return nil, top
		}
		slices.SortFunc(details, func(a, b directapi.MessageDetail) int { return cmp.Compare(a.UID, b.UID) })
		var above []directapi.MessageDetail
		var claimed map[imap.UID]bool
		if fresh {
			claimed = st.claimedIn(auth.Username, dest)
		}
		for _, d := range details {
			top = max(top, d.UID)
			if d.UID > prev && d.UID <= MaxUID && !claimed[imap.UID(d.UID)] {
				// Not a copy another transfer paired already.
				above = append(above, d)
			}
		}
		if dm != nil {
			dm.fillMeta(details)
		}
		// The copies of one request are numbered one after another: a
		// run of consecutive UIDs, each with its source's size and
		// Message-ID. Exactly one such run is certain; none or two (the
		// same messages copied twice at once) are not.
		var found []imap.UID
		runs := 0
		for i := 0; i+len(src) <= len(above); i++ {
			ok := true
			for k := range src {
				d, m := above[i+k], src[k].Meta
				if d.UID != above[i].UID+int64(k) || d.Size != m.Size || d.MsgID != m.MsgID {
					ok = false
					break
				}
			}
			if ok {
				runs++
				found = found[:0]
				for k := range src {
					found = append(found, imap.UID(above[i+k].UID))
				}
			}
		}
		switch {
		case runs == 1 && fresh && st.twinElsewhere(auth.Username, dest, self, src):
			// Another transfer under way copies a twin here: if another
			// client removed this one's copy meanwhile, the run found is
			// that transfer's copy. (For a retry, the transfer under way
			// is most likely the earlier attempt itself, whose copies
			// are the ones looked for.)
			return nil, top
		case runs == 1:
			return found, top
		case runs > 1:
			return nil, top
		}
	}
	return nil, top
}

// destTop returns the largest UID a destination folder is known to have
// had, without asking the provider when the bridge knows: from the
// folder's mirror, or from the state store's record of the largest UID
// seen (which placeCopies keeps up to date). Only a folder the bridge has
// never looked at costs a GetUIDs; for one that does not exist, the
// provider's refusal is returned (upstream.IsRefusal).
func (st *Store) destTop(ctx context.Context, auth upstream.Auth, folder string) (int64, *Folder, error) {
	if dm := st.peek(auth.Username, folder); dm != nil {
		if next, ok := dm.Next(); ok {
			return int64(next) - 1, dm, nil
		}
	}
	fs, err := st.cfg.State.Folder(ctx, auth.Username, folder)
	if err != nil {
		return 0, nil, err
	}
	if fs.UIDNext > 1 {
		return int64(fs.UIDNext) - 1, nil, nil
	}
	pids, err := st.cfg.Provider.UIDs(ctx, auth, folder)
	if err != nil {
		return 0, nil, err
	}
	var top int64
	for _, p := range pids {
		top = max(top, p)
	}
	return top, nil, nil
}

// folderValidity is a folder's UIDVALIDITY: its mirror's, or the state
// store's (which a later SELECT uses too).
func (st *Store) folderValidity(ctx context.Context, auth upstream.Auth, folder string, dm *Folder) (uint32, error) {
	if dm != nil {
		if _, ok := dm.Next(); ok {
			return dm.Validity(), nil
		}
	}
	fs, err := st.cfg.State.Folder(ctx, auth.Username, folder)
	return fs.UIDValidity, err
}

// landed reports whether a COPY or MOVE of msgs whose answer was lost
// took place: exactly as many messages appeared in dest above prev (its
// largest UID before), and, for a copy, each with the size and
// Message-ID of its source in order; for a move, none of the sources is
// left in the source folder. Anything less certain is false, and the
// command is answered NO as before.
func (st *Store) landed(auth upstream.Auth, m *Folder, dest string, prev int64, msgs []*Message, move bool) bool {
	ctx, cancel := context.WithTimeout(context.Background(), st.cfg.CallTimeout)
	defer cancel()
	c := st.cfg.Provider
	pids, err := c.UIDs(ctx, auth, dest)
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
		left, err := c.UIDs(ctx, auth, m.Name())
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
	if err := m.EnsureMeta(ctx, msgs); err != nil {
		return false
	}
	copies, err := c.Messages(ctx, auth, dest, added) // rare: a lost answer
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
		if !ok || !MetaKnown(meta) || d.Size != meta.Size || d.MsgID != meta.MsgID {
			return false
		}
	}
	return true
}

// notePendingFlags writes down, before a COPY or MOVE of msgs from m to
// dest, the kept flags of those that have any, under their Message-ID and
// size (state.PendingFlags): a bridge killed during the provider's call
// finds them again when dest is next refreshed (pendingFlagsFor).
// Messages whose metadata the bridge has not loaded are left out (their
// flags go on after the call only). It returns the entries' ids, for
// dropPendingFlags once the flags are on the new UIDs; a failure is
// logged and the copy goes on.
func (st *Store) notePendingFlags(ctx context.Context, dest string, m *Folder, msgs []*Message) []int64 {
	mb := m.Mailbox()
	if mb == nil {
		return nil
	}
	// Twins (copies of one message: the same Message-ID and size) are
	// told apart only by their order, so each twin gets an entry, even
	// one without flags: the copies are matched to the entries in order,
	// and a twin without flags must not let its copy take the flags of
	// the next one.
	seen := map[twinID]int{}
	for _, msg := range msgs {
		if meta, _ := m.MetaOf(msg); MetaKnown(meta) {
			seen[twinID{meta.MsgID, meta.Size}]++
		}
	}
	var pf []state.PendingFlag
	for _, msg := range msgs {
		fl, ok := mb.Flags(msg.UID)
		kept := KeptOf(fl)
		meta, _ := m.MetaOf(msg)
		if !ok || !MetaKnown(meta) || meta.MsgID == "" || meta.Size < 0 ||
			len(kept) == 0 && seen[twinID{meta.MsgID, meta.Size}] < 2 {
			continue
		}
		pf = append(pf, state.PendingFlag{MsgID: meta.MsgID, Size: meta.Size, Flags: flagStrings(kept)})
	}
	if !slices.ContainsFunc(pf, func(p state.PendingFlag) bool { return len(p.Flags) > 0 }) {
		return nil
	}
	ids, err := st.cfg.State.AddPendingFlags(ctx, m.user, dest, pf)
	if err == nil {
		st.holdPending(ids, true)
	}
	if err != nil {
		st.cfg.Logger.Warn("imap copy: writing down flags failed", "user", m.user, "err", err)
		return nil
	}
	return ids
}

// dropPendingFlags forgets entries of notePendingFlags whose flags are on
// the new UIDs.
func (st *Store) dropPendingFlags(ctx context.Context, ids []int64) {
	if len(ids) == 0 {
		return
	}
	st.forgetPending(ids)
	if err := st.cfg.State.DropPendingFlags(ctx, ids); err != nil {
		st.cfg.Logger.Warn("imap copy: state store", "err", err)
	}
}

// forgetPending forgets what this process knew of entries dropped.
func (st *Store) forgetPending(ids []int64) {
	st.mu.Lock()
	defer st.mu.Unlock()
	for _, id := range ids {
		delete(st.pendingRun, id)
		delete(st.pendingFreed, id)
	}
}

// holdPending marks pending-flag entries as belonging to a transfer of
// this process that is still running (on), or no longer (off).
func (st *Store) holdPending(ids []int64, on bool) {
	if !on {
		st.releasePending(ids, time.Now())
		return
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.pendingRun == nil {
		st.pendingRun, st.pendingFreed = map[int64]bool{}, map[int64]time.Time{}
	}
	for _, id := range ids {
		st.pendingRun[id] = true
	}
}

// releasePending hands entries of a transfer that ended to the refreshes
// of the destination, from since on: at once, or, when the transfer's
// outcome is unknown (the provider may still carry it out, late), after
// the hold (Config.AttemptHold), so that copies made late still get them.
func (st *Store) releasePending(ids []int64, since time.Time) {
	st.mu.Lock()
	defer st.mu.Unlock()
	for _, id := range ids {
		if st.pendingRun[id] {
			delete(st.pendingRun, id)
			st.pendingFreed[id] = since
		}
	}
}

// intoMark is a transfer into a folder under way: its copies get UIDs
// above prev; done closes when it has placed them (or given up). twins
// are its sources' Message-ID and size, once known (transferSources).
type intoMark struct {
	prev  int64
	done  chan struct{}
	twins map[twinID]bool
}

// twinID is what findCopies knows a copy by: copies of one message (its
// twins) share it.
type twinID struct {
	msgID string
	size  int
}

// transferInto notes a transfer into dest (whose largest UID was prev)
// under way, until the returned function is called (more than once is
// allowed); mark is the transfer's, for transferSources and findCopies.
func (st *Store) transferInto(user, dest string, prev int64) (done func(), mark *intoMark) {
	k := mirrorKey(user, dest)
	mark = &intoMark{prev: prev, done: make(chan struct{})}
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.into == nil {
		st.into = map[string]map[*intoMark]bool{}
	}
	if st.into[k] == nil {
		st.into[k] = map[*intoMark]bool{}
	}
	st.into[k][mark] = true
	var once sync.Once
	return func() {
		once.Do(func() {
			st.mu.Lock()
			defer st.mu.Unlock()
			delete(st.into[k], mark)
			if len(st.into[k]) == 0 {
				delete(st.into, k)
			}
			close(mark.done)
		})
	}, mark
}

// transferSources notes what the sources of the transfer of mark are
// known by (their metadata, metas).
func (st *Store) transferSources(mark *intoMark, metas []*directapi.MessageDetail) {
	st.mu.Lock()
	defer st.mu.Unlock()
	mark.twins = map[twinID]bool{}
	for _, d := range metas {
		if MetaKnown(d) {
			mark.twins[twinID{d.MsgID, d.Size}] = true
		}
	}
}

// twinElsewhere reports whether another transfer under way into the
// folder (not self's) copies a message of the same Message-ID and size
// as one of src: its copy may be the one findCopies takes for src's.
func (st *Store) twinElsewhere(user, folder string, self *intoMark, src []copied) bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	for mark := range st.into[mirrorKey(user, folder)] {
		if mark == self {
			continue
		}
		for _, cp := range src {
			if cp.Meta != nil && mark.twins[twinID{cp.Meta.MsgID, cp.Meta.Size}] {
				return true
			}
		}
	}
	return false
}

// transferFloor is the lowest UID a transfer under way into the folder
// may give its copies (above the smallest prev); ok is false when none
// runs.
func (st *Store) transferFloor(user, folder string) (floor int64, ok bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	for mark := range st.into[mirrorKey(user, folder)] {
		if !ok || mark.prev+1 < floor {
			floor, ok = mark.prev+1, true
		}
	}
	return floor, ok
}

// awaitTransfersInto waits, within ctx, for the transfers under way into
// the folder that may have made any of uids (ascending): a copy whose
// flags its transfer has yet to write must not be copied or moved on
// without them (the flags would go to a message no longer there). A
// transfer waits here before it notes its own (transferInto), so no two
// wait for each other.
func (st *Store) awaitTransfersInto(ctx context.Context, user, folder string, uids []imap.UID) error {
	if len(uids) == 0 {
		return nil
	}
	top := int64(uids[len(uids)-1])
	st.mu.Lock()
	var wait []chan struct{}
	for mark := range st.into[mirrorKey(user, folder)] {
		if mark.prev < top {
			wait = append(wait, mark.done)
		}
	}
	st.mu.Unlock()
	return awaitAll(ctx, wait)
}

// claimTTL is how long a transfer's claim on its copies' UIDs lasts: by
// then a refresh has shown them, or they are gone.
const claimTTL = 10 * time.Minute

// claim notes the UIDs a transfer paired with its copies in folder, and
// forgets claims past claimTTL.
func (st *Store) claim(user, folder string, uids []imap.UID) {
	now := time.Now()
	k := mirrorKey(user, folder)
	st.mu.Lock()
	defer st.mu.Unlock()
	for fk, set := range st.claimed {
		for u, at := range set {
			if now.Sub(at) > claimTTL {
				delete(set, u)
			}
		}
		if len(set) == 0 {
			delete(st.claimed, fk)
		}
	}
	if st.claimed == nil {
		st.claimed = map[string]map[imap.UID]time.Time{}
	}
	if st.claimed[k] == nil {
		st.claimed[k] = map[imap.UID]time.Time{}
	}
	for _, u := range uids {
		st.claimed[k][u] = now
	}
}

// unclaimAll forgets the claims on a folder's UIDs (renumbered).
func (st *Store) unclaimAll(user, folder string) {
	st.mu.Lock()
	defer st.mu.Unlock()
	delete(st.claimed, mirrorKey(user, folder))
}

// unclaimedOf returns uids without those a transfer of this process
// paired with its copies (claim).
func (st *Store) unclaimedOf(user, folder string, uids []imap.UID) []imap.UID {
	claimed := st.claimedIn(user, folder)
	if len(claimed) == 0 {
		return uids
	}
	return slices.DeleteFunc(slices.Clone(uids), func(u imap.UID) bool { return claimed[u] })
}

// claimedIn returns the UIDs of folder that transfers of this process
// paired with their copies (claim), within claimTTL.
func (st *Store) claimedIn(user, folder string) map[imap.UID]bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	set := st.claimed[mirrorKey(user, folder)]
	if len(set) == 0 {
		return nil
	}
	now := time.Now()
	out := make(map[imap.UID]bool, len(set))
	for u, at := range set {
		if now.Sub(at) <= claimTTL {
			out[u] = true
		}
	}
	return out
}

// pendingState tells whether a transfer of this process still runs for
// the entry (held), and otherwise since when the entry waits for a
// refresh: the end of its transfer (its hold, when the outcome was not
// known), or, for one an earlier process left (killed during a transfer
// the provider may carry out late), this process's start and the hold.
func (st *Store) pendingState(id int64) (held bool, since time.Time) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.pendingRun[id] {
		return true, time.Time{}
	}
	if at, ok := st.pendingFreed[id]; ok {
		return false, at
	}
	return false, st.startedAt.Add(st.cfg.AttemptHold)
}

// pendingFlagsFor finds, for messages new to the folder (added,
// ascending), the flags written down for them before a copy or move whose
// end the bridge did not see (it was killed, or the new UIDs could not be
// paired): matched by Message-ID and size, one match each, oldest entry
// first. The flags go into kept, which the refresh shows, and into w,
// which the refresh writes with the rest of what it learnt (one
// transaction, see doRefresh). It costs a state-store read per refresh
// that found new messages, and a provider call for the new messages'
// metadata only when flags wait.
func (m *Folder) pendingFlagsFor(ctx context.Context, auth upstream.Auth, added []imap.UID, kept map[uint32][]string, w *state.RefreshWrite) error {
	// New UIDs a transfer under way may have given its copies are its to
	// flag (placeCopies adds the sources' flags): an entry left by an
	// earlier transfer of the same message must not add its flags too.
	if floor, ok := m.store.transferFloor(m.user, m.name); ok {
		added = slices.DeleteFunc(slices.Clone(added), func(u imap.UID) bool { return int64(u) >= floor })
	}
	// Copies a transfer paired have their flags from it; one not shown
	// yet (its mirror lacked a UID below them, addCopies) is new to this
	// refresh, and must not take the flags another transfer wrote down
	// for a copy of the same message (model seed 817: a keyword moved
	// from one copy to its twin).
	added = m.store.unclaimedOf(m.user, m.name, added)
	if len(added) == 0 {
		return nil
	}
	st := m.store
	pend, err := st.cfg.State.PendingFlagsOf(ctx, m.user, m.name)
	if err != nil || len(pend) == 0 {
		return err
	}
	var details []directapi.MessageDetail
	if len(added) <= fewByUID {
		details, err = st.cfg.Provider.Messages(ctx, auth, m.name, uidList(added))
	} else {
		details, err = st.cfg.Provider.Metadata(ctx, auth, m.name)
	}
	if err != nil {
		return err
	}
	// An entry is for the first refresh that lists the folder after its
	// transfer ended (or, left by an earlier process, after this one
	// started): its copies are new to that one, if they exist. Later it is
	// stale (the copies were shown without it, or never made) and is
	// dropped, or it would give its flags to the next message of the same
	// Message-ID and size, another copy of the same message, say.
	m.mu.Lock()
	listedAt := m.lastStart
	if m.lastListed.After(listedAt) {
		listedAt = m.lastListed
	}
	m.mu.Unlock()
	live := pend[:0]
	var stale []int64
	for _, p := range pend {
		held, since := st.pendingState(p.ID)
		switch {
		case held:
			// A transfer of this process still runs and places its own
			// copies' flags: the entry is for a bridge killed during one
			// (messages of the same Message-ID and size, copied twice,
			// must not take each other's flags).
		case listedAt.After(since):
			stale = append(stale, p.ID)
		default:
			live = append(live, p)
		}
	}
	w.DropPending = append(w.DropPending, stale...)
	st.forgetPending(stale)
	if pend = live; len(pend) == 0 {
		return nil
	}
	isNew := make(map[int64]bool, len(added))
	for _, u := range added {
		isNew[int64(u)] = true
	}
	slices.SortFunc(details, func(a, b directapi.MessageDetail) int { return cmp.Compare(a.UID, b.UID) })
	n := 0
	for _, p := range pend {
		for i, d := range details {
			if isNew[d.UID] && d.MsgID == p.MsgID && d.Size == p.Size && len(kept[uint32(d.UID)]) == 0 {
				kept[uint32(d.UID)] = p.Flags
				if w.Flags == nil {
					w.Flags = map[uint32][]string{}
				}
				w.Flags[uint32(d.UID)] = p.Flags
				w.DropPending = append(w.DropPending, p.ID)
				details = slices.Delete(details, i, i+1)
				n++
				break
			}
		}
	}
	if n > 0 {
		st.cfg.Logger.Info("imap copy: flags written down before a copy applied to its messages", "user", m.user, "messages", n)
	}
	return nil
}
