package bridge_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"github.com/directbridge/directbridge/bridge"
)

// TestStartRefusedUnderLowFileLimit: under `ulimit -n 200` (soft and
// hard) each listener would get 18 connections, 9 before login, fewer
// than the 20 one address may hold; the bridge refuses to start and says
// what file limit would do. Run in a child process of the test binary,
// since a hard limit once lowered cannot be raised again.
func TestStartRefusedUnderLowFileLimit(t *testing.T) {
	const marker = "NEW ERROR: "
	if os.Getenv("BRIDGE_TEST_NOFILE_CHILD") == "1" {
		lim := syscall.Rlimit{Cur: 200, Max: 200}
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
			fmt.Println("SETRLIMIT:", err)
			return
		}
		b, err := bridge.New(testConfig(t), nil, nil)
		if err == nil {
			fmt.Println("STARTED")
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			b.Run(ctx)
			return
		}
		fmt.Println(marker + strings.ReplaceAll(err.Error(), "\n", " | "))
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestStartRefusedUnderLowFileLimit$", "-test.count=1")
	cmd.Env = append(os.Environ(), "BRIDGE_TEST_NOFILE_CHILD=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	if strings.Contains(string(out), "SETRLIMIT:") {
		t.Skipf("cannot lower the file limit here:\n%s", out)
	}
	_, msg, ok := strings.Cut(string(out), marker)
	if !ok {
		t.Fatalf("the bridge started under a file limit of 200:\n%s", out)
	}
	for _, want := range []string{"pre-login total 9", "per-address limit 20", "file-descriptor limit 200", "at least 288", "DIRECTBRIDGE_MAX_CONNS_PER_ADDRESS"} {
		if !strings.Contains(msg, want) {
			t.Errorf("the refusal lacks %q: %s", want, msg)
		}
	}
}
