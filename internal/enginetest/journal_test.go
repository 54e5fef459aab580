package enginetest

import (
	"fmt"
	"slices"
	"strings"

	"github.com/emersion/go-imap/v2"

	"github.com/directbridge/directbridge/internal/fakeprovider"
)

// checkJournal fails every change the bridge asked of the provider that
// no client asked of the bridge: a message saved twice, or copied twice
// for one COPY, is a duplicate; one deleted or moved unasked is lost;
// one marked read or unread unasked is a \Seen nobody set. Each change
// must fall within a command that calls for it (the journal's clock
// between the command's start and end), except the read marking of an
// APPEND with \Seen, which the bridge may send later.
func (r *run) checkJournal(l *lineage, journal []fakeprovider.Event, after int64) {
	records := r.model.all()
	// during finds a command under way at e that also approves, the one
	// that ended first when several do: matching the journal's changes,
	// in order, to the commands that ended first is what lets every
	// change find a command when any matching can.
	during := func(cmd string, e *fakeprovider.Event, also func(*record) bool) *record {
		var best *record
		for _, rec := range records {
			if rec.cmd == cmd && rec.user == e.User && rec.folder == e.Folder && rec.start < e.Seq && e.Seq <= rec.end && also(rec) &&
				(best == nil || rec.end < best.end) {
				best = rec
			}
		}
		return best
	}
	saves := map[string]int{}
	type use struct {
		rec *record
		uid int64
	}
	used := map[use]bool{}
	for i := range journal {
		e := &journal[i]
		if e.Seq <= after || e.Behind {
			continue
		}
		switch e.Op {
		case "Save":
			for _, raw := range e.Raws {
				id := modelIDOf(raw)
				if saves[id]++; saves[id] == 2 {
					r.fail("the provider was asked to save message %s twice (the second at clock %d): a duplicate", id, e.Seq)
				}
				if during("APPEND", e, func(rec *record) bool { return rec.modelID == id }) == nil {
					r.fail("message %s was saved to %s at clock %d, with no APPEND of it under way", id, e.Folder, e.Seq)
				}
			}
		case "Copy", "Move":
			cmd := map[string]string{"Copy": "COPY", "Move": "MOVE"}[e.Op]
			for _, u := range e.UIDs {
				rec := during(cmd, e, func(rec *record) bool {
					return rec.dest == e.Dest && rec.names(imap.UID(u)) && !used[use{rec, u}]
				})
				if rec == nil {
					r.fail("%s of UID %d from %s to %s at clock %d, with no %s of it under way (or a second for one); under way then:\n%s",
						e.Op, u, e.Folder, e.Dest, e.Seq, cmd, underway(records, e))
					continue
				}
				used[use{rec, u}] = true
			}
		case "Delete":
			if e.Forever && e.Folder != fakeprovider.Trash {
				// Outside the Trash EXPUNGE moves to the Trash, except
				// what the expunging session copied to another folder
				// (COPY + EXPUNGE is a move).
				for _, u := range e.UIDs {
					// Any EXPUNGE under way that names it, by a session
					// that copied it (several may run at once).
					moved := func(rec *record) bool {
						return rec.names(imap.UID(u)) && copiedAway(records, rec, imap.UID(u))
					}
					if during("EXPUNGE", e, moved) == nil && during("UID EXPUNGE", e, moved) == nil {
						r.fail("UID %d of %s removed for good at clock %d: outside the Trash EXPUNGE moves to the Trash, unless the session copied it elsewhere", u, e.Folder, e.Seq)
					}
				}
			}
			for _, u := range e.UIDs {
				named := func(rec *record) bool { return rec.names(imap.UID(u)) }
				if during("EXPUNGE", e, named) == nil && during("UID EXPUNGE", e, named) == nil {
					r.fail("UID %d of %s deleted at clock %d, with no EXPUNGE under way; under way then:\n%s", u, e.Folder, e.Seq, underway(records, e))
				} else if !r.markedDeleted(l, records, e, imap.UID(u)) {
					r.fail("UID %d of %s (%s) deleted at clock %d, though no session stored \\Deleted on it; under way then:\n%s",
						u, e.Folder, l.describe(e.User, e.Folder, imap.UID(u)), e.Seq, underway(records, e))
				}
			}
		case "SetRead":
			for _, u := range e.UIDs {
				if !r.readAsked(l, records, e, imap.UID(u), during) {
					r.fail("UID %d of %s (%s) marked read=%v at clock %d, which no command under way asked for; under way then:\n%s",
						u, e.Folder, l.describe(e.User, e.Folder, imap.UID(u)), e.Read, e.Seq, underway(records, e))
				}
			}
		default:
			r.fail("the bridge asked the provider for %s (%s %s) at clock %d, which no command calls for", e.Op, e.User, e.Folder, e.Seq)
		}
	}
}

// copiedAway reports a COPY of uid to another folder answered OK to the
// session of the EXPUNGE x before it began.
func copiedAway(records []*record, x *record, uid imap.UID) bool {
	return slices.ContainsFunc(records, func(rec *record) bool {
		return rec.cmd == "COPY" && rec.ok() && rec.sess == x.sess && rec.user == x.user && rec.folder == x.folder &&
			rec.dest != x.folder && rec.names(uid) && rec.end <= x.start
	})
}

// markedDeleted reports a STORE +FLAGS (\Deleted) sent before the
// deletion e, of the message or of one it was copied or moved from
// (flags travel with copies).
func (r *run) markedDeleted(l *lineage, records []*record, e *fakeprovider.Event, uid imap.UID) bool {
	for in := l.get(e.User, e.Folder, uid); in != nil; in = in.src {
		if slices.ContainsFunc(records, func(rec *record) bool {
			return rec.stores(imap.FlagDeleted) && rec.storeOp == imap.StoreFlagsAdd && rec.user == in.key.user &&
				rec.folder == in.key.folder && rec.names(in.key.uid) && rec.start < e.Seq
		}) {
			return true
		}
	}
	return false
}

// readAsked reports what asked for a read marking: a STORE of \Seen
// under way, a FETCH BODY[] under way (marking read), or, for marking
// read, an APPEND of the message with \Seen (marked when the bridge
// gets to it).
func (r *run) readAsked(l *lineage, records []*record, e *fakeprovider.Event, uid imap.UID,
	during func(string, *fakeprovider.Event, func(*record) bool) *record) bool {
	store := during("STORE", e, func(rec *record) bool {
		return rec.stores(imap.FlagSeen) && rec.names(uid) && (rec.storeOp == imap.StoreFlagsAdd) == e.Read
	})
	if store != nil || !e.Read {
		return store != nil
	}
	if during("FETCH", e, func(rec *record) bool { return !rec.peek && rec.names(uid) }) != nil {
		return true
	}
	in := l.get(e.User, e.Folder, uid)
	return in != nil && in.origin.Op == "Save" && slices.ContainsFunc(records, func(rec *record) bool {
		return rec.cmd == "APPEND" && rec.modelID == in.modelID && slices.Contains(rec.flags, imap.FlagSeen)
	})
}

// underway lists the user's commands under way at the clock of e, for
// failure messages.
func underway(records []*record, e *fakeprovider.Event) string {
	var b strings.Builder
	for _, rec := range records {
		if rec.user == e.User && rec.start < e.Seq && e.Seq <= rec.end {
			fmt.Fprintf(&b, "    %v\n", rec)
		}
	}
	if b.Len() == 0 {
		return "    (none)\n"
	}
	return b.String()
}
