package state

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"
	"time"
)

// The journals (the SMTP send journal, Submissions, and the IMAP journal
// of attempts, Attempts) find a retry by a fingerprint of what was sent or
// saved: the exact bytes of a message, among others. A plain hash of
// health data lets anyone holding state.db confirm a guessed message
// (a lab result with one value changed hashes differently: guessing is
// cheap). So the fingerprints are HMAC-SHA256 under a key kept outside
// the database, in its own file of the data directory: a copy of state.db
// alone (a backup, a file handed over for debugging, a store shared among
// replicas) confirms nothing.
//
// A data directory that had no key (a bridge before the key existed, or
// a key file lost) gets a new one; the entries written under the old
// fingerprints no longer match. They age out within a day (SubmissionTTL,
// AttemptTTL), and meanwhile a client's retry of a message whose send or
// APPEND was under way, undecided or (for SMTP) answered but not heard by
// the client just before the new key was made is sent or saved again
// rather than recognised. JournalEntries tells the operator how many
// entries that concerns.

// JournalKeyFile is the name of the journal key's file in the data
// directory.
const JournalKeyFile = "journal.key"

// JournalKeySize is the size of the journal key in bytes.
const JournalKeySize = 32

// LoadJournalKey returns the journal key kept in dir, creating it (32
// random bytes, mode 0600) when there is none; created says it was made
// now. A key file of another size is an error rather than replaced: a
// new key would silently disown every journal entry.
func LoadJournalKey(dir string) (key []byte, created bool, err error) {
	path := filepath.Join(dir, JournalKeyFile)
	key, err = readJournalKey(path)
	if err == nil {
		return key, false, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return nil, false, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, false, fmt.Errorf("state: journal key: %w", err)
	}
	key = make([]byte, JournalKeySize)
	if _, err := rand.Read(key); err != nil {
		return nil, false, fmt.Errorf("state: journal key: %w", err)
	}
	// Written whole to a temporary file, then linked into place: a crash
	// leaves no short key behind, and of two bridges starting at once
	// on one directory the second finds the first one's key (a link
	// does not replace) and uses it.
	tmp, err := os.CreateTemp(dir, "."+JournalKeyFile+"-*") // mode 0600
	if err != nil {
		return nil, false, fmt.Errorf("state: journal key: %w", err)
	}
	defer os.Remove(tmp.Name())
	_, err = tmp.Write(key)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, false, fmt.Errorf("state: journal key: %w", err)
	}
	if err := os.Link(tmp.Name(), path); err != nil {
		if errors.Is(err, os.ErrExist) {
			key, err = readJournalKey(path)
			return key, false, err
		}
		return nil, false, fmt.Errorf("state: journal key: %w", err)
	}
	// The link must outlive a crash, or the next start makes another
	// key and the journal written meanwhile no longer matches.
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
	return key, true, nil
}

// readJournalKey reads the key file at path, making it 0600 if it is not
// (as sqlstmt.PrivateFile does for the databases).
func readJournalKey(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("state: journal key: %w", err)
	}
	defer f.Close()
	key, err := io.ReadAll(io.LimitReader(f, JournalKeySize+1))
	if err != nil {
		return nil, fmt.Errorf("state: journal key: %w", err)
	}
	if len(key) != JournalKeySize {
		return nil, fmt.Errorf("state: journal key %s holds %d bytes, want %d; remove it to have a new one made (retries of messages sent in the last day may then be sent again)",
			path, len(key), JournalKeySize)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		return nil, fmt.Errorf("state: cannot make %s private (mode 0600): %w", path, err)
	}
	return key, nil
}

// JournalHash returns a new hash for a journal fingerprint: HMAC-SHA256
// under key, or plain SHA-256 when key is empty (a store made without a
// key, as tests do; the bridge always has one).
func JournalHash(key []byte) hash.Hash {
	if len(key) == 0 {
		return sha256.New()
	}
	return hmac.New(sha256.New, key) // copies what it needs of key
}

// JournalEntries counts the entries of the send journal and the journal
// of attempts that may still be matched by a retry (younger than
// SubmissionTTL and AttemptTTL). The bridge reports it when it makes a
// new journal key: those entries no longer match.
func (s *Store) JournalEntries(ctx context.Context) (int, error) {
	now := time.Now()
	var subs, atts int
	if err := s.stmts.QueryRow(ctx, `SELECT count(*) FROM submissions WHERE first_at >= ?`, now.Add(-SubmissionTTL).UnixMilli()).Scan(&subs); err != nil {
		return 0, fmt.Errorf("state: journal: %w", err)
	}
	if err := s.stmts.QueryRow(ctx, `SELECT count(*) FROM attempts WHERE created_at >= ?`, now.Add(-AttemptTTL).UnixMilli()).Scan(&atts); err != nil {
		return 0, fmt.Errorf("state: attempts: %w", err)
	}
	return subs + atts, nil
}
