package restclient

import (
	"context"
	"sync"
	"time"
)

// limiter is a token bucket: rate tokens per second, at most burst saved up.
// It is small and local (rather than golang.org/x/time/rate) so that tests
// drive it with the client's fake clock. An Unlimited client keeps none;
// a nil *limiter never waits.
type limiter struct {
	clock Clock
	rate  float64 // tokens per second; <= 0 never waits
	burst float64

	mu     sync.Mutex
	tokens float64
	last   time.Time
}

func newLimiter(clock Clock, rate float64, burst int) *limiter {
	if burst < 1 {
		burst = 1
	}
	return &limiter{clock: clock, rate: rate, burst: float64(burst), tokens: float64(burst)}
}

// wait blocks until a token is available or ctx ends.
func (l *limiter) wait(ctx context.Context) error {
	if l == nil || l.rate <= 0 {
		return ctx.Err()
	}
	l.mu.Lock()
	now := l.clock.Now()
	if !l.last.IsZero() {
		l.tokens += now.Sub(l.last).Seconds() * l.rate
		if l.tokens > l.burst {
			l.tokens = l.burst
		}
	}
	l.last = now
	l.tokens-- // reserve a token, possibly going into debt
	debt := -l.tokens
	l.mu.Unlock()
	if debt <= 0 {
		return ctx.Err()
	}
	delay := time.Duration(debt / l.rate * float64(time.Second))
	if err := l.clock.Sleep(ctx, delay); err != nil {
		l.mu.Lock()
		l.tokens++ // give the reservation back
		l.mu.Unlock()
		return err
	}
	return nil
}

// Clock is the client's view of time, replaceable in tests.
type Clock interface {
	Now() time.Time
	// Sleep waits for d or until ctx ends, whichever is first.
	Sleep(ctx context.Context, d time.Duration) error
}

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
