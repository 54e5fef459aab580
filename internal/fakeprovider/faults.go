package fakeprovider

import (
	"context"
	"math/rand/v2"
	"slices"
	"sync"
	"time"
)

// Latency is the range the time a call takes is drawn from, uniformly.
type Latency struct {
	Min, Max time.Duration
}

// Faults are the failures injected into calls, each drawn independently
// per call.
type Faults struct {
	// Unavailable is the probability that a call fails with
	// upstream.ErrTemporary before doing anything: the provider could
	// not be reached.
	Unavailable float64
	// LostAnswer is the probability that a change (Save, Copy, Move,
	// Delete, SetRead, the folder operations, Send, Forward) is carried
	// out and then answers upstream.ErrUnknownOutcome, as when the
	// connection breaks after the request went out.
	LostAnswer float64
	// Methods limits the faults to these upstream.Provider methods
	// (e.g. "Save"); nil means every method.
	Methods []string
}

// chaos is the part of the provider that is not the provider: latency,
// faults, call counters. Its lock is its own, so that drawing never waits
// for an operation.
type chaos struct {
	mu       sync.Mutex
	rng      *rand.Rand
	latency  Latency
	faults   Faults
	calls    map[string]int64
	injected int64 // faults injected so far, of both kinds
}

// draw counts a call of method and draws its latency, split in the part
// before the operation runs and the part after, and its faults.
func (c *chaos) draw(method string, change bool) (before, after time.Duration, fail, lose bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls[method]++
	d := c.latency.Min
	if span := c.latency.Max - c.latency.Min; span > 0 {
		d += time.Duration(c.rng.Int64N(int64(span) + 1))
	}
	before = d / 2
	after = d - before
	f := c.faults
	if f.Methods != nil && !slices.Contains(f.Methods, method) {
		return before, after, false, false
	}
	fail = f.Unavailable > 0 && c.rng.Float64() < f.Unavailable
	lose = !fail && change && f.LostAnswer > 0 && c.rng.Float64() < f.LostAnswer
	if fail || lose {
		c.injected++
	}
	return before, after, fail, lose
}

// SetFaults replaces the faults injected from now on; Faults{} stops them.
func (p *Provider) SetFaults(f Faults) {
	p.chaos.mu.Lock()
	defer p.chaos.mu.Unlock()
	p.chaos.faults = f
}

// SetLatency replaces the latency of calls from now on.
func (p *Provider) SetLatency(l Latency) {
	p.chaos.mu.Lock()
	defer p.chaos.mu.Unlock()
	p.chaos.latency = l
}

// FaultsInjected returns how many faults were injected so far. A test
// compares it before and after one of its commands to learn whether a
// failure it saw may come from a fault.
func (p *Provider) FaultsInjected() int64 {
	p.chaos.mu.Lock()
	defer p.chaos.mu.Unlock()
	return p.chaos.injected
}

// pause waits d, or returns ctx's error if ctx ends first (or has ended).
func pause(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if d <= 0 {
		return nil
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
