package mailstore

import (
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/emersion/go-imap/v2"

	"github.com/directbridge/directbridge/internal/seqview"
	"github.com/directbridge/directbridge/internal/state"
	"github.com/directbridge/directbridge/upstream"
)

// FlagUpdate is a change of one message's flags.
type FlagUpdate struct {
	UID imap.UID
	// Seen is the wanted \Seen state; nil leaves it as it is.
	Seen *bool
	// SeenNamed: the client named \Seen explicitly (STORE +FLAGS or
	// -FLAGS). The mirror may be behind the provider, so it is brought
	// within seenFresh of it before it decides that nothing is to be done
	// (readStateFresh); a mirror whose read state is in doubt does not
	// decide, and the provider is told.
	SeenNamed bool
	// Kept changes the other flags (those the state store keeps); nil
	// leaves them. It is a change, not a set: it applies to the flags
	// kept at the moment it is written, so that +FLAGS and -FLAGS of two
	// sessions at once never undo each other.
	Kept *KeptChange
}

// KeptChange is a change of the flags other than \Seen: Replace sets
// them to Add (STORE FLAGS); otherwise Add is added and Del taken away
// (STORE +FLAGS, -FLAGS).
type KeptChange struct {
	Replace  bool
	Add, Del []imap.Flag
}

// applyTo is kept changed by c, as the state store applies it.
func (c *KeptChange) applyTo(kept []imap.Flag) []imap.Flag {
	return canonicalFlags(state.ApplyFlagChange(flagStrings(kept), c.storeChange(0)))
}

func (c *KeptChange) storeChange(uid imap.UID) state.FlagChange {
	return state.FlagChange{UID: uint32(uid), Replace: c.Replace, Add: flagStrings(c.Add), Del: flagStrings(c.Del)}
}

// shown is a flag change as the mirror shows it: \Seen, and the whole
// set of kept flags as the state store holds them after the change.
type shown struct {
	UID     imap.UID
	Seen    *bool
	Kept    []imap.Flag
	SetKept bool
}

