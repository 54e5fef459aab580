package bridge_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/directbridge/directbridge/bridge"
	"github.com/directbridge/directbridge/internal/limits"
)

// TestConnectionLimitsLogged: the bridge logs the limits it derived once,
// at start, from the file limit it raised: soft at hard, a quarter of it
// less 128 per listener (at most 10,000), half of that before login, the
// per-address and per-prefix limits; and no secret.
func TestConnectionLimitsLogged(t *testing.T) {
	cfg := testConfig(t)
	var logs strings.Builder
	b, err := bridge.New(cfg, slog.New(slog.NewTextHandler(&logs, nil)), nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := b.Run(ctx); err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, `msg="connection limits"`) {
			lines = append(lines, l)
		}
	}
	if len(lines) != 1 {
		t.Fatalf("%d lines of connection limits; want 1:\n%s", len(lines), logs.String())
	}
	if testing.Verbose() {
		t.Log(lines[0])
	}
	files, err := limits.CurrentFileLimit()
	if err != nil {
		t.Skip(err)
	}
	if runtime.GOOS == "linux" && files.Soft != files.Hard {
		t.Errorf("the soft file limit %d was not raised to the hard one %d", files.Soft, files.Hard)
	}
	total := int(min(10000, (files.Soft-128)/4))
	for _, want := range []string{
		fmt.Sprintf("file_limit=%d ", files.Soft), fmt.Sprintf("file_limit_hard=%d ", files.Hard),
		fmt.Sprintf("listener_total=%d ", total), fmt.Sprintf("pre_login_total=%d ", total/2),
		fmt.Sprintf("reserved_for_users=%d ", total-total/2),
		"per_address=20 ", "per_prefix=80 ", "pre_login_time=30s",
	} {
		if !strings.Contains(lines[0], want) {
			t.Errorf("the line lacks %q: %s", want, lines[0])
		}
	}
	if strings.Contains(logs.String(), "sandbox-demo") {
		t.Error("a password in the log")
	}
}

// TestStartRefusesLimitsThatCannotHold: a per-address limit above the
// pre-login total (one address could take every place before login)
// stops the bridge before it opens anything, with an error that names
// the setting.
func TestStartRefusesLimitsThatCannotHold(t *testing.T) {
	cfg := testConfig(t)
	cfg.MaxConnsPerAddress = 100000
	_, err := bridge.New(cfg, nil, nil)
	if !errors.Is(err, limits.ErrLimits) {
		t.Fatalf("New: %v; want limits.ErrLimits", err)
	}
	for _, want := range []string{"DIRECTBRIDGE_MAX_CONNS_PER_ADDRESS", "per-address limit 100000"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error lacks %q: %v", want, err)
		}
	}
	if _, err := os.Stat(filepath.Join(cfg.DataDir, "sandbox")); !os.IsNotExist(err) {
		t.Errorf("the embedded sandbox was opened before the refusal (%v)", err)
	}
}
