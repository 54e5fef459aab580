package smtpbackend

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/directbridge/directbridge/internal/mimeconv"
)

// TestTuserMessageID: the Message-ID the bridge gives a T-user's message
// is valid (the provider keeps only a valid one), the same for a retry
// that reads the entry back from the state store (FirstAt to the
// millisecond), another for another attempt or entry, and keyed: without
// the journal key nobody can derive it from a guessed message's entry.
//
// Broken on purpose: derived from the attempt's time to the nanosecond,
// the retry's look-up (FirstAt read back in milliseconds) asks for another
// Message-ID than the attempt went out with.
func TestTuserMessageID(t *testing.T) {
	key := bytes.Repeat([]byte{0x5a}, 32)
	at := time.Date(2025, 3, 1, 10, 0, 0, 123456789, time.UTC)
	id := tuserMessageID(key, "entry", at, "alice@direct.example")
	if !mimeconv.ValidMessageID(id) || !strings.HasSuffix(id, "@direct.example") {
		t.Fatalf("Message-ID %q: not valid, or not in the sender's domain", id)
	}
	if again := tuserMessageID(key, "entry", time.UnixMilli(at.UnixMilli()).UTC(), "alice@direct.example"); again != id {
		t.Errorf("read back to the millisecond: %q, then %q", id, again)
	}
	for name, other := range map[string]string{
		"another attempt": tuserMessageID(key, "entry", at.Add(time.Millisecond), "alice@direct.example"),
		"another entry":   tuserMessageID(key, "other", at, "alice@direct.example"),
		"another key":     tuserMessageID(bytes.Repeat([]byte{0xa5}, 32), "entry", at, "alice@direct.example"),
		"no key":          tuserMessageID(nil, "entry", at, "alice@direct.example"),
	} {
		if other == id {
			t.Errorf("%s gives the same Message-ID %q", name, id)
		}
	}
}
