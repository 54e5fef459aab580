package bridge_test

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/tls"
	"database/sql"
	"encoding/hex"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"

	"github.com/directbridge/directbridge/bridge"
	"github.com/directbridge/directbridge/internal/state"
	"github.com/directbridge/directbridge/upstream/directapi"
)

// running starts a bridge on cfg and returns it with its stop function,
// which waits for Run to return cleanly.
func running(t *testing.T, cfg bridge.Config, log *slog.Logger) (*bridge.Bridge, func()) {
	t.Helper()
	b, err := bridge.New(cfg, log, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.Run(ctx) }()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(40 * time.Second):
			t.Fatal("Run did not return after cancel")
		}
	}
	t.Cleanup(stop)
	return b, stop
}

// smtpLogin logs alice in over SMTP submission.
func smtpLogin(t *testing.T, b *bridge.Bridge) *smtp.Client {
	t.Helper()
	c, err := smtp.DialStartTLS(b.Addr("SMTP submission (STARTTLS)"), &tls.Config{InsecureSkipVerify: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if err := c.Auth(sasl.NewPlainClient("", "alice@direct.example", "sandbox-demo")); err != nil {
		t.Fatal(err)
	}
	return c
}

// TestBounceFiledAfterBridgeRestart: the whole bridge, on the embedded
// sandbox. A message to an unknown mailbox is sent and the bridge stops
// before its first status check (30 s after the send). The journal entry
// is keyed with the data directory's journal.key (mode 0600). After the
// restart no status is asked until alice logs in (her credentials are not
// stored); her SMTP login resumes the message and exactly one DSN is
// filed.
//
// Broken on purpose: without the tracker's WatchLogins in front of the
// Verifier the DSN never comes; without the journal key given to the SMTP
// front the journal key is the plain hash.
func TestBounceFiledAfterBridgeRestart(t *testing.T) {
	cfg := testConfig(t)
	cfg.IMAPAddr, cfg.IMAPSAddr = bridge.Off, bridge.Off
	b, stop := running(t, cfg, nil)
	msg := "From: alice@direct.example\r\nTo: nobody@direct.example\r\nSubject: restart bounce\r\nMessage-ID: <rb-1@client.example>\r\n\r\nhello\r\n"
	c := smtpLogin(t, b)
	if err := c.SendMail("alice@direct.example", []string{"nobody@direct.example"}, strings.NewReader(msg)); err != nil {
		t.Fatal(err)
	}
	c.Quit()
	stop()

	key, err := os.ReadFile(filepath.Join(cfg.DataDir, state.JournalKeyFile))
	if err != nil || len(key) != state.JournalKeySize {
		t.Fatalf("journal key: %d bytes, %v", len(key), err)
	}
	if fi, _ := os.Stat(filepath.Join(cfg.DataDir, state.JournalKeyFile)); fi.Mode().Perm() != 0o600 {
		t.Errorf("journal key mode %o; want 0600", fi.Mode().Perm())
	}
	db, err := sql.Open("sqlite", "file:"+filepath.Join(cfg.DataDir, "state.db")+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	var journalKey string
	err = db.QueryRow(`SELECT key FROM submissions`).Scan(&journalKey)
	db.Close()
	m := hmac.New(sha256.New, key)
	m.Write([]byte("alice@direct.example\x00\x00" + msg))
	if want := hex.EncodeToString(m.Sum(nil)); err != nil || journalKey != want {
		t.Errorf("send journal key %q (%v); want the HMAC under journal.key %s", journalKey, err, want)
	}

	b, _ = running(t, cfg, nil)
	time.Sleep(1500 * time.Millisecond) // a tick or more
	if n := b.Sandbox().Calls("GetMessageStatuses") + b.Sandbox().Calls("SaveRawMessages"); n != 0 {
		t.Fatalf("%d status or save calls before alice logged in; want none (no credentials)", n)
	}
	smtpLogin(t, b).Quit()
	deadline := time.Now().Add(15 * time.Second)
	for b.Sandbox().Calls("SaveRawMessages") == 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(1500 * time.Millisecond) // further checks would come and go
	if n := b.Sandbox().Calls("SaveRawMessages"); n != 1 {
		t.Fatalf("%d DSNs filed after alice's login; want 1", n)
	}
}

// syncBuffer is a log destination written from several goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestJournalKeyMadeForOldStore: a data directory whose state store has
// journal entries but no journal key (a bridge from before the key) gets
// a key, and the operator is warned that those entries no longer match;
// a new data directory gets no warning.
func TestJournalKeyMadeForOldStore(t *testing.T) {
	cfg := testConfig(t)
	st, err := state.OpenStore(cfg.DataDir)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := st.ClaimSubmission(context.Background(), state.Submission{Key: "old", Username: "alice@direct.example", Match: "m", FirstAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	st.Close()
	var logs syncBuffer
	b, err := bridge.New(cfg, slog.New(slog.NewTextHandler(&logs, nil)), nil)
	if err != nil {
		t.Fatal(err)
	}
	b.Run(canceled())
	if !strings.Contains(logs.String(), "journal key made") || !strings.Contains(logs.String(), "entries=1") {
		t.Errorf("no warning about the entry made without the key:\n%s", logs.String())
	}
	if _, err := os.Stat(filepath.Join(cfg.DataDir, state.JournalKeyFile)); err != nil {
		t.Error(err)
	}

	fresh := testConfig(t)
	var quiet syncBuffer
	b, err = bridge.New(fresh, slog.New(slog.NewTextHandler(&quiet, nil)), nil)
	if err != nil {
		t.Fatal(err)
	}
	b.Run(canceled())
	if strings.Contains(quiet.String(), "journal key made") {
		t.Errorf("a warning on a new data directory:\n%s", quiet.String())
	}
}

// canceled is a context that has ended: Run stops at once.
func canceled() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}

// TestJournalKeyFromEnv: with DIRECTBRIDGE_JOURNAL_KEY (hex or base64 of
// 32 bytes) the bridge takes its key from there and writes no key file
// (replicas sharing a state store share the key through a Secret); a
// value of another length is refused at start, naming the variable and
// not quoting the value.
func TestJournalKeyFromEnv(t *testing.T) {
	for _, key := range []string{
		"00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff",
		"ABEiM0RVZneImaq7zN3u/wARIjNEVWZ3iJmqu8zd7v8=",
	} {
		cfg := testConfig(t)
		cfg.JournalKey = directapi.Secret(key)
		b, err := bridge.New(cfg, nil, nil)
		if err != nil {
			t.Fatalf("key %.8s...: %v", key, err)
		}
		b.Run(canceled())
		if _, err := os.Stat(filepath.Join(cfg.DataDir, state.JournalKeyFile)); !os.IsNotExist(err) {
			t.Errorf("a key file was written with the key given: %v", err)
		}
	}
	cfg := testConfig(t)
	cfg.JournalKey = "c2hvcnQta2V5LXNlY3JldA=="
	_, err := bridge.New(cfg, nil, nil)
	if err == nil || !strings.Contains(err.Error(), "DIRECTBRIDGE_JOURNAL_KEY") || strings.Contains(err.Error(), string(cfg.JournalKey)) {
		t.Fatalf("a 17-byte key: %v; want a refusal naming the variable, not the value", err)
	}
}
