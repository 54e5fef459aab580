package sandbox

import (
	"context"
	"time"
)

// Added latency makes the sandbox stand for a provider far away or slow,
// so that the bridge can be measured against one (the benchmark program,
// DIRECTBRIDGE_SANDBOX_LATENCY). Half of it passes before an operation runs
// and half after, before the answer is written, as a network round trip
// splits between the request and the answer; an operation's effect is
// thus visible to other requests about when a provider's would be.

// SetLatency makes every later REST answer of both services arrive d
// later; 0 (or less) adds none. Requests already waiting keep theirs.
func (s *Server) SetLatency(d time.Duration) {
	s.latency.Store(int64(max(d, 0)))
}

// Latency is the time added to every REST answer.
func (s *Server) Latency() time.Duration { return time.Duration(s.latency.Load()) }

// pause waits d, or less if ctx ends first; it reports whether all of d
// passed. A request whose client went away gets no answer.
func pause(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
