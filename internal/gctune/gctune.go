// Package gctune sets the garbage collector's target after every
// collection from the heap that survived it: a small heap may grow by a
// fixed headroom before the next collection, a large one by a fixed
// share.
//
// Go's GOGC is one share for every heap size. The bridge's heap is small
// under a load of many short commands (tens of megabytes: sessions,
// mirrors, a few cached messages), where a low share means a collection
// every few megabytes allocated, and large during a first sync of a big
// folder (metadata and cached raw messages of tens of thousands of
// messages), where a high share means hundreds of megabytes of garbage
// held. With a share of 50% alone, collection took a tenth of the
// daemon's CPU in imaptest's stress at a heap of some 20 MB; with 100%,
// the first sync of a 50,000-message folder left the process 30% larger
// (BENCHMARKS.md). Headroom then share gives each case its own: the
// heap grows by Headroom, or by Percent of what is live when that is
// more.
//
// The target is set from a finalizer (a sentinel object left
// unreachable, then made again), which the runtime runs after a
// collection when its finalizer goroutine gets to it: under a burst of
// allocation on one CPU that may be some collections later, so the
// target lags, and MaxPercent bounds what a stale target of a small heap
// can cost. It costs nothing between collections. GOMEMLIMIT still
// applies: the collector runs at whichever comes first.
package gctune

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync/atomic"
)

// Config is the tuning.
type Config struct {
	// Percent is the least share (GOGC) the heap may grow by between
	// collections.
	Percent int
	// Headroom is the least number of bytes it may grow by.
	Headroom uint64
	// MaxPercent bounds the share a tiny heap gets.
	MaxPercent int
}

// Tuner keeps the target set until Stop.
type Tuner struct {
	cfg     Config
	stopped atomic.Bool
	sample  []metrics.Sample
	// cycle is the number of collections completed when the target was
	// last set (for tests).
	cycle atomic.Uint64
}

// sentinel is allocated so that the collector finds it unreachable.
type sentinel struct{ t *Tuner }

// Start sets the target now and after every collection.
func Start(cfg Config) *Tuner {
	t := &Tuner{cfg: cfg, sample: []metrics.Sample{{Name: "/gc/heap/live:bytes"}, {Name: "/gc/cycles/total:gc-cycles"}}}
	t.set()
	t.arm()
	return t
}

// Stop ends the tuning; the last target set stays.
func (t *Tuner) Stop() { t.stopped.Store(true) }

func (t *Tuner) arm() {
	s := &sentinel{t: t}
	runtime.SetFinalizer(s, func(s *sentinel) {
		if s.t.stopped.Load() {
			return
		}
		s.t.set()
		s.t.arm()
	})
}

// set applies the target for the heap live after the last collection.
// The finalizer goroutine is the only caller after Start, so sample
// needs no lock.
func (t *Tuner) set() {
	metrics.Read(t.sample)
	var live uint64
	if t.sample[0].Value.Kind() == metrics.KindUint64 {
		live = t.sample[0].Value.Uint64()
	}
	debug.SetGCPercent(Percent(t.cfg, live))
	if t.sample[1].Value.Kind() == metrics.KindUint64 {
		t.cycle.Store(t.sample[1].Value.Uint64())
	}
}

// Percent is the share (GOGC) for a heap of live bytes: Headroom over
// live, at least cfg.Percent and at most cfg.MaxPercent.
func Percent(cfg Config, live uint64) int {
	p := cfg.MaxPercent
	if live > 0 {
		if h := cfg.Headroom * 100 / live; h < uint64(p) {
			p = int(h)
		}
	}
	return max(p, cfg.Percent)
}
