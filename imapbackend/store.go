package imapbackend

import (
	"slices"
	"strings"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapserver"

	"github.com/directbridge/directbridge/internal/mailstore"
)

// Flags live in two places. \Seen is the provider's read/unread state and
// is changed with MarkMessagesAsReadByUIDs and MarkMessagesAsUnreadByUIDs.
// Every other flag (\Flagged, \Answered, \Draft, \Deleted, $Forwarded, any
// keyword) is kept by the bridge in its state store per user, folder,
// UIDVALIDITY and UID, always in canonical spelling, because mbsync and
// offlineimap undo flags that come back in another case than they wrote.
//
// The front makes no provider or state-store call: STORE is one engine
// operation (mailstore.Store.ApplyFlags), which changes \Seen at the
// provider and the other flags as changes applied to the set kept at that
// moment, and shows the result to every other session.

// wantedFlags checks and canonicalises the flags of a STORE or APPEND:
// system flags in their RFC 9051 §2.3.2 spelling, \Recent dropped (RFC
// 3501 §2.3.2: it is the server's and cannot be stored), other flags that
// start with a backslash refused (they are not keywords, RFC 9051 §9
// flag-extension). seen says whether \Seen was named; kept is the rest,
// sorted, without duplicates (keywords compare case-insensitively, RFC
// 9051 §9 note 1).
func wantedFlags(in []imap.Flag) (seen bool, kept []imap.Flag, err error) {
	for _, f := range in {
		c := mailstore.CanonicalFlag(f)
		switch {
		case c == imap.FlagSeen:
			seen = true
			continue
		case equalFold(string(c), `\Recent`):
			continue
		case strings.HasPrefix(string(c), `\`) && !mailstore.IsSystemFlag(c):
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
	gone, validity := m.Gone(), m.Validity()
	ts, err := s.targets(numSet)
	if err != nil {
		return err
	}
	ups := make([]mailstore.FlagUpdate, 0, len(ts))
	for _, t := range ts {
		if !t.live {
			// Expunged meanwhile: nothing to change (RFC 2180 §4.2.1);
			// the EXPUNGE follows at the next command that allows it.
			continue
		}
		u := mailstore.FlagUpdate{UID: t.msg.UID, Kept: &mailstore.KeptChange{}}
		var read bool
		switch flags.Op {
		case imap.StoreFlagsSet:
			read, u.Kept.Replace, u.Kept.Add = seenNamed, true, req
			u.Seen = &read
		case imap.StoreFlagsAdd:
			u.Kept.Add = req
			if seenNamed {
				read, u.SeenNamed = true, true
				u.Seen = &read
			}
		case imap.StoreFlagsDel:
			u.Kept.Del = req
			if seenNamed {
				read, u.SeenNamed = false, true
				u.Seen = &read
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
	done, err := s.srv.store.ApplyFlags(ctx, s.auth, m.Name(), validity, m, ups, s.view)
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
	s.view.QueueFetch(done...)
	return nil
}
