package mailstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// A change's journal entry stays "asking" while its answer may still be
// on the way to the client (answered.go), and a repeat of the change by
// the same process meanwhile is a new change: two identical APPENDs at
// once are two messages. That holds when the process holding the
// client's connection is the one running the change. With the director
// (internal/director) it may not be: another replica holds the client's
// connection and relays this one's answers. When that replica dies
// during the change, or before it relayed the answer, the client
// reconnects and retries, very likely here, where the entry is this
// process's own and still asking: the retry would be taken for a new
// change, and the message saved twice.
//
// So a session whose answers travel such a path gives the engine an
// AnswerPath with the command's context (WithAnswerPath). The engine
// watches the journal entries begun under it: when a repeat of the
// change comes, or the entry's grace ends, and the path is lost, the
// entry is made unknown instead (state.Attempts.UnknownAttempt), which
// every retry, here or anywhere, answers from what the provider did.

// AnswerPath is how the answer to a command reaches its client when it
// can break without this process seeing the client go: a session
// relayed by another replica. Lost reports that the answers given on it
// may not have reached the client (the relaying replica died, or the
// link to it broke), as a retry would find out.
type AnswerPath interface{ Lost() bool }

// ErrAnswerLost is a change not made because its answer could not reach
// the client any more: the replica relaying it is gone, and the client's
// retry, under way through another, makes it instead. Made anyway, the
// change would race the retry, which might not find it yet.
var ErrAnswerLost = errors.New("mailstore: the client's connection is gone; the change was not made")

// answerLost reports that ctx's answer path is lost (false without one).
func answerLost(ctx context.Context) bool {
	p := answerPathOf(ctx)
	return p != nil && p.Lost()
}

type answerPathKey struct{}

// WithAnswerPath returns ctx whose changes' answers travel p.
func WithAnswerPath(ctx context.Context, p AnswerPath) context.Context {
	return context.WithValue(ctx, answerPathKey{}, p)
}

func answerPathOf(ctx context.Context) AnswerPath {
	p, _ := ctx.Value(answerPathKey{}).(AnswerPath)
	return p
}

// pathWatch holds the journal entries begun under an AnswerPath, until
// they end or are made unknown.
type pathWatch struct {
	mu      sync.Mutex
	byKey   map[string][]watched // by user and journal key
	byID    map[int64]watched
	settled map[int64]bool // made unknown by settleLost: endAnswered must not end them
}

type watched struct {
	id   int64
	key  string // user "\x00" journal key
	path AnswerPath
}

// watch notes entry id of key, begun under ctx's AnswerPath if any.
func (st *Store) watch(ctx context.Context, user, key string, id int64) {
	p := answerPathOf(ctx)
	if p == nil || id == 0 {
		return
	}
	w := &st.paths
	k := user + "\x00" + key
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.byKey == nil {
		w.byKey, w.byID, w.settled = map[string][]watched{}, map[int64]watched{}, map[int64]bool{}
	}
	e := watched{id: id, key: k, path: p}
	w.byKey[k] = append(w.byKey[k], e)
	w.byID[id] = e
}

// unwatchLocked forgets entry id. Called with w.mu held.
func (w *pathWatch) unwatchLocked(id int64) {
	e, ok := w.byID[id]
	if !ok {
		return
	}
	delete(w.byID, id)
	list := w.byKey[e.key]
	for i := range list {
		if list[i].id == id {
			list = append(list[:i], list[i+1:]...)
			break
		}
	}
	if len(list) == 0 {
		delete(w.byKey, e.key)
	} else {
		w.byKey[e.key] = list
	}
}

func (st *Store) unwatch(ids ...int64) {
	w := &st.paths
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, id := range ids {
		w.unwatchLocked(id)
		delete(w.settled, id)
	}
}

// settleLost makes unknown the entries of key whose answer path is lost,
// before a repeat of the change looks at the journal: the repeat then
// finds them undecided, and is answered from what the provider did. The
// entries stay watched until the state store has them unknown, so that
// a repeat meanwhile (or the end of their grace) makes them unknown too,
// never takes them for changes under way or ends them. An error is the
// repeat's: without the entries unknown it could not be told from a new
// change.
func (st *Store) settleLost(ctx context.Context, user, key string) error {
	w := &st.paths
	k := user + "\x00" + key
	w.mu.Lock()
	var lost []int64
	for _, e := range w.byKey[k] {
		if e.path.Lost() {
			lost = append(lost, e.id)
			// Still to be answered, or just taken from the queue by
			// its loop: endAnswered must leave it (sortAnswered).
			if !st.answered.forget(e.id) {
				w.settled[e.id] = true
			}
		}
	}
	w.mu.Unlock()
	if len(lost) == 0 {
		return nil
	}
	st.cfg.Logger.Info("imap: the replica relaying a change's answer is gone; a repeat is answered from the provider", "user", user)
	jctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), st.cfg.CallTimeout)
	defer cancel()
	for _, id := range lost {
		if err := st.cfg.State.UnknownAttempt(jctx, id); err != nil {
			return fmt.Errorf("mailstore: attempts journal: %w", err)
		}
	}
	w.mu.Lock()
	for _, id := range lost {
		w.unwatchLocked(id) // settled stays: the entry may still be queued later
	}
	w.mu.Unlock()
	return nil
}

// sortAnswered splits entries whose answer grace ended: those to end,
// and those whose answer path is lost, to make unknown (they stay
// watched until they are). Entries settleLost made unknown are neither.
func (st *Store) sortAnswered(ids []int64) (end, lost []int64) {
	w := &st.paths
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, id := range ids {
		if w.settled[id] {
			delete(w.settled, id)
			continue
		}
		if e, ok := w.byID[id]; ok {
			if e.path.Lost() {
				lost = append(lost, id)
				continue
			}
			w.unwatchLocked(id)
		}
		end = append(end, id)
	}
	return end, lost
}

// markUnknown records that entry id's outcome is unknown: a retry,
// through any replica, is answered from what the provider did. The
// entry stays watched until the state store has it (a failure leaves it
// watched: a repeat tries again).
func (st *Store) markUnknown(ctx context.Context, id int64) {
	st.answered.forget(id)
	if err := st.cfg.State.UnknownAttempt(ctx, id); err != nil {
		st.cfg.Logger.Warn("imap: attempts journal", "err", err)
		return
	}
	w := &st.paths
	w.mu.Lock()
	w.unwatchLocked(id)
	delete(w.settled, id)
	w.mu.Unlock()
}

// beginAgain journals an attempt after the earlier ones were decided
// not done (resolveAppend, resolveCopy).
func (st *Store) beginAgain(ctx context.Context, user, key string, mark int64) (int64, error) {
	id, err := st.cfg.State.BeginAttempt(ctx, user, key, st.owner, mark)
	st.watch(ctx, user, key, id)
	return id, err
}
