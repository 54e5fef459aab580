package imapbackend

import (
	"context"
	"errors"
	"slices"
	"strings"

	"github.com/directbridge/directbridge/seqview"
	"github.com/directbridge/directbridge/upstream"
	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapserver"
)

// Flags live in two places. \Seen is the provider's read/unread state and
// is changed with MarkMessagesAsReadByUIDs and MarkMessagesAsUnreadByUIDs.
// Every other flag (\Flagged, \Answered, \Draft, \Deleted, $Forwarded, any
// keyword) is kept by the bridge in its state store per user, folder,
// UIDVALIDITY and UID, always in canonical spelling, because mbsync and
// offlineimap undo flags that come back in another case than they wrote.
//
// Rule for everything that changes messages of a mirror (here and in
// copy.go, expunge.go, append.go, fetch.go): ask the provider first, with
// no lock held, then show the change in the mirror and raise its version
// (showFlags, removeMessages). A refresh whose answers were read before
// the change then leaves it alone (mirror.apply), so it can neither undo
// a flag change nor take a removed UID for a renumbering.

// wantedFlags checks and canonicalises the flags of a STORE or APPEND:
// system flags in their RFC 9051 §2.3.2 spelling, \Recent dropped (RFC
// 3501 §2.3.2: it is the server's and cannot be stored), other flags that
// start with a backslash refused (they are not keywords, RFC 9051 §9
// flag-extension). seen says whether \Seen was named; kept is the rest,
// sorted, without duplicates (keywords compare case-insensitively, RFC
// 9051 §9 note 1).
func wantedFlags(in []imap.Flag) (seen bool, kept []imap.Flag, err error) {
	for _, f := range in {
		c := canonicalFlag(f)
		switch {
		case c == imap.FlagSeen:
			seen = true
			continue
		case equalFold(string(c), `\Recent`):
			continue
		case strings.HasPrefix(string(c), `\`) && !slices.Contains(systemFlags, c):
			return false, nil, errBadFlag(f)
		}
		kept = addFlags(kept, c)
	}
	return seen, kept, nil
}

// addFlags returns have with the flags of add that it lacks, sorted. A
// keyword already there in another case keeps its spelling.
func addFlags(have []imap.Flag, add ...imap.Flag) []imap.Flag {
	out := slices.Clone(have)
	for _, f := range add {
		if !slices.ContainsFunc(out, func(g imap.Flag) bool { return equalFold(string(f), string(g)) }) {
			out = append(out, f)
		}
	}
	slices.Sort(out)
	return out
}

// delFlags returns have without the flags of del, in any case.
func delFlags(have []imap.Flag, del []imap.Flag) []imap.Flag {
	return slices.DeleteFunc(slices.Clone(have), func(g imap.Flag) bool {
		return slices.ContainsFunc(del, func(f imap.Flag) bool { return equalFold(string(f), string(g)) })
	})
}

// flagUpdate is the flags one message is to have.
type flagUpdate struct {
	uid imap.UID
	// seen is the wanted \Seen state; nil leaves it as it is.
	seen *bool
	// forceSeen tells the provider even when the mirror already shows the
	// wanted state: the client named \Seen explicitly, and the mirror may
	// be behind the provider.
	forceSeen bool
	// kept is the wanted set of other flags when setKept.
	kept    []imap.Flag
	setKept bool
}

// applyFlags gives messages of folder the flags ups ask for: \Seen at the
// provider (at most one call per direction), the other flags in the state
// store under validity (one transaction), then in mirror m when m is not
// nil, queueing FETCH FLAGS for every connection that has the folder
// selected except source.
//
// A provider refusal because some UID is gone (code 3: the provider
// refuses the whole request then) refreshes the mirror and retries once
// with the UIDs that remain. The updates that were carried out are
// returned.
func (s *session) applyFlags(ctx context.Context, folder string, validity uint32, m *mirror, ups []flagUpdate, source *seqview.View) ([]flagUpdate, error) {
	// The mirror's current state decides which calls are needed.
	type cur struct {
		known bool
		seen  bool
		kept  []imap.Flag
	}
	current := func() map[imap.UID]cur {
		out := make(map[imap.UID]cur, len(ups))
		if m == nil {
			return out
		}
		m.mu.Lock()
		mb := m.mb
		m.mu.Unlock()
		if mb == nil {
			return out
		}
		for _, u := range ups {
			if fl, ok := mb.Flags(u.uid); ok {
				out[u.uid] = cur{true, hasSeen(fl), keptOf(fl)}
			}
		}
		return out
	}
	ups = slices.Clone(ups)
	c := s.srv.cfg.Provider
	for _, read := range []bool{true, false} {
		state := current()
		var uids []imap.UID
		for _, u := range ups {
			cs := state[u.uid]
			if u.seen != nil && *u.seen == read && (u.forceSeen || !cs.known || cs.seen != read) {
				uids = append(uids, u.uid)
			}
		}
		if len(uids) == 0 {
			continue
		}
		mark := func(u []int64) error { return c.SetRead(ctx, s.auth, folder, u, read) }
		var done []imap.UID
		var err error
		if m != nil {
			done, err = s.mutateExisting(ctx, m, uids, mark)
		} else {
			done, err = uids, mark(uidList(uids))
		}
		if err != nil {
			if !read && m != nil {
				// The read marking went through: show it, nothing else.
				var shown []flagUpdate
				for _, u := range ups {
					if u.seen != nil && *u.seen {
						shown = append(shown, flagUpdate{uid: u.uid, seen: u.seen})
					}
				}
				m.showFlags(shown, source)
			}
			return nil, err
		}
		if len(done) != len(uids) {
			asked := make(map[imap.UID]bool, len(uids))
			for _, u := range uids {
				asked[u] = true
			}
			for _, u := range done {
				asked[u] = false
			}
			ups = slices.DeleteFunc(ups, func(u flagUpdate) bool { return asked[u.uid] })
		}
	}

	state := current()
	kept := map[uint32][]string{}
	for _, u := range ups {
		if cs := state[u.uid]; u.setKept && (!cs.known || !slices.Equal(cs.kept, u.kept)) {
			kept[uint32(u.uid)] = flagStrings(u.kept)
		}
	}
	var storeErr error
	if len(kept) > 0 {
		if storeErr = s.srv.cfg.Store.SetFlags(ctx, s.auth.Username, folder, validity, kept); storeErr != nil {
			// The provider already changed \Seen: show that, and keep
			// the other flags as they were.
			for i := range ups {
				ups[i].setKept = false
			}
		}
	}
	if m != nil {
		m.showFlags(ups, source)
	}
	return ups, storeErr
}

// showFlags puts flag updates into the mirror (seqview.Mailbox.SetFlags),
// which gives every view but source a FETCH FLAGS for each message whose
// flags changed (RFC 9051 §7.5.2: other connections learn of changes as
// unsolicited FETCH responses), and before them a FLAGS response when a
// keyword new to the folder appeared (RFC 9051 §7.3.5). It raises the
// mirror's version, so an older refresh does not undo the change.
func (m *mirror) showFlags(ups []flagUpdate, source *seqview.View) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.loaded {
		return
	}
	m.version++
	var changes []seqview.FlagChange
	for _, u := range ups {
		if u.seen != nil {
			op := imap.StoreFlagsDel
			if *u.seen {
				op = imap.StoreFlagsAdd
			}
			changes = append(changes, seqview.FlagChange{UID: u.uid, Op: op, Flags: []imap.Flag{imap.FlagSeen}})
		}
		if u.setKept {
			fl, ok := m.mb.Flags(u.uid)
			if !ok {
				continue
			}
			want := withSeen(u.kept, hasSeen(fl))
			if u.seen != nil {
				want = withSeen(u.kept, *u.seen)
			}
			changes = append(changes, seqview.FlagChange{UID: u.uid, Op: imap.StoreFlagsSet, Flags: want})
		}
	}
	m.mb.SetFlags(source, changes...)
}

// mutateExisting runs a provider operation that changes messages. The
// provider refuses the whole request when any UID is gone (another client
// removed it since the last refresh); then the mirror is refreshed (which
// queues the EXPUNGEs) and the operation tried again, a few times, with
// the UIDs that remain. It returns the UIDs the operation was carried out for.
//
// A refusal after part of a batched request went through (PartialError)
// is not retried: the operation may not be repeatable (a copy would be
// made twice).
func (s *session) mutateExisting(ctx context.Context, m *mirror, uids []imap.UID, op func([]int64) error) ([]imap.UID, error) {
	err := op(uidList(uids))
	// Commands of other connections change the folder at the same time
	// (nothing is locked across provider calls), so a UID may vanish
	// again between the refresh and the retry: a few rounds.
	for attempt := 0; err != nil && uidMissing(err) && attempt < mutateRetries; attempt++ {
		if serr := m.sync(ctx); serr != nil {
			if errors.Is(serr, errFolderGone) {
				return nil, serr
			}
			return nil, err
		}
		m.mu.Lock()
		still := slices.DeleteFunc(slices.Clone(uids), func(u imap.UID) bool { return !m.live(u) })
		m.mu.Unlock()
		switch {
		case len(still) == len(uids):
			return nil, err // every UID exists: the refusal is about something else
		case len(still) == 0:
			return nil, nil
		}
		uids = still
		err = op(uidList(uids))
	}
	if err != nil {
		return nil, err
	}
	return uids, nil
}

// mutateRetries is how many times a change refused for a vanished UID is
// tried again with the UIDs that remain.
const mutateRetries = 3

// uidMissing reports the provider's refusal of a request ("other error"),
// which it gives when a UID is gone. A request partly carried out is
// ErrUnknownOutcome, not a refusal.
func uidMissing(err error) bool {
	return errors.Is(err, upstream.ErrRefused)
}

func uidList(uids []imap.UID) []int64 {
	out := make([]int64, len(uids))
	for i, u := range uids {
		out[i] = int64(u)
	}
	return out
}

func flagStrings(fl []imap.Flag) []string {
	out := make([]string, len(fl))
	for i, f := range fl {
		out[i] = string(f)
	}
	return out
}

// Store changes flags (STORE and UID STORE, RFC 9051 §6.4.6 and §6.4.9).
// \Seen goes to the provider in one call per direction for all messages;
// every other flag goes to the state store in one transaction. Unless
// .SILENT, the new flags are answered as FETCH responses, with the UID for
// UID STORE (RFC 9051 §6.4.9 requires it there). Other connections get
// FETCH FLAGS at their next command or while idling.
func (s *session) Store(w *imapserver.FetchWriter, numSet imap.NumSet, flags *imap.StoreFlags, options *imap.StoreOptions) error {
	if options != nil && options.UnchangedSince != 0 {
		return errNoCondStore
	}
	if s.readOnly {
		return errReadOnly
	}
	seenNamed, req, err := wantedFlags(flags.Flags)
	if err != nil {
		return err
	}
	m := s.sel
	ctx, cancel := s.ctx()
	defer cancel()
	m.mu.Lock()
	gone, validity := m.gone, m.validity
	m.mu.Unlock()
	ts, err := s.targets(numSet)
	if err != nil {
		return err
	}
	ups := make([]flagUpdate, 0, len(ts))
	for _, t := range ts {
		if !t.live {
			// Expunged meanwhile: nothing to change (RFC 2180 §4.2.1);
			// the EXPUNGE follows at the next command that allows it.
			continue
		}
		u := flagUpdate{uid: t.msg.uid, setKept: true}
		now := keptOf(s.flagsOf(t.msg.uid))
		var read bool
		switch flags.Op {
		case imap.StoreFlagsSet:
			read, u.kept = seenNamed, req
			u.seen = &read
		case imap.StoreFlagsAdd:
			u.kept = addFlags(now, req...)
			if seenNamed {
				read, u.forceSeen = true, true
				u.seen = &read
			}
		case imap.StoreFlagsDel:
			u.kept = delFlags(now, req)
			if seenNamed {
				read, u.forceSeen = false, true
				u.seen = &read
			}
		}
		ups = append(ups, u)
	}
	if gone != nil {
		return imapError(gone)
	}
	if len(ups) == 0 {
		return nil
	}
	done, err := s.applyFlags(ctx, m.name, validity, m, ups, s.view)
	if err != nil {
		return imapError(err)
	}
	if flags.Silent {
		return nil
	}
	// The answer: a FETCH FLAGS for every message stored, queued to this
	// connection's view after any FLAGS response the STORE caused, so that
	// go-imap's poll right after the command writes FLAGS first and then
	// the FETCHes, with the UID (RFC 9051 §6.4.9 requires it for UID
	// STORE) and the flags as they are now.
	uids := make([]imap.UID, len(done))
	for i, u := range done {
		uids[i] = u.uid
	}
	s.view.QueueFetch(uids...)
	return nil
}
