package state_test

import (
	"context"
	"testing"

	"github.com/directbridge/directbridge/internal/state"
)

// testAttempts: an attempt asking under its owner is not undecided for
// that owner, is for another (its process stopped), and is for anyone
// once marked unknown; an ended one is gone; all of it across a restart,
// the user in any case.
func testAttempts(t *testing.T, open func() (state.StateStore, error)) {
	ctx := context.Background()
	st, err := open()
	if err != nil {
		t.Fatal(err)
	}
	a, err := st.BeginAttempt(ctx, "Alice@direct.example", "append:k1", "replica-a", 41)
	if err != nil {
		t.Fatal(err)
	}
	b, err := st.BeginAttempt(ctx, "alice@direct.example", "append:k1", "replica-a", 42)
	if err != nil || b <= a {
		t.Fatalf("second attempt id %d after %d, %v", b, a, err)
	}
	if got, err := st.UndecidedAttempts(ctx, "alice@direct.example", "append:k1", "replica-a"); err != nil || len(got) != 0 {
		t.Fatalf("own attempts still asking: %+v, %v; want none undecided", got, err)
	}
	if err := st.UnknownAttempt(ctx, a); err != nil {
		t.Fatal(err)
	}
	st.Close()
	if st, err = open(); err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	got, err := st.UndecidedAttempts(ctx, "ALICE@direct.example", "append:k1", "replica-a")
	if err != nil || len(got) != 1 || got[0].ID != a || got[0].State != state.AttemptUnknown || got[0].Mark != 41 {
		t.Fatalf("undecided for its owner after a restart: %+v, %v; want attempt %d, unknown, mark 41", got, err, a)
	}
	if got, _ := st.UndecidedAttempts(ctx, "alice@direct.example", "append:k1", "replica-b"); len(got) != 2 {
		t.Fatalf("undecided for another owner: %+v; want both (the owner's process stopped)", got)
	}
	if err := st.EndAttempts(ctx, a); err != nil {
		t.Fatal(err)
	}
	if got, _ := st.UndecidedAttempts(ctx, "alice@direct.example", "append:k1", "replica-b"); len(got) != 1 || got[0].ID != b {
		t.Fatalf("after ending %d: %+v; want only %d", a, got, b)
	}
	// Begun in one step unless undecided: another owner finds b.
	id, found, err := st.BeginUnlessUndecided(ctx, "alice@direct.example", "append:k1", "replica-b", 7)
	if err != nil || id != 0 || len(found) != 1 || found[0].ID != b || found[0].Mark != 42 || found[0].Owner != "replica-a" {
		t.Fatalf("BeginUnlessUndecided with an undecided attempt: id %d, %+v, %v; want none begun and %d found", id, found, err, b)
	}
	// Its owner finds nothing undecided and begins.
	id, found, err = st.BeginUnlessUndecided(ctx, "ALICE@direct.example", "append:k1", "replica-a", 7)
	if err != nil || id == 0 || len(found) != 0 {
		t.Fatalf("BeginUnlessUndecided with nothing undecided: id %d, %+v, %v; want one begun", id, found, err)
	}
	if got, _ := st.UndecidedAttempts(ctx, "alice@direct.example", "append:k1", "replica-c"); len(got) != 2 || got[1].ID != id || got[1].Mark != 7 || got[1].State != state.AttemptAsking {
		t.Fatalf("the attempt begun: %+v; want it after %d, asking, mark 7", got, b)
	}
}

// testReported: the first claim of a recipient's DSN is the caller's to
// file; a second finds it, with its DSN id, unfiled until marked filed;
// an unmarked claim can be made again.
func testReported(t *testing.T, open func() (state.StateStore, error)) {
	ctx := context.Background()
	st, err := open()
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	c, err := st.ClaimReport(ctx, "smtp-1", "dr@elsewhere.example", "dsn-1@bridge")
	if err != nil || !c.First || c.Filed || c.DSNID != "dsn-1@bridge" || c.At.IsZero() {
		t.Fatalf("first claim: %+v, %v", c, err)
	}
	if c, err = st.ClaimReport(ctx, "smtp-1", "dr@elsewhere.example", "dsn-2@bridge"); err != nil || c.First || c.Filed || c.DSNID != "dsn-1@bridge" {
		t.Fatalf("second claim: %+v, %v; want the first's, unfiled", c, err)
	}
	if err := st.MarkFiled(ctx, "smtp-1", []string{"dr@elsewhere.example"}); err != nil {
		t.Fatal(err)
	}
	if c, _ = st.ClaimReport(ctx, "smtp-1", "dr@elsewhere.example", "x"); c.First || !c.Filed {
		t.Fatalf("after MarkFiled: %+v; want filed", c)
	}
	if c, _ = st.ClaimReport(ctx, "smtp-1", "other@elsewhere.example", "dsn-3@bridge"); !c.First {
		t.Fatalf("another recipient: %+v; want a first claim", c)
	}
	if err := st.UnmarkReported(ctx, "smtp-1", "other@elsewhere.example"); err != nil {
		t.Fatal(err)
	}
	if c, _ = st.ClaimReport(ctx, "smtp-1", "other@elsewhere.example", "dsn-4@bridge"); !c.First || c.DSNID != "dsn-4@bridge" {
		t.Fatalf("after UnmarkReported: %+v; want a new first claim", c)
	}
}

// testSettings: a setting is recorded and read back after a restart, and
// UsedBefore says whether any folder has state.
func testSettings(t *testing.T, open func() (state.StateStore, error)) {
	ctx := context.Background()
	st, err := open()
	if err != nil {
		t.Fatal(err)
	}
	s, ok := st.(interface {
		Setting(ctx context.Context, name string) (string, error)
		SetSetting(ctx context.Context, name, value string) error
		UsedBefore(ctx context.Context) (bool, error)
	})
	if !ok {
		t.Fatalf("%T keeps no settings", st)
	}
	if v, err := s.Setting(ctx, "imap_layout"); err != nil || v != "" {
		t.Fatalf("unset setting: %q, %v", v, err)
	}
	if used, err := s.UsedBefore(ctx); err != nil || used {
		t.Fatalf("UsedBefore of a new store: %v, %v", used, err)
	}
	if err := s.SetSetting(ctx, "imap_layout", "inbox"); err != nil {
		t.Fatal(err)
	}
	if err := s.SetSetting(ctx, "imap_layout", "flat"); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Folder(ctx, "alice@direct.example", "INBOX"); err != nil {
		t.Fatal(err)
	}
	st.Close()
	if st, err = open(); err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	s = st.(interface {
		Setting(ctx context.Context, name string) (string, error)
		SetSetting(ctx context.Context, name, value string) error
		UsedBefore(ctx context.Context) (bool, error)
	})
	if v, err := s.Setting(ctx, "imap_layout"); err != nil || v != "flat" {
		t.Fatalf("setting after a restart: %q, %v; want flat", v, err)
	}
	if used, err := s.UsedBefore(ctx); err != nil || !used {
		t.Fatalf("UsedBefore with a folder: %v, %v", used, err)
	}
}