// ApplyFlags changes flags of messages of folder as ups ask: \Seen at
// the provider (at most one call per direction), the other flags in the
// state store under validity (one transaction, each change applied to
// the set kept at that moment), then in mirror m when m is not nil,
// queueing FETCH FLAGS for every connection that has the folder selected
// except source.
//
// A provider refusal because some UID is gone (the provider refuses the
// whole request then) is retried with the UIDs that remain
// (mutateExisting); messages gone are left out, as RFC 2180 §4.2.1
// allows. The UIDs whose change was carried out are returned.
func (st *Store) ApplyFlags(ctx context.Context, auth upstream.Auth, folder string, validity uint32, m *Folder, ups []FlagUpdate, source *seqview.View) ([]imap.UID, error) {
	if m != nil {
		// A copy a transfer under way made may be shown before its
		// flags are placed (a refresh holds nothing back while an
		// APPEND waits for its UID, holdBackLocked); the transfer adds
		// its source's flags to whatever the copy holds then, which
		// would undo a change made here meanwhile: the STORE, which
		// saw the copy, comes after it (doc.go, rule 6).
		uids := make([]imap.UID, len(ups))
		for i, u := range ups {
			uids[i] = u.UID
		}
		slices.Sort(uids)
		if err := st.awaitTransfersInto(ctx, m.user, m.name, uids); err != nil {
			return nil, err
		}
	}
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
		// Appended \Seen, shown read, but not yet marked at the provider
		// (arrivals.go): not read there yet.
		waiting := make(map[imap.UID]bool, len(m.unmarked))
		for _, u := range m.unmarked {
			waiting[u] = true
		}
		m.mu.Unlock()
		if mb == nil {
			return out
		}
		for _, u := range ups {
			if fl, ok := mb.Flags(u.UID); ok {
				out[u.UID] = cur{true, HasSeen(fl) && !waiting[u.UID], KeptOf(fl)}
			}
		}
		return out
	}
	ups = slices.Clone(ups)
	if m != nil {
		// A message appended \Seen and marked unread since: the client's
		// later choice wins over the read marking that waits (arrivals.go).
		var unread []imap.UID
		for _, u := range ups {
			if u.Seen != nil && !*u.Seen {
				unread = append(unread, u.UID)
			}
		}
		m.mu.Lock()
		m.dropUnmarkedLocked(unread)
		m.mu.Unlock()
	}
	c := st.cfg.Provider
	// A STORE that names \Seen for messages the mirror shows so already
	// makes no call when the mirror's read state is the provider's.
	trusted := false
	if m != nil {
		mirror := current()
		trusted = slices.ContainsFunc(ups, func(u FlagUpdate) bool {
			cs := mirror[u.UID]
			return u.SeenNamed && u.Seen != nil && cs.known && cs.seen == *u.Seen
		}) && m.readStateFresh(ctx)
	}
	for _, read := range []bool{true, false} {
		// Two sessions that mark one message read and unread at once:
		// the mirror must end as the provider does, so each direction's
		// call and its showing are one step per folder (seenMu).
		if m != nil {
			if err := m.seenMu.Lock(ctx); err != nil {
				return nil, err
			}
		}
		mirror := current()
		// Still exact: a read marking that failed meanwhile, a copy or
		// an arrival may have made it a guess (readInferredLocked).
		exact := trusted && m.readExactNow()
		var uids []imap.UID
		for _, u := range ups {
			cs := mirror[u.UID]
			if u.Seen != nil && *u.Seen == read && (u.SeenNamed && !exact || !cs.known || cs.seen != read) {
				uids = append(uids, u.UID)
			}
		}
		if len(uids) == 0 {
			if m != nil {
				m.seenMu.Unlock()
			}
			continue
		}
		mark := func(u []int64) error { return c.SetRead(ctx, auth, folder, u, read) }
		var done []imap.UID
		var err error
		if m != nil {
			done, err = m.mutateExisting(ctx, auth, uids, mark)
		} else {
			done, err = uids, mark(uidList(uids))
		}
		if err != nil {
			if m != nil {
				// The failed call may have been carried out in part or
				// in whole (an answer lost): the mirror learns the
				// provider's read state again (after seenMu: a refresh
				// takes it).
				m.readUnsureNow()
				m.seenMu.Unlock()
				m.resync(ctx, "after a failed read marking")
			}
			return nil, err
		}
		if m != nil {
			r := read
			shownNow := make([]shown, len(done))
			for i, u := range done {
				shownNow[i] = shown{UID: u, Seen: &r}
			}
			m.show(shownNow, source)
			m.seenMu.Unlock()
		}
		if len(done) != len(uids) {
			asked := make(map[imap.UID]bool, len(uids))
			for _, u := range uids {
				asked[u] = true
			}
			for _, u := range done {
				asked[u] = false
			}
			ups = slices.DeleteFunc(ups, func(u FlagUpdate) bool { return asked[u.UID] })
		}
	}

	mirror := current()
	var changes []state.FlagChange
	for _, u := range ups {
		if u.Kept == nil {
			continue
		}
		// A change the mirror shows done already costs no write.
		if cs := mirror[u.UID]; cs.known && slices.Equal(u.Kept.applyTo(cs.kept), cs.kept) {
			continue
		}
		changes = append(changes, u.Kept.storeChange(u.UID))
	}
	var storeErr error
	switch {
	case len(changes) == 0:
	case m != nil:
		// The write and its showing are one step per folder, in groups
		// (keptwrites.go): two sessions' changes show in the order the
		// store made them, so the mirror ends with the set the store
		// holds.
		_, storeErr = m.writeKept(ctx, auth.Username, validity, changes, ups, source)
	default:
		_, storeErr = st.cfg.State.ChangeFlags(ctx, strings.ToLower(auth.Username), folder, validity, changes)
	}
	out := make([]imap.UID, 0, len(ups))
	for _, u := range ups {
		out = append(out, u.UID)
	}
	if storeErr != nil {
		// The provider already changed \Seen: that shows; the other
		// flags stay as they were.
		return nil, storeErr
	}
	return out, nil
}

// show puts flag changes into the mirror (seqview.Mailbox.SetFlags),
// which gives every view but source a FETCH FLAGS for each message whose
// flags changed (RFC 9051 §7.5.2: other connections learn of changes as
// unsolicited FETCH responses), and before them a FLAGS response when a
// keyword new to the folder appeared (RFC 9051 §7.3.5). It raises the
// mirror's version, so an older refresh does not undo the change.
func (m *Folder) show(ups []shown, source *seqview.View) {
	m.showVersioned(ups, source, true)
}

// showOwn is show for a change a refresh made itself after its reads
// (its read marking): the version is not raised (see markListedRead).
func (m *Folder) showOwn(ups []shown) {
	m.showVersioned(ups, nil, false)
}

