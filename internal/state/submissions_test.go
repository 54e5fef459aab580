package state_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/directbridge/directbridge/internal/state"
)

// testSubmissionJournal: an entry goes from sending to sent or unknown,
// survives reopening the store, and is forgotten on request.
func testSubmissionJournal(t *testing.T, open func() (state.StateStore, error)) {
	ctx := context.Background()
	st, err := open()
	if err != nil {
		t.Fatal(err)
	}
	at := time.Now().Add(-time.Minute).Truncate(time.Millisecond)
	for _, k := range []string{"k1", "k2", "k3"} {
		if _, claimed, err := st.ClaimSubmission(ctx, state.Submission{Key: k, Username: "Alice@direct.example", Match: "m-" + k, FirstAt: at}); err != nil || !claimed {
			t.Fatalf("claim %s: claimed %v, %v", k, claimed, err)
		}
	}
	if err := st.EndSubmission(ctx, "k1", state.SubmissionSent, "smtp-1"); err != nil {
		t.Fatal(err)
	}
	if err := st.EndSubmission(ctx, "k2", state.SubmissionUnknown, ""); err != nil {
		t.Fatal(err)
	}
	if err := st.ForgetSubmission(ctx, "k3"); err != nil {
		t.Fatal(err)
	}
	st.Close()
	if st, err = open(); err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for _, want := range []state.Submission{
		{Key: "k1", Username: "alice@direct.example", State: state.SubmissionSent, SmtpID: "smtp-1", Match: "m-k1", FirstAt: at.UTC()},
		{Key: "k2", Username: "alice@direct.example", State: state.SubmissionUnknown, Match: "m-k2", FirstAt: at.UTC()},
	} {
		got, ok, err := st.FindSubmission(ctx, want.Key)
		if got.UpdatedAt.Before(got.FirstAt) {
			t.Errorf("%s: updated %v before first %v", want.Key, got.UpdatedAt, got.FirstAt)
		}
		got.UpdatedAt = time.Time{}
		if err != nil || !ok || got != want {
			t.Errorf("FindSubmission(%s) = %+v, %v, %v; want %+v", want.Key, got, ok, err, want)
		}
	}
	if _, ok, err := st.FindSubmission(ctx, "k3"); ok || err != nil {
		t.Errorf("a forgotten entry is found (%v)", err)
	}
	// A new attempt of the same submission starts over as sending.
	again := at.Add(30 * time.Second)
	prev, _, _ := st.FindSubmission(ctx, "k2")
	if began, err := st.BeginSubmission(ctx, prev, state.Submission{Key: "k2", Username: "alice@direct.example", Match: "m-k2", FirstAt: again}); err != nil || !began {
		t.Fatalf("BeginSubmission: began %v, %v", began, err)
	}
	if got, _, _ := st.FindSubmission(ctx, "k2"); got.State != state.SubmissionSending || !got.FirstAt.Equal(again) {
		t.Errorf("after a new attempt: %+v", got)
	}
}

// testClaimSubmission: a claim records a new entry and says so; a second
// claim of the same key finds the first (and changes nothing); an entry
// older than SubmissionTTL is taken over as a new one.
func testClaimSubmission(t *testing.T, open func() (state.StateStore, error)) {
	ctx := context.Background()
	st, err := open()
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	at := time.Now().Truncate(time.Millisecond)
	sub := state.Submission{Key: "k", Username: "alice@direct.example", Match: "m", FirstAt: at}
	if _, claimed, err := st.ClaimSubmission(ctx, sub); err != nil || !claimed {
		t.Fatalf("first claim: claimed %v, %v", claimed, err)
	}
	if err := st.EndSubmission(ctx, "k", state.SubmissionSent, "smtp-k"); err != nil {
		t.Fatal(err)
	}
	later := sub
	later.FirstAt, later.Match = at.Add(time.Second), "other"
	prev, claimed, err := st.ClaimSubmission(ctx, later)
	if err != nil || claimed {
		t.Fatalf("second claim: claimed %v, %v", claimed, err)
	}
	if prev.State != state.SubmissionSent || prev.SmtpID != "smtp-k" || prev.Match != "m" || !prev.FirstAt.Equal(at.UTC()) {
		t.Errorf("second claim found %+v; want the first entry, sent", prev)
	}
	old := state.Submission{Key: "old", Username: "alice@direct.example", FirstAt: at.Add(-state.SubmissionTTL - time.Minute)}
	if _, claimed, err := st.ClaimSubmission(ctx, old); err != nil || !claimed {
		t.Fatalf("claim of an old entry: claimed %v, %v", claimed, err)
	}
	old.FirstAt = at
	if _, claimed, err := st.ClaimSubmission(ctx, old); err != nil || !claimed {
		t.Fatalf("claim over an expired entry: claimed %v, %v", claimed, err)
	}
	if got, ok, _ := st.FindSubmission(ctx, "old"); !ok || got.State != state.SubmissionSending || !got.FirstAt.Equal(at.UTC()) {
		t.Errorf("after taking over an expired entry: %+v (found %v)", got, ok)
	}
}

