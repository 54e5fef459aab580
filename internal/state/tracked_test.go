package state_test

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/directbridge/directbridge/internal/state"
)

// testTrackedMessages: what the delivery tracker follows survives
// reopening the store, whole (recipients in order, with their NOTIFY);
// an untracked message is gone, and one sent before the bound asked for
// is dropped.
func testTrackedMessages(t *testing.T, open func() (state.StateStore, error)) {
	ctx := context.Background()
	st, err := open()
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().Truncate(time.Millisecond).UTC()
	a := state.TrackedMessage{SmtpID: "id-a", Username: "alice@direct.example", Sender: "alice@direct.example",
		MessageID: "<a@client.example>", EnvID: "env-a", SentAt: now.Add(-time.Hour),
		Recipients: []state.TrackedRecipient{{Address: "bob@direct.example"}, {Address: "doc@remote.example", Notify: "NEVER"}}}
	b := state.TrackedMessage{SmtpID: "id-b", Username: "alice@direct.example", Sender: "alice@direct.example",
		SentAt: now, Recipients: []state.TrackedRecipient{{Address: "carol@direct.example", Notify: "SUCCESS,FAILURE"}}}
	old := state.TrackedMessage{SmtpID: "id-old", Username: "alice@direct.example", Sender: "alice@direct.example",
		SentAt: now.Add(-48 * time.Hour), Recipients: []state.TrackedRecipient{{Address: "bob@direct.example"}}}
	gone := state.TrackedMessage{SmtpID: "id-gone", Username: "alice@direct.example", Sender: "alice@direct.example",
		SentAt: now, Recipients: []state.TrackedRecipient{{Address: "bob@direct.example"}}}
	for _, m := range []state.TrackedMessage{b, a, old, gone} {
		if err := st.TrackMessage(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.UntrackMessage(ctx, "id-gone"); err != nil {
		t.Fatal(err)
	}
	if err := st.UntrackMessage(ctx, "never-tracked"); err != nil {
		t.Fatal(err)
	}
	st.Close()
	if st, err = open(); err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	got, err := st.TrackedMessages(ctx, now.Add(-24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if want := []state.TrackedMessage{a, b}; !reflect.DeepEqual(got, want) {
		t.Fatalf("after reopening:\n got %+v\nwant %+v", got, want)
	}
	// The old one was dropped, not only left out.
	if got, _ := st.TrackedMessages(ctx, now.Add(-72*time.Hour)); len(got) != 2 {
		t.Errorf("%d messages with a wider bound; the one older than the first bound should be gone", len(got))
	}
}

// testCompleteTracks: completing a send's journal entry with the tracked
// message writes the entry, the sent record and the tracked record in one
// go, and without one writes no tracked record (a T-user's send, or a
// bridge without a delivery tracker).
func testCompleteTracks(t *testing.T, open func() (state.StateStore, error)) {
	ctx := context.Background()
	st, err := open()
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	now := time.Now().Truncate(time.Millisecond).UTC()
	for _, key := range []string{"k1", "k2"} {
		if _, claimed, err := st.ClaimSubmission(ctx, state.Submission{Key: key, Username: "alice@direct.example", Match: key, FirstAt: now}); err != nil || !claimed {
			t.Fatalf("claim %s: %v, %v", key, claimed, err)
		}
	}
	tm := state.TrackedMessage{SmtpID: "smtp-1", Username: "alice@direct.example", Sender: "alice@direct.example",
		MessageID: "<1@client.example>", SentAt: now, Recipients: []state.TrackedRecipient{{Address: "bob@direct.example", Notify: "FAILURE"}}}
	if err := st.CompleteSubmission(ctx, "k1", state.SentRecord{Username: "alice@direct.example", SmtpID: "smtp-1", MessageID: "<1@client.example>", SentAt: now}, &tm); err != nil {
		t.Fatal(err)
	}
	if err := st.CompleteSubmission(ctx, "k2", state.SentRecord{Username: "alice@direct.example", SmtpID: "smtp-2", SentAt: now}, nil); err != nil {
		t.Fatal(err)
	}
	for key, id := range map[string]string{"k1": "smtp-1", "k2": "smtp-2"} {
		if got, ok, err := st.FindSubmission(ctx, key); err != nil || !ok || got.State != state.SubmissionSent || got.SmtpID != id {
			t.Errorf("entry %s: %+v, %v, %v; want sent as %s", key, got, ok, err, id)
		}
	}
	got, err := st.TrackedMessages(ctx, now.Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if want := []state.TrackedMessage{tm}; !reflect.DeepEqual(got, want) {
		t.Fatalf("tracked:\n got %+v\nwant %+v", got, want)
	}
}
