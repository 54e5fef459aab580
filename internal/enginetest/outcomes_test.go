package enginetest

import (
	"fmt"
	"slices"
	"strings"

	"github.com/emersion/go-imap/v2"
)

// checkOutcome fails a command answered OK whose change the provider
// does not show, right after its answer: an APPEND that saved nothing (a
// lost message), an APPENDUID or COPYUID that names another message, a
// MOVE or EXPUNGE that left its messages in place, a STORE of \Seen the
// provider never had.
func (r *run) checkOutcome(rec *record) {
	if !rec.ok() || r.hung.Load() {
		return
	}
	r.withLineage(func(l *lineage) {
		switch rec.cmd {
		case "APPEND":
			r.checkAppended(l, rec)
		case "COPY", "MOVE":
			for from, to := range rec.copied {
				if in := l.get(rec.user, rec.dest, to); in == nil || in.src == nil || in.src.key != (instKey{rec.user, rec.folder, from}) {
					r.fail("%v: COPYUID pairs UID %d with UID %d of %s, which the provider did not make from it (%s; the source's copies: %s)",
						rec, from, to, rec.dest, l.describe(rec.user, rec.dest, to), l.copiesOf(instKey{rec.user, rec.folder, from}))
				}
			}
			if rec.cmd == "MOVE" {
				for _, u := range rec.uids {
					if in := l.get(rec.user, rec.folder, u); in != nil && (in.removed == 0 || in.removed > rec.end) {
						r.fail("%v: answered OK, but UID %d stayed in %s", rec, u, rec.folder)
					}
				}
			}
		case "EXPUNGE", "UID EXPUNGE":
			r.checkExpunged(l, r.model.all(), rec)
		case "STORE":
			if !rec.stores(imap.FlagSeen) {
				return
			}
			read := rec.storeOp == imap.StoreFlagsAdd
			for _, u := range rec.uids {
				// A STORE that names the read state the bridge shows makes
				// no call when the bridge read the provider's state lately
				// (issue 22: a change that changes nothing costs nothing,
				// mailstore seenFresh): a read state another client set
				// since, away from the one the STORE names, which the
				// bridge has not seen yet, stays, as if that client's
				// change had come right after the STORE.
				if in := l.get(rec.user, rec.folder, u); in != nil && in.liveOver(rec.start, rec.end) && !in.readOver(rec.start, rec.end, read) && !in.changedBehindFrom(rec.start, read) {
					r.fail("%v: answered OK, but the provider never had UID %d read=%v while it ran (%s)", rec, u, read, in.ancestry())
				}
			}
		}
	})
}

// checkAppendedSeen: a message appended with \Seen (answered OK) is
// read at the provider once all is quiet, and so is every copy made of
// it, moved or copied or deleted to the Trash, unless a session stored
// -FLAGS (\Seen) on one of them. Not in a seed with faults: when the
// read marking fails, the bridge documents that the \Seen is lost.
func (r *run) checkAppendedSeen(l *lineage) {
	if r.params.faults.Unavailable > 0 || r.params.faults.LostAnswer > 0 {
		return
	}
	records := r.model.all()
	unseen := func(in *instance) bool {
		return slices.ContainsFunc(records, func(rec *record) bool {
			return rec.stores(imap.FlagSeen) && rec.storeOp == imap.StoreFlagsDel && rec.user == in.key.user &&
				rec.folder == in.key.folder && rec.names(in.key.uid)
		})
	}
	for _, rec := range records {
		if rec.cmd != "APPEND" || !rec.ok() || !slices.Contains(rec.flags, imap.FlagSeen) {
			continue
		}
		for _, in := range l.byModel[rec.modelID] {
			if in.removed != 0 || in.reads[len(in.reads)-1] {
				continue
			}
			how := map[string]string{"Copy": "copied", "Move": "moved", "Delete": "deleted to the Trash"}
			var chain []string
			root, cleared := in, false
			for ; root.src != nil; root = root.src {
				cleared = cleared || unseen(root)
				chain = append(chain, fmt.Sprintf("%s from %v", how[root.origin.Op], root.src.key))
			}
			if cleared || unseen(root) || root.origin.Op != "Save" {
				continue
			}
			r.fail("%v: %v is unread at the provider after all is quiet, though appended \\Seen and never unset: %s",
				rec, in.key, strings.Join(chain, ", "))
		}
	}
}

// checkAppended: an APPEND answered OK saved its message in its folder
// while it ran, under the UID APPENDUID names.
func (r *run) checkAppended(l *lineage, rec *record) {
	for _, in := range l.byModel[rec.modelID] {
		if in.origin.Op == "Save" && in.key.folder == rec.folder && rec.start < in.created && in.created <= rec.end {
			if rec.appendUID != 0 && in.key.uid != rec.appendUID {
				r.fail("%v: APPENDUID %d, but the provider saved it as UID %d (UID %d is %s)",
					rec, rec.appendUID, in.key.uid, rec.appendUID, l.describe(rec.user, rec.folder, rec.appendUID))
			}
			return
		}
	}
	r.fail("%v: answered OK, but the provider saved no such message while it ran: lost", rec)
}

// checkExpunged: an EXPUNGE answered OK removed every message of the
// folder that a STORE answered OK before it began had marked \Deleted
// (no session ever removes \Deleted).
func (r *run) checkExpunged(l *lineage, records []*record, rec *record) {
	for _, d := range records {
		if !d.ok() || !d.stores(imap.FlagDeleted) || d.user != rec.user || d.folder != rec.folder || d.t1.IsZero() || !d.t1.Before(rec.t0) {
			continue
		}
		for _, u := range d.uids {
			if !rec.names(u) {
				continue
			}
			if in := l.get(rec.user, rec.folder, u); in != nil && (in.removed == 0 || in.removed > rec.end) {
				r.fail("%v: answered OK, but UID %d, marked \\Deleted by %v, stayed in %s", rec, u, d, rec.folder)
			}
		}
	}
}
