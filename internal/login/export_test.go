package login

import (
	"context"
	"time"
)

// SetClock replaces the guard's clock and sleep, so that the tests of
// package login_test, which drive the guard with a verifier and a
// provider, can pass minutes without waiting.
func SetClock(g *Guard, now func() time.Time, sleep func(context.Context, time.Duration) error) {
	g.now = now
	g.sleep = sleep
}
