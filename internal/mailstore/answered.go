package mailstore

import (
	"context"
	"sync"
	"time"
)

// answerGrace is how long a change's journal entry outlives the engine's
// answer: the front writes the answer to the client after the engine
// returns, and a bridge killed before the client read it must leave the
// entry, so that the client's retry is answered from what the provider
// did, not done again.
const answerGrace = 2 * time.Second

// answeredBatch is how long the ending of answered entries waits past
// the first one's grace for others to end with it. Under load every
// APPEND and COPY ends an entry: one DELETE per change was a fifth of the
// statements a replica sent PostgreSQL under imaptest's stress; one per
// batch is a few a second. Entries live this much longer, which only
// makes the journal more careful.
const answeredBatch = 250 * time.Millisecond

// answeredQueue holds the journal entries of answered changes until
// their grace has passed (endAnswered), and ends them in batches.
type answeredQueue struct {
	mu      sync.Mutex
	due     []answeredEntry // in order of due time
	running bool            // a goroutine is ending them
}

type answeredEntry struct {
	id  int64
	due time.Time
}

// endAnswered forgets attempt id answerGrace after now, in the
// background (at once when the store closes: nothing is written into
// the state store after Close). A repeat of the change by the same
// process meanwhile is a new change all the same (its own attempts
// asking are left out of the undecided).
func (st *Store) endAnswered(id int64) {
	q := &st.answered
	q.mu.Lock()
	q.due = append(q.due, answeredEntry{id: id, due: time.Now().Add(answerGrace)})
	start := !q.running
	q.running = true
	q.mu.Unlock()
	if start && !st.bg.Go(st.endAnsweredLoop) {
		st.endAnsweredLoop(nil)
	}
}

// forget takes entry id out of the queue: it was ended or made unknown
// otherwise. An id left queued would end, after its grace, whatever
// entry has the id by then (SQLite gives the id of a row deleted last to
// the next one). Reports whether it was queued.
func (q *answeredQueue) forget(id int64) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	for i, e := range q.due {
		if e.id == id {
			q.due = append(q.due[:i], q.due[i+1:]...)
			return true
		}
	}
	return false
}

// endAnsweredLoop ends the queued entries as their grace passes, in
// batches, until the queue is empty; with life nil or ended, it ends
// them all at once.
func (st *Store) endAnsweredLoop(life context.Context) {
	q := &st.answered
	for {
		q.mu.Lock()
		if len(q.due) == 0 {
			q.running = false
			q.mu.Unlock()
			return
		}
		first := q.due[0].due
		q.mu.Unlock()
		if life != nil {
			t := time.NewTimer(time.Until(first) + answeredBatch)
			select {
			case <-t.C:
			case <-life.Done():
				life = nil
			}
			t.Stop()
		}
		now := time.Now()
		q.mu.Lock()
		n := len(q.due)
		if life != nil {
			n = 0
			for n < len(q.due) && !q.due[n].due.After(now) {
				n++
			}
		}
		ids := make([]int64, n)
		for i, e := range q.due[:n] {
			ids[i] = e.id
		}
		q.due = append(q.due[:0:0], q.due[n:]...)
		q.mu.Unlock()
		end, lost := st.sortAnswered(ids)
		st.endIDs(end)
		st.markLost(lost)
	}
}

// markLost makes unknown the entries whose answers a relaying replica
// may not have passed on (answerpath.go).
func (st *Store) markLost(ids []int64) {
	if len(ids) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), st.cfg.CallTimeout)
	defer cancel()
	for _, id := range ids {
		st.markUnknown(ctx, id)
	}
}

// endIDs forgets journal entries in one state-store statement; a failure
// is logged (a later retry decides again, and the journal drops entries
// after state.AttemptTTL).
func (st *Store) endIDs(ids []int64) {
	if len(ids) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), st.cfg.CallTimeout)
	defer cancel()
	if err := st.cfg.State.EndAttempts(ctx, ids...); err != nil {
		st.cfg.Logger.Warn("imap: attempts journal", "err", err)
	}
}
