package mailstore

import (
	"testing"
	"time"

	"github.com/directbridge/directbridge/upstream"
)

// TestPollIntervalStretches: polls of all watched folders together never
// take more than half of the provider budget; the interval stretches
// instead, and is the configured one when there is room or no budget.
func TestPollIntervalStretches(t *testing.T) {
	for _, tc := range []struct {
		rate   float64
		polled int64
		want   time.Duration
	}{
		{0, 1000, 5 * time.Second},    // unlimited (embedded sandbox)
		{100, 10, 5 * time.Second},    // 4 calls/s of a 50/s share
		{100, 125, 5 * time.Second},   // exactly the share
		{100, 1000, 40 * time.Second}, // 1,000 idle users: 2,000 calls per 40 s = 50/s
		{10, 100, 40 * time.Second},   // a small budget
		{100, 0, 5 * time.Second},     // nobody watching
	} {
		st := New(Config{PollInterval: 5 * time.Second, Budget: upstream.NewBudget(tc.rate)})
		st.polled.Store(tc.polled)
		if got := st.PollInterval(); got != tc.want {
			t.Errorf("rate %g, %d folders: interval %v; want %v", tc.rate, tc.polled, got, tc.want)
		}
	}
}
