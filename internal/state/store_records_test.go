package state_test

import (
	"context"
	"testing"
	"time"

	"github.com/directbridge/directbridge/internal/state"
)

// alice is the user of the store tests of this file.
const alice = "alice@direct.example"

func testStoreSentRecords(t *testing.T, open func() (state.StateStore, error)) {
	s, err := open()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	if err := s.RecordSent(ctx, state.SentRecord{Username: "Alice@Direct.Example", SmtpID: "abc@direct.example", MessageID: "<m1@client>", SentAt: at}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s, err = open() // survives a restart
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	rec, ok, err := s.FindSent(ctx, alice, "<m1@client>", at.Add(-time.Hour))
	if err != nil || !ok || rec.SmtpID != "abc@direct.example" || !rec.SentAt.Equal(at) {
		t.Fatalf("FindSent = %+v, %v, %v", rec, ok, err)
	}
	if _, ok, _ := s.FindSent(ctx, alice, "<m1@client>", at.Add(time.Second)); ok {
		t.Fatal("a record older than since was found")
	}
	if _, ok, _ := s.FindSent(ctx, "bob@direct.example", "<m1@client>", time.Time{}); ok {
		t.Fatal("another user's record was found")
	}
}

func testStoreFolderState(t *testing.T, open func() (state.StateStore, error)) {
	s, err := open()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	a, err := s.Folder(ctx, alice, "INBOX")
	if err != nil || a.UIDValidity == 0 || a.UIDNext != 1 {
		t.Fatalf("new folder: %+v, %v", a, err)
	}
	b, _ := s.Folder(ctx, alice, "INBOX.Sent")
	if b.UIDValidity == a.UIDValidity {
		t.Fatal("two folders share a UIDVALIDITY")
	}
	if err := s.SeenUIDs(ctx, alice, "INBOX", 41); err != nil {
		t.Fatal(err)
	}
	s.SeenUIDs(ctx, alice, "INBOX", 7) // never goes down
	if err := s.SetFlags(ctx, alice, "INBOX", a.UIDValidity, map[uint32][]string{5: {"\\Flagged", "$Label1"}, 6: {"\\Answered"}}); err != nil {
		t.Fatal(err)
	}
	s.Close()

	s, _ = open() // survives a restart
	defer s.Close()
	again, _ := s.Folder(ctx, alice, "INBOX")
	if again.UIDValidity != a.UIDValidity || again.UIDNext != 42 {
		t.Fatalf("after restart: %+v; want validity %d, next 42", again, a.UIDValidity)
	}
	fl, err := s.Flags(ctx, alice, "INBOX", a.UIDValidity)
	if err != nil || len(fl) != 2 || len(fl[5]) != 2 || fl[6][0] != "\\Answered" {
		t.Fatalf("flags after restart: %v, %v", fl, err)
	}
	s.SetFlags(ctx, alice, "INBOX", a.UIDValidity, map[uint32][]string{6: nil})
	if fl, _ := s.Flags(ctx, alice, "INBOX", a.UIDValidity); len(fl) != 1 {
		t.Fatalf("removing flags: %v", fl)
	}

	// A rename keeps UIDVALIDITY and flags; a reset makes a new UIDVALIDITY.
	if err := s.RenameFolder(ctx, alice, "INBOX", "INBOX.Old"); err != nil {
		t.Fatal(err)
	}
	old, _ := s.Folder(ctx, alice, "INBOX.Old")
	if old.UIDValidity != a.UIDValidity {
		t.Fatalf("rename lost UIDVALIDITY: %+v", old)
	}
	if fl, _ := s.Flags(ctx, alice, "INBOX.Old", a.UIDValidity); len(fl) != 1 {
		t.Fatalf("rename lost flags: %v", fl)
	}
	reset, _ := s.ResetFolder(ctx, alice, "INBOX.Old", 100)
	if reset.UIDValidity == a.UIDValidity || reset.UIDNext != 100 {
		t.Fatalf("reset: %+v", reset)
	}
	if fl, _ := s.Flags(ctx, alice, "INBOX.Old", reset.UIDValidity); len(fl) != 0 {
		t.Fatalf("reset kept flags: %v", fl)
	}
	// Deleting forgets: a folder of the same name starts afresh with a
	// new UIDVALIDITY, but the UIDNEXT high-water mark of the name stays
	// (a provider does not reuse a folder name's UIDs).
	s.ForgetFolder(ctx, alice, "INBOX.Old")
	fresh, _ := s.Folder(ctx, alice, "INBOX.Old")
	if fresh.UIDValidity == reset.UIDValidity || fresh.UIDNext != 100 {
		t.Fatalf("after forget: %+v", fresh)
	}
	if again, _ := s.Folder(ctx, alice, "INBOX.Old"); again != fresh {
		t.Fatalf("state changed between reads: %+v, %+v", fresh, again)
	}
	s.ForgetFolder(ctx, alice, "INBOX.Old")
	created, _ := s.ResetFolder(ctx, alice, "INBOX.Old", 0)
	if created.UIDValidity == fresh.UIDValidity || created.UIDNext != 100 {
		t.Fatalf("re-created folder: %+v", created)
	}
	// A renamed folder's old name keeps its high-water mark too.
	s.SeenUIDs(ctx, alice, "INBOX.Old", 149)
	s.RenameFolder(ctx, alice, "INBOX.Old", "INBOX.New")
	if st, _ := s.Folder(ctx, alice, "INBOX.Old"); st.UIDNext != 150 || st.UIDValidity == created.UIDValidity {
		t.Fatalf("old name after rename: %+v", st)
	}
	if st, _ := s.Folder(ctx, alice, "INBOX.New"); st != (state.FolderState{UIDValidity: created.UIDValidity, UIDNext: 150}) {
		t.Fatalf("new name after rename: %+v", st)
	}
	if fresh, _ := s.Folder(ctx, alice, "INBOX.Never"); fresh.UIDNext != 1 {
		t.Fatalf("new name: %+v", fresh)
	}
}

// testStoreNonASCIIFolderNames: prefixes are measured in characters, as
// SQLite measures them, so sub-folders of non-ASCII names follow a rename.
func testStoreNonASCIIFolderNames(t *testing.T, open func() (state.StateStore, error)) {
	s, err := open()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	child, _ := s.Folder(ctx, alice, "INBOX.Bücher.Kinder")
	if err := s.RenameFolder(ctx, alice, "INBOX.Bücher", "INBOX.Books"); err != nil {
		t.Fatal(err)
	}
	moved, _ := s.Folder(ctx, alice, "INBOX.Books.Kinder")
	if moved.UIDValidity != child.UIDValidity {
		t.Fatalf("sub-folder of a non-ASCII name lost its UIDVALIDITY in a rename")
	}
	s.ForgetFolder(ctx, alice, "INBOX.Books")
	if again, _ := s.Folder(ctx, alice, "INBOX.Books.Kinder"); again.UIDValidity == child.UIDValidity {
		t.Fatal("ForgetFolder kept a sub-folder")
	}
}
