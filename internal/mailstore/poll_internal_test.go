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
		rate     float64
		polled   int64
		interval time.Duration
		full     time.Duration
	}{
		{0, 1000, s, s},                      // unlimited (embedded sandbox)
		{100, 8, s, 8 * s},                   // eight users
		{100, 98, s, 98 * s},                 // exactly the peeks' share
		{100, 1000, 1000 * s / 98, 1000 * s}, // 1,000 idle users
		{100, 5000, 5000 * s / 98, fullMax},  // past fullMax
		{100, 0, s, s},                       // nobody watching
	} {
		st := New(Config{PollInterval: s, Budget: upstream.NewBudget(tc.rate)})
		st.polled.Store(tc.polled)
		interval, full := st.pollTimes()
		if d := interval - tc.interval; d < -time.Millisecond || d > time.Millisecond || full.Round(time.Millisecond) != tc.full {
			t.Errorf("rate %g, %d folders: interval %v, full every %v; want %v, %v", tc.rate, tc.polled, interval, full, tc.interval, tc.full)
		}
		// What the polls cost at these times fits in the rate, unless
		// fullMax holds full refreshes back.
		if tc.rate > 0 && full < fullMax {
			perSec := float64(tc.polled)/interval.Seconds() + 2*float64(tc.polled)/full.Seconds()
			if perSec > tc.rate*1.001 {
				t.Errorf("rate %g, %d folders: polls cost %.1f calls/s", tc.rate, tc.polled, perSec)
			}
		}
		if got := st.PollInterval(); got != interval {
			t.Errorf("PollInterval %v; want %v", got, interval)
		}
	}
}
