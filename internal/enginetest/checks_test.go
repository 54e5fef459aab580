package enginetest

import (
	"bytes"
	"errors"
	"slices"
	"sort"

	"github.com/emersion/go-imap/v2"
)

// The checks made right after a command, on its answer alone and on the
// provider's lineage up to its end.

// checkAnswer fails a command answered with anything but OK, except a NO
// with one of the codes allowed, or NO [UNAVAILABLE] when a fault was
// injected while it ran (the provider could not be asked; nothing may be
// lost for it, which the final checks see to).
func (r *run) checkAnswer(rec *record, allowed ...imap.ResponseCode) {
	if rec.ok() || r.hung.Load() {
		return
	}
	code, no := rec.noCode()
	switch {
	case no && slices.Contains(allowed, code):
		return
	case no && code == imap.ResponseCodeUnavailable && rec.faulted:
		return
	case no && code == imap.ResponseCodeUnavailable && r.repeatsUndecided(rec):
		// The same COPY as one whose outcome a fault left unknown: the
		// bridge cannot tell it from that one's retry, and answers it
		// from the destination, "try later" while the copies may still
		// come (internal/mailstore/attempts.go).
		return
	case !no && !isIMAPError(rec.err):
		r.fail("%v: the connection failed: %v", rec, rec.err)
		return
	}
	r.fail("%v: answered with a NO or BAD it has no reason for", rec)
}

// repeatsUndecided reports a COPY of the same messages of the same folder
// to the same destination as an earlier one by the same user that a fault
// left unanswered (NO).
func (r *run) repeatsUndecided(rec *record) bool {
	if rec.cmd != "COPY" {
		return false
	}
	return slices.ContainsFunc(r.model.all(), func(o *record) bool {
		return o != rec && o.cmd == "COPY" && o.faulted && !o.ok() && o.user == rec.user && o.folder == rec.folder &&
			o.dest == rec.dest && slices.Equal(o.uids, rec.uids) && o.start < rec.start
	})
}

func isIMAPError(err error) bool {
	var ie *imap.Error
	return errors.As(err, &ie)
}

// checkValidity fails a folder whose UIDVALIDITY changes: the provider
// never renumbers, so the bridge has no reason to.
func (r *run) checkValidity(s *session, folder string, v uint32) {
	r.mu.Lock()
	defer r.mu.Unlock()
	k := s.user + "\x00" + folder
	if old, ok := r.validity[k]; ok && old != v {
		r.failLocked("session %d: UIDVALIDITY of %s changed from %d to %d, though the provider kept its UIDs", s.id, folder, old, v)
	}
	r.validity[k] = v
}

// checkNewUID fails a UID the bridge gives a new message (APPENDUID,
// COPYUID) that is not above every UID the session has seen in the
// folder: UIDs are assigned strictly ascending (RFC 9051 §2.3.1.1).
func (r *run) checkNewUID(s *session, rec *record, folder string, uid imap.UID) {
	for u := range s.seen[folder] {
		if u >= uid {
			r.fail("%v: new UID %d in %s, not above UID %d the session saw there before", rec, uid, folder, u)
			return
		}
	}
}

// checkFetch checks a FETCH of bodies: each body is the provider's
// message under that UID, byte for byte; every message the provider held
// throughout the command was answered (RFC 2180 §4.1: the others are
// answered even when one vanished); and without PEEK each answered
// message the provider held throughout shows \Seen and was read at the
// provider at some moment of the command.
func (r *run) checkFetch(s *session, rec *record) {
	if r.hung.Load() || !rec.ok() {
		return
	}
	r.withLineage(func(l *lineage) {
		for u, m := range rec.fetched {
			in := l.get(s.user, rec.folder, u)
			switch {
			case in == nil:
				r.fail("%v: answered UID %d, which the provider never had in %s", rec, u, rec.folder)
			case !bytes.Equal(m.body, in.raw):
				r.fail("%v: BODY[] of UID %d is not the provider's message %s (got %d bytes, model id %q)",
					rec, u, in.modelID, len(m.body), modelIDOf(m.body))
			case rec.peek || !in.liveOver(rec.start, rec.end) || r.unseenMeanwhile(rec, u):
				// Nothing to mark; nothing left to mark (a message gone
				// at the provider may be answered from the cache,
				// unmarked: RFC 2180 §4.1); or another session's
				// -FLAGS (\Seen) may come before or after the marking.
			case !slices.Contains(m.flags, imap.FlagSeen):
				r.fail("%v: UID %d answered without \\Seen, though BODY[] sets it", rec, u)
			case !in.readOver(rec.start, rec.end, true) && !r.appendedSeen(in):
				r.fail("%v: UID %d answered \\Seen but not read at the provider at any moment of it: %s", rec, u, in.ancestry())
			}
		}
		for _, u := range rec.uids {
			if _, ok := rec.fetched[u]; ok {
				continue
			}
			if in := l.get(s.user, rec.folder, u); in != nil && in.liveOver(rec.start, rec.end) {
				r.fail("%v: UID %d left out of the answer, though the provider held it throughout", rec, u)
			}
		}
	})
}

