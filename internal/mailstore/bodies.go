package mailstore

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/emersion/go-imap/v2"

	"github.com/directbridge/directbridge/upstream"
	"github.com/directbridge/directbridge/upstream/directapi"
)

// Defaults of the raw-message loader.
const (
	// BatchSize is the most UIDs asked of the provider in one request. The
	// documents state no limit; 500 keeps an answer of average messages
	// to a few megabytes.
	BatchSize = 500
	// parallelBatches is how many batches of one large request are in
	// flight at once: enough to hide the round trip, few enough that one
	// client's SEARCH BODY does not take the whole budget.
	parallelBatches = 4
	// readAheadWindow is how many messages a sequential reader gets in one
	// request: a client that fetches one message per command in UID order
	// (JavaMail, mbsync, fetchmail, offlineimap) costs one request per
	// readAheadWindow messages instead of one per message. A reader that
	// keeps going gets up to maxReadAhead, as the cache allows (an eighth
	// of it, at the sizes read so far).
	readAheadWindow = 50
	maxReadAhead    = 200
)

// FolderRef names one folder of one user under one UIDVALIDITY: the raw
// bytes of a UID never change while it holds.
type FolderRef struct {
	User     string // lower-case Direct address
	Folder   string
	Validity uint32
}

// Bodies serves raw messages: from the memory cache, else from the
// provider, in batches of up to BatchSize with a few in flight, and with
// read-ahead for sequential readers. Raw messages are health data: they
// stay in memory only.
type Bodies struct {
	up    upstream.Provider
	cache *rawCache
	bg    *background // read-ahead goroutines (the store's, or its own)

	mu      sync.Mutex
	readers map[readerKey]*reader

	// Other replicas' memory (held.go): which of them hold which
	// messages, how to ask them, where the metadata they give goes.
	holders    Holders
	hints      heldHints
	onMeta     func(FolderRef, []directapi.MessageDetail)
	log        *slog.Logger
	holderWarn everyMinute
	onHeld     func(result string, n int)
}

// reader is what Bodies remembers of the last fetch in a folder, to see a
// sequential reader coming.
type reader struct {
	next  imap.UID // the UID after the last one fetched, in folder order
	run   int      // how many single fetches in a row followed in order
	bytes int64    // bytes read ahead for it so far, and
	count int64    // how many messages: their average bounds the window
	// ahead is the read-ahead download under way in the background, if
	// any: the UIDs it brings, and closed when they are in the cache.
	ahead     map[imap.UID]bool
	aheadDone chan struct{}
}

type readerKey struct {
	user, folder string
}

// NewBodies returns a loader over up with a cache of cacheBytes.
func NewBodies(up upstream.Provider, cacheBytes int64) *Bodies {
	return &Bodies{up: up, cache: newRawCache(cacheBytes), bg: newBackground(), readers: map[readerKey]*reader{}}
}

// OnLookup sets a function told of every cache hit and miss (metrics).
func (b *Bodies) OnLookup(f func(hit bool)) { b.cache.onLookup = f }

// OnHeld sets a function told how many messages asked of other replicas
// came ("held"), were no longer there ("missing") or did not come in time
// ("failed") (metrics).
func (b *Bodies) OnHeld(f func(result string, n int)) { b.onHeld = f }

// put keeps raw as the bytes of uid: a message the bridge itself saved
// (APPEND) need not be downloaded again.
func (b *Bodies) put(ref FolderRef, uid imap.UID, raw []byte) {
	b.cache.put(rawKey{ref.User, ref.Folder, ref.Validity, uid}, raw)
}

// Cached returns the raw bytes of uid if they are in memory.
func (b *Bodies) Cached(ref FolderRef, uid imap.UID) ([]byte, bool) {
	return b.cache.get(rawKey{ref.User, ref.Folder, ref.Validity, uid})
}

// Order is a folder's UIDs in ascending order, as read-ahead needs them.
type Order interface {
	// After returns up to n UIDs of the folder that follow uid.
	After(uid imap.UID, n int) []imap.UID
}

