package mailstore

import (
	"testing"
	"time"

	"github.com/directbridge/directbridge/upstream"
)

// TestPollTimesFitTheBudget: peeks (one call) of all watched folders
// together take the polls' budget less fullShare, full refreshes (two
// calls) that share; each stretches past the configured interval only
// when the folders would not fit, and without a budget every poll is
// full at the configured interval.
func TestPollTimesFitTheBudget(t *testing.T) {
	const s = time.Second
	for _, tc := range []struct {
		rate         float64
		polled       int64
		interval     time.Duration
		full         time.Duration
		callsPerSecs float64 // what the polls cost, at most the rate
	}{
		{0, 1000, s, s, 0},                  // unlimited (embedded sandbox)
		{100, 8, s, 8 * s, 8 + 16/8.0},      // eight users
		{100, 98, s, 98 * s, 98 + 196/98.0}, // exactly the peeks' share
		{100, 1000, 1000 * s / 98, 1000 * s, 1000/(1000/98.0) + 2000/1000.0}, // 1,000 idle users
		{100, 5000, 5000 * s / 98, fullMax, 0},                               // past fullMax
		{100, 0, s, s, 0},                                                    // nobody watching
	} {
		st := New(Config{PollInterval: s, Budget: upstream.NewBudget(tc.rate)})
		st.polled.Store(tc.polled)
		interval, full := st.pollTimes()
		if d := interval - tc.interval; d < -time.Millisecond || d > time.Millisecond || full.Round(time.Millisecond) != tc.full {
			t.Errorf("rate %g, %d folders: interval %v, full every %v; want %v, %v", tc.rate, tc.polled, interval, full, tc.interval, tc.full)
		}
		if tc.callsPerSecs > tc.rate+0.01 {
			t.Errorf("rate %g, %d folders: the case's polls cost %.1f calls/s", tc.rate, tc.polled, tc.callsPerSecs)
		}
		if got := st.PollInterval(); got != interval {
			t.Errorf("PollInterval %v; want %v", got, interval)
		}
	}
}
