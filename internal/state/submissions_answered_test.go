package state_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/directbridge/directbridge/internal/state"
)

// testSubmissionAnswered: an entry is marked answered only while it is
// the attempt sent under the smtpId named, the mark survives reopening
// the store, changes the entry's version (a take-over that read it
// before fails), and a new attempt clears it.
//
// Broken on purpose: without the state and smtp_id conditions in
// AnswerSubmission, an earlier attempt's reply marks the later one; with
// BeginSubmission leaving answered alone, the new attempt starts out
// answered.
func testSubmissionAnswered(t *testing.T, open func() (state.StateStore, error)) {
	ctx := context.Background()
	st, err := open()
	if err != nil {
		t.Fatal(err)
	}
	at := time.Now().Add(-time.Minute).Truncate(time.Millisecond)
	sub := state.Submission{Key: "k", Username: "alice@direct.example", Match: "m", FirstAt: at}
	if _, claimed, err := st.ClaimSubmission(ctx, sub); err != nil || !claimed {
		t.Fatalf("claim: %v, %v", claimed, err)
	}
	// Not sent yet: nothing to answer.
	if err := st.AnswerSubmission(ctx, "k", ""); err != nil {
		t.Fatal(err)
	}
	if got, _, _ := st.FindSubmission(ctx, "k"); got.Answered {
		t.Fatalf("an entry still sending was marked answered: %+v", got)
	}
	if err := st.CompleteSubmission(ctx, "k", state.SentRecord{Username: "alice@direct.example", SmtpID: "smtp-1", SentAt: time.Now()}, nil); err != nil {
		t.Fatal(err)
	}
	if err := st.AnswerSubmission(ctx, "k", "smtp-other"); err != nil {
		t.Fatal(err)
	}
	before, _, _ := st.FindSubmission(ctx, "k")
	if before.Answered {
		t.Fatalf("another smtpId's reply marked the entry: %+v", before)
	}
	time.Sleep(2 * time.Millisecond) // updated_at is kept to the millisecond
	if err := st.AnswerSubmission(ctx, "k", "smtp-1"); err != nil {
		t.Fatal(err)
	}
	st.Close()
	if st, err = open(); err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	answered, ok, err := st.FindSubmission(ctx, "k")
	if err != nil || !ok || !answered.Answered || answered.State != state.SubmissionSent || answered.SmtpID != "smtp-1" {
		t.Fatalf("after the reply was written and a reopen: %+v, %v, %v", answered, ok, err)
	}
	if !answered.UpdatedAt.After(before.UpdatedAt) {
		t.Errorf("the mark left updated_at at %v (was %v): not part of the entry's version", answered.UpdatedAt, before.UpdatedAt)
	}
	next := sub
	next.FirstAt = at.Add(30 * time.Second)
	if began, err := st.BeginSubmission(ctx, before, next); err != nil || began {
		t.Fatalf("a take-over that read the entry before it was answered: began %v, %v", began, err)
	}
	if began, err := st.BeginSubmission(ctx, answered, next); err != nil || !began {
		t.Fatalf("a second submission taking the answered entry over: began %v, %v", began, err)
	}
	got, _, _ := st.FindSubmission(ctx, "k")
	if got.Answered || got.State != state.SubmissionSending || got.SmtpID != "" {
		t.Fatalf("the new attempt: %+v; want sending, not answered", got)
	}
	// The earlier attempt's smtpId no longer marks it, even once sent.
	if err := st.EndSubmission(ctx, "k", state.SubmissionSent, "smtp-2"); err != nil {
		t.Fatal(err)
	}
	if err := st.AnswerSubmission(ctx, "k", "smtp-1"); err != nil {
		t.Fatal(err)
	}
	if got, _, _ := st.FindSubmission(ctx, "k"); got.Answered {
		t.Errorf("the first attempt's reply marked the second: %+v", got)
	}
}

// testSubmissionDeferred: submissions told to try later are counted,
// across reopening the store and new attempts (the clients told to wait
// still are), and each is taken once, by one of concurrent takers; the
// count leaves updated_at (the start of an unknown outcome's hold) alone,
// and an expired entry claimed anew starts from none.
//
// Broken on purpose: with TakeDeferred decrementing without its
// "deferred > 0" condition, more takers than deferrals get one; with
// BeginSubmission clearing the count, the count is 0 after the take-over
// (a client told to wait before another retry took the entry over would
// have its own retry taken for a second submission).
func testSubmissionDeferred(t *testing.T, open func() (state.StateStore, error)) {
	ctx := context.Background()
	st, err := open()
	if err != nil {
		t.Fatal(err)
	}
	at := time.Now().Add(-time.Minute).Truncate(time.Millisecond)
	sub := state.Submission{Key: "k", Username: "alice@direct.example", Match: "m", FirstAt: at}
	if _, claimed, err := st.ClaimSubmission(ctx, sub); err != nil || !claimed {
		t.Fatalf("claim: %v, %v", claimed, err)
	}
	if err := st.EndSubmission(ctx, "k", state.SubmissionUnknown, ""); err != nil {
		t.Fatal(err)
	}
	unknown, _, _ := st.FindSubmission(ctx, "k")
	if took, err := st.TakeDeferred(ctx, "k"); err != nil || took {
		t.Fatalf("TakeDeferred with none deferred: %v, %v", took, err)
	}
	for range 3 {
		if err := st.DeferSubmission(ctx, "k"); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.DeferSubmission(ctx, "no such key"); err != nil {
		t.Fatal(err)
	}
	got, _, _ := st.FindSubmission(ctx, "k")
	if got.Deferred != 3 || !got.UpdatedAt.Equal(unknown.UpdatedAt) {
		t.Fatalf("after three deferrals: %+v; want 3, updated_at unchanged (%v)", got, unknown.UpdatedAt)
	}
	st.Close()
	if st, err = open(); err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	next := sub
	next.FirstAt = at.Add(30 * time.Second)
	if began, err := st.BeginSubmission(ctx, got, next); err != nil || !began {
		t.Fatalf("take-over: %v, %v", began, err)
	}
	var took atomic.Int32
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ok, err := st.TakeDeferred(ctx, "k")
			if err != nil {
				t.Error(err)
			}
			if ok {
				took.Add(1)
			}
		}()
	}
	wg.Wait()
	if n := took.Load(); n != 3 {
		t.Errorf("8 concurrent takers of 3 deferrals took %d", n)
	}
	if got, _, _ := st.FindSubmission(ctx, "k"); got.Deferred != 0 {
		t.Errorf("after taking them all: %+v", got)
	}

	// An expired entry claimed again starts from no deferral.
	old := state.Submission{Key: "old", Username: "alice@direct.example", Match: "m", FirstAt: time.Now().Add(-state.SubmissionTTL - time.Minute)}
	if _, claimed, err := st.ClaimSubmission(ctx, old); err != nil || !claimed {
		t.Fatalf("claim: %v, %v", claimed, err)
	}
	if err := st.DeferSubmission(ctx, "old"); err != nil {
		t.Fatal(err)
	}
	old.FirstAt = time.Now()
	if _, claimed, err := st.ClaimSubmission(ctx, old); err != nil || !claimed {
		t.Fatalf("claim of the expired entry: %v, %v", claimed, err)
	}
	if got, _, _ := st.FindSubmission(ctx, "old"); got.Deferred != 0 || got.Answered {
		t.Errorf("an expired entry claimed anew: %+v", got)
	}
}
