package mailstore

import (
	"context"
	"crypto/sha256"
	"strings"
	"sync"
	"time"

	"github.com/emersion/go-imap/v2"
)

// A client whose connection broke before the tagged answer of an APPEND
// does not know whether the message was saved, and appends it again on a
// new connection: without care the folder would hold it twice. The store
// remembers, for appendRetryWindow, the fingerprint of every message
// appended through it, the UID it got and the connection that appended
// it. An APPEND of the very same bytes to the same folder from another
// connection, while the first copy is still in the folder, is taken for
// such a retry: it answers OK with the first copy's UID and saves
// nothing. The same bytes appended twice on one connection are two
// copies, as the client asked; so are messages appended again after the
// window, or after the first copy was expunged. Only fingerprints are
// kept, in memory: no message content.

// appendRetryWindow is how long an APPEND is recognised when retried.
const appendRetryWindow = 10 * time.Minute

// maxRecentAppends bounds the fingerprints kept; past it the oldest go.
const maxRecentAppends = 20000

type appendKey struct {
	user, folder string
	validity     uint32 // a renumbered folder's UIDs name other messages
	sum          [32]byte
}

type recentAppend struct {
	conn uint64 // the connection that appended it
	at   time.Time
	a    *arrival // its arrival: the UID once a refresh placed it
}

// recentAppends is the store's memory of appends.
type recentAppends struct {
	mu    sync.Mutex
	m     map[appendKey]recentAppend
	order []noted // oldest first, for pruning
}

// noted is one note in order of time.
type noted struct {
	k  appendKey
	at time.Time
}

func (r *recentAppends) key(user, folder string, validity uint32, raw []byte) appendKey {
	return appendKey{strings.ToLower(user), folder, validity, sha256.Sum256(raw)}
}

// earlier returns the arrival of the same bytes appended to the folder by
// another connection within the window, if any.
func (r *recentAppends) earlier(k appendKey, conn uint64) *arrival {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.m[k]
	if !ok || e.conn == conn || time.Since(e.at) > appendRetryWindow {
		return nil
	}
	return e.a
}

// note remembers an append that the provider holds.
func (r *recentAppends) note(k appendKey, conn uint64, a *arrival) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m == nil {
		r.m = map[appendKey]recentAppend{}
	}
	now := time.Now()
	for len(r.order) > 0 && (len(r.m) >= maxRecentAppends || now.Sub(r.order[0].at) > appendRetryWindow) {
		old := r.order[0]
		if e, ok := r.m[old.k]; ok && e.at.Equal(old.at) { // not noted again since
			delete(r.m, old.k)
		}
		r.order = r.order[1:]
	}
	r.m[k] = recentAppend{conn: conn, at: now, a: a}
	r.order = append(r.order, noted{k, now})
}

// retriedUID returns the UID of the earlier copy of a retried APPEND
// (see above), finding it with a light refresh if no refresh placed it
// yet; 0 when there is none or it is gone.
func (m *Folder) retriedUID(ctx context.Context, earlier *arrival) imap.UID {
	uid := m.placed(earlier)
	if uid == 0 {
		if err := m.Discover(ctx); err != nil {
			return 0
		}
		uid = m.placed(earlier)
	}
	if uid == 0 || !m.isLive(uid) {
		return 0
	}
	return uid
}
