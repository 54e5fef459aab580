package mailbox

import (
	"context"
	"testing"
	"time"
)

func TestRecentSent(t *testing.T) {
	s, err := OpenStore(t.TempDir())
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
