package enginetest

import (
	"fmt"
	"slices"

	"github.com/emersion/go-imap/v2"
)

// Keywords: session n alone sets $sn, so the state of $sn on a message
// is decided by session n's last STORE of it there, which no other
// session's command may undo: two sessions adding their keywords to one
// message at once must both find them. Where no such STORE was made, the
// message's origin decides: its APPEND (when APPENDUID named it), its
// delivery (no keywords), or the message it was copied from (when
// COPYUID named the copy, and session n stored nothing on the source
// while the copy was under way). Anything else is unknown, except that
// a keyword nobody ever put on any copy of a message cannot be on it.

// kwState is what a keyword must be on a message.
type kwState int8

const (
	kwUnknown kwState = iota
	kwAbsent
	kwPresent
)

func (k kwState) String() string {
	return [...]string{"unknown", "absent", "present"}[k]
}

// keywords works out expected keywords from the history and lineage.
type keywords struct {
	l       *lineage
	records []*record
	// putOn: model id to the sessions that ever tried to put their
	// keyword on a copy of the message (STORE +FLAGS, APPEND).
	putOn map[string]map[int]bool
}

func newKeywords(l *lineage, records []*record) *keywords {
	k := &keywords{l: l, records: records, putOn: map[string]map[int]bool{}}
	put := func(id string, n int) {
		if k.putOn[id] == nil {
			k.putOn[id] = map[int]bool{}
		}
		k.putOn[id][n] = true
	}
	for _, r := range records {
		kw := keywordOf(r.sess)
		switch {
		case r.cmd == "APPEND" && slices.Contains(r.flags, kw):
			put(r.modelID, r.sess)
		case r.stores(kw) && r.storeOp != imap.StoreFlagsDel:
			for _, u := range r.uids {
				if in := l.get(r.user, r.folder, u); in != nil {
					put(in.modelID, r.sess)
				}
			}
		}
	}
	return k
}

// expect returns what $sn must be on in, and why.
func (k *keywords) expect(in *instance, n int) (kwState, string) {
	if st, why, ok := k.lastStore(in, n, nil); ok {
		return st, why
	}
	st, why := k.origin(in, n)
	if st == kwUnknown && !k.putOn[in.modelID][n] {
		return kwAbsent, fmt.Sprintf("no session %d command ever put %s on message %s", n, keywordOf(n), in.modelID)
	}
	return st, why
}

// lastStore returns the state session n's last STORE of its keyword on
// in left (unknown when that STORE was not answered OK), among those
// answered before the command before started when before is not nil.
// ok is false when there is none.
func (k *keywords) lastStore(in *instance, n int, before *record) (st kwState, why string, ok bool) {
	kw := keywordOf(n)
	var last *record
	for _, r := range k.records {
		if r.sess == n && r.user == in.key.user && r.folder == in.key.folder && r.stores(kw) && r.names(in.key.uid) &&
			(before == nil || !r.t1.IsZero() && r.t1.Before(before.t0)) {
			last = r
		}
	}
	if last == nil {
		return kwUnknown, "", false
	}
	if !last.ok() {
		return kwUnknown, "", true
	}
	return present(last.storeOp == imap.StoreFlagsAdd), fmt.Sprintf("session %d's last STORE of it: %v", n, last), true
}

// origin returns what $sn is on in as it was made.
func (k *keywords) origin(in *instance, n int) (kwState, string) {
	switch in.origin.Op {
	case "Deliver":
		return kwAbsent, "delivered without keywords"
	case "Save":
		for _, r := range k.records {
			if r.cmd == "APPEND" && r.modelID == in.modelID && r.ok() && r.folder == in.key.folder && r.appendUID == in.key.uid {
				if r.sess != n {
					return kwAbsent, fmt.Sprintf("appended by session %d: %v", r.sess, r)
				}
				return present(slices.Contains(r.flags, keywordOf(n))), fmt.Sprintf("appended: %v", r)
			}
		}
	case "Copy", "Move":
		src, cmd := in.src, map[string]string{"Copy": "COPY", "Move": "MOVE"}[in.origin.Op]
		for _, r := range k.records {
			if r.cmd != cmd || !r.ok() || r.user != in.key.user || r.folder != src.key.folder || r.dest != in.key.folder || r.copied[src.key.uid] != in.key.uid {
				continue
			}
			// The copy took the source's keywords while r ran: known
			// only if session n stored none on it meanwhile.
			kw := keywordOf(n)
			for _, st := range k.records {
				if st.sess == n && st.user == in.key.user && st.folder == src.key.folder && st.stores(kw) && st.names(src.key.uid) && st.overlaps(r) {
					return kwUnknown, ""
				}
			}
			if st, why, ok := k.lastStore(src, n, r); ok {
				return st, fmt.Sprintf("copied by %v from %v, where %s", r, src.key, why)
			}
			st, why := k.origin(src, n)
			return st, fmt.Sprintf("copied by %v from %v, %s", r, src.key, why)
		}
	}
	return kwUnknown, ""
}
