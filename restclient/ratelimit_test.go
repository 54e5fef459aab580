package restclient

import (
	"context"
	"errors"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/directbridge/directbridge/upstream/directapi"
)

// fakeClock implements Clock. Sleep returns at once, advancing the fake time
// by d and recording d; it is safe for concurrent use.
type fakeClock struct {
	mu      sync.Mutex
	now     time.Time
	sleeps  []time.Duration
	onSleep func(d time.Duration) // called before Sleep checks its context
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Date(2024, 3, 1, 12, 0, 0, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Sleep(ctx context.Context, d time.Duration) error {
	c.mu.Lock()
	c.sleeps = append(c.sleeps, d)
	hook := c.onSleep
	c.mu.Unlock()
	if hook != nil {
		hook(d)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	c.Advance(d)
	return nil
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func (c *fakeClock) Sleeps() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.sleeps)
}

func (c *fakeClock) ResetSleeps() {
	c.mu.Lock()
	c.sleeps = nil
	c.mu.Unlock()
}

var _ Clock = (*fakeClock)(nil)

func TestLimiterBurstThenRate(t *testing.T) {
	fc := newFakeClock()
	l := newLimiter(fc, 10, 2)
	ctx := context.Background()
	start := fc.Now()

	for i := range 2 {
		if err := l.wait(ctx); err != nil {
			t.Fatalf("call %d: %v", i+1, err)
		}
	}
	if s := fc.Sleeps(); len(s) != 0 {
		t.Fatalf("first two calls slept %v; want no sleep within the burst", s)
	}
	if err := l.wait(ctx); err != nil {
		t.Fatal(err)
	}
	if got, want := fc.Sleeps(), []time.Duration{100 * time.Millisecond}; !slices.Equal(got, want) {
		t.Fatalf("third call slept %v; want %v", got, want)
	}
	// The fourth call comes when the third's sleep has ended: the bucket is
	// empty again, so it waits one more token interval.
	if err := l.wait(ctx); err != nil {
		t.Fatal(err)
	}
	if got, want := fc.Sleeps(), []time.Duration{100 * time.Millisecond, 100 * time.Millisecond}; !slices.Equal(got, want) {
		t.Fatalf("sleeps %v; want %v", got, want)
	}
	if got := fc.Now().Sub(start); got != 200*time.Millisecond {
		t.Fatalf("fake time advanced %v; want 200ms", got)
	}
}

func TestLimiterBackToBackDebt(t *testing.T) {
	// Calls at the same instant queue up behind each other: the n-th call
	// past the burst waits n token intervals.
	still := &stillClock{t: newFakeClock().Now()}
	l := newLimiter(still, 10, 2)
	for range 5 {
		if err := l.wait(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	want := []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 300 * time.Millisecond}
	if !slices.Equal(still.sleeps, want) {
		t.Fatalf("sleeps %v; want %v", still.sleeps, want)
	}
}

// stillClock never advances; Sleep just records.
type stillClock struct {
	t      time.Time
	sleeps []time.Duration
}

func (c *stillClock) Now() time.Time { return c.t }
func (c *stillClock) Sleep(ctx context.Context, d time.Duration) error {
	c.sleeps = append(c.sleeps, d)
	return ctx.Err()
}

func TestLimiterRefillsUpToBurstOnly(t *testing.T) {
	fc := newFakeClock()
	l := newLimiter(fc, 10, 2)
	ctx := context.Background()
	for range 2 {
		if err := l.wait(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// A long quiet spell refills at most burst (2) tokens, not 100.
	fc.Advance(10 * time.Second)
	for i := range 2 {
		if err := l.wait(ctx); err != nil {
			t.Fatal(err)
		}
		if s := fc.Sleeps(); len(s) != 0 {
			t.Fatalf("call %d after refill slept %v", i+1, s)
		}
	}
	if err := l.wait(ctx); err != nil {
		t.Fatal(err)
	}
	if got, want := fc.Sleeps(), []time.Duration{100 * time.Millisecond}; !slices.Equal(got, want) {
		t.Fatalf("third call after refill slept %v; want %v (refill must cap at burst)", got, want)
	}

	// A partial refill: after 150ms there are 1.5 tokens; the second call
	// needs half a token more and waits 50ms.
	fc.ResetSleeps()
	fc.Advance(150 * time.Millisecond) // from 0 tokens to 1.5
	if err := l.wait(ctx); err != nil {
		t.Fatal(err)
	}
	if s := fc.Sleeps(); len(s) != 0 {
		t.Fatalf("slept %v with 1.5 tokens available", s)
	}
	if err := l.wait(ctx); err != nil {
		t.Fatal(err)
	}
	if got, want := fc.Sleeps(), []time.Duration{50 * time.Millisecond}; !slices.Equal(got, want) {
		t.Fatalf("slept %v; want %v", got, want)
	}
}

func TestLimiterContextCancelledDuringSleep(t *testing.T) {
	fc := newFakeClock()
	l := newLimiter(fc, 10, 2)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for range 2 {
		if err := l.wait(ctx); err != nil {
			t.Fatal(err)
		}
	}
	fc.onSleep = func(time.Duration) { cancel() }
	err := l.wait(ctx)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("wait = %v; want context.Canceled", err)
	}
	if got := fc.Now(); !got.Equal(newFakeClock().now) {
		t.Fatalf("fake time advanced to %v although the sleep was cancelled", got)
	}
	// The cancelled call gave its reservation back: the next caller waits
	// one interval, not two.
	fc.onSleep = nil
	fc.ResetSleeps()
	if err := l.wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got, want := fc.Sleeps(), []time.Duration{100 * time.Millisecond}; !slices.Equal(got, want) {
		t.Fatalf("sleeps after a cancelled wait %v; want %v", got, want)
	}
}

func TestLimiterCancelledContextWithoutSleep(t *testing.T) {
	fc := newFakeClock()
	l := newLimiter(fc, 10, 2)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := l.wait(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("wait with a cancelled context = %v; want context.Canceled", err)
	}
}

func TestLimiterUnlimited(t *testing.T) {
	for _, rate := range []float64{0, -1} {
		fc := newFakeClock()
		l := newLimiter(fc, rate, 1)
		for range 1000 {
			if err := l.wait(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
		if s := fc.Sleeps(); len(s) != 0 {
			t.Fatalf("rate %v: slept %d times; want unlimited", rate, len(s))
		}
	}
	var nilLimiter *limiter
	if err := nilLimiter.wait(context.Background()); err != nil {
		t.Fatalf("nil limiter: %v", err)
	}
}

func TestLimiterBurstAtLeastOne(t *testing.T) {
	fc := newFakeClock()
	l := newLimiter(fc, 10, 0)
	if err := l.wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	if s := fc.Sleeps(); len(s) != 0 {
		t.Fatalf("first call with burst 0 slept %v; burst must be at least 1", s)
	}
	if err := l.wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got, want := fc.Sleeps(), []time.Duration{100 * time.Millisecond}; !slices.Equal(got, want) {
		t.Fatalf("sleeps %v; want %v", got, want)
	}
}

func TestClientRateLimitOptions(t *testing.T) {
	fc := newFakeClock()
	c, err := New(Options{BaseURL: "http://x", Clock: fc})
	if err != nil {
		t.Fatal(err)
	}
	if c.limiter == nil || c.limiter.rate != DefaultRateLimit || c.limiter.burst != DefaultRateBurst {
		t.Fatalf("default limiter %+v; want rate %v burst %v", c.limiter, DefaultRateLimit, DefaultRateBurst)
	}
	// Unlimited, any negative rate and +Inf keep no bucket at all.
	for _, rate := range []float64{Unlimited, -5, math.Inf(1)} {
		c, err = New(Options{BaseURL: "http://x", Clock: fc, RateLimit: rate})
		if err != nil {
			t.Fatal(err)
		}
		if c.limiter != nil {
			t.Errorf("RateLimit %v: a limiter of rate %v; want none", rate, c.limiter.rate)
		}
	}
	if _, err := New(Options{BaseURL: "http://x", RateLimit: math.NaN()}); err == nil {
		t.Error("RateLimit NaN accepted")
	}
}

// TestUnlimitedClientMakesNoWaits: an Unlimited client sends 300 requests
// as fast as they are answered, never sleeping on its (fake) clock; the
// same requests with a rate of 50/s sleep, which shows the clock sees
// every wait.
func TestUnlimitedClientMakesNoWaits(t *testing.T) {
	var mu sync.Mutex
	served := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		served++
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"success":true,"code":0,"message":"","uids":[1,2]}`)
	}))
	defer srv.Close()
	auth := directapi.Authentication{Username: "alice@direct.example", Password: "pw"}
	for _, tc := range []struct {
		rate   float64
		sleeps bool
	}{{Unlimited, false}, {50, true}} {
		fc := newFakeClock()
		c, err := New(Options{BaseURL: srv.URL, Clock: fc, RateLimit: tc.rate})
		if err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		served = 0
		mu.Unlock()
		var wg sync.WaitGroup
		for range 3 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 100 {
					if uids, err := c.GetUIDs(context.Background(), auth, "INBOX"); err != nil || len(uids) != 2 {
						t.Errorf("GetUIDs: %v %v", uids, err)
						return
					}
				}
			}()
		}
		wg.Wait()
		mu.Lock()
		n := served
		mu.Unlock()
		if n != 300 {
			t.Errorf("rate %v: provider served %d requests, want 300", tc.rate, n)
		}
		if got := len(fc.Sleeps()); (got > 0) != tc.sleeps {
			t.Errorf("rate %v: the client slept %d times; want sleeps %v", tc.rate, got, tc.sleeps)
		}
	}
}

func TestRealClockSleep(t *testing.T) {
	var c realClock
	if err := c.Sleep(context.Background(), 0); err != nil {
		t.Fatal(err)
	}
	if err := c.Sleep(context.Background(), time.Millisecond); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	start := time.Now()
	if err := c.Sleep(ctx, time.Hour); !errors.Is(err, context.Canceled) {
		t.Fatalf("Sleep with a cancelled context = %v", err)
	}
	if time.Since(start) > time.Second {
		t.Fatal("Sleep did not return when its context ended")
	}
}
