package mailstore

import (
	"context"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"
	"go.uber.org/goleak"

	"github.com/directbridge/directbridge/internal/state"
)

// TestCloseStopsEverything: after Close no goroutine of the engine is
// left (pollers, the settle timer's work, read-ahead) and nothing touches
// the state store, which is closed right after: the read marking that
// waited went out before.
func TestCloseStopsEverything(t *testing.T) {
	before := goleak.IgnoreCurrent()
	p := newFolderProvider(3)
	state, err := state.OpenStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	st := New(Config{Provider: p, State: state, PollInterval: 20 * time.Millisecond, CacheBytes: 1 << 20})
	ctx := context.Background()
	f, err := st.Acquire(ctx, testAuth, "INBOX")
	if err != nil {
		t.Fatal(err)
	}
	// An APPEND asked \Seen: its read marking waits for the settle timer.
	if _, err := f.Append(ctx, testAuth, []byte("Message-ID: <new@example.org>\r\nSubject: s\r\n\r\nnew\r\n"), "<new@example.org>", true, []imap.Flag{"$k"}, true); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond) // a poll or two run
	if err := st.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := state.Close(); err != nil {
		t.Fatal(err)
	}
	// Nothing runs any more, although a connection still holds the
	// folder (its poller ended with the store).
	goleak.VerifyNone(t, before)
	// The marking went out before Close returned.
	p.mu.Lock()
	read := p.read[4]
	p.mu.Unlock()
	if !read {
		t.Error("the appended message was not marked read at Close")
	}
	st.Release(f) // after Close: harmless, starts nothing
	goleak.VerifyNone(t, before)
}
