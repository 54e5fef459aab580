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
