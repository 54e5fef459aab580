package mailstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/emersion/go-imap/v2"

	"github.com/directbridge/directbridge/internal/state"
	"github.com/directbridge/directbridge/upstream"
	"github.com/directbridge/directbridge/upstream/directapi"
)

// Store is the mail engine between the protocol fronts and the provider:
// it holds the mirrors of all users' folders (Folder), so that every
// connection of a user that selects a folder shares one mirror and one
// poller, the raw-message cache with its read-ahead (Bodies), and the
// read memos of folders it forgot. It makes every provider call a front
// needs to see a folder, and none while holding a lock that other
// commands on the folder need (see Folder).
type Store struct {
	cfg Config

	polled atomic.Int64 // mirrors with a poller (held by a connection)

	mu      sync.Mutex
	mirrors map[string]*Folder
	memos   map[string]*readMemo // read state of forgotten mirrors (readmemo.go)
	bodies  *Bodies              // the raw-message cache
	bg      *background          // pollers, timers and read-ahead, ended by Close
	clock   providerClock        // the provider's clock offset (provclock.go)
	// pendingRun are the pending-flag entries of transfers still running
	// in this process (copies.go): a refresh leaves them to the transfer.
	// pendingFreed are those whose transfer ended without placing their
	// flags, with when it ended; entries in neither were left by an
	// earlier process (they count from startedAt).
	pendingRun   map[int64]bool
	pendingFreed map[int64]time.Time
	// into are the transfers (COPY, MOVE) under way into each folder
	// (mirrorKey), with the largest UID the destination had before
	// each: new UIDs above it may be their copies, whose flags they
	// place themselves (copies.go, pendingFlagsFor).
	into map[string]map[*intoMark]bool
	// claimed are, per folder (mirrorKey), the UIDs transfers of this
	// process paired with their copies (placeCopies), with when: their
	// flags are that transfer's, never another's written down for a
	// message of the same Message-ID and size (pendingFlagsFor).
	claimed   map[string]map[imap.UID]time.Time
	startedAt time.Time
	owner     string        // this process in the journal of attempts (attempts.go)
	answered  answeredQueue // journal entries of answered changes, ended in batches (answered.go)
	paths     pathWatch     // journal entries whose answers another replica relays (answerpath.go)

	folders folderCache // per-user folder lists, shared by a user's connections (tree.go)
	shape   folderShape // how the provider's GetFolders lists (tree.go)
}

// Config configures a Store.
type Config struct {
	// Provider is the mail provider, usually wrapped in a budget.
	Provider upstream.Provider
	// State keeps what the provider does not: UIDVALIDITY, the largest
	// UID seen, flags other than \Seen.
	State state.StateStore
	// Budget is the provider budget Provider spends, if any: polls are
	// paced to take at most its poll share.
	Budget *upstream.Budget
	// PollInterval is how often a folder someone holds is polled; the
	// budget may stretch it (PollInterval method).
	PollInterval time.Duration
	// OnPoll, if set, is told of every poll: how long the folder had gone
	// without a look when it began (how long new mail may have waited:
	// the poll lag), its kind (PollPeek or PollFull) and whether a peek
	// found news. For metrics; it must not block.
	OnPoll func(lag time.Duration, kind string, found bool)
	// Idle is how long a folder nobody holds stays in memory; 0 means
	// DefaultIdle.
	Idle time.Duration
	// CallTimeout bounds the provider calls of a poll or of a refresh
	// nobody waits for.
	CallTimeout time.Duration
	// AttemptHold is how long after the bridge stopped waiting for a
	// change's answer the provider may still carry it out (late
	// processing): a retry meanwhile is answered ErrOutcomeUnknown unless
	// the change shows (attempts.go). 0 means DefaultAttemptHold.
	AttemptHold time.Duration
	// CacheBytes bounds the raw-message cache (memory only, never disk).
	CacheBytes int64
	// FolderWalk makes the folder list be read level by level when the
	// provider's GetFolders might list direct children only (tree.go);
	// false takes its answer for the whole tree.
	FolderWalk bool
	// JournalKey keys the fingerprints the journal of attempts holds
	// (HMAC-SHA256, state.JournalHash): a plain hash of a message's
	// bytes in the state store would let its holder confirm a guessed
	// message. nil makes them plain SHA-256 (tests); the bridge sets the
	// data directory's key (state.LoadJournalKey).
	JournalKey []byte
	// Peers are the other replicas sharing the state store (peers.go);
	// nil runs alone.
	Peers Peers
	// Holders asks the other replicas for the messages they hold in
	// memory (held.go); nil downloads everything from the provider.
	Holders Holders
	Logger  *slog.Logger
}

