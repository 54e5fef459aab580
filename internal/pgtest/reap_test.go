package pgtest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
)

// TestReapStale: the directory of a server whose test process is gone is
// stopped and removed at the next start; one of a live process (this
// one) is left alone.
func TestReapStale(t *testing.T) {
	bin, err := findBin()
	if err != nil {
		t.Skipf("PostgreSQL tests skipped: %v", err)
	}
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Skip("no true(1) to make a finished process")
	}
	stale := filepath.Join(os.TempDir(), dirPrefix+strconv.Itoa(gone.Process.Pid)+"-reaptest")
	live := filepath.Join(os.TempDir(), dirPrefix+strconv.Itoa(os.Getppid())+"-reaptest")
	for _, d := range []string{stale, live} {
		if err := os.MkdirAll(filepath.Join(d, "data"), 0o700); err != nil {
			t.Fatal(err)
		}
		defer os.RemoveAll(d)
	}
	reapStale(bin)
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("the directory of a finished test process is still there: %v", err)
	}
	if _, err := os.Stat(live); err != nil {
		t.Errorf("the directory of a live process was removed: %v", err)
	}
}
