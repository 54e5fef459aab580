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

// callsPerPoll is what one poll costs when nothing changed (GetUIDs and
// GetUnreadMessageCount).
const callsPerPoll = 2

// PollInterval is how often each watched folder is polled: the configured
// interval, stretched when the polls of every watched folder together
// would take more than their share of the provider budget (half of it,
// see upstream.Budget.PollShare). The stretch shows in metrics
// (PollStats).
func (st *Store) PollInterval() time.Duration {
	base := st.cfg.PollInterval
	share := st.cfg.Budget.PollShare()
	if share <= 0 {
		return base
	}
	need := time.Duration(float64(st.polled.Load()) * callsPerPoll / share * float64(time.Second))
	return max(base, need)
}

// PollStats reports how many folders are polled and how often each is,
// for metrics: an interval above the configured one means the provider
// budget stretched it.
func (st *Store) PollStats() (folders int, interval time.Duration) {
	return int(st.polled.Load()), st.PollInterval()
}

// poll refreshes the mirror while stop is open: a PollInterval after the
// last refresh, whoever made it (a NOOP's refresh counts as a poll), with
// a little jitter so that folders watched since the same moment do not
// all ask at once. Polls wait for the budget at its lowest priority, and
// before the refresh starts (upstream.Budget.Prepay). Errors are logged and the next round tries again;
// connections keep the state they have.
//
// Among replicas (peers.go) one polls the folder at a time, the holder
// of its lease; the others learn from its messages. The lease is taken
// at the poll's turn and let go when the poller ends.
func (m *Folder) poll(life context.Context, stop chan struct{}) {
	if p := m.store.cfg.Peers; p != nil {
		defer p.Release(pollLeaseKey(m.user, m.name))
	}
	first := true
	for {
		interval := m.store.PollInterval()
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
		case <-life.Done(): // the store is closing
			t.Stop()
			return
		case <-t.C:
		}
		m.mu.Lock()
		recent := time.Since(m.lastStart) < interval*9/10
		m.mu.Unlock()
		if recent || !m.leased(life) {
			continue
		}
		// The call timeout, not the interval: a short interval must not
		// make every poll of a slow provider fail; the next round waits.
		ctx, cancel := context.WithTimeout(life, m.store.cfg.CallTimeout)
		// Paid for before the refresh starts: a client that joins it
		// then waits for the provider only, never for polls' turn.
		pctx, err := m.store.cfg.Budget.Prepay(upstream.WithPriority(ctx, upstream.Poll), m.user, callsPerPoll)
		if err == nil {
			err = m.Sync(pctx)
		}
		cancel()
		if err != nil {
			m.store.cfg.Logger.Warn("imap poll failed", "user", m.user, "err", err)
		}
	}
}
