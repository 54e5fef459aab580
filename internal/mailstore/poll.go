package mailstore

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/directbridge/directbridge/upstream"
)

// leased reports whether this replica polls the folder now (it holds
// the folder's lease among the replicas, or runs alone).
func (m *Folder) leased(ctx context.Context) bool {
	p := m.store.cfg.Peers
	if p == nil {
		return true
	}
	lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return p.Lease(lctx, pollLeaseKey(m.user, m.name))
}

// Kinds of poll, for Config.OnPoll.
const (
	PollPeek = "peek" // one call: what was received since the last look
	PollFull = "full" // the full refresh: UIDs and unread count
)

// lastLook is lastLookLocked, taking the lock.
func (m *Folder) lastLook() time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.lastLookLocked()
}

// PollInterval is how often each watched folder is polled: the configured
// interval (1 s by default), stretched when the polls of every watched
// folder together would take more than the budget lets polls have
// (upstream.Budget.PollShare: all of it, behind every request a client
// waits for). The stretch shows in metrics (PollStats).
func (st *Store) PollInterval() time.Duration {
	interval, _ := st.pollTimes()
	return interval
}

// pollTimes returns the poll interval and how often each folder is
// refreshed in full: with the budget's poll share split between peeks (one
// call each) and full refreshes (two calls, fullShare of it), each as
// often as its part lets every watched folder have one, and never more
// often than the configured interval. Without a budget both are the
// configured interval: every poll is full.
func (st *Store) pollTimes() (interval, full time.Duration) {
	base := st.cfg.PollInterval
	share := st.cfg.Budget.PollShare()
	if share <= 0 {
		return base, base
	}
	n := float64(st.polled.Load())
	interval = max(base, time.Duration(n/(share*(1-fullShare))*float64(time.Second)))
	full = max(base, time.Duration(2*n/(share*fullShare)*float64(time.Second)))
	return interval, min(max(full, interval), max(fullMax, interval))
}

// PollStats reports how many folders are polled and how often each is,
// for metrics: an interval above the configured one means the provider
// budget stretched it.
func (st *Store) PollStats() (folders int, interval time.Duration) {
	return int(st.polled.Load()), st.PollInterval()
}

// poll looks for changes while stop is open: a PollInterval after the
// last poll began, or after the last full refresh whoever made it (a
// command's counts as a poll), with a little jitter so that folders
// watched since the same moment do not all ask at once. Most polls are
// peeks (peek.go, one call); one whose last full refresh is as old as
// pollTimes lets it be refreshes in full (two calls), and so does one
// whose peek found news it could not show. Polls wait for the budget at
// its lowest priority, and before the call starts
// (upstream.Budget.Prepay); the refresh after a peek that found mail
// waits behind clients only, so that an IDLE client gets the mail a
// round trip later, not a turn later. Errors are logged and the next
// round tries again; connections keep the state they have.
//
// Among replicas (peers.go) one polls the folder at a time, the holder
// of its lease; the others learn from its messages. The lease is taken
// at the poll's turn and let go when the poller ends.
func (m *Folder) poll(life context.Context, stop chan struct{}) {
	if p := m.store.cfg.Peers; p != nil {
		defer p.Release(pollLeaseKey(m.user, m.name))
	}
	first := true
	// entered is when this poller's last poll began to wait for its turn
	// in the budget: the next is due an interval after it, not after its
	// look, so that the wait for the budget does not stretch every
	// folder's interval by itself (a thousand folders at 100 requests a
	// second wait most of a second each). A full refresh someone else
	// made (a command's) counts as a poll.
	var entered time.Time
	for {
		interval, fullEvery := m.store.pollTimes()
		m.mu.Lock()
		last := m.lastStart
		m.mu.Unlock()
		if entered.After(last) {
			last = entered
		}
		wait := interval - time.Since(last)
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
		case <-life.Done(): // the store is closing
			t.Stop()
			return
		case <-t.C:
		}
		m.mu.Lock()
		recent := time.Since(m.lastStart) < interval*9/10
		full := time.Since(m.lastStart) >= fullEvery*9/10
		m.mu.Unlock()
		if recent {
			continue
		}
		// Due again an interval from now, also where another replica
		// holds the lease: it asks again then, not at every tick (its
		// peeks publish nothing that would move lastStart here).
		entered = time.Now()
		if !m.leased(life) {
			continue
		}
		if err := m.pollOnce(life, full); err != nil {
			m.store.cfg.Logger.Warn("imap poll failed", "user", m.user, "err", err)
		}
	}
}

// pollOnce makes one poll: a full refresh, or a peek and a full refresh
// if it found news it could not show. Config.OnPoll hears of it, with
// how long the folder had gone without a look when the look began (after
// the wait for the budget).
func (m *Folder) pollOnce(life context.Context, full bool) error {
	if !full {
		// A folder a peek cannot judge is refreshed in full, without
		// paying for a peek first.
		m.mu.Lock()
		full = !m.peekable()
		m.mu.Unlock()
	}
	kind, found := PollFull, false
	if !full {
		kind = PollPeek
	}
	var lag time.Duration
	if f := m.store.cfg.OnPoll; f != nil {
		defer func() { f(lag, kind, found) }()
	}
	// The call timeout, not the interval: a short interval must not
	// make every poll of a slow provider fail; the next round waits.
	ctx, cancel := context.WithTimeout(life, m.store.cfg.CallTimeout)
	defer cancel()
	// Paid for before the call: a client that joins a refresh waits for
	// the provider only, never for polls' turn.
	budget, prio := m.store.cfg.Budget, upstream.Poll
	if !full {
		pctx, err := budget.Prepay(upstream.WithPriority(ctx, upstream.Poll), m.user, 1)
		if err != nil {
			return err
		}
		lag = time.Since(m.lastLook())
		var refresh bool
		found, refresh, err = m.peek(pctx, time.Now())
		if err != nil || !refresh {
			return err
		}
		prio = upstream.ReadAhead // news an IDLE client waits for
	}
	pctx, err := budget.Prepay(upstream.WithPriority(ctx, prio), m.user, 2)
	if err != nil {
		return err
	}
	if full {
		lag = time.Since(m.lastLook())
	}
	return m.Sync(pctx)
}