// appendedSeen reports a message saved by an APPEND with \Seen, or
// copied from one: the bridge shows it \Seen at once and marks it read
// at the provider a little later, so a FETCH meanwhile has nothing to
// mark. (Whether a copy made meanwhile is ever marked read is
// checkAppendedSeen's matter.)
func (r *run) appendedSeen(in *instance) bool {
	for in.src != nil {
		in = in.src
	}
	return in.origin.Op == "Save" && slices.ContainsFunc(r.model.all(), func(o *record) bool {
		return o.cmd == "APPEND" && o.modelID == in.modelID && slices.Contains(o.flags, imap.FlagSeen)
	})
}

// unseenMeanwhile reports a STORE -FLAGS (\Seen) of the message by
// another session while rec ran, which may come before or after it.
func (r *run) unseenMeanwhile(rec *record, uid imap.UID) bool {
	return slices.ContainsFunc(r.model.all(), func(o *record) bool {
		return o.sess != rec.sess && o.stores(imap.FlagSeen) && o.storeOp == imap.StoreFlagsDel && o.user == rec.user &&
			o.folder == rec.folder && o.names(uid) && o.overlaps(rec)
	})
}

// checkLook checks a LOOK and returns the view it gives: UIDs strictly
// ascending in sequence order; each UID the provider's, with the
// provider's model id; a UID never seen before above every UID seen
// before; the session's keyword where the session alone decides it.
func (r *run) checkLook(s *session, rec *record) []viewMsg {
	view := make([]viewMsg, 0, len(rec.fetched))
	for u, m := range rec.fetched {
		view = append(view, viewMsg{seq: m.seq, uid: u, modelID: modelIDOf(m.body), flags: m.flags})
	}
	sort.Slice(view, func(i, j int) bool { return view[i].seq < view[j].seq })
	if r.hung.Load() {
		return view
	}
	for i := 1; i < len(view); i++ {
		if view[i].uid <= view[i-1].uid {
			r.fail("%v: message %d has UID %d, message %d UID %d: UIDs must ascend", rec, view[i-1].seq, view[i-1].uid, view[i].seq, view[i].uid)
		}
	}
	seen := s.seen[rec.folder]
	if seen == nil {
		seen = map[imap.UID]string{}
		s.seen[rec.folder] = seen
	}
	var top imap.UID
	for u := range seen {
		top = max(top, u)
	}
	r.withLineage(func(l *lineage) {
		for _, m := range view {
			in := l.get(s.user, rec.folder, m.uid)
			switch {
			case in == nil:
				r.fail("%v: shows UID %d, which the provider never had in %s", rec, m.uid, rec.folder)
			case m.modelID != in.modelID:
				r.fail("%v: UID %d shows message %q, the provider's UID %d is %q", rec, m.uid, m.modelID, m.uid, in.modelID)
			}
			if _, ok := seen[m.uid]; !ok && m.uid < top {
				r.fail("%v: UID %d appears after UID %d was shown: a client that fetches above the last UID it saw never sees it", rec, m.uid, top)
			}
			seen[m.uid] = m.modelID
			if o, ok := s.own[instKey{s.user, rec.folder, m.uid}]; ok && o.state != kwUnknown {
				if shown := present(slices.Contains(m.flags, s.kw)); shown != o.state {
					r.fail("%v: UID %d shows %s %s, but the session's last word on it was %v: a flag update was lost",
						rec, m.uid, s.kw, shown, o.rec)
				}
			}
		}
	})
	return view
}
