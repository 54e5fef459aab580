package state

import (
	"context"
	"database/sql"
	"errors"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// legacySchema is the schema text of the store before it was versioned,
// copied here on purpose: migration 1 must keep accepting databases made
// with exactly this.
const legacySchema = `
CREATE TABLE IF NOT EXISTS sent (
	id          INTEGER PRIMARY KEY,
	username    TEXT NOT NULL COLLATE NOCASE,
	smtp_id     TEXT NOT NULL,
	message_id  TEXT NOT NULL,
	sent_at     INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS sent_by_message_id ON sent (username, message_id);
CREATE INDEX IF NOT EXISTS sent_by_smtp_id ON sent (smtp_id);

CREATE TABLE IF NOT EXISTS folder_state (
	username     TEXT NOT NULL COLLATE NOCASE,
	folder       TEXT NOT NULL,
	uid_validity INTEGER NOT NULL,
	uid_next     INTEGER NOT NULL,
	PRIMARY KEY (username, folder)
);
CREATE TABLE IF NOT EXISTS flags (
	username     TEXT NOT NULL COLLATE NOCASE,
	folder       TEXT NOT NULL,
	uid_validity INTEGER NOT NULL,
	uid          INTEGER NOT NULL,
	flags        TEXT NOT NULL,
	PRIMARY KEY (username, folder, uid_validity, uid)
);
CREATE TABLE IF NOT EXISTS validity_counter (
	id   INTEGER PRIMARY KEY CHECK (id = 1),
	last INTEGER NOT NULL
);
`

// rawDB opens dir's state.db directly, as the code before versioning did.
func rawDB(t *testing.T, dir string) *sql.DB {
	t.Helper()
	dsn := "file:" + (&url.URL{Path: filepath.Join(dir, "state.db")}).EscapedPath() +
		"?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)"
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	t.Cleanup(func() { db.Close() })
	return db
}

func mustExec(t *testing.T, db *sql.DB, query string, args ...any) {
	t.Helper()
	if _, err := db.Exec(query, args...); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
}

// versionRows returns the rows of schema_version, in order.
func versionRows(t *testing.T, db *sql.DB) []int {
	t.Helper()
	rows, err := db.Query(`SELECT version FROM schema_version ORDER BY version`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []int
	for rows.Next() {
		var v int
		if err := rows.Scan(&v); err != nil {
			t.Fatal(err)
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func allVersions() []int {
	var out []int
	for _, m := range migrations {
		out = append(out, m.version)
	}
	return out
}

func TestMigrationsNumberedInOrder(t *testing.T) {
	if len(migrations) == 0 {
		t.Fatal("no migrations")
	}
	if err := checkMigrations(migrations); err != nil {
		t.Fatal(err)
	}
	if err := checkMigrations([]migration{{version: 1}, {version: 3}}); err == nil {
		t.Fatal("a gap in the numbering was accepted")
	}
	if strings.TrimSpace(migrations[0].sql) != strings.TrimSpace(legacySchema) {
		t.Fatal("migration 1 differs from the schema of the unversioned store")
	}
}

// TestMigrateFromUnversioned: a database made by the code before
// versioning, with rows in every table, opens with its data intact and
// is recorded at the newest version.
func TestMigrateFromUnversioned(t *testing.T) {
	dir := t.TempDir()
	old := rawDB(t, dir)
	mustExec(t, old, legacySchema)
	sentAt := time.Date(2026, 11, 1, 9, 30, 0, 0, time.UTC)
	mustExec(t, old, `INSERT INTO sent (username, smtp_id, message_id, sent_at) VALUES (?, ?, ?, ?)`,
		"alice@direct.example", "smtp-1", "<m1@x>", sentAt.UnixMilli())
	mustExec(t, old, `INSERT INTO folder_state (username, folder, uid_validity, uid_next) VALUES (?, ?, ?, ?)`,
		"alice@direct.example", "INBOX", 1700000000, 42)
	mustExec(t, old, `INSERT INTO flags (username, folder, uid_validity, uid, flags) VALUES (?, ?, ?, ?, ?)`,
		"alice@direct.example", "INBOX", 1700000000, 7, `$Forwarded \Flagged`)
	// A counter ahead of the clock: the next UIDVALIDITY must follow it.
	far := time.Now().Unix() + 100000
	mustExec(t, old, `INSERT INTO validity_counter (id, last) VALUES (1, ?)`, far)
	if err := old.Close(); err != nil {
		t.Fatal(err)
	}

	s, err := OpenStore(dir)
	if err != nil {
		t.Fatalf("OpenStore on an unversioned store: %v", err)
	}
	ctx := context.Background()
	if got := versionRows(t, s.db); !slices.Equal(got, allVersions()) {
		t.Fatalf("schema_version rows %v; want %v", got, allVersions())
	}
	rec, ok, err := s.FindSent(ctx, "Alice@Direct.Example", "<m1@x>", sentAt.Add(-time.Minute))
	if err != nil || !ok || rec.SmtpID != "smtp-1" || !rec.SentAt.Equal(sentAt) {
		t.Fatalf("FindSent after migration = %+v, %v, %v", rec, ok, err)
	}
	if known, err := s.KnownSmtpID(ctx, "smtp-1"); err != nil || !known {
		t.Fatalf("KnownSmtpID after migration = %v, %v", known, err)
	}
	st, err := s.Folder(ctx, "alice@direct.example", "INBOX")
	if err != nil || st != (FolderState{UIDValidity: 1700000000, UIDNext: 42}) {
		t.Fatalf("Folder after migration = %+v, %v", st, err)
	}
	flags, err := s.Flags(ctx, "alice@direct.example", "INBOX", 1700000000)
	if err != nil || !slices.Equal(flags[7], []string{"$Forwarded", `\Flagged`}) || len(flags) != 1 {
		t.Fatalf("Flags after migration = %v, %v", flags, err)
	}
	st, err = s.ResetFolder(ctx, "alice@direct.example", "INBOX", 42)
	if err != nil || int64(st.UIDValidity) != far+1 {
		t.Fatalf("ResetFolder after migration = %+v, %v; want UIDVALIDITY %d", st, err, far+1)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	// Opening again applies nothing twice and loses nothing.
	s, err = OpenStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got := versionRows(t, s.db); !slices.Equal(got, allVersions()) {
		t.Fatalf("schema_version rows after reopening %v; want %v", got, allVersions())
	}
	if _, ok, err := s.FindSent(ctx, "alice@direct.example", "<m1@x>", time.Time{}); err != nil || !ok {
		t.Fatalf("FindSent after reopening = %v, %v", ok, err)
	}
}

func TestMigrateFreshStore(t *testing.T) {
	dir := t.TempDir()
	s, err := OpenStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	v, err := schemaVersion(ctx, s.db)
	if err != nil || v != len(migrations) {
		t.Fatalf("schemaVersion = %d, %v; want %d", v, err, len(migrations))
	}
	var appID int64
	if err := s.db.QueryRow(`PRAGMA application_id`).Scan(&appID); err != nil || appID != applicationID {
		t.Fatalf("application_id = %#x, %v; want %#x", appID, err, applicationID)
	}
}

// TestRefuseNewerSchema: a store written by a newer bridge is refused
// with ErrSchemaTooNew, and left as it was.
func TestRefuseNewerSchema(t *testing.T) {
	dir := t.TempDir()
	s, err := OpenStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	newer := len(migrations) + 1
	mustExec(t, s.db, `INSERT INTO schema_version (version, name, applied_at) VALUES (?, 'from the future', 0)`, newer)
	mustExec(t, s.db, `CREATE TABLE future (x INTEGER)`)
	s.Close()

	s, err = OpenStore(dir)
	if err == nil {
		s.Close()
		t.Fatal("OpenStore accepted a store with a newer schema")
	}
	if !errors.Is(err, ErrSchemaTooNew) {
		t.Fatalf("error %v does not wrap ErrSchemaTooNew", err)
	}
	for _, want := range []string{"newer directbridge", "state.db"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
	db := rawDB(t, dir)
	if got, want := versionRows(t, db), append(allVersions(), newer); !slices.Equal(got, want) {
		t.Fatalf("schema_version rows %v after refusal; want %v", got, want)
	}
}

func TestRefuseForeignDatabase(t *testing.T) {
	dir := t.TempDir()
	db := rawDB(t, dir)
	mustExec(t, db, `PRAGMA application_id = 1234`)
	mustExec(t, db, `CREATE TABLE theirs (x INTEGER)`)
	db.Close()
	s, err := OpenStore(dir)
	if err == nil {
		s.Close()
		t.Fatal("OpenStore accepted another application's database")
	}
	if !errors.Is(err, ErrNotStateStore) {
		t.Fatalf("error %v does not wrap ErrNotStateStore", err)
	}
}

// TestFailedMigrationRollsBack: a migration that fails part-way leaves
// nothing of itself behind, the version stays at the last completed step,
// and a corrected list then applies it.
func TestFailedMigrationRollsBack(t *testing.T) {
	dir := t.TempDir()
	s, err := OpenStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	bad := append(slices.Clone(migrations), migration{
		version: len(migrations) + 1,
		name:    "half right",
		sql:     `CREATE TABLE extra (x INTEGER); INSERT INTO no_such_table VALUES (1);`,
	})
	if err := migrate(ctx, s.db, bad); err == nil || !strings.Contains(err.Error(), "half right") {
		t.Fatalf("migrate with a failing step = %v; want its error", err)
	}
	if v, err := schemaVersion(ctx, s.db); err != nil || v != len(migrations) {
		t.Fatalf("schemaVersion after a failed step = %d, %v; want %d", v, err, len(migrations))
	}
	var n int
	if err := s.db.QueryRow(`SELECT COUNT(*) FROM sqlite_master WHERE name = 'extra'`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("table of the failed step exists (%d, %v)", n, err)
	}
	good := slices.Clone(bad)
	good[len(good)-1].sql = `CREATE TABLE extra (x INTEGER);`
	if err := migrate(ctx, s.db, good); err != nil {
		t.Fatal(err)
	}
	if got := versionRows(t, s.db); len(got) != len(good) {
		t.Fatalf("schema_version rows %v; want %d of them", got, len(good))
	}
}

// TestConcurrentOpen: two bridges opening a new store at once both
// succeed and each migration is recorded once.
func TestConcurrentOpen(t *testing.T) {
	dir := t.TempDir()
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := OpenStore(dir)
			if err == nil {
				err = s.Close()
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("OpenStore %d: %v", i, err)
		}
	}
	if got := versionRows(t, rawDB(t, dir)); !slices.Equal(got, allVersions()) {
		t.Fatalf("schema_version rows %v; want %v", got, allVersions())
	}
}