// Get returns the raw bytes of uids; UIDs the provider does not have are
// missing from the answer. order, when not nil, is the folder: a caller that asks for the message right after the
// one it asked for last, in that order, is taken for a sequential reader,
// and the next readAheadWindow messages come in the same request (within
// the cache's budget, so read-ahead never evicts what it fetched before
// the client reads it).
func (b *Bodies) Get(ctx context.Context, auth upstream.Auth, ref FolderRef, uids []imap.UID, order Order) (map[imap.UID][]byte, error) {
	b.awaitAhead(ctx, ref, uids)
	out := make(map[imap.UID][]byte, len(uids))
	var need []imap.UID
	for _, u := range uids {
		if raw, ok := b.Cached(ref, u); ok {
			out[u] = raw
		} else {
			need = append(need, u)
		}
	}
	if len(need) > 0 {
		if got := b.fromHolders(ctx, ref, need); len(got) > 0 {
			rest := need[:0:0]
			for _, u := range need {
				if raw, ok := got[u]; ok {
					out[u] = raw
				} else {
					rest = append(rest, u)
				}
			}
			need = rest
		}
	}
	extra := b.readAhead(ref, uids, need, order)
	if len(need) == 0 {
		if len(extra) > 0 {
			b.fetchAhead(auth, ref, extra)
		}
		return out, nil
	}
	got, err := b.download(ctx, auth, ref, append(need, extra...))
	if len(extra) > 0 {
		b.noteReadAhead(ref, extra, got)
	}
	for _, u := range need {
		if raw, ok := got[u]; ok {
			out[u] = raw
		}
	}
	if err != nil {
		return out, err
	}
	return out, nil
}

// readAhead notes a fetch of uids (need of them uncached) and returns the
// UIDs to fetch with them for a sequential reader.
func (b *Bodies) readAhead(ref FolderRef, uids, need []imap.UID, order Order) []imap.UID {
	if order == nil || len(uids) == 0 {
		return nil
	}
	k := readerKey{ref.User, strings.ToLower(ref.Folder)}
	last := slices.Max(uids)
	b.mu.Lock()
	r := b.readers[k]
	window := readAheadWindow
	if r != nil && r.run >= readAheadWindow && r.count > 0 {
		// A long sequential read: as large as an eighth of the cache
		// holds at the average size so far.
		window = int(min(maxReadAhead, max(readAheadWindow, b.cache.limit/8/max(r.bytes/r.count, 1))))
	}
	b.mu.Unlock()
	if b.cache.limit < 8<<20 {
		window = 10 // the cache must hold the window with room to spare
	}
	following := order.After(last, window)
	var next imap.UID
	if len(following) > 0 {
		next = following[0]
	}
	b.mu.Lock()
	r = b.readers[k]
	if r == nil {
		if len(b.readers) > 10000 {
			clear(b.readers) // bounded: a reader forgotten costs one request
		}
		r = &reader{}
		b.readers[k] = r
	}
	sequential := len(uids) <= 2 && r.next != 0 && slices.Min(uids) <= r.next && r.next <= last
	if sequential {
		r.run++
	} else {
		r.run = 0
	}
	r.next = next
	busy := r.ahead != nil
	b.mu.Unlock()
	if !sequential {
		return nil
	}
	if len(need) > 0 {
		return b.uncached(ref, following)
	}
	// Served from the cache: download the next window in the background
	// while the client reads this one, once a whole window past the
	// next one is missing (or the rest of the folder is), so the reader
	// never waits for the provider and each request still brings a window.
	if busy {
		return nil
	}
	after := order.After(last, 2*window)
	// What is read ahead is a run of UIDs from the reader's position, so
	// one look-up tells whether a window's worth (or the folder's rest)
	// is missing; the whole list is looked at only then.
	probe := len(after) - window
	if len(after) < 2*window {
		probe = len(after) - 1 // the folder's last ones
	}
	if probe < 0 {
		return nil
	}
	if _, ok := b.cache.peek(rawKey{ref.User, ref.Folder, ref.Validity, after[probe]}); ok {
		return nil
	}
	return b.uncached(ref, after)
}

// uncached returns the UIDs of uids not in the cache.
func (b *Bodies) uncached(ref FolderRef, uids []imap.UID) []imap.UID {
	var out []imap.UID
	for _, u := range uids {
		if _, ok := b.cache.peek(rawKey{ref.User, ref.Folder, ref.Validity, u}); !ok {
			out = append(out, u)
		}
	}
	return out
}

// aheadTimeout bounds a background read-ahead download.
const aheadTimeout = 2 * time.Minute