// testBeginSubmissionIsCompareAndSet: two retries that found the same
// undecided entry both try to start it over; only the first does, and
// the entry is then its attempt. An entry ended, or forgotten, since it
// was read is not started over either; nor is one read before an earlier
// take-over of the same state (a killed bridge's entry, still sending).
func testBeginSubmissionIsCompareAndSet(t *testing.T, open func() (state.StateStore, error)) {
	ctx := context.Background()
	st, err := open()
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	at := time.Now().Add(-10 * time.Minute).Truncate(time.Millisecond)
	sub := state.Submission{Key: "k", Username: "alice@direct.example", Match: "m", FirstAt: at}
	if _, claimed, err := st.ClaimSubmission(ctx, sub); err != nil || !claimed {
		t.Fatalf("first claim: claimed %v, %v", claimed, err)
	}
	if err := st.EndSubmission(ctx, "k", state.SubmissionUnknown, ""); err != nil {
		t.Fatal(err)
	}
	// Both retries read the entry before either starts it over.
	retry := sub
	retry.FirstAt = time.Now().Truncate(time.Millisecond)
	var found [2]state.Submission
	for i := range found {
		prev, claimed, err := st.ClaimSubmission(ctx, retry)
		if err != nil || claimed || prev.State != state.SubmissionUnknown {
			t.Fatalf("retry %d: claim found %+v, claimed %v, %v; want the unknown entry", i, prev, claimed, err)
		}
		found[i] = prev
	}
	if began, err := st.BeginSubmission(ctx, found[0], retry); err != nil || !began {
		t.Fatalf("the first retry did not start the entry over: %v, %v", began, err)
	}
	second := retry
	second.FirstAt = retry.FirstAt.Add(time.Millisecond)
	if began, err := st.BeginSubmission(ctx, found[1], second); err != nil || began {
		t.Fatalf("the second retry started the entry over too (began %v, %v): both would send", began, err)
	}
	got, ok, err := st.FindSubmission(ctx, "k")
	if err != nil || !ok || got.State != state.SubmissionSending || !got.FirstAt.Equal(retry.FirstAt.UTC()) {
		t.Fatalf("after the race: %+v (found %v, %v); want the first retry's attempt, sending", got, ok, err)
	}

	// Read while sending (a bridge killed mid-call), taken over by one
	// retry, which then ends: a retry that read the old entry in state
	// sending does not start it over, though the state is sending again.
	stale := got
	third := retry
	third.FirstAt = retry.FirstAt.Add(2 * time.Millisecond)
	if began, err := st.BeginSubmission(ctx, stale, third); err != nil || !began {
		t.Fatalf("taking over the sending entry: %v, %v", began, err)
	}
	fourth := retry
	fourth.FirstAt = retry.FirstAt.Add(3 * time.Millisecond)
	if began, err := st.BeginSubmission(ctx, stale, fourth); err != nil || began {
		t.Fatalf("a stale read of a sending entry started it over (began %v, %v)", began, err)
	}

	// Ended meanwhile: the provider took it; nothing starts it over.
	now, _, _ := st.FindSubmission(ctx, "k")
	if err := st.EndSubmission(ctx, "k", state.SubmissionSent, "smtp-k"); err != nil {
		t.Fatal(err)
	}
	if began, err := st.BeginSubmission(ctx, now, fourth); err != nil || began {
		t.Fatalf("an entry sent since it was read was started over (began %v, %v)", began, err)
	}
	if got, _, _ := st.FindSubmission(ctx, "k"); got.State != state.SubmissionSent || got.SmtpID != "smtp-k" {
		t.Errorf("the sent entry changed: %+v", got)
	}

	// Forgotten meanwhile: no entry is made by a take-over.
	sent, _, _ := st.FindSubmission(ctx, "k")
	if err := st.ForgetSubmission(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	if began, err := st.BeginSubmission(ctx, sent, fourth); err != nil || began {
		t.Fatalf("a forgotten entry was started over (began %v, %v)", began, err)
	}
	if _, ok, _ := st.FindSubmission(ctx, "k"); ok {
		t.Error("a take-over of a forgotten entry made one")
	}
}

// testConcurrentClaimsOneWins: many claims of one new key at once, on
// the same store: exactly one may send.
func testConcurrentClaimsOneWins(t *testing.T, open func() (state.StateStore, error)) {
	ctx := context.Background()
	st, err := open()
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	const n = 8
	claims := make(chan bool, n)
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, claimed, err := st.ClaimSubmission(ctx, state.Submission{Key: "k", Username: "a@direct.example", FirstAt: time.Now()})
			if err != nil {
				t.Error(err)
			}
			claims <- claimed
		}()
	}
	wg.Wait()
	close(claims)
	won := 0
	for c := range claims {
		if c {
			won++
		}
	}
	if won != 1 {
		t.Errorf("%d of %d concurrent claims of one key won, want 1", won, n)
	}
}

// testSentRecordsPruned: sent records older than the retention go at the
// next purge (the first send of the minute); younger ones stay.
func testSentRecordsPruned(t *testing.T, open func() (state.StateStore, error)) {
	ctx := context.Background()
	st, err := open()
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	r, ok := st.(interface{ SetSentRetention(time.Duration) })
	if !ok {
		t.Fatalf("%T cannot be told how long to keep sent records (SetSentRetention)", st)
	}
	r.SetSentRetention(time.Hour)
	old := state.SentRecord{Username: "a@direct.example", SmtpID: "old", MessageID: "<old@x>", SentAt: time.Now().Add(-2 * time.Hour)}
	young := state.SentRecord{Username: "a@direct.example", SmtpID: "young", MessageID: "<young@x>", SentAt: time.Now()}
	for _, r := range []state.SentRecord{old, young} {
		if err := st.RecordSent(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := st.ClaimSubmission(ctx, state.Submission{Key: "k", Username: "a@direct.example", FirstAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := st.FindSent(ctx, "a@direct.example", "<old@x>", time.Time{}); ok {
		t.Error("a sent record older than the retention is still there")
	}
	if _, ok, _ := st.FindSent(ctx, "a@direct.example", "<young@x>", time.Time{}); !ok {
		t.Error("a young sent record was pruned")
	}
}