// Defaults of Config.
const (
	// DefaultPollInterval brings new mail to an IDLE client within a
	// second or so when the budget has room (a poll that finds nothing is
	// one call, peek.go); the budget stretches it (Store.PollInterval).
	DefaultPollInterval = time.Second
	// DefaultCacheBytes bounds the raw-message cache.
	DefaultCacheBytes = 64 << 20
	// DefaultCallTimeout bounds the provider calls of a poll or of a
	// refresh nobody waits for.
	DefaultCallTimeout = 2 * time.Minute
)

// New returns a Store. Provider and State are required. Close ends it.
func New(cfg Config) *Store {
	if cfg.Idle <= 0 {
		cfg.Idle = DefaultIdle
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = DefaultPollInterval
	}
	if cfg.CacheBytes <= 0 {
		cfg.CacheBytes = DefaultCacheBytes
	}
	if cfg.CallTimeout <= 0 {
		cfg.CallTimeout = DefaultCallTimeout
	}
	if cfg.AttemptHold <= 0 {
		cfg.AttemptHold = DefaultAttemptHold
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	st := &Store{cfg: cfg, mirrors: map[string]*Folder{}, memos: map[string]*readMemo{},
		bodies: NewBodies(cfg.Provider, cfg.CacheBytes), bg: newBackground(), startedAt: time.Now(), owner: newOwner()}
	st.bodies.bg = st.bg
	st.bodies.holders, st.bodies.onMeta, st.bodies.log = cfg.Holders, st.peerMeta, cfg.Logger
	if cfg.Peers != nil {
		st.owner = cfg.Peers.ID()
	}
	return st
}

// Close ends the engine: the read marking of appended messages that
// waits goes out (bounded by ctx), then every poller, timer and
// read-ahead stops, and Close waits for them, so that nothing writes
// into the state store after it (the caller closes the state store
// afterwards). The fronts are shut down before: no command runs.
func (st *Store) Close(ctx context.Context) error {
	// Timers first, then the goroutines: a marking they had under way is
	// cut short and put back in its list (requeueUnmarked), and Close
	// sends every list itself, bounded by ctx, before it returns.
	st.mu.Lock()
	folders := make([]*Folder, 0, len(st.mirrors))
	for _, m := range st.mirrors {
		folders = append(folders, m)
	}
	st.mu.Unlock()
	for _, m := range folders {
		m.mu.Lock()
		if m.settle != nil {
			m.settle.Stop()
		}
		if m.evict != nil {
			m.evict.Stop()
		}
		m.mu.Unlock()
	}
	err := st.bg.close(ctx)
	st.MarkAppendedRead(ctx)
	return err
}

// Bodies is the store's raw-message cache.
func (st *Store) Bodies() *Bodies { return st.bodies }

func mirrorKey(user, name string) string { return strings.ToLower(user) + "\x00" + name }

// freshness is how old a mirror nobody else has open may be when a
// connection selects it or asks its STATUS before it is refreshed first:
// clients that select in a loop do not each cost a refresh. A mirror
// another connection has open is polled, and may be a poll interval old.
const freshness = 2 * time.Second

// Acquire returns the user's mirror of folder name, refreshed if it is
// older than freshness, with a reference the caller must release. While
// any reference is held, the mirror is polled every PollInterval.
func (st *Store) Acquire(ctx context.Context, auth directapi.Authentication, name string) (*Folder, error) {
	user := strings.ToLower(auth.Username)
	for {
		st.mu.Lock()
		m := st.mirrors[mirrorKey(user, name)]
		if m == nil {
			m = &Folder{store: st, user: user, name: name}
			st.mirrors[mirrorKey(user, name)] = m
		}
		st.mu.Unlock()

		m.mu.Lock()
		if m.dropped {
			m.mu.Unlock()
			continue // forgotten between the look-up and now: take the new one
		}
		m.auth = auth
		// A folder someone else has open is polled and holds every
		// change made through the bridge already: fresh enough for a
		// poll interval. A peek counts (peek.go): it found new mail;
		// what other clients of the provider changed shows at the
		// polls' next full refresh, as it does for the connections
		// that have the folder open.
		maxAge := freshness
		watched := m.refs > 0 && m.loaded
		if watched {
			maxAge = max(freshness, st.PollInterval())
		}
		peeked := watched && time.Since(m.lastLookLocked()) < maxAge
		m.refs++
		if m.evict != nil {
			m.evict.Stop()
			m.evict = nil
		}
		if m.refs == 1 {
			st.polled.Add(1)
			stop := make(chan struct{})
			m.stopPoll = stop
			st.bg.Go(func(life context.Context) { m.poll(life, stop) })
		}
		m.mu.Unlock()
		if peeked {
			return m, nil
		}
		if err := m.syncIfOlder(ctx, maxAge); err != nil {
			st.Release(m)
			return nil, err
		}
		return m, nil
	}
}

// DefaultIdle is how long a mirror no connection holds stays in memory:
// long enough that re-selecting a folder is cheap, short enough that
// message metadata (health data) and the user's password are not kept
// for the life of the process.
//
// Config.Idle sets it; this is the default.
const DefaultIdle = 10 * time.Minute

// MarkAppendedRead sends the SetRead of every folder's appended messages
// that wait for it (arrivals.go): at shutdown, so that no \Seen asked for
// in an APPEND is lost to the settle timer.
func (st *Store) MarkAppendedRead(ctx context.Context) {
	st.mu.Lock()
	folders := make([]*Folder, 0, len(st.mirrors))
	for _, m := range st.mirrors {
		folders = append(folders, m)
	}
	st.mu.Unlock()
	for _, m := range folders {
		m.markAppendedRead(ctx)
	}
}

// markAppendedReadIn sends the read marking that waits for folder and the
// folders below it, before a RENAME gives them other names.
func (st *Store) markAppendedReadIn(ctx context.Context, user, folder string) {
	user = strings.ToLower(user)
	st.mu.Lock()
	var folders []*Folder
	for _, m := range st.mirrors {
		if m.user == user && (m.name == folder || strings.HasPrefix(m.name, folder+".")) {
			folders = append(folders, m)
		}
	}
	st.mu.Unlock()
	for _, m := range folders {
		m.markAppendedRead(ctx)
	}
}

// Release drops a reference. The last one stops the poller; a mirror that
// never loaded (no such folder, say) is forgotten at once, any other after
// DefaultIdle.
func (st *Store) Release(m *Folder) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.refs--
	if m.refs > 0 {
		return
	}
	st.polled.Add(-1)
	if m.stopPoll != nil {
		close(m.stopPoll)
		m.stopPoll = nil
	}
	if !m.loaded {
		m.dropLocked()
		return
	}
	m.evict = time.AfterFunc(st.cfg.Idle, func() {
		m.mu.Lock()
		defer m.mu.Unlock()
		if m.refs == 0 {
			m.dropLocked()
		}
	})
}

