package limits

import (
	"syscall"
	"testing"
)

// TestRaiseFileLimit: with the soft limit below the hard one (the Go
// runtime leaves it one below), RaiseFileLimit sets it to the hard limit.
func TestRaiseFileLimit(t *testing.T) {
	var orig syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &orig); err != nil {
		t.Skip(err)
	}
	if orig.Max < 256 || orig.Max == ^uint64(0) {
		t.Skipf("hard limit %d", orig.Max)
	}
	low := syscall.Rlimit{Cur: orig.Max - 1, Max: orig.Max}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &low); err != nil {
		t.Skipf("lowering the soft limit is not permitted: %v", err)
	}
	t.Cleanup(func() { syscall.Setrlimit(syscall.RLIMIT_NOFILE, &orig) })
	before, after, err := RaiseFileLimit()
	if err != nil {
		t.Skipf("raising is not permitted here: %v", err)
	}
	if before.Soft != low.Cur {
		t.Errorf("before: soft %d; want %d", before.Soft, low.Cur)
	}
	var now syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &now); err != nil {
		t.Fatal(err)
	}
	if now.Cur != now.Max || after.Soft != now.Cur || after.Hard != now.Max {
		t.Fatalf("after: soft %d, hard %d (reported %+v); want the soft limit at the hard one", now.Cur, now.Max, after)
	}
}
