package imapbackend

import (
	"context"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/directbridge/directbridge/directapi"
	"github.com/directbridge/directbridge/mailstore"
	"github.com/directbridge/directbridge/upstream"
)

// hub holds the mirrors of all users' folders, so that every connection of
// a user that selects a folder shares one mirror and one poller.
type hub struct {
	cfg *Config

	polled atomic.Int64 // mirrors with a poller (held by a connection)

	mu      sync.Mutex
	mirrors map[string]*mirror
	memos   map[string]*readMemo // read state of forgotten mirrors (readmemo.go)
	bodies  *mailstore.Bodies    // the raw-message cache, for what APPEND saved
}

func newHub(cfg *Config) *hub {
	return &hub{cfg: cfg, mirrors: map[string]*mirror{}, memos: map[string]*readMemo{}}
}

func mirrorKey(user, name string) string { return strings.ToLower(user) + "\x00" + name }

// freshness is how old a mirror nobody else has open may be when a
// connection selects it or asks its STATUS before it is refreshed first:
// clients that select in a loop do not each cost a refresh. A mirror
// another connection has open is polled, and may be a poll interval old.
const freshness = 2 * time.Second

// acquire returns the user's mirror of folder name, refreshed if it is
// older than freshness, with a reference the caller must release. While
// any reference is held, the mirror is polled every PollInterval.
func (h *hub) acquire(ctx context.Context, auth directapi.Authentication, name string) (*mirror, error) {
	user := strings.ToLower(auth.Username)
	for {
		h.mu.Lock()
		m := h.mirrors[mirrorKey(user, name)]
		if m == nil {
			m = &mirror{hub: h, user: user, name: name}
			h.mirrors[mirrorKey(user, name)] = m
		}
		h.mu.Unlock()

		m.mu.Lock()
		if m.dropped {
			m.mu.Unlock()
			continue // forgotten between the look-up and now: take the new one
		}
		m.auth = auth
		// A folder someone else has open is polled and holds every
		// change made through the bridge already: fresh enough for a
		// poll interval.
		maxAge := freshness
		if m.refs > 0 && m.loaded {
			maxAge = max(freshness, h.pollInterval())
		}
		m.refs++
		if m.evict != nil {
			m.evict.Stop()
			m.evict = nil
		}
		if m.refs == 1 {
			h.polled.Add(1)
			m.stopPoll = make(chan struct{})
			go m.poll(m.stopPoll)
		}
		m.mu.Unlock()
		if err := m.syncIfOlder(ctx, maxAge); err != nil {
			h.release(m)
			return nil, err
		}
		return m, nil
	}
}

// idleEviction is how long a mirror no connection holds stays in memory:
// long enough that re-selecting a folder is cheap, short enough that
// message metadata (health data) and the user's password are not kept
// for the life of the process.
//
// Config.MirrorIdle sets it; this is the default.
const idleEviction = 10 * time.Minute

// release drops a reference. The last one stops the poller; a mirror that
// never loaded (no such folder, say) is forgotten at once, any other after
// idleEviction.
func (h *hub) release(m *mirror) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.refs--
	if m.refs > 0 {
		return
	}
	h.polled.Add(-1)
	if m.stopPoll != nil {
		close(m.stopPoll)
		m.stopPoll = nil
	}
	if !m.loaded {
		m.dropLocked()
		return
	}
	m.evict = time.AfterFunc(h.cfg.MirrorIdle, func() {
		m.mu.Lock()
		defer m.mu.Unlock()
		if m.refs == 0 {
			m.dropLocked()
		}
	})
}

// dropLocked forgets the mirror and what it holds; called with m.mu held
// (the hub's lock is taken inside it, the order renumberedLocked uses too).
func (m *mirror) dropLocked() {
	m.hub.saveMemo(m.user, m.name, m.memoLocked())
	m.dropped = true
	m.auth = directapi.Authentication{}
	m.byUID, m.ghosts = nil, nil
	m.hub.drop(m)
}

