package mailstore

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/emersion/go-imap/v2"

	"github.com/directbridge/directbridge/upstream/directapi"
)

// Messages one replica holds in memory are taken from it by the others
// (internal/peerfetch), not downloaded from the provider again: a replica
// that announces an added message says whether it holds its bytes, and a
// replica whose client then fetches the message asks the holder first,
// for its metadata and bytes in one request. Whatever the holder does not
// answer with, in time, comes from the provider as before.

// HeldMessage is a message a replica holds in memory: its metadata and
// its raw bytes, either of which may be missing.
type HeldMessage struct {
	UID  imap.UID
	Meta *directapi.MessageDetail
	Raw  []byte
}

// Holders asks other replicas for what they hold (peerfetch.Client).
type Holders interface {
	// Held asks replica for the messages uids of ref it holds.
	Held(ctx context.Context, replica string, ref FolderRef, uids []imap.UID) ([]HeldMessage, error)
}

// maxHeldHints bounds the messages remembered as held elsewhere; past it
// the hints start afresh (a message not hinted is downloaded, as before).
const maxHeldHints = 1 << 16

// heldHints are the messages other replicas said they hold, and which.
type heldHints struct {
	mu sync.Mutex
	by map[rawKey]string // replica
}

func (h *heldHints) note(k rawKey, replica string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.by == nil || len(h.by) >= maxHeldHints {
		h.by = map[rawKey]string{}
	}
	h.by[k] = replica
}

// take removes and returns, per replica, the hinted messages of ref
// among uids.
func (h *heldHints) take(ref FolderRef, uids []imap.UID) map[string][]imap.UID {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out map[string][]imap.UID
	for _, u := range uids {
		k := rawKey{ref.User, ref.Folder, ref.Validity, u}
		if r, ok := h.by[k]; ok {
			delete(h.by, k)
			if out == nil {
				out = map[string][]imap.UID{}
			}
			out[r] = append(out[r], u)
		}
	}
	return out
}

// fromHolders takes the hinted messages of ref among uids from the
// replicas holding them: their bytes go into the cache (and are
// returned), their metadata to onMeta. A replica that fails to answer
// costs nothing but the wait: the caller downloads what is missing.
func (b *Bodies) fromHolders(ctx context.Context, ref FolderRef, uids []imap.UID) map[imap.UID][]byte {
	if b.holders == nil {
		return nil
	}
	asks := b.hints.take(ref, uids)
	if len(asks) == 0 {
		return nil
	}
	out := map[imap.UID][]byte{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for replica, list := range asks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			held, err := b.holders.Held(ctx, replica, ref, list)
			if err != nil {
				if !isQuiet(err) {
					b.warnHolders(err)
				}
				b.countHeld("failed", len(list))
				return
			}
			got := 0
			defer func() { b.countHeld("held", got); b.countHeld("missing", len(list)-got) }()
			asked := make(map[imap.UID]bool, len(list))
			for _, u := range list {
				asked[u] = true
			}
			var metas []directapi.MessageDetail
			mu.Lock()
			for _, h := range held {
				if !asked[h.UID] {
					continue // only what was asked, once
				}
				delete(asked, h.UID)
				if h.Raw != nil {
					got++
					out[h.UID] = h.Raw
					b.put(ref, h.UID, h.Raw)
				}
				if h.Meta != nil {
					d := *h.Meta
					d.UID = int64(h.UID)
					metas = append(metas, d)
				}
			}
			mu.Unlock()
			if len(metas) > 0 && b.onMeta != nil {
				b.onMeta(ref, metas)
			}
		}()
	}
	wg.Wait()
	return out
}

// isQuiet reports an error a Holders marks as not worth a warning (a
// replica known not to answer, asked again later).
func isQuiet(err error) bool {
	var q interface{ Quiet() bool }
	return errors.As(err, &q) && q.Quiet()
}

// countHeld tells the metrics of n messages asked of another replica.
func (b *Bodies) countHeld(result string, n int) {
	if b.onHeld != nil && n > 0 {
		b.onHeld(result, n)
	}
}

// warnHolders logs a failed request to another replica, at most once a
// minute (a replica's clients fetch often; its cause is one).
func (b *Bodies) warnHolders(err error) {
	if b.log == nil || !b.holderWarn.allow() {
		return
	}
	b.log.Warn("mailstore: another replica did not give the messages it holds; they come from the provider", "err", err)
}

// Holding returns the messages of ref among uids that this replica
// holds: the metadata its mirror has and the bytes in its cache. No
// provider call, no wait.
func (st *Store) Holding(ref FolderRef, uids []imap.UID) []HeldMessage {
	m := st.peek(ref.User, ref.Folder)
	var out []HeldMessage
	for _, u := range uids {
		h := HeldMessage{UID: u}
		h.Raw, _ = st.bodies.cache.peek(rawKey{ref.User, ref.Folder, ref.Validity, u})
		if m != nil {
			m.mu.Lock()
			if m.validity == ref.Validity {
				if msg := m.byUID[u]; msg != nil && !msg.expunged && MetaKnown(msg.meta) {
					h.Meta = msg.meta
				} else if sv, ok := m.savedAt[u]; ok && MetaKnown(sv.meta) {
					h.Meta = sv.meta
				}
			}
			m.mu.Unlock()
		}
		if h.Raw != nil || h.Meta != nil {
			out = append(out, h)
		}
	}
	return out
}

// peerMeta keeps metadata another replica gave in the mirror of ref.
func (st *Store) peerMeta(ref FolderRef, metas []directapi.MessageDetail) {
	if m := st.peek(ref.User, ref.Folder); m != nil {
		m.fillMetaUnder(ref.Validity, metas)
	}
}

// everyMinute lets something happen at most once a minute.
type everyMinute struct{ last atomic.Int64 }

func (e *everyMinute) allow() bool {
	now := time.Now().UnixNano()
	last := e.last.Load()
	return now-last >= int64(time.Minute) && e.last.CompareAndSwap(last, now)
}
