// LibraryLogger turns the log lines of the protocol libraries (go-imap,
// go-smtp) into lines that hold no client input: those libraries write
// what a client sent into their errors ("expected SP, got …", a bad
// mailbox name, a panic value), and a client may send health data or a
// password. Only the library's own words before the first colon are kept
// (for example "failed to read command"), with the length and a short
// hash of the whole line, enough to tell repeated errors apart.

package observe

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"log"
	"log/slog"
	"strings"
)

// LibraryLogger returns a *log.Logger for a library that writes through l at
// WARN, as "source: kind".
func LibraryLogger(l *slog.Logger, source string) *log.Logger {
	return log.New(writer{l, source}, "", 0)
}

type writer struct {
	l      *slog.Logger
	source string
}

func (w writer) Write(p []byte) (int, error) {
	line := strings.TrimSpace(string(p))
	kind := line
	if i := strings.IndexAny(kind, ":\n\"'"); i >= 0 {
		kind = kind[:i]
	}
	if len(kind) > 60 {
		kind = kind[:60]
	}
	sum := sha256.Sum256([]byte(line))
	w.l.Warn(w.source+": "+strings.TrimSpace(kind), "len", len(line), "sha256", hex.EncodeToString(sum[:6]))
	return len(p), nil
}

var _ io.Writer = writer{}