func (m *Folder) showVersioned(ups []shown, source *seqview.View, bump bool) {
	if len(ups) == 0 {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.loaded {
		return
	}
	if bump {
		m.version++
	}
	var changes []seqview.FlagChange
	seen := map[imap.UID]bool{} // \Seen as this batch leaves it
	for _, u := range ups {
		if u.Seen != nil {
			op := imap.StoreFlagsDel
			if *u.Seen {
				op = imap.StoreFlagsAdd
			}
			seen[u.UID] = *u.Seen
			changes = append(changes, seqview.FlagChange{UID: u.UID, Op: op, Flags: []imap.Flag{imap.FlagSeen}})
		}
		if u.SetKept {
			fl, ok := m.mb.Flags(u.UID)
			if !ok {
				continue
			}
			read, set := seen[u.UID]
			if !set {
				read = HasSeen(fl)
			}
			changes = append(changes, seqview.FlagChange{UID: u.UID, Op: imap.StoreFlagsSet, Flags: withSeen(u.Kept, read)})
		}
	}
	m.showFlagsLocked(source, changes)
}

// seenFresh is how old the provider's list of unread messages may be
// for a STORE that names \Seen to take the mirror's word that a message
// is read (or unread) already, and make no call. fetchmail marks every
// message it downloaded read, whether it was or not: 2,300 calls a run
// when each was told to the provider (issue 22); with this, one refresh
// that reads the list (three calls) every half minute at most.
//
// The price: a read state another client set since the list was read,
// which the bridge has not seen yet, is not undone by such a STORE; it
// stands as if it had come right after the STORE, and the client sees it
// at the next refresh. A list read but not applied (commands changed
// the mirror meanwhile) ends the trust, as it may show such a change.
const seenFresh = 30 * time.Second

// readStateFresh reports whether the mirror's read state is the
// provider's (readExact), as of a list of unread messages read less than
// seenFresh ago: when not, it asks for one (a refresh that reads it,
// shared with none under way that does not), at most once per seenFresh
// while the folder keeps changing under it. A read state the unread count
// only suggests is not enough: a change made elsewhere that keeps the
// count (one message read and another unread between two refreshes), or
// a copy whose source's state was inferred, would leave the message as
// the client did not ask, with the command answered OK.
func (m *Folder) readStateFresh(ctx context.Context) bool {
	m.mu.Lock()
	exact := m.readExactLocked()
	try := !exact && time.Since(m.exactTried) >= seenFresh && m.readUnsure <= m.readSure
	if try {
		m.exactTried = time.Now()
		m.wantList = true // the refresh below reads the list (doRefresh)
	}
	m.mu.Unlock()
	if exact {
		return true
	}
	if !try || m.refresh(ctx, time.Now(), false) != nil {
		return false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return !m.readExact.IsZero()
}

// readExactNow reports whether the mirror's read state is still the
// provider's as of a list read less than seenFresh ago.
func (m *Folder) readExactNow() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.readExactLocked()
}

func (m *Folder) readExactLocked() bool {
	return !m.readExact.IsZero() && time.Since(m.readExact) < seenFresh
}

// readInferredLocked notes that the mirror's read state may no longer be
// the provider's (Folder.readExact).
func (m *Folder) readInferredLocked() { m.readExact = time.Time{} }

// readUnsureNow notes a read marking that failed (Folder.readUnsure).
func (m *Folder) readUnsureNow() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.readUnsure++
	m.readInferredLocked()
}

// ReadUnsure reports that a read marking failed since the provider's
// read state was last read (Folder.readUnsure): the \Seen the mirror
// shows may be wrong either way, so a FETCH that sets \Seen marks every
// message it reads, not only those shown unread.
func (m *Folder) ReadUnsure() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.readUnsure > m.readSure
}

