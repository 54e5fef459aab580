package enginetest

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// defaultSeeds keeps `go test ./internal/enginetest/` under 20 s on a
// 2-core machine, and under 40 s with -race: a seed takes a little under
// a second (1,000 seeds: 14 minutes), under -race about 1.7 s.
// ENGINE_SEEDS=1000 is a deeper run.
const defaultSeeds = 4

var seedFlag = flag.Int64("seed", -1, "run this seed only (as ENGINE_SEED does)")

// TestMain fails the package when a run leaves a goroutine behind: every
// connection, poller and timer of the bridge must end when it stops.
// Only when the tests passed: a command that hung leaves goroutines
// stuck, which its failure already shows.
func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goroutines left behind: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// seeds returns the seeds to run: ENGINE_SEED or -seed alone, else
// ENGINE_SEEDS of them (defaultSeeds unless set) from 1.
func seeds(t *testing.T) []uint64 {
	if *seedFlag >= 0 {
		return []uint64{uint64(*seedFlag)}
	}
	if v := os.Getenv("ENGINE_SEED"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("ENGINE_SEED=%q: %v", v, err)
		}
		return []uint64{n}
	}
	count := defaultSeeds
	if v := os.Getenv("ENGINE_SEEDS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("ENGINE_SEEDS=%q: want a positive number", v)
		}
		count = n
	}
	out := make([]uint64, count)
	for i := range out {
		out[i] = uint64(i + 1)
	}
	return out
}

// TestEngineModel runs the model test for each seed, stopping at the
// first that fails (the rest would mostly repeat it) unless
// ENGINE_KEEPGOING is set, to survey what fails how often.
func TestEngineModel(t *testing.T) {
	start := time.Now()
	ss := seeds(t)
	for _, seed := range ss {
		ok := t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) { runSeed(t, seed) })
		if !ok {
			t.Logf("replay: ENGINE_SEED=%d go test ./internal/enginetest -run TestEngineModel -v", seed)
			if os.Getenv("ENGINE_KEEPGOING") == "" {
				break
			}
		}
	}
	t.Logf("%d seeds in %v", len(ss), time.Since(start).Round(time.Millisecond))
}
