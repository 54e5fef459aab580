package mailstore

import (
	"context"
	"errors"
	"slices"
	"strings"

	"github.com/emersion/go-imap/v2"

	"github.com/directbridge/directbridge/seqview"
	"github.com/directbridge/directbridge/upstream"
)

// FlagUpdate is the flags one message is to have.
type FlagUpdate struct {
	UID imap.UID
	// Seen is the wanted \Seen state; nil leaves it as it is.
	Seen *bool
	// ForceSeen tells the provider even when the mirror already shows the
	// wanted state: the client named \Seen explicitly, and the mirror may
	// be behind the provider.
	ForceSeen bool
	// Kept is the wanted set of other flags when SetKept.
	Kept    []imap.Flag
	SetKept bool
}

// ApplyFlags gives messages of folder the flags ups ask for: \Seen at the
// provider (at most one call per direction), the other flags in the state
// store under validity (one transaction), then in mirror m when m is not
// nil, queueing FETCH FLAGS for every connection that has the folder
// selected except source.
//
// A provider refusal because some UID is gone (code 3: the provider
// refuses the whole request then) refreshes the mirror and retries once
// with the UIDs that remain. The updates that were carried out are
// returned.
func (st *Store) ApplyFlags(ctx context.Context, auth upstream.Auth, folder string, validity uint32, m *Folder, ups []FlagUpdate, source *seqview.View) ([]FlagUpdate, error) {
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
			if fl, ok := mb.Flags(u.UID); ok {
				out[u.UID] = cur{true, HasSeen(fl), KeptOf(fl)}
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
	for _, read := range []bool{true, false} {
		state := current()
		var uids []imap.UID
		for _, u := range ups {
			cs := state[u.UID]
			if u.Seen != nil && *u.Seen == read && (u.ForceSeen || !cs.known || cs.seen != read) {
				uids = append(uids, u.UID)
			}
		}
		if len(uids) == 0 {
			continue
		}
		mark := func(u []int64) error { return c.SetRead(ctx, auth, folder, u, read) }
		var done []imap.UID
		var err error
		if m != nil {
			done, err = m.MutateExisting(ctx, uids, mark)
		} else {
			done, err = uids, mark(UIDList(uids))
		}
		if err != nil {
			if !read && m != nil {
				// The read marking went through: show it, nothing else.
				var shown []FlagUpdate
				for _, u := range ups {
					if u.Seen != nil && *u.Seen {
						shown = append(shown, FlagUpdate{UID: u.UID, Seen: u.Seen})
					}
				}
				m.ShowFlags(shown, source)
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
			ups = slices.DeleteFunc(ups, func(u FlagUpdate) bool { return asked[u.UID] })
		}
	}

	state := current()
	kept := map[uint32][]string{}
	for _, u := range ups {
		if cs := state[u.UID]; u.SetKept && (!cs.known || !slices.Equal(cs.kept, u.Kept)) {
			kept[uint32(u.UID)] = FlagStrings(u.Kept)
		}
	}
	var storeErr error
	if len(kept) > 0 {
		if storeErr = st.cfg.State.SetFlags(ctx, auth.Username, folder, validity, kept); storeErr != nil {
			// The provider already changed \Seen: show that, and keep
			// the other flags as they were.
			for i := range ups {
				ups[i].SetKept = false
			}
		}
	}
	if m != nil {
		m.ShowFlags(ups, source)
	}
	return ups, storeErr
}

// ShowFlags puts flag updates into the mirror (seqview.Mailbox.SetFlags),
// which gives every view but source a FETCH FLAGS for each message whose
// flags changed (RFC 9051 §7.5.2: other connections learn of changes as
// unsolicited FETCH responses), and before them a FLAGS response when a
// keyword new to the folder appeared (RFC 9051 §7.3.5). It raises the
// mirror's version, so an older refresh does not undo the change.
func (m *Folder) ShowFlags(ups []FlagUpdate, source *seqview.View) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.loaded {
		return
	}
	m.version++
	var changes []seqview.FlagChange
	for _, u := range ups {
		if u.Seen != nil {
			op := imap.StoreFlagsDel
			if *u.Seen {
				op = imap.StoreFlagsAdd
			}
			changes = append(changes, seqview.FlagChange{UID: u.UID, Op: op, Flags: []imap.Flag{imap.FlagSeen}})
		}
		if u.SetKept {
			fl, ok := m.mb.Flags(u.UID)
			if !ok {
				continue
			}
			want := WithSeen(u.Kept, HasSeen(fl))
			if u.Seen != nil {
				want = WithSeen(u.Kept, *u.Seen)
			}
			changes = append(changes, seqview.FlagChange{UID: u.UID, Op: imap.StoreFlagsSet, Flags: want})
		}
	}
	m.mb.SetFlags(source, changes...)
}

// MutateExisting runs a provider operation that changes messages. The
// provider refuses the whole request when any UID is gone (another client
// removed it since the last refresh); then the mirror is refreshed (which
// queues the EXPUNGEs) and the operation tried again with the UIDs that
// remain, as long as each refresh takes some away (ten clients expunging
// in one folder, as imaptest does, can take a UID away again between
// a refresh and the retry) and at most mutateRetries times. It returns the UIDs the operation was carried out for.
//
// A refusal after part of a batched request went through (PartialError)
// is not retried: the operation may not be repeatable (a copy would be
// made twice).
func (m *Folder) MutateExisting(ctx context.Context, uids []imap.UID, op func([]int64) error) ([]imap.UID, error) {
	err := op(UIDList(uids))
	// Commands of other connections change the folder at the same time
	// (nothing is locked across provider calls), so a UID may vanish
	// again between the refresh and the retry. Every round removes at
	// least one UID or ends, so the rounds are bounded by the UIDs too.
	for attempt := 0; err != nil && UIDMissing(err) && attempt < mutateRetries; attempt++ {
		if serr := m.Sync(ctx); serr != nil {
			if errors.Is(serr, ErrFolderGone) {
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
		err = op(UIDList(uids))
	}
	if err != nil {
		return nil, err
	}
	return uids, nil
}

// mutateRetries bounds the times a change refused for a vanished UID is
// tried again with the UIDs that remain (each time fewer).
const mutateRetries = 16

// UIDMissing reports the provider's refusal of a request ("other error"),
// which it gives when a UID is gone. A request partly carried out is
// ErrUnknownOutcome, not a refusal.
func UIDMissing(err error) bool {
	return errors.Is(err, upstream.ErrRefused)
}

func UIDList(uids []imap.UID) []int64 {
	out := make([]int64, len(uids))
	for i, u := range uids {
		out[i] = int64(u)
	}
	return out
}

func FlagStrings(fl []imap.Flag) []string {
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

// WithSeen is kept flags plus \Seen when read, as mb holds them.
func WithSeen(keptFlags []imap.Flag, read bool) []imap.Flag {
	if read {
		return append(slices.Clone(keptFlags), imap.FlagSeen)
	}
	return keptFlags
}

// CanonicalFlags turns stored flag texts into canonical IMAP flags: system
// flags in their RFC 9051 §2.3.2 spelling (mbsync and offlineimap undo
// lower-case ones), keywords as written, sorted, without duplicates or \Seen
// and \Recent, which the bridge never stores.
func CanonicalFlags(fl []string) []imap.Flag {
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
