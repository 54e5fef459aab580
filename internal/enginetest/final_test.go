package enginetest

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/emersion/go-imap/v2"

	"github.com/directbridge/directbridge/internal/fakeprovider"
)

// settleTime bounds how long the bridge may take, once nothing happens
// any more, to show every session what the provider holds: a poll or
// two, and the read marking of appended messages (mailstore's settle).
const settleTime = 8 * time.Second

// quietEnd checks, once the sessions and the other client have stopped,
// that every session comes to see every folder as the provider holds it.
//
// First as the bridge documents it: the provider tells read states only
// as an unread count and a list of unread messages, which the bridge
// asks for when the count is not what it expects, so a message another
// client read may show unread until the count changes. Then, after one
// more message delivered to every folder (a count change), exactly.
func (r *run) quietEnd() {
	for _, s := range r.sessions {
		for _, f := range userFolders {
			s.converge(f, true)
		}
	}
	for _, u := range users {
		for _, f := range userFolders {
			if _, err := r.p.Deliver(u, f, newMessage(r.newModelID(), rand.New(rand.NewPCG(r.seed, 1)))); err != nil {
				r.fail("delivering the last messages: %v", err)
			}
		}
	}
	for _, s := range r.sessions {
		for _, f := range userFolders {
			s.converge(f, false)
		}
	}
}

// converge selects folder and looks at it until the session sees what
// the provider holds (UIDs, model ids, \Seen), or fails when it does
// not within settleTime: a message it never shows is lost to it, one it
// shows that the provider does not have is a ghost. With countBlind, a
// message shown unread that another client read is let be.
func (s *session) converge(folder string, countBlind bool) {
	if s.r.stopping.Load() {
		return
	}
	if s.folder != folder {
		s.selectFolder(folder)
		if s.folder != folder {
			return // checkAnswer failed the run
		}
	}
	deadline := time.Now().Add(settleTime)
	for {
		s.noop()
		s.look()
		snap, err := s.r.p.Snapshot(s.user, folder)
		if err != nil {
			s.r.fail("snapshot of %s %s: %v", s.user, folder, err)
			return
		}
		var diff string
		s.r.withLineage(func(l *lineage) {
			diff = viewDiff(s.view, snap, func(uid imap.UID) bool {
				in := l.get(s.user, folder, uid)
				return countBlind && in != nil && in.readBehind()
			})
		})
		if diff == "" {
			s.final[folder] = s.view
			return
		}
		if s.r.stopping.Load() || time.Now().After(deadline) {
			s.r.fail("session %d (%s): %s still differs from the provider's after %v of quiet:\n%s",
				s.id, s.user, folder, settleTime, diff)
			return
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// viewDiff tells how a session's view differs from the provider's
// folder, or "" when it does not. A message shown unread that the
// provider has read is no difference when unreadOK says so.
func viewDiff(view []viewMsg, snap fakeprovider.Snapshot, unreadOK func(imap.UID) bool) string {
	var b strings.Builder
	have := map[imap.UID]viewMsg{}
	for _, m := range view {
		have[m.uid] = m
	}
	for _, m := range snap.Messages {
		u := imap.UID(m.UID)
		v, ok := have[u]
		id := modelIDOf(m.Raw)
		seen := slices.Contains(v.flags, imap.FlagSeen)
		switch {
		case !ok:
			fmt.Fprintf(&b, "  UID %d (%s) is at the provider, not shown\n", u, id)
		case v.modelID != id:
			fmt.Fprintf(&b, "  UID %d shows %q, the provider's is %q\n", u, v.modelID, id)
		case seen != m.Read && !(m.Read && unreadOK(u)):
			fmt.Fprintf(&b, "  UID %d (%s) shows \\Seen=%v, the provider's read=%v\n", u, id, seen, m.Read)
		}
		delete(have, u)
	}
	for u, v := range have {
		fmt.Fprintf(&b, "  UID %d (%s) shown, not at the provider\n", u, v.modelID)
	}
	return b.String()
}

// checkFinalKeywords compares every keyword on every message each
// session finally sees with what the model expects (keywords_test.go).
func (r *run) checkFinalKeywords(l *lineage) {
	k := newKeywords(l, r.model.all())
	for _, s := range r.sessions {
		for _, folder := range userFolders {
			for _, m := range s.final[folder] {
				in := l.get(s.user, folder, m.uid)
				if in == nil {
					continue // failed already
				}
				for _, o := range r.sessions {
					want, why := k.expect(in, o.id)
					if want == kwUnknown {
						continue
					}
					if got := present(slices.Contains(m.flags, o.kw)); got != want {
						r.fail("session %d sees %s %s on %v (%s), want %s: %s", s.id, o.kw, got, in.key, in.modelID, want, why)
					}
				}
			}
		}
	}
}
