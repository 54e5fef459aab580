package mailstore

import (
	"context"
	"time"

	"github.com/emersion/go-imap/v2"
)

// A poll that finds nothing must be cheap: with a real provider's budget
// (100 requests a second) shared by a thousand users idling on INBOX,
// every call a poll spends is a second more before new mail shows (issue
// 22). A full refresh costs two calls (GetUIDs and GetUnreadMessageCount)
// and tells everything: arrivals, expunges and read state changed
// elsewhere. Most polls peek instead: one SearchMessagesMetadataByReceivedDate
// over what was received since the last look. New mail is received now,
// so the peek finds it, and a full refresh follows at once; mail never
// waits for the next full refresh. What a peek cannot see (messages
// expunged, read or copied in by another client of the provider: a copy
// keeps its source's received date) waits for the full refresh, which
// polls make as often as their budget lets (Store.pollTimes), and for a
// command that refreshes (SELECT, and commands that change the folder).

// fullShare is the part of the polls' budget that full refreshes get;
// peeks get the rest. With a thousand folders watched at 100 requests a
// second, each is peeked at every 10.5 s and refreshed in full every 400
// s; with eight, peeked at every second and refreshed in full every 3.2
// s. Without a budget (the embedded sandbox) every poll is full.
const fullShare = 1.0 / 20

// fullMax bounds the time between two full refreshes of a folder, however
// many are watched: past it, they cost more than their share.
const fullMax = 30 * time.Minute

// peekSkew widens a peek's window either way while the provider's clock
// is not known (provclock.go): received dates are the provider's clock.
const peekSkew = metaSkew

// peek asks the provider for the messages received in the folder since
// the last look (one call) and reports whether any is new to the mirror:
// then the caller refreshes it. started is when the peek began (the
// bridge's clock). A folder whose state a peek cannot judge (not loaded,
// saves or transfers under way, whose UIDs only a listing pairs) reports
// news: the caller refreshes in full, as before peeks.
func (m *Folder) peek(ctx context.Context, started time.Time) (news bool, err error) {
	m.mu.Lock()
	if !m.loaded || m.mb == nil || m.gone != nil || len(m.pending) > 0 || len(m.inflight) > 0 || len(m.unclaimed) > 0 {
		m.mu.Unlock()
		return true, nil
	}
	auth, uidNext := m.auth, m.uidNext
	since := m.lastLookLocked()
	m.mu.Unlock()
	if _, busy := m.store.transferFloor(m.user, m.name); busy {
		return true, nil
	}
	begin, end, ok := m.store.clock.window(since, started)
	if !ok {
		begin, end = since.Add(-peekSkew), started.Add(peekSkew)
	}
	details, err := m.store.cfg.Provider.MetadataReceived(ctx, auth, m.name, begin, end)
	if err != nil {
		return false, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, d := range details {
		if d.UID <= 0 || d.UID > MaxUID {
			continue
		}
		u := imap.UID(d.UID)
		if _, gone := m.removed[u]; u >= uidNext && !gone && m.byUID[u] == nil {
			return true, nil
		}
	}
	if m.uidNext == uidNext && started.After(m.lastPeek) {
		m.lastPeek = started
	}
	return false, nil
}

// lastLookLocked is when the provider was last asked about new mail in
// the folder: the last full refresh or peek that started.
func (m *Folder) lastLookLocked() time.Time {
	if m.lastPeek.After(m.lastStart) {
		return m.lastPeek
	}
	return m.lastStart
}
