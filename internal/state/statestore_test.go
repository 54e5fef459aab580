package state

import (
	"context"
	"maps"
	"slices"
	"testing"
	"time"
)

// testStateStore checks the behaviour the StateStore interface documents,
// on stores made by open. Any implementation must pass it.
func testStateStore(t *testing.T, open func(t *testing.T) StateStore) {
	ctx := context.Background()
	const alice = "alice@direct.example"

	t.Run("Folder", func(t *testing.T) {
		s := open(t)
		a, err := s.Folder(ctx, alice, "INBOX")
		if err != nil || a.UIDValidity == 0 || a.UIDNext != 1 {
			t.Fatalf("new folder = %+v, %v; want a UIDVALIDITY and UIDNEXT 1", a, err)
		}
		if again, err := s.Folder(ctx, "ALICE@direct.example", "INBOX"); err != nil || again != a {
			t.Fatalf("same folder again (user in other case) = %+v, %v; want %+v", again, err, a)
		}
		seen := map[uint32]bool{a.UIDValidity: true}
		for _, f := range []string{"inbox", "INBOX.Sent", "INBOX.Trash"} {
			st, err := s.Folder(ctx, alice, f)
			if err != nil || seen[st.UIDValidity] {
				t.Fatalf("Folder(%q) = %+v, %v; want a UIDVALIDITY not handed out before", f, st, err)
			}
			seen[st.UIDValidity] = true
		}
		b, err := s.Folder(ctx, "bob@direct.example", "INBOX")
		if err != nil || seen[b.UIDValidity] {
			t.Fatalf("another user's INBOX = %+v, %v; want its own UIDVALIDITY", b, err)
		}
	})

	t.Run("SeenUIDs", func(t *testing.T) {
		s := open(t)
		st, err := s.Folder(ctx, alice, "INBOX")
		if err != nil {
			t.Fatal(err)
		}
		for _, step := range []struct {
			maxUID uint32
			want   uint32
		}{{0, 1}, {10, 11}, {5, 11}, {4294967294, 4294967295}} {
			if err := s.SeenUIDs(ctx, alice, "INBOX", step.maxUID); err != nil {
				t.Fatal(err)
			}
			got, err := s.Folder(ctx, alice, "INBOX")
			if err != nil || got.UIDNext != step.want || got.UIDValidity != st.UIDValidity {
				t.Fatalf("after SeenUIDs(%d): %+v, %v; want UIDNEXT %d, UIDVALIDITY kept", step.maxUID, got, err, step.want)
			}
		}
		// A folder without state stays without: its first use still
		// starts at UIDNEXT 1.
		if err := s.SeenUIDs(ctx, alice, "Nowhere", 50); err != nil {
			t.Fatal(err)
		}
		if got, err := s.Folder(ctx, alice, "Nowhere"); err != nil || got.UIDNext != 1 {
			t.Fatalf("folder after SeenUIDs without state = %+v, %v", got, err)
		}
	})

	t.Run("FlagsAndReset", func(t *testing.T) {
		s := open(t)
		st, err := s.Folder(ctx, alice, "INBOX")
		if err != nil {
			t.Fatal(err)
		}
		v := st.UIDValidity
		if err := s.SetFlags(ctx, alice, "INBOX", v, map[uint32][]string{
			1: {`\Flagged`, `$Forwarded`, `\Answered`}, 2: {`\Deleted`}, 3: {"work"},
		}); err != nil {
			t.Fatal(err)
		}
		if err := s.SetFlags(ctx, alice, "INBOX", v, map[uint32][]string{2: nil, 3: {"home"}}); err != nil {
			t.Fatal(err)
		}
		got, err := s.Flags(ctx, "Alice@Direct.Example", "INBOX", v)
		want := map[uint32][]string{1: {`$Forwarded`, `\Answered`, `\Flagged`}, 3: {"home"}}
		if err != nil || !maps.EqualFunc(got, want, slices.Equal) {
			t.Fatalf("Flags = %v, %v; want %v", got, err, want)
		}
		if from, err := s.FlagsFrom(ctx, alice, "INBOX", v, 2); err != nil || !maps.EqualFunc(from, map[uint32][]string{3: {"home"}}, slices.Equal) {
			t.Fatalf("FlagsFrom 2 = %v, %v; want UID 3's only", from, err)
		}
		if other, err := s.Flags(ctx, alice, "INBOX", v+1); err != nil || len(other) != 0 {
			t.Fatalf("Flags under another UIDVALIDITY = %v, %v; want none", other, err)
		}
		if other, err := s.Flags(ctx, alice, "INBOX.Sent", v); err != nil || len(other) != 0 {
			t.Fatalf("Flags of another folder = %v, %v; want none", other, err)
		}

		reset, err := s.ResetFolder(ctx, alice, "INBOX", 0)
		if err != nil || reset.UIDValidity == v || reset.UIDNext != 1 {
			t.Fatalf("ResetFolder = %+v, %v; want a new UIDVALIDITY and UIDNEXT 1", reset, err)
		}
		if now, err := s.Folder(ctx, alice, "INBOX"); err != nil || now != reset {
			t.Fatalf("Folder after reset = %+v, %v; want %+v", now, err, reset)
		}
		if old, err := s.Flags(ctx, alice, "INBOX", v); err != nil || len(old) != 0 {
			t.Fatalf("flags survived a reset: %v, %v", old, err)
		}
		again, err := s.ResetFolder(ctx, alice, "INBOX", 77)
		if err != nil || again.UIDValidity == reset.UIDValidity || again.UIDNext != 77 {
			t.Fatalf("second ResetFolder = %+v, %v", again, err)
		}
	})

	t.Run("RenameAndForget", func(t *testing.T) {
		s := open(t)
		states := map[string]FolderState{}
		for _, f := range []string{"Work", "Work.2026", "Workshop", "Archive"} {
			st, err := s.Folder(ctx, alice, f)
			if err != nil {
				t.Fatal(err)
			}
			states[f] = st
			if err := s.SetFlags(ctx, alice, f, st.UIDValidity, map[uint32][]string{9: {f}}); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.RenameFolder(ctx, alice, "Work", "Archive"); err != nil {
			t.Fatal(err)
		}
		for from, to := range map[string]string{"Work": "Archive", "Work.2026": "Archive.2026", "Workshop": "Workshop"} {
			st, err := s.Folder(ctx, alice, to)
			if err != nil || st != states[from] {
				t.Fatalf("%s after renaming Work to Archive = %+v, %v; want %s's %+v", to, st, err, from, states[from])
			}
			fl, err := s.Flags(ctx, alice, to, st.UIDValidity)
			if err != nil || !slices.Equal(fl[9], []string{from}) {
				t.Fatalf("flags of %s after rename = %v, %v; want %s's", to, fl, err, from)
			}
		}
		if st, err := s.Folder(ctx, alice, "Work"); err != nil || st == states["Work"] || st.UIDNext != 1 {
			t.Fatalf("Work after rename = %+v, %v; want a fresh state", st, err)
		}

		if err := s.ForgetFolder(ctx, alice, "Archive"); err != nil {
			t.Fatal(err)
		}
		for _, f := range []string{"Archive", "Archive.2026"} {
			if st, err := s.Folder(ctx, alice, f); err != nil || st.UIDValidity == states["Work"].UIDValidity ||
				st.UIDValidity == states["Work.2026"].UIDValidity {
				t.Fatalf("%s after ForgetFolder = %+v, %v; want a fresh state", f, st, err)
			}
		}
		if st, err := s.Folder(ctx, alice, "Workshop"); err != nil || st != states["Workshop"] {
			t.Fatalf("Workshop after forgetting Archive = %+v, %v; want it untouched", st, err)
		}
	})

	t.Run("ChangeFlags", func(t *testing.T) {
		s := open(t)
		f, _ := s.Folder(ctx, alice, "INBOX")
		if _, err := s.ChangeFlags(ctx, alice, "INBOX", f.UIDValidity, []FlagChange{{UID: 1, Add: []string{"$a", `\Flagged`}}}); err != nil {
			t.Fatal(err)
		}
		got, err := s.ChangeFlags(ctx, alice, "INBOX", f.UIDValidity, []FlagChange{{UID: 1, Add: []string{"$B"}, Del: []string{"$A"}}})
		if err != nil || !slices.Equal(got[1], []string{"$B", `\Flagged`}) {
			t.Fatalf("after change: %v %v", got, err)
		}
		fl, _ := s.Flags(ctx, alice, "INBOX", f.UIDValidity)
		if !slices.Equal(fl[1], []string{"$B", `\Flagged`}) {
			t.Fatalf("stored %v", fl)
		}
	})

	t.Run("WriteRefresh", func(t *testing.T) {
		s := open(t)
		f, _ := s.Folder(ctx, alice, "INBOX")
		ids, err := s.AddPendingFlags(ctx, alice, "INBOX", []PendingFlag{{MsgID: "<m@x>", Size: 10, Flags: []string{"$p"}}})
		if err != nil {
			t.Fatal(err)
		}
		w := RefreshWrite{Flags: map[uint32][]string{7: {"$p"}, 8: {"$q", "$a"}}, DropPending: ids, MaxUID: 8}
		if _, err := s.WriteRefresh(ctx, alice, "INBOX", f.UIDValidity, w); err != nil {
			t.Fatal(err)
		}
		fl, _ := s.Flags(ctx, alice, "INBOX", f.UIDValidity)
		if !slices.Equal(fl[7], []string{"$p"}) || !slices.Equal(fl[8], []string{"$a", "$q"}) {
			t.Fatalf("flags %v", fl)
		}
		if pend, _ := s.PendingFlagsOf(ctx, alice, "INBOX"); len(pend) != 0 {
			t.Fatalf("pending left: %v", pend)
		}
		if g, _ := s.Folder(ctx, alice, "INBOX"); g.UIDNext != 9 || g.UIDValidity != f.UIDValidity {
			t.Fatalf("state %+v", g)
		}
		// Never lowered; an empty write is nothing.
		if _, err := s.WriteRefresh(ctx, alice, "INBOX", f.UIDValidity, RefreshWrite{MaxUID: 3}); err != nil {
			t.Fatal(err)
		}
		if g, _ := s.Folder(ctx, alice, "INBOX"); g.UIDNext != 9 {
			t.Fatalf("UIDNEXT lowered: %+v", g)
		}
		if _, err := s.WriteRefresh(ctx, alice, "INBOX", f.UIDValidity, RefreshWrite{}); err != nil {
			t.Fatal(err)
		}
		// Entries dropped without a refresh (a transfer that gave up).
		ids, err = s.AddPendingFlags(ctx, alice, "INBOX", []PendingFlag{{MsgID: "<n@x>", Size: 20, Flags: []string{"$r"}}, {MsgID: "<o@x>", Size: 30}})
		if err != nil || len(ids) != 2 {
			t.Fatalf("AddPendingFlags: %v, %v", ids, err)
		}
		if err := s.DropPendingFlags(ctx, ids[:1]); err != nil {
			t.Fatal(err)
		}
		if pend, _ := s.PendingFlagsOf(ctx, alice, "INBOX"); len(pend) != 1 || pend[0].MsgID != "<o@x>" {
			t.Fatalf("pending after dropping one of two: %+v", pend)
		}
	})

	t.Run("SentJournal", func(t *testing.T) {
		s := open(t)
		at := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
		for _, r := range []SentRecord{
			{Username: "Alice@Direct.Example", SmtpID: "s1", MessageID: "<m@x>", SentAt: at},
			{Username: alice, SmtpID: "s2", MessageID: "<m@x>", SentAt: at.Add(time.Minute)},
			{Username: "bob@direct.example", SmtpID: "s3", MessageID: "<b@x>", SentAt: at},
		} {
			if err := s.RecordSent(ctx, r); err != nil {
				t.Fatal(err)
			}
		}
		rec, ok, err := s.FindSent(ctx, "ALICE@direct.example", "<m@x>", at)
		if err != nil || !ok || rec.SmtpID != "s2" || !rec.SentAt.Equal(at.Add(time.Minute)) || rec.MessageID != "<m@x>" {
			t.Fatalf("FindSent = %+v, %v, %v; want the later record s2", rec, ok, err)
		}
		if _, ok, err := s.FindSent(ctx, alice, "<m@x>", at.Add(2*time.Minute)); err != nil || ok {
			t.Fatalf("FindSent after the window = %v, %v; want none", ok, err)
		}
		if _, ok, err := s.FindSent(ctx, alice, "<b@x>", time.Time{}); err != nil || ok {
			t.Fatalf("FindSent of bob's message as alice = %v, %v; want none", ok, err)
		}
		for id, want := range map[string]bool{"s1": true, "s3": true, "nope": false} {
			if got, err := s.KnownSmtpID(ctx, id); err != nil || got != want {
				t.Fatalf("KnownSmtpID(%q) = %v, %v; want %v", id, got, err, want)
			}
		}
		recent, err := s.RecentSent(ctx, alice, at, 10)
		if err != nil || len(recent) != 2 || recent[0].SmtpID != "s2" || recent[1].SmtpID != "s1" {
			t.Fatalf("RecentSent = %+v, %v; want s2, s1", recent, err)
		}
	})
}

func TestStoreImplementsStateStore(t *testing.T) {
	testStateStore(t, func(t *testing.T) StateStore {
		s, err := OpenStore(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	})
}

// TestStoreKeepsStateAcrossReopen: what the store keeps survives a
// restart of the bridge.
func TestStoreKeepsStateAcrossReopen(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	s, err := OpenStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	st, err := s.Folder(ctx, "alice@direct.example", "INBOX")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SeenUIDs(ctx, "alice@direct.example", "INBOX", 41); err != nil {
		t.Fatal(err)
	}
	if err := s.SetFlags(ctx, "alice@direct.example", "INBOX", st.UIDValidity, map[uint32][]string{5: {`\Flagged`}}); err != nil {
		t.Fatal(err)
	}
	at := time.Now().UTC().Truncate(time.Millisecond)
	if err := s.RecordSent(ctx, SentRecord{Username: "alice@direct.example", SmtpID: "s1", MessageID: "<m@x>", SentAt: at}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s, err = OpenStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got, err := s.Folder(ctx, "alice@direct.example", "INBOX"); err != nil || got != (FolderState{st.UIDValidity, 42}) {
		t.Fatalf("Folder after reopening = %+v, %v", got, err)
	}
	if fl, err := s.Flags(ctx, "alice@direct.example", "INBOX", st.UIDValidity); err != nil || !slices.Equal(fl[5], []string{`\Flagged`}) {
		t.Fatalf("Flags after reopening = %v, %v", fl, err)
	}
	if rec, ok, err := s.FindSent(ctx, "alice@direct.example", "<m@x>", at); err != nil || !ok || !rec.SentAt.Equal(at) {
		t.Fatalf("FindSent after reopening = %+v, %v, %v", rec, ok, err)
	}
}
