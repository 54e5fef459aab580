package main

import (
	"bytes"
	"os/exec"
	"strings"
	"testing"
)

// TestMetricsAddrVariable: help lists DIRECTBRIDGE_METRICS_ADDR, and a bad
// value stops start-up with exit status 2 and a line naming it.
func TestMetricsAddrVariable(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run([]string{"help"}, &out, &errOut); code != 0 {
		t.Fatalf("help exit %d", code)
	}
	if !strings.Contains(out.String(), "DIRECTBRIDGE_METRICS_ADDR") {
		t.Error("help does not list DIRECTBRIDGE_METRICS_ADDR")
	}

	cmd := exec.Command(binPath, "serve")
	cmd.Env = cleanEnv("DIRECTBRIDGE_DATA_DIR="+t.TempDir(), "DIRECTBRIDGE_METRICS_ADDR=9090")
	got, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 {
		t.Fatalf("want exit 2, got %v\n%s", err, got)
	}
	if !strings.Contains(string(got), "DIRECTBRIDGE_METRICS_ADDR") {
		t.Errorf("output does not name DIRECTBRIDGE_METRICS_ADDR:\n%s", got)
	}
}