// drop forgets a mirror whose folder vanished or was renumbered; the next
// acquire builds a new one.
func (h *hub) drop(m *mirror) {
	h.mu.Lock()
	if h.mirrors[mirrorKey(m.user, m.name)] == m {
		delete(h.mirrors, mirrorKey(m.user, m.name))
	}
	h.mu.Unlock()
}

// dropFolder forgets the mirrors of a folder and its sub-folders after a
// DELETE or RENAME, telling connections that have them selected.
func (h *hub) dropFolder(user, name string) {
	h.mu.Lock()
	var gone []*mirror
	for k, m := range h.mirrors {
		if m.user == strings.ToLower(user) && (m.name == name || strings.HasPrefix(m.name, name+".")) {
			gone = append(gone, m)
			delete(h.mirrors, k)
		}
	}
	h.mu.Unlock()
	for _, m := range gone {
		m.mu.Lock()
		m.markGoneLocked()
		m.dropped = true
		m.mu.Unlock()
	}
}

// peek returns the mirror of a folder if one exists, without a reference.
func (h *hub) peek(user, name string) *mirror {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.mirrors[mirrorKey(user, name)]
}

// callsPerPoll is what one poll costs when nothing changed (GetUIDs and
// GetUnreadMessageCount).
const callsPerPoll = 2

// pollInterval is how often each watched folder is polled: the configured
// interval, stretched when the polls of every watched folder together
// would take more than their share of the provider budget (half of it,
// see upstream.Budget.PollShare). The stretch shows in metrics
// (PollStats).
func (h *hub) pollInterval() time.Duration {
	base := h.cfg.PollInterval
	share := h.cfg.Budget.PollShare()
	if share <= 0 {
		return base
	}
	need := time.Duration(float64(h.polled.Load()) * callsPerPoll / share * float64(time.Second))
	return max(base, need)
}

// PollStats reports how many folders are polled and how often each is,
// for metrics: an interval above the configured one means the provider
// budget stretched it.
func (s *Server) PollStats() (folders int, interval time.Duration) {
	return int(s.hub.polled.Load()), s.hub.pollInterval()
}

// poll refreshes the mirror while stop is open: a pollInterval after the
// last refresh, whoever made it (a NOOP's refresh counts as a poll), with
// a little jitter so that folders watched since the same moment do not
// all ask at once. Polls wait for the budget at its lowest priority, and
// before the refresh starts (upstream.Budget.Prepay). Errors are logged and the next round tries again;
// connections keep the state they have.
func (m *mirror) poll(stop chan struct{}) {
	first := true
	for {
		interval := m.hub.pollInterval()
		m.mu.Lock()
		wait := interval - time.Since(m.lastStart)
		m.mu.Unlock()
		if first {
			wait = interval
			first = false
		}
		wait += time.Duration(rand.Int64N(int64(interval)/10 + 1))
		t := time.NewTimer(max(wait, 10*time.Millisecond))
		select {
		case <-stop:
			t.Stop()
			return
		case <-t.C:
		}
		m.mu.Lock()
		recent := time.Since(m.lastStart) < interval*9/10
		m.mu.Unlock()
		if recent {
			continue
		}
		// The call timeout, not the interval: a short interval must not
		// make every poll of a slow provider fail; the next round waits.
		ctx, cancel := context.WithTimeout(context.Background(), m.hub.cfg.CallTimeout)
		// Paid for before the refresh starts: a client that joins it
		// then waits for the provider only, never for polls' turn.
		pctx, err := m.hub.cfg.Budget.Prepay(upstream.WithPriority(ctx, upstream.Poll), m.user, callsPerPoll)
		if err == nil {
			err = m.sync(pctx)
		}
		cancel()
		if err != nil {
			m.hub.cfg.Logger.Warn("imap poll failed", "user", m.user, "err", err)
		}
	}
}
