package gctune

import (
	"runtime"
	"runtime/debug"
	"testing"
	"time"
)

func TestPercent(t *testing.T) {
	cfg := Config{Percent: 50, Headroom: 64 << 20, MaxPercent: 800}
	for _, c := range []struct {
		live uint64
		want int
	}{
		{0, 800},        // nothing live yet: the most
		{4 << 20, 800},  // 64 MiB over 4 MiB would be 1600%: bounded
		{32 << 20, 200}, // 64 MiB of headroom over 32 MiB
		{128 << 20, 50}, // 50% of 128 MiB is 64 MiB
		{1 << 30, 50},   // large heaps grow by the share
		{100 << 20, 64}, // 64 MiB over 100 MiB
	} {
		if got := Percent(cfg, c.live); got != c.want {
			t.Errorf("Percent(%d MiB) = %d, want %d", c.live>>20, got, c.want)
		}
	}
}

// gcPercent reads the collector's current target.
func gcPercent() int {
	p := debug.SetGCPercent(100)
	debug.SetGCPercent(p)
	return p
}

// TestTargetFollowsLiveHeap: after a collection the target is the one
// for the heap that survived it, small or large.
func TestTargetFollowsLiveHeap(t *testing.T) {
	defer debug.SetGCPercent(gcPercent())
	tu := Start(Config{Percent: 50, Headroom: 64 << 20, MaxPercent: 800})
	defer tu.Stop()

	// collect runs a collection and waits until the target was set
	// from it or a later one (the finalizer may run collections late).
	collect := func() {
		t.Helper()
		runtime.GC()
		var st runtime.MemStats
		runtime.ReadMemStats(&st)
		want := uint64(st.NumGC)
		deadline := time.Now().Add(5 * time.Second)
		for tu.cycle.Load() < want {
			runtime.GC()
			if time.Now().After(deadline) {
				t.Fatal("the target was not set after a collection")
			}
			time.Sleep(time.Millisecond)
		}
	}
	collect()
	if p := gcPercent(); p < 200 {
		t.Fatalf("small heap: target %d%%, want the headroom's share (>= 200%%)", p)
	}
	big := make([][]byte, 0, 256)
	for range 256 {
		big = append(big, make([]byte, 1<<20)) // 256 MiB live
	}
	collect()
	if p := gcPercent(); p != 50 {
		t.Fatalf("256 MiB live: target %d%%, want 50%%", p)
	}
	runtime.KeepAlive(big)
	big = nil
	collect()
	if p := gcPercent(); p < 200 {
		t.Fatalf("heap small again: target %d%%, want >= 200%%", p)
	}
	tu.Stop()
	debug.SetGCPercent(77)
	collect2 := func() { runtime.GC(); runtime.GC(); time.Sleep(10 * time.Millisecond) }
	collect2()
	if p := gcPercent(); p != 77 {
		t.Fatalf("after Stop the target was changed: %d%%", p)
	}
}
