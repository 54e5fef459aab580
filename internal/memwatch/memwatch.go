// Package memwatch measures the memory a piece of work adds, for
// benchmarks: the peak of the Go heap while it runs, sampled every
// millisecond, and the rise of the process's peak resident memory
// (VmHWM), which is what a container's memory limit counts. Benchmarks
// report them with b.ReportMetric; pass/fail tests should not depend on
// them, as they vary with the garbage collector's timing.
package memwatch

import (
	"bufio"
	"os"
	"runtime"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// heapInuse is runtime.MemStats.HeapInuse in runtime/metrics terms: the
// heap's spans holding objects, live or not yet collected.
var heapInuse = []string{"/memory/classes/heap/objects:bytes", "/memory/classes/heap/unused:bytes"}

// Watch samples the heap until Stop.
type Watch struct {
	base, hwm0 int64
	peak       atomic.Int64
	done       chan struct{}
	wg         sync.WaitGroup
}

// Start collects garbage, notes the heap in use and the process's peak
// resident memory, and samples the heap every millisecond until Stop.
func Start() *Watch {
	runtime.GC()
	w := &Watch{done: make(chan struct{}), hwm0: VmHWM()}
	samples := make([]metrics.Sample, len(heapInuse))
	for i, name := range heapInuse {
		samples[i].Name = name
	}
	read := func() int64 {
		metrics.Read(samples)
		var n int64
		for _, s := range samples {
			n += int64(s.Value.Uint64())
		}
		return n
	}
	w.base = read()
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for {
			if v := read(); v > w.peak.Load() {
				w.peak.Store(v)
			}
			select {
			case <-w.done:
				return
			case <-t.C:
			}
		}
	}()
	return w
}

// Stop ends the sampling and returns the peak heap in use above the
// start, and the rise of the process's peak resident memory (0 where
// there is no /proc). The latter is meaningful only for the first, or
// largest, piece of work in a process: the peak never comes down.
func (w *Watch) Stop() (heap, hwm int64) {
	close(w.done)
	w.wg.Wait()
	return max(0, w.peak.Load()-w.base), max(0, VmHWM()-w.hwm0)
}

// VmHWM is the process's peak resident memory in bytes, 0 without /proc.
func VmHWM() int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				return 0
			}
			return kb << 10
		}
	}
	return 0
}
