package mailstore

import (
	"context"
	"strings"
	"sync"

	"github.com/emersion/go-imap/v2"

	"github.com/directbridge/directbridge/internal/seqview"
	"github.com/directbridge/directbridge/internal/state"
)

// The kept-flag writes of a folder's STOREs are committed in groups: a
// STORE that finds another one's write under way queues its changes, and
// when that write ends, the first in the queue writes every queued
// change in one state-store transaction, in the order they came, and
// shows each command's result in that order. On SQLite a transaction is
// cheap; on PostgreSQL it is some round trips, made while the folder's
// other STOREs wait (flagMu), and ten clients storing at once each
// waited for nine transactions. Each change still applies to the set
// kept at that moment, so that no STORE undoes another; and the result a
// command shows is the set the store holds after its group, which is
// what the client would have read right after its own write anyway.

// keptWrites is a folder's queue of kept-flag writes.
type keptWrites struct {
	mu      sync.Mutex
	queue   []*keptWrite
	running bool // a leader is writing a group
}

// keptWrite is one command's kept-flag changes on its way to the store.
type keptWrite struct {
	user     string
	validity uint32
	changes  []state.FlagChange
	ups      []FlagUpdate
	source   *seqview.View

	kept map[uint32][]string // the sets after its group
	err  error
	lead bool          // this command writes the group
	wake chan struct{} // closed when written, or when made leader
}

// writeKept writes changes (the kept flags of ups) to the state store
// and shows the result to the folder's sessions other than source, in
// the order of the store's writes; see above. It returns the sets the
// store holds for the messages changed.
func (m *Folder) writeKept(ctx context.Context, user string, validity uint32, changes []state.FlagChange, ups []FlagUpdate, source *seqview.View) (map[uint32][]string, error) {
	w := &keptWrite{user: user, validity: validity, changes: changes, ups: ups, source: source, wake: make(chan struct{})}
	m.kw.mu.Lock()
	m.kw.queue = append(m.kw.queue, w)
	lead := !m.kw.running
	if lead {
		m.kw.running = true
		w.lead = true
	}
	m.kw.mu.Unlock()
	if !lead {
		// Bounded: the leader's transaction has CallTimeout. Made
		// leader (w.lead set before wake closed) or written.
		<-w.wake
		if !w.lead {
			return w.kept, w.err
		}
	}
	m.kw.mu.Lock()
	group := m.kw.queue
	m.kw.queue = nil
	m.kw.mu.Unlock()
	m.writeGroup(ctx, group)
	m.kw.mu.Lock()
	if len(m.kw.queue) > 0 {
		next := m.kw.queue[0]
		next.lead = true
		close(next.wake)
	} else {
		m.kw.running = false
	}
	m.kw.mu.Unlock()
	return w.kept, w.err
}

// writeGroup writes a group of kept-flag changes, one transaction per
// run of the same UIDVALIDITY, shows each command's result in order, and
// wakes the commands that wait.
func (m *Folder) writeGroup(ctx context.Context, group []*keptWrite) {
	st := m.store
	// The group is written for all its commands: not cut short by the
	// leader's client hanging up.
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), st.cfg.CallTimeout)
	defer cancel()
	m.flagMu.Lock()
	for start := 0; start < len(group); {
		end := start + 1
		for end < len(group) && group[end].validity == group[start].validity && group[end].user == group[start].user {
			end++
		}
		run := group[start:end]
		var all []state.FlagChange
		for _, w := range run {
			all = append(all, w.changes...)
		}
		kept, err := st.cfg.State.ChangeFlags(wctx, strings.ToLower(run[0].user), m.name, run[0].validity, all)
		for _, w := range run {
			w.err = err
			w.kept = make(map[uint32][]string, len(w.changes))
			var show []shown
			for _, u := range w.ups {
				if fl, ok := kept[uint32(u.UID)]; ok {
					w.kept[uint32(u.UID)] = fl
					show = append(show, shown{UID: imap.UID(u.UID), Kept: canonicalFlags(fl), SetKept: true})
				}
			}
			m.show(show, w.source)
		}
		start = end
	}
	m.flagMu.Unlock()
	for _, w := range group {
		if !w.lead {
			close(w.wake)
		}
	}
}
