package state

import (
	"context"
	"errors"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/directbridge/directbridge/internal/pgtest"
)

// TestCopyToPostgres: the state of a SQLite data directory copied into an
// empty PostgreSQL store keeps every folder's UIDVALIDITY and UIDNEXT
// (no client resyncs), kept flags, the journal, subscriptions and
// settings; the UIDVALIDITY counter goes along (a new folder gets a value
// never handed out), ids continue after the copied ones, and a second copy
// into the now full store is refused.
func TestCopyToPostgres(t *testing.T) {
	ctx := context.Background()
	src, err := OpenStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	const alice = "alice@direct.example"
	inbox, _ := src.Folder(ctx, alice, "INBOX")
	sent, _ := src.Folder(ctx, alice, "INBOX.Sent")
	if err := src.SeenUIDs(ctx, alice, "INBOX", 41); err != nil {
		t.Fatal(err)
	}
	inbox, _ = src.Folder(ctx, alice, "INBOX")
	if _, err := src.ChangeFlags(ctx, alice, "INBOX", inbox.UIDValidity, []FlagChange{{UID: 7, Add: []string{"\\Flagged", "$label1"}}}); err != nil {
		t.Fatal(err)
	}
	if err := src.RecordSent(ctx, SentRecord{Username: alice, SmtpID: "s1", MessageID: "<m1@x>", SentAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if _, err := src.AddPendingFlags(ctx, alice, "INBOX.Sent", []PendingFlag{{MsgID: "<m1@x>", Size: 10, Flags: []string{"$p"}}}); err != nil {
		t.Fatal(err)
	}
	if err := src.Subscribe(ctx, alice, "INBOX.Gone"); err != nil {
		t.Fatal(err)
	}
	if err := src.SetSetting(ctx, "imap_layout", "flat"); err != nil {
		t.Fatal(err)
	}

	url := pgtest.Database(t)
	dst, err := OpenPostgres(url)
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Close()
	stats, err := Copy(ctx, src, dst)
	if err != nil {
		t.Fatal(err)
	}
	if stats["folder_state"] != 2 || stats["flags"] != 1 || stats["sent"] != 1 || stats["pending_flags"] != 1 {
		t.Errorf("copied %v", stats)
	}
	for name, want := range map[string]FolderState{"INBOX": inbox, "INBOX.Sent": sent} {
		if got, err := dst.Folder(ctx, "Alice@Direct.example", name); err != nil || got != want {
			t.Errorf("%s on PostgreSQL: %+v, %v; want %+v as on SQLite", name, got, err, want)
		}
	}
	if fl, _ := dst.Flags(ctx, alice, "INBOX", inbox.UIDValidity); !slices.Equal(fl[7], []string{"$label1", "\\Flagged"}) {
		t.Errorf("kept flags of UID 7: %v", fl[7])
	}
	if _, ok, _ := dst.FindSent(ctx, alice, "<m1@x>", time.Time{}); !ok {
		t.Error("the sent record was not copied")
	}
	if subs, _ := dst.Subscribed(ctx, alice); !slices.Equal(subs, []string{"INBOX.Gone"}) {
		t.Errorf("subscriptions: %v", subs)
	}
	if v, _ := dst.Setting(ctx, "imap_layout"); v != "flat" {
		t.Errorf("setting: %q", v)
	}
	fresh, _ := dst.Folder(ctx, alice, "INBOX.New")
	if fresh.UIDValidity <= max(inbox.UIDValidity, sent.UIDValidity) {
		t.Errorf("a new folder after the copy got UIDVALIDITY %d, not above the copied %d and %d", fresh.UIDValidity, inbox.UIDValidity, sent.UIDValidity)
	}
	ids, err := dst.AddPendingFlags(ctx, alice, "INBOX", []PendingFlag{{MsgID: "<m2@x>", Size: 5}})
	if err != nil || len(ids) != 1 || ids[0] <= 1 {
		t.Errorf("a pending-flags entry after the copy: ids %v, %v; want one after the copied", ids, err)
	}
	if _, err := Copy(ctx, src, dst); !errors.Is(err, ErrNotEmpty) {
		t.Errorf("a second copy: %v; want ErrNotEmpty", err)
	}
}

// TestCopyCoversSchema: Copy knows every table and column of the schema
// (a migration that adds one must add it to copyTables).
func TestCopyCoversSchema(t *testing.T) {
	s, err := OpenStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	rows, err := s.db.QueryContext(ctx, `SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT IN ('schema_version') AND name NOT LIKE 'sqlite_%'`)
	if err != nil {
		t.Fatal(err)
	}
	var tables []string
	for rows.Next() {
		var n string
		rows.Scan(&n)
		tables = append(tables, n)
	}
	rows.Close()
	known := map[string][]string{}
	for _, ct := range copyTables {
		known[ct.name] = slices.Sorted(slices.Values(ct.cols))
	}
	for _, table := range tables {
		if slices.Contains(notCopied, table) {
			continue
		}
		cols, ok := known[table]
		if !ok {
			t.Errorf("table %s is not copied", table)
			continue
		}
		r, err := s.db.QueryContext(ctx, `SELECT name FROM pragma_table_info(?)`, table)
		if err != nil {
			t.Fatal(err)
		}
		var have []string
		for r.Next() {
			var n string
			r.Scan(&n)
			have = append(have, n)
		}
		r.Close()
		sort.Strings(have)
		if !slices.Equal(have, cols) {
			t.Errorf("table %s has columns %v; Copy copies %v", table, have, cols)
		}
	}
}
