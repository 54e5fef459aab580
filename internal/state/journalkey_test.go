package state_test

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/directbridge/directbridge/internal/state"
)

// TestJournalKeyFile: the first start makes a 32-byte key in
// journal.key, mode 0600; later starts read the same key back; a key file
// made readable by others is made 0600 again; a key file of the wrong
// size stops the start and is left as it is (a new key would disown every
// journal entry).
func TestJournalKeyFile(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data") // not there yet
	key, created, err := state.LoadJournalKey(dir)
	if err != nil || !created || len(key) != state.JournalKeySize {
		t.Fatalf("first load: %d bytes, created %v, %v; want a new 32-byte key", len(key), created, err)
	}
	path := filepath.Join(dir, state.JournalKeyFile)
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("key file mode %o; want 0600", fi.Mode().Perm())
	}
	if onDisk, _ := os.ReadFile(path); !bytes.Equal(onDisk, key) {
		t.Errorf("the file holds %x; the key is %x", onDisk, key)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("the directory holds %d files; want the key alone (no temporary file left)", len(entries))
	}

	again, created, err := state.LoadJournalKey(dir)
	if err != nil || created || !bytes.Equal(again, key) {
		t.Fatalf("second load: %x, created %v, %v; want the same key, not made again", again, created, err)
	}

	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := state.LoadJournalKey(dir); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Errorf("key file left mode %o; want 0600", fi.Mode().Perm())
	}

	if err := os.WriteFile(path, key[:10], 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := state.LoadJournalKey(dir); err == nil {
		t.Error("a 10-byte key file was accepted")
	}
	if onDisk, _ := os.ReadFile(path); !bytes.Equal(onDisk, key[:10]) {
		t.Error("a key file of the wrong size was replaced")
	}
}

// TestJournalKeyConcurrentStart: bridges starting at once on a new data
// directory end up with one key between them.
func TestJournalKeyConcurrentStart(t *testing.T) {
	dir := t.TempDir()
	const n = 8
	keys := make([][]byte, n)
	made := make([]bool, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var err error
			if keys[i], made[i], err = state.LoadJournalKey(dir); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	creators := 0
	for i := range n {
		if !bytes.Equal(keys[i], keys[0]) {
			t.Fatalf("start %d got key %x, start 0 %x", i, keys[i], keys[0])
		}
		if made[i] {
			creators++
		}
	}
	if creators != 1 {
		t.Errorf("%d starts made the key; want 1", creators)
	}
}

// TestJournalHash: with a key the fingerprint is HMAC-SHA256 under it
// (another key, another fingerprint); without one it is plain SHA-256, as
// before keys existed.
func TestJournalHash(t *testing.T) {
	data := []byte("Subject: lab results\r\n\r\npotassium 6.8 mmol/L\r\n")
	sum := func(key []byte) []byte {
		h := state.JournalHash(key)
		h.Write(data)
		return h.Sum(nil)
	}
	plain := sha256.Sum256(data)
	if !bytes.Equal(sum(nil), plain[:]) {
		t.Error("without a key the fingerprint is not SHA-256")
	}
	k1, k2 := bytes.Repeat([]byte{1}, 32), bytes.Repeat([]byte{2}, 32)
	m := hmac.New(sha256.New, k1)
	m.Write(data)
	if !bytes.Equal(sum(k1), m.Sum(nil)) {
		t.Error("with a key the fingerprint is not HMAC-SHA256 under it")
	}
	if bytes.Equal(sum(k1), sum(k2)) || bytes.Equal(sum(k1), plain[:]) {
		t.Error("the fingerprint does not depend on the key")
	}
}

// TestJournalEntries counts what a new journal key would disown: live
// send-journal entries and attempts.
func TestJournalEntries(t *testing.T) {
	ctx := context.Background()
	st, err := state.OpenStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if n, err := st.JournalEntries(ctx); err != nil || n != 0 {
		t.Fatalf("empty store: %d, %v", n, err)
	}
	if _, _, err := st.ClaimSubmission(ctx, state.Submission{Key: "k", Username: "alice@direct.example", Match: "m", FirstAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.BeginAttempt(ctx, "alice@direct.example", "a", "owner", 0); err != nil {
		t.Fatal(err)
	}
	if n, err := st.JournalEntries(ctx); err != nil || n != 2 {
		t.Fatalf("one entry of each: %d, %v; want 2", n, err)
	}
}
