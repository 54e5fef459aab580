package mailstore

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"testing"

	"github.com/emersion/go-imap/v2"
)

// TestAttemptKeysKeyed: the journal keys of APPEND and COPY are
// HMAC-SHA256 under Config.JournalKey (the same key as the SMTP send
// journal's), so the state store holds no plain hash of an appended
// message; the same change gives the same key under the same key (a
// retry after a restart finds its attempt), another under another key.
// Without a key they are the plain SHA-256 they were.
//
// Broken on purpose: with appendKey or copyKey hashing with sha256.New()
// again, the keyed and unkeyed values are equal and the test fails.
func TestAttemptKeysKeyed(t *testing.T) {
	raw := []byte("Subject: lab results\r\n\r\nPotassium 6.8 mmol/L.\r\n")
	k1, k2 := bytes.Repeat([]byte{0x11}, 32), bytes.Repeat([]byte{0x22}, 32)
	keyed, other, plain := &Store{cfg: Config{JournalKey: k1}}, &Store{cfg: Config{JournalKey: k2}}, &Store{}

	m := hmac.New(sha256.New, k1)
	m.Write([]byte("append\x00INBOX\x00"))
	m.Write(raw)
	if got, want := keyed.appendKey("INBOX", raw), hex.EncodeToString(m.Sum(nil)); got != want {
		t.Errorf("APPEND key %s; want HMAC-SHA256 under the key, %s", got, want)
	}
	sum := sha256.Sum256(append([]byte("append\x00INBOX\x00"), raw...))
	if got := plain.appendKey("INBOX", raw); got != hex.EncodeToString(sum[:]) {
		t.Errorf("APPEND key without a journal key %s; want the plain SHA-256", got)
	}
	if (&Store{cfg: Config{JournalKey: bytes.Clone(k1)}}).appendKey("INBOX", raw) != keyed.appendKey("INBOX", raw) {
		t.Error("the same APPEND under the same key gives another journal key")
	}
	if other.appendKey("INBOX", raw) == keyed.appendKey("INBOX", raw) {
		t.Error("another key gives the same APPEND key")
	}

	uids := []imap.UID{3, 5, 8}
	if keyed.copyKey("INBOX", 7, "Archive", uids) != keyed.copyKey("INBOX", 7, "Archive", uids) {
		t.Error("the same COPY gives another journal key")
	}
	if keyed.copyKey("INBOX", 7, "Archive", uids) == plain.copyKey("INBOX", 7, "Archive", uids) ||
		keyed.copyKey("INBOX", 7, "Archive", uids) == other.copyKey("INBOX", 7, "Archive", uids) {
		t.Error("the COPY key does not depend on the journal key")
	}
}