// mutateExisting runs a provider operation that changes messages. The
// provider refuses the whole request when any UID is gone (another client
// removed it since the last refresh); then the folder's UIDs are listed
// (one GetUIDs, never a refresh: mutateExisting runs inside refreshes
// too, and a refresh must never wait on a refresh, see doc.go), the UIDs
// gone are taken out of the mirror (remove: the sessions get their
// EXPUNGE), and the operation is tried again with the UIDs that remain,
// as long as each round takes some away (ten clients expunging in one
// folder, as imaptest does, can take a UID away again between the
// listing and the retry) and at most mutateRetries times. It returns the
// UIDs the operation was carried out for.
//
// A refusal after part of a batched request went through (PartialError)
// is not retried: the operation may not be repeatable (a copy would be
// made twice).
func (m *Folder) mutateExisting(ctx context.Context, auth upstream.Auth, uids []imap.UID, op func([]int64) error) ([]imap.UID, error) {
	err := op(uidList(uids))
	for attempt := 0; err != nil && uidMissing(err) && attempt < mutateRetries; attempt++ {
		listed, lerr := m.store.cfg.Provider.UIDs(ctx, auth, m.name)
		if lerr != nil {
			// Which UIDs remain cannot be told: the listing's error
			// (the provider unreachable, say) is the one to answer.
			return nil, lerr
		}
		there := make(map[imap.UID]bool, len(listed))
		for _, p := range listed {
			if p > 0 && p <= MaxUID {
				there[imap.UID(p)] = true
			}
		}
		var still, vanished []imap.UID
		for _, u := range uids {
			if there[u] {
				still = append(still, u)
			} else {
				vanished = append(vanished, u)
			}
		}
		if len(vanished) == 0 {
			return nil, err // every UID exists: the refusal is about something else
		}
		m.remove(ctx, m.Validity(), vanished)
		if len(still) == 0 {
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

// mutateRetries bounds the times a change refused for a vanished UID is
// tried again with the UIDs that remain (each time fewer).
const mutateRetries = 16

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

// HasSeen tells whether flags hold \Seen.
func HasSeen(flags []imap.Flag) bool { return slices.Contains(flags, imap.FlagSeen) }

// KeptOf is flags without \Seen: what the state store keeps.
func KeptOf(flags []imap.Flag) []imap.Flag {
	return slices.DeleteFunc(slices.Clone(flags), func(f imap.Flag) bool { return f == imap.FlagSeen })
}

// withSeen is kept flags plus \Seen when read, as mb holds them.
func withSeen(keptFlags []imap.Flag, read bool) []imap.Flag {
	if read {
		return append(slices.Clone(keptFlags), imap.FlagSeen)
	}
	return keptFlags
}

// canonicalFlags turns stored flag texts into canonical IMAP flags: system
// flags in their RFC 9051 §2.3.2 spelling (mbsync and offlineimap undo
// lower-case ones), keywords as written, sorted, without duplicates or \Seen
// and \Recent, which the bridge never stores.
func canonicalFlags(fl []string) []imap.Flag {
	out := make([]imap.Flag, 0, len(fl))
	for _, f := range fl {
		c := CanonicalFlag(imap.Flag(f))
		if c == imap.FlagSeen || c == "\\Recent" || c == "" {
			continue
		}
		out = append(out, c)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

var systemFlags = []imap.Flag{imap.FlagSeen, imap.FlagAnswered, imap.FlagFlagged, imap.FlagDeleted, imap.FlagDraft,
	imap.FlagForwarded, imap.FlagMDNSent, imap.FlagJunk, imap.FlagNotJunk, imap.FlagPhishing, imap.FlagImportant}

// CanonicalFlag spells system flags and well-known keywords as the RFCs do.
func CanonicalFlag(f imap.Flag) imap.Flag {
	for _, s := range systemFlags {
		// Same length: ASCII case folding only (a non-ASCII letter
		// that folds to an ASCII one is longer in bytes).
		if len(s) == len(f) && strings.EqualFold(string(s), string(f)) {
			return s
		}
	}
	return f
}

// IsSystemFlag reports a system flag RFC 9051 §2.3.2 (or a registered
// keyword of the same spelling rules) knows, canonically spelled.
func IsSystemFlag(f imap.Flag) bool { return slices.Contains(systemFlags, f) }

// MarkRead sets \Seen on messages at the provider, as a FETCH of a body
// section does (RFC 9051 §6.4.5), and shows it to every connection but
// source. Messages that vanished at the provider are left out and the
// rest marked (RFC 2180 §4.1: the FETCH answers what it can), so one
// message removed by another client never fails the whole command. It
// returns the UIDs marked.
func (m *Folder) MarkRead(ctx context.Context, auth upstream.Auth, uids []imap.UID, source *seqview.View) ([]imap.UID, error) {
	mark := func(u []int64) error { return m.store.cfg.Provider.SetRead(ctx, auth, m.name, u, true) }
	if err := m.seenMu.Lock(ctx); err != nil { // ordered with other sessions' \Seen changes (ApplyFlags)
		return nil, err
	}
	done, err := m.mutateExisting(ctx, auth, uids, mark)
	if err != nil {
		m.readUnsureNow()
		m.seenMu.Unlock()
		// Carried out in part or whole, perhaps (an answer lost): the
		// mirror learns the provider's read state again.
		m.resync(ctx, "after a failed read marking")
		return nil, err
	}
	read := true
	ups := make([]shown, len(done))
	for i, u := range done {
		ups[i] = shown{UID: u, Seen: &read}
	}
	m.show(ups, source)
	m.seenMu.Unlock()
	return done, nil
}
