package observe

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

// TestNoClientInput: what a client sent never reaches the log; the
// library's own words do.
func TestNoClientInput(t *testing.T) {
	var buf bytes.Buffer
	l := LibraryLogger(slog.New(slog.NewTextHandler(&buf, nil)), "imap library")
	l.Printf("failed to read command: in command: imapwire: expected SP, got %q", "Patient Jane Doe 1970-01-01")
	l.Printf("handling LIST command: utf7: invalid UTF-7 in \"INBOX.secret&\"")
	out := buf.String()
	for _, leak := range []string{"Jane", "1970", "secret"} {
		if strings.Contains(out, leak) {
			t.Errorf("client input %q in the log: %s", leak, out)
		}
	}
	for _, want := range []string{"imap library: failed to read command", "imap library: handling LIST command", "sha256="} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %q: %s", want, out)
		}
	}
}
