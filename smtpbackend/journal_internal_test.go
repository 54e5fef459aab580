package smtpbackend

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"testing"

	"github.com/directbridge/directbridge/upstream/directapi"
)

// TestJournalFingerprintsKeyed: the journal's key and match are
// HMAC-SHA256 under the journal key: the same message gives the same
// fingerprints under the same key (a restart reads the key back), other
// ones under another key, and neither is the plain SHA-256 a holder of
// the state store could compute from a guessed message. Without a key
// they are the plain hashes they always were.
//
// Broken on purpose: with submissionKey or copyMatch hashing with
// sha256.New() again, the "not keyed" checks fail.
func TestJournalFingerprintsKeyed(t *testing.T) {
	raw := []byte("From: alice@direct.example\r\nTo: bob@direct.example\r\nSubject: lab results\r\n\r\nPotassium 6.8 mmol/L.\r\n")
	sub, err := Convert(raw, Envelope{From: "alice@direct.example", Recipients: []string{"bob@direct.example"}}, "alice@direct.example", Limits{})
	if err != nil {
		t.Fatal(err)
	}
	k1, k2 := bytes.Repeat([]byte{0x11}, 32), bytes.Repeat([]byte{0x22}, 32)

	keyed := submissionKey(k1, "alice@direct.example", "", raw)
	if again := submissionKey(bytes.Clone(k1), "alice@direct.example", "", raw); again != keyed {
		t.Errorf("the same message under the same key: %s, then %s", keyed, again)
	}
	m := hmac.New(sha256.New, k1)
	m.Write([]byte("alice@direct.example\x00\x00"))
	m.Write(raw)
	if want := hex.EncodeToString(m.Sum(nil)); keyed != want {
		t.Errorf("submission key %s; want HMAC-SHA256 under the key, %s", keyed, want)
	}
	plain := sha256.Sum256(append([]byte("alice@direct.example\x00\x00"), raw...))
	if keyed == hex.EncodeToString(plain[:]) {
		t.Error("the submission key is not keyed")
	}
	if submissionKey(k2, "alice@direct.example", "", raw) == keyed {
		t.Error("another key gives the same submission key")
	}
	if got := submissionKey(nil, "alice@direct.example", "", raw); got != hex.EncodeToString(plain[:]) {
		t.Errorf("without a key the submission key is %s; want the plain SHA-256 %s", got, hex.EncodeToString(plain[:]))
	}

	match := matchOf(k1, sub)
	if matchOf(k1, sub) != match {
		t.Error("the same message's match differs under the same key")
	}
	if match == matchOf(nil, sub) {
		t.Error("the match is not keyed")
	}
	if matchOf(k2, sub) == match {
		t.Error("another key gives the same match")
	}
	// The provider's Sent copy of the message matches under the key.
	shown := []string{"Bob@Direct.Example "}
	if copyMatch(k1, sub.Message.Subject, shown, directapi.Message{Body: sub.Message.Body + "\n"}) != match {
		t.Error("the Sent copy does not match under the key")
	}
}
