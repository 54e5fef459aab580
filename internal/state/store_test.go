package state

import (
	"context"
	"strings"
	"testing"
	"time"
)

func TestRecentSent(t *testing.T) { eachBackend(t, testRecentSent) }

func testRecentSent(t *testing.T, open func() (*Store, error)) {
	s, err := open()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Millisecond)
	for _, r := range []SentRecord{
		{Username: "Alice@Direct.Example", SmtpID: "a1", MessageID: "<1@x>", SentAt: now.Add(-2 * time.Hour)},
		{Username: "alice@direct.example", SmtpID: "a2", MessageID: "<2@x>", SentAt: now.Add(-time.Hour)},
		{Username: "alice@direct.example", SmtpID: "a3", MessageID: "<3@x>", SentAt: now},
		{Username: "alice@direct.example", SmtpID: "old", MessageID: "<0@x>", SentAt: now.Add(-30 * 24 * time.Hour)},
		{Username: "bob@direct.example", SmtpID: "b1", MessageID: "<4@x>", SentAt: now},
	} {
		if err := s.RecordSent(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.RecentSent(ctx, "ALICE@direct.example", now.Add(-24*time.Hour), 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got[0].SmtpID != "a3" || got[2].SmtpID != "a1" || !got[0].SentAt.Equal(now) || got[0].MessageID != "<3@x>" {
		t.Fatalf("RecentSent: %+v", got)
	}
	if got, _ := s.RecentSent(ctx, "alice@direct.example", now.Add(-24*time.Hour), 2); len(got) != 2 || got[1].SmtpID != "a2" {
		t.Fatalf("RecentSent with a limit: %+v", got)
	}
	if got, _ := s.RecentSent(ctx, "carol@direct.example", time.Time{}, 10); len(got) != 0 {
		t.Fatalf("RecentSent of nobody: %+v", got)
	}
}

// TestSubscriptionsKept: subscribed names without a folder are kept per
// user (case-insensitive user, case-sensitive name) and across a reopen.
func TestSubscriptionsKept(t *testing.T) { eachBackend(t, testSubscriptionsKept) }

func testSubscriptionsKept(t *testing.T, open func() (*Store, error)) {
	ctx := context.Background()
	s, err := open()
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"INBOX.b", "INBOX.a", "INBOX.a"} {
		if err := s.Subscribe(ctx, "U@x", n); err != nil {
			t.Fatal(err)
		}
	}
	s.Subscribe(ctx, "other@x", "INBOX.c")
	s.Close()
	if s, err = open(); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got, err := s.Subscribed(ctx, "u@x")
	if err != nil || strings.Join(got, ",") != "INBOX.a,INBOX.b" {
		t.Fatalf("Subscribed = %q, %v", got, err)
	}
	if n, err := s.Unsubscribe(ctx, "u@X", "INBOX.A", "INBOX.a", "INBOX.z"); err != nil || n != 1 {
		t.Fatalf("Unsubscribe = %d, %v; want 1", n, err)
	}
	if got, _ := s.Subscribed(ctx, "u@x"); strings.Join(got, ",") != "INBOX.b" {
		t.Fatalf("after Unsubscribe: %q", got)
	}
	if got, _ := s.Subscribed(ctx, "other@x"); strings.Join(got, ",") != "INBOX.c" {
		t.Fatalf("other user: %q", got)
	}
}