// fetchAhead downloads uids into the cache in the background, at the
// ReadAhead priority (after requests clients wait for). One at a time
// per reader; a fetch of a UID it brings waits for it (awaitAhead)
// instead of asking the provider a second time.
func (b *Bodies) fetchAhead(auth upstream.Auth, ref FolderRef, uids []imap.UID) {
	k := readerKey{ref.User, strings.ToLower(ref.Folder)}
	b.mu.Lock()
	r := b.readers[k]
	if r == nil || r.ahead != nil {
		b.mu.Unlock()
		return
	}
	r.ahead = make(map[imap.UID]bool, len(uids))
	for _, u := range uids {
		r.ahead[u] = true
	}
	done := make(chan struct{})
	r.aheadDone = done
	b.mu.Unlock()
	started := b.bg.Go(func(life context.Context) {
		ctx, cancel := context.WithTimeout(upstream.WithPriority(life, upstream.ReadAhead), aheadTimeout)
		defer cancel()
		got, _ := b.download(ctx, auth, ref, uids) // a failure leaves the client to fetch them itself
		b.noteReadAhead(ref, uids, got)
		b.mu.Lock()
		if r.aheadDone == done {
			r.ahead, r.aheadDone = nil, nil
		}
		b.mu.Unlock()
		close(done)
	})
	if !started { // the store is closing
		b.mu.Lock()
		r.ahead, r.aheadDone = nil, nil
		b.mu.Unlock()
		close(done)
	}
}

// awaitAhead waits, within ctx, for the background read-ahead of the
// folder when it brings any of uids.
func (b *Bodies) awaitAhead(ctx context.Context, ref FolderRef, uids []imap.UID) {
	b.mu.Lock()
	r := b.readers[readerKey{ref.User, strings.ToLower(ref.Folder)}]
	var done chan struct{}
	if r != nil && r.ahead != nil && slices.ContainsFunc(uids, func(u imap.UID) bool { return r.ahead[u] }) {
		done = r.aheadDone
	}
	b.mu.Unlock()
	if done == nil {
		return
	}
	select {
	case <-done:
	case <-ctx.Done():
	}
}

// noteReadAhead adds what was read ahead to its reader's average size.
func (b *Bodies) noteReadAhead(ref FolderRef, extra []imap.UID, got map[imap.UID][]byte) {
	b.mu.Lock()
	defer b.mu.Unlock()
	r := b.readers[readerKey{ref.User, strings.ToLower(ref.Folder)}]
	if r == nil {
		return
	}
	for _, u := range extra {
		if raw, ok := got[u]; ok {
			r.bytes += int64(len(raw))
			r.count++
		}
	}
}

// download fetches uids from the provider in batches, a few in flight,
// caching every answer.
func (b *Bodies) download(ctx context.Context, auth upstream.Auth, ref FolderRef, uids []imap.UID) (map[imap.UID][]byte, error) {
	slices.Sort(uids)
	uids = slices.Compact(uids)
	batches := chunk(uids, BatchSize)
	out := make(map[imap.UID][]byte, len(uids))
	var mu sync.Mutex
	var firstErr error
	sem := make(chan struct{}, parallelBatches)
	var wg sync.WaitGroup
	for _, batch := range batches {
		wg.Add(1)
		sem <- struct{}{}
		go func(batch []imap.UID) {
			defer wg.Done()
			defer func() { <-sem }()
			ids := make([]int64, len(batch))
			for i, u := range batch {
				ids[i] = int64(u)
			}
			got, err := b.up.Raw(ctx, auth, ref.Folder, ids)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				if firstErr == nil {
					firstErr = err
				}
				return
			}
			for id, raw := range got {
				if id <= 0 || id > MaxUID {
					continue
				}
				u := imap.UID(id)
				out[u] = raw
				b.cache.put(rawKey{ref.User, ref.Folder, ref.Validity, u}, raw)
			}
		}(batch)
	}
	wg.Wait()
	return out, firstErr
}

// chunk splits s into slices of at most n items.
func chunk[T any](s []T, n int) [][]T {
	var out [][]T
	for len(s) > n {
		out = append(out, s[:n:n])
		s = s[n:]
	}
	if len(s) > 0 {
		out = append(out, s)
	}
	return out
}
