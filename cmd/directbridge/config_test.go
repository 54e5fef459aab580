package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestServeConfigurationErrors: every invalid setting of the bridge stops
// start-up with a line naming the variable and exit status 2; several
// problems give one line each; no configured secret is printed.
func TestServeConfigurationErrors(t *testing.T) {
	for _, tc := range []struct{ env, want string }{
		{"DIRECTBRIDGE_IMAP_ADDR=imap.example", "DIRECTBRIDGE_IMAP_ADDR"},
		{"DIRECTBRIDGE_SMTPS_ADDR=465", "DIRECTBRIDGE_SMTPS_ADDR"},
		{"DIRECTBRIDGE_API_URL=ftp://hisp.example", "DIRECTBRIDGE_API_URL"},
		{"DIRECTBRIDGE_TLS_CERT=/nonexistent/cert.pem", "DIRECTBRIDGE_TLS_KEY"},
		{"DIRECTBRIDGE_EXPUNGE=shred", "DIRECTBRIDGE_EXPUNGE"},
		{"DIRECTBRIDGE_POLL_INTERVAL=often", "POLL_INTERVAL"},
		{"DIRECTBRIDGE_POLL_INTERVAL=1ms", "DIRECTBRIDGE_POLL_INTERVAL"},
		{"DIRECTBRIDGE_API_BATCH_SIZE=9000", "DIRECTBRIDGE_API_BATCH_SIZE"},
		{"DIRECTBRIDGE_API_RATE_LIMIT=-5", "DIRECTBRIDGE_API_RATE_LIMIT"},
		{"DIRECTBRIDGE_API_RATE_LIMIT=fast", "DIRECTBRIDGE_API_RATE_LIMIT"},
		{"DIRECTBRIDGE_SANDBOX_USERS=alice@direct.example", "DIRECTBRIDGE_SANDBOX_USERS"},
	} {
		cmd := exec.Command(binPath, "serve")
		cmd.Env = cleanEnv("DIRECTBRIDGE_DATA_DIR="+t.TempDir(), tc.env)
		out, err := cmd.CombinedOutput()
		ee, ok := err.(*exec.ExitError)
		if !ok || ee.ExitCode() != 2 {
			t.Errorf("%s: want exit 2, got %v\n%s", tc.env, err, out)
			continue
		}
		if !strings.Contains(string(out), tc.want) {
			t.Errorf("%s: output does not name %s:\n%s", tc.env, tc.want, out)
		}
	}

	cmd := exec.Command(binPath, "serve")
	cmd.Env = cleanEnv("DIRECTBRIDGE_DATA_DIR="+t.TempDir(), "DIRECTBRIDGE_IMAP_ADDR=x", "DIRECTBRIDGE_EXPUNGE=shred",
		"DIRECTBRIDGE_SANDBOX_USERS=alice@direct.example:Secret-Pass-77")
	out, _ := cmd.CombinedOutput()
	lines := strings.Count(strings.TrimSpace(string(out)), "\n") + 1
	if lines < 2 || !strings.Contains(string(out), "DIRECTBRIDGE_IMAP_ADDR") || !strings.Contains(string(out), "DIRECTBRIDGE_EXPUNGE") {
		t.Errorf("two problems should give two lines:\n%s", out)
	}
	if strings.Contains(string(out), "Secret-Pass-77") {
		t.Errorf("a configured password was printed:\n%s", out)
	}
}