// dropLocked forgets the mirror and what it holds; called with m.mu held
// (the store's lock is taken inside it, the order renumberedLocked uses too).
func (m *Folder) dropLocked() {
	m.store.saveMemo(m.user, m.name, m.memoLocked())
	m.dropped = true
	m.loaded = false // a refresh by someone still holding it reloads; none writes into byUID
	m.auth = directapi.Authentication{}
	m.byUID, m.ghosts = nil, nil
	m.store.drop(m)
}

// drop forgets a mirror whose folder vanished or was renumbered; the next
// Acquire builds a new one.
func (st *Store) drop(m *Folder) {
	st.mu.Lock()
	if st.mirrors[mirrorKey(m.user, m.name)] == m {
		delete(st.mirrors, mirrorKey(m.user, m.name))
	}
	st.mu.Unlock()
}

// dropFolder forgets the mirrors of a folder and its sub-folders after a
// DELETE or RENAME, telling connections that have them selected.
func (st *Store) dropFolder(user, name string) {
	st.mu.Lock()
	var gone []*Folder
	for k, m := range st.mirrors {
		if m.user == strings.ToLower(user) && (m.name == name || strings.HasPrefix(m.name, name+".")) {
			gone = append(gone, m)
			delete(st.mirrors, k)
		}
	}
	// A folder made again under the name has new UIDs: claims on the
	// old ones go, mirror or not.
	for k := range st.claimed {
		if k == mirrorKey(user, name) || strings.HasPrefix(k, mirrorKey(user, name)+".") {
			delete(st.claimed, k)
		}
	}
	st.mu.Unlock()
	for _, m := range gone {
		m.mu.Lock()
		m.markGoneLocked()
		m.dropped = true
		m.mu.Unlock()
	}
}

// peek returns the mirror of a folder if one exists, without a reference.
func (st *Store) peek(user, name string) *Folder {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.mirrors[mirrorKey(user, name)]
}

// ErrStateUnavailable is StateReady's answer when the state store does
// not answer.
var ErrStateUnavailable = errors.New("mailstore: the state store does not answer")

// StateReady reports whether the state store answers a query now (a store
// that cannot say is taken to). The IMAP front asks it at LOGIN: a
// session could only fail, or guess UIDs and journal entries, without
// it; refusing the login sends the client elsewhere or to a retry.
func (m *Store) StateReady(ctx context.Context) error {
	p, ok := m.cfg.State.(interface{ Ping(context.Context) error })
	if !ok {
		return nil
	}
	if err := p.Ping(ctx); err != nil {
		return fmt.Errorf("%w: %w", ErrStateUnavailable, err)
	}
	return nil
}
