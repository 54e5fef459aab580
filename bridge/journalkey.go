package bridge

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"strings"
	"time"

	"github.com/directbridge/directbridge/internal/state"
)

// journalKey loads the key the journals' fingerprints are made under (the
// SMTP send journal, the IMAP journal of attempts), from the data
// directory, making it on first start. When it is made for a state store
// that already holds journal entries (a data directory from before the
// key, or whose key file was lost), those entries no longer match a
// retry: the operator is told how many, and what that risks.
func (b *Bridge) journalKey() ([]byte, error) {
	if b.cfg.JournalKey != "" {
		return decodeJournalKey(string(b.cfg.JournalKey))
	}
	key, created, err := state.LoadJournalKey(b.cfg.DataDir)
	if err != nil {
		return nil, fmt.Errorf("journal key: %w", err)
	}
	if !created {
		return key, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	n, err := b.store.JournalEntries(ctx)
	switch {
	case err != nil:
		b.log.Warn("journal key made; the journal entries made before it could not be counted", "err", err)
	case n > 0:
		b.log.Warn("journal key made for a state store with journal entries made without it: they no longer match, "+
			"and a client's retry of one of those messages within the next 24 hours is sent or saved again rather than recognised",
			"entries", n, "file", state.JournalKeyFile)
	}
	return key, nil
}

// decodeJournalKey reads DIRECTBRIDGE_JOURNAL_KEY: 32 bytes, written in
// hex (64 digits, as "openssl rand -hex 32" writes them) or base64. Its
// errors never quote the value.
func decodeJournalKey(s string) ([]byte, error) {
	s = strings.TrimSpace(s)
	if b, err := hex.DecodeString(s); err == nil && len(b) == state.JournalKeySize {
		return b, nil
	}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(s); err == nil && len(b) == state.JournalKeySize {
			return b, nil
		}
	}
	return nil, fmt.Errorf("not %d bytes in hex or base64 (make one with: openssl rand -hex %d)", state.JournalKeySize, state.JournalKeySize)
}
