package mailstore

import (
	"context"
	"time"
)

// overlapWait bounds how long an APPEND waits for the saves that overlap
// its own before it looks for its UID (awaitOverlapping): a save waiting
// for the provider's budget may take long, and the APPEND's own answer
// must not wait for it. Under imaptest's stress at 100 requests/s, 250 ms
// halved the listings (GetUIDs) of a stream of APPENDs, where a second
// made every APPEND of the stream wait the full second.
const overlapWait = 250 * time.Millisecond

// awaitOverlapping waits, when other saves to the folder asked before a's
// was answered are still with the provider, for their answers (at most
// overlapWait, and within ctx): the refresh that finds a's UID then
// finds theirs too, one light refresh for all instead of one each (under
// a stream of APPENDs, as imaptest's, about half of them; under a budget
// such saves often went out in one call, upstream.WithCoalescing). Saves
// asked later are not waited for: a stream of them would hold a's answer
// back for ever.
func (m *Folder) awaitOverlapping(ctx context.Context, a *arrival) {
	m.mu.Lock()
	var wait []chan struct{}
	for _, b := range m.inflight {
		if b != a && b.sent.Before(a.at) {
			wait = append(wait, b.done)
		}
	}
	m.mu.Unlock()
	if len(wait) == 0 {
		return
	}
	wctx, cancel := context.WithTimeout(ctx, overlapWait)
	defer cancel()
	awaitAll(wctx, wait)
}
