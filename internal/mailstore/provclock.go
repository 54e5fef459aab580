package mailstore

import (
	"context"
	"sync"
	"time"

	"github.com/emersion/go-imap/v2"

	"github.com/directbridge/directbridge/upstream"
	"github.com/directbridge/directbridge/upstream/directapi"
)

// The provider answers SaveRawMessages, CopyMessagesByUIDs and
// MoveMessagesByUIDs without the new UIDs, and the engine confirms them
// with the new messages' metadata: SearchMessagesMetadataByReceivedDate
// from the moment of the save on. The received dates are the provider's
// clock, which may be minutes off the bridge's, so the search was
// widened by metaSkew either way; but then it answered every message of
// the last ten minutes, each one parsed by the provider and decoded by
// the bridge, for every APPEND that needed it (imaptest's stress keeps a
// busy folder: 2.6 ms and a growing answer each).
//
// Instead the bridge learns how far the provider's clock is from its own
// from the messages it saved: a message saved between sent and answered
// (the bridge's clock) that the provider dates received is evidence that
// the offset lies in [received-answered, received-sent]. With an estimate
// the search reaches back only to the seconds before the save, shifted by
// it (an APPEND's light refresh asks for everything after that, open at
// the end: discover.go);
// should the answer lack a UID that was looked for (the provider's clock
// jumped), the wide search follows. The estimate is per Store: one
// provider, one clock.

// clockSlack widens a narrow search for the provider's rounding of
// received dates (some keep seconds) and for the estimate's own error;
// fineSlack is the same for a provider seen to keep milliseconds, whose
// narrow search can then be some tens of milliseconds wide. The estimate's
// own error is its spread, which the window adds; the slack covers only
// rounding and the moments the bridge reads its clock. Under imaptest's
// stress (hundreds of APPENDs a second into one folder) 200 ms answered a
// hundred messages' metadata to every APPEND, which the provider looked
// up and the bridge decoded: a fifth of the CPU of both (issue 22). A
// window that misses a UID is followed by the wide search, as before.
const (
	clockSlack = 2 * time.Second
	fineSlack  = 25 * time.Millisecond
)

// providerClock is the estimate of the provider's clock offset.
type providerClock struct {
	mu     sync.Mutex
	known  bool
	fine   bool          // a received date with milliseconds was seen
	offset time.Duration // the provider's clock minus the bridge's
	spread time.Duration // half the width of the last evidence
}

// learn takes the evidence of one message saved between sent and
// answered (the bridge's clock) and dated received by the provider.
func (c *providerClock) learn(sent, answered, received time.Time) {
	if sent.IsZero() || answered.IsZero() || received.IsZero() || answered.Before(sent) {
		return
	}
	lo, hi := received.Sub(answered), received.Sub(sent)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.known, c.offset, c.spread = true, lo+(hi-lo)/2, (hi-lo)/2
	c.fine = c.fine || received.Nanosecond() != 0
}

// window is the received dates, in the provider's clock, of messages
// that arrived between from and to (the bridge's clock); ok is false
// while the offset is not known.
func (c *providerClock) window(from, to time.Time) (begin, end time.Time, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.known {
		return time.Time{}, time.Time{}, false
	}
	slack := clockSlack
	if c.fine {
		slack = fineSlack
	}
	slack += c.spread
	return from.Add(c.offset - slack), to.Add(c.offset + slack), true
}

// receivedSince returns the metadata of the messages of the folder
// received since since (the bridge's clock), sure to hold each of want
// the provider still has: the narrow search when the provider's clock is
// known and its answer holds them all, else the wide one (metaSkew). The
// answer fills the mirror's metadata.
func (m *Folder) receivedSince(ctx context.Context, auth upstream.Auth, since time.Time, want []imap.UID) ([]directapi.MessageDetail, error) {
	c := m.store.cfg.Provider
	now := time.Now()
	if begin, end, ok := m.store.clock.window(since, now); ok {
		details, err := c.MetadataReceived(ctx, auth, m.name, begin, end)
		if err != nil {
			return nil, err
		}
		if holdsAll(details, want) {
			m.fillMeta(details)
			return details, nil
		}
	}
	details, err := c.MetadataReceived(ctx, auth, m.name, since.Add(-metaSkew), now.Add(metaSkew))
	if err != nil {
		return nil, err
	}
	m.fillMeta(details)
	return details, nil
}

// holdsAll reports whether details lists every UID of want.
func holdsAll(details []directapi.MessageDetail, want []imap.UID) bool {
	listed := make(map[int64]bool, len(details))
	for _, d := range details {
		listed[d.UID] = true
	}
	for _, u := range want {
		if !listed[int64(u)] {
			return false
		}
	}
	return true
}
