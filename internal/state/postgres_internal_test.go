package state

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/directbridge/directbridge/internal/pgtest"
	"github.com/directbridge/directbridge/internal/sqlstmt"
)

// TestMain stops the throwaway PostgreSQL of the package's tests.
func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// TestPostgresImplementsStateStore runs what the StateStore interface
// documents on the PostgreSQL store.
func TestPostgresImplementsStateStore(t *testing.T) {
	testStateStore(t, func(t *testing.T) StateStore {
		s, err := OpenPostgres(pgtest.Database(t))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	})
}

// eachBackend runs test on both implementations of the store; open
// opens the same store again at every call (a restart).
func eachBackend(t *testing.T, test func(t *testing.T, open func() (*Store, error))) {
	t.Run("sqlite", func(t *testing.T) {
		dir := t.TempDir()
		test(t, func() (*Store, error) { return OpenStore(dir) })
	})
	t.Run("postgres", func(t *testing.T) {
		url := pgtest.Database(t)
		test(t, func() (*Store, error) { return OpenPostgres(url) })
	})
}

// TestPostgresMigratesOnce: replicas starting together on one empty
// database migrate it once, under the advisory lock: every open succeeds
// and each version is recorded once; a schema newer than this program's
// is refused.
func TestPostgresMigratesOnce(t *testing.T) {
	url := pgtest.Database(t)
	var wg sync.WaitGroup
	errs := make(chan error, 6)
	for range 6 {
		wg.Go(func() {
			s, err := OpenPostgres(url)
			if err == nil {
				s.Close()
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("an open beside others: %v", err)
		}
	}
	s, err := OpenPostgres(url)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	var n, top int
	if err := s.db.QueryRowContext(ctx, `SELECT COUNT(*), MAX(version) FROM schema_version`).Scan(&n, &top); err != nil || n != len(pgMigrations) || top != len(pgMigrations) {
		t.Fatalf("schema_version: %d rows up to %d, %v; want each of %d once", n, top, err, len(pgMigrations))
	}
	if _, err := s.db.ExecContext(ctx, `INSERT INTO schema_version (version, name, applied_at) VALUES ($1, 'from the future', 0)`, len(pgMigrations)+1); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenPostgres(url); !errors.Is(err, ErrSchemaTooNew) {
		t.Fatalf("a newer schema: %v; want ErrSchemaTooNew", err)
	}
}

// TestPostgresMigrationsFollowSQLite: the PostgreSQL schema has a version
// for each of SQLite's, with the same names.
func TestPostgresMigrationsFollowSQLite(t *testing.T) {
	if len(pgMigrations) != len(migrations) {
		t.Fatalf("%d PostgreSQL migrations, %d SQLite ones", len(pgMigrations), len(migrations))
	}
	for i := range migrations {
		if pgMigrations[i].version != migrations[i].version || pgMigrations[i].name != migrations[i].name {
			t.Errorf("migration %d: PostgreSQL %d %q, SQLite %d %q", i+1, pgMigrations[i].version, pgMigrations[i].name, migrations[i].version, migrations[i].name)
		}
	}
}

// TestPostgresReplicasShareOneCounter: two stores on one database (two
// replicas) creating folders at once never hand out one UIDVALIDITY
// twice, and concurrent flag changes through both all hold.
func TestPostgresReplicasShareOneCounter(t *testing.T) {
	url := pgtest.Database(t)
	var stores [2]*Store
	for i := range stores {
		s, err := OpenPostgres(url)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		stores[i] = s
	}
	ctx := context.Background()
	var mu sync.Mutex
	seen := map[uint32]string{}
	var wg sync.WaitGroup
	for i := range 40 {
		wg.Go(func() {
			s := stores[i%2]
			name := fmt.Sprintf("INBOX.f%d", i)
			st, err := s.Folder(ctx, "alice@direct.example", name)
			if err != nil {
				t.Error(err)
				return
			}
			if _, err := s.ChangeFlags(ctx, "alice@direct.example", "INBOX", 7, []FlagChange{{UID: 1, Add: []string{fmt.Sprintf("k%d", i)}}}); err != nil {
				t.Error(err)
			}
			mu.Lock()
			defer mu.Unlock()
			if other, dup := seen[st.UIDValidity]; dup {
				t.Errorf("UIDVALIDITY %d handed out to %s and %s", st.UIDValidity, other, name)
			}
			seen[st.UIDValidity] = name
		})
	}
	wg.Wait()
	fl, err := stores[0].Flags(ctx, "alice@direct.example", "INBOX", 7)
	if err != nil || len(fl[1]) != 40 {
		t.Fatalf("flags of UID 1 after 40 changes through two stores: %d, %v", len(fl[1]), err)
	}
}

// TestPostgresOddText: a Message-ID with a NUL byte or bytes that are not
// UTF-8 (what a client may write) is recorded and found again on
// PostgreSQL, which refuses such text as it is.
func TestPostgresOddText(t *testing.T) {
	s, err := OpenPostgres(pgtest.Database(t))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	for _, id := range []string{"<a\x00b@x>", "<M\xfcller@x>"} {
		if err := s.RecordSent(ctx, SentRecord{Username: "alice@direct.example", SmtpID: "s-" + id, MessageID: id, SentAt: time.Now()}); err != nil {
			t.Fatalf("RecordSent(%q): %v", id, err)
		}
		if _, ok, err := s.FindSent(ctx, "alice@direct.example", id, time.Time{}); err != nil || !ok {
			t.Fatalf("FindSent(%q): %v, %v", id, ok, err)
		}
	}
}

// TestPostgresOwnSchema: the store keeps to its schema: a database whose
// public schema holds another tool's schema_version (version 999) and a
// table named like one of the store's opens as a new store beside them,
// leaving them as they were; a schema history that is not the store's is
// refused.
func TestPostgresOwnSchema(t *testing.T) {
	url := pgtest.Database(t)
	ctx := context.Background()
	other, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close(ctx)
	for _, q := range []string{
		`CREATE TABLE public.schema_version (version int PRIMARY KEY, name text)`,
		`INSERT INTO public.schema_version VALUES (999, 'someone else''s')`,
		`CREATE TABLE public.settings (name text, value text)`,
		`INSERT INTO public.settings VALUES ('imap_layout', 'theirs')`,
	} {
		if _, err := other.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	s, err := OpenPostgres(url)
	if err != nil {
		t.Fatalf("a database with another tool's tables: %v", err)
	}
	if v, err := s.Setting(ctx, "imap_layout"); err != nil || v != "" {
		t.Fatalf("the store reads another tool's settings: %q, %v", v, err)
	}
	s.Close()
	var n int
	if err := other.QueryRow(ctx, `SELECT count(*) FROM public.schema_version`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("the other tool's schema_version: %d rows, %v", n, err)
	}
	if _, err := other.Exec(ctx, `UPDATE directbridge.schema_version SET name = 'flyway baseline' WHERE version = 1`); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenPostgres(url); !errors.Is(err, ErrNotStateStore) {
		t.Fatalf("a foreign history in the store's schema: %v; want ErrNotStateStore", err)
	}
}

// TestPostgresCommitsAsync: the store commits without waiting for the
// disk, as SQLite's WAL with synchronous=NORMAL does, unless the URL asks
// for synchronous commits; the send journal's claim is committed
// synchronously either way, and works.
func TestPostgresCommitsAsync(t *testing.T) {
	url := pgtest.Database(t)
	show := func(u string) (string, *Store) {
		t.Helper()
		s, err := OpenPostgres(u)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		var v string
		if err := s.db.QueryRow(`SHOW synchronous_commit`).Scan(&v); err != nil {
			t.Fatal(err)
		}
		return v, s
	}
	v, s := show(url)
	if v != "off" || !s.asyncCommit {
		t.Fatalf("synchronous_commit by default: %q (async %v), want off", v, s.asyncCommit)
	}
	sep := "?"
	if strings.Contains(url, "?") {
		sep = "&"
	}
	if v, s := show(url + sep + "options=-c%20synchronous_commit%3Don"); v != "on" || s.asyncCommit {
		t.Fatalf("synchronous_commit with the URL's options: %q (async %v), want on", v, s.asyncCommit)
	}
	ctx := context.Background()
	sub := Submission{Key: "k-durable", Username: "alice@direct.example", FirstAt: time.Now()}
	if _, claimed, err := s.ClaimSubmission(ctx, sub); err != nil || !claimed {
		t.Fatalf("a claim committed synchronously: %v, %v", claimed, err)
	}
	if _, claimed, err := s.ClaimSubmission(ctx, sub); err != nil || claimed {
		t.Fatalf("the second claim: %v, %v; want found", claimed, err)
	}
}

// TestPostgresUIDNextBefore: WriteRefresh tells each replica the UIDNEXT
// mark it found, so that of two replicas showing one new message exactly
// one takes it for first seen (\Recent).
func TestPostgresUIDNextBefore(t *testing.T) {
	url := pgtest.Database(t)
	ctx := context.Background()
	var stores [2]*Store
	for i := range stores {
		s, err := OpenPostgres(url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		stores[i] = s
	}
	f, err := stores[0].Folder(ctx, "alice@direct.example", "INBOX")
	if err != nil {
		t.Fatal(err)
	}
	for _, step := range []struct {
		store  int
		maxUID uint32
		want   uint32
	}{{0, 5, 1}, {1, 3, 6}, {1, 9, 6}, {0, 9, 10}} {
		got, err := stores[step.store].WriteRefresh(ctx, "alice@direct.example", "INBOX", f.UIDValidity, RefreshWrite{MaxUID: step.maxUID})
		if err != nil || got != step.want {
			t.Fatalf("replica %d raising to %d: found %d, %v; want %d", step.store, step.maxUID+1, got, err, step.want)
		}
	}
	// In a transaction too (flags written with the mark).
	got, err := stores[1].WriteRefresh(ctx, "alice@direct.example", "INBOX", f.UIDValidity, RefreshWrite{MaxUID: 12, Flags: map[uint32][]string{12: {"$x"}}})
	if err != nil || got != 10 {
		t.Fatalf("with flags: found %d, %v; want 10", got, err)
	}
}

// TestPostgresCancelledTxLetsGoOfTheLock: a transaction whose context
// ends while it holds the write lock (a client hung up mid-STORE) rolls
// back and lets go of the lock, so that the next transaction, of this
// replica or another, runs at once rather than waiting for the pool to
// drop a connection left inside the transaction.
func TestPostgresCancelledTxLetsGoOfTheLock(t *testing.T) {
	url := pgtest.Database(t)
	s, err := OpenPostgres(url)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	other, err := OpenPostgres(url) // another replica
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	for range 3 {
		ctx, cancel := context.WithCancel(context.Background())
		err := s.tx(ctx, func(tx *sqlstmt.Tx) error {
			if _, err := tx.Exec(`INSERT INTO settings (name, value) VALUES ('cancelled', 'x')`); err != nil {
				return err
			}
			cancel()
			return ctx.Err()
		})
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("the cancelled transaction: %v", err)
		}
	}
	for _, st := range []*Store{other, s} { // the other replica first: it has no connection of s to discard
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := st.Folder(ctx, "alice@direct.example", "INBOX")
		cancel()
		if err != nil {
			t.Fatalf("a transaction after the cancelled ones: %v (the write lock still held?)", err)
		}
	}
	var n int
	if err := s.db.QueryRow(`SELECT count(*) FROM settings WHERE name = 'cancelled'`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("rows of the cancelled transactions: %d, %v; want none", n, err)
	}
}

// TestPostgresTxEndsWhateverHappens: a transaction whose function panics
// (recovered by a front) or leaves rows open still ends, and lets go of
// the write lock for every replica.
func TestPostgresTxEndsWhateverHappens(t *testing.T) {
	url := pgtest.Database(t)
	s, err := OpenPostgres(url)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	other, err := OpenPostgres(url)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("the panic did not come through")
			}
		}()
		s.tx(context.Background(), func(tx *sqlstmt.Tx) error {
			if _, err := tx.Exec(`INSERT INTO settings (name, value) VALUES ('panicked', 'x')`); err != nil {
				return err
			}
			panic("a bug in a transaction")
		})
	}()
	err = s.tx(context.Background(), func(tx *sqlstmt.Tx) error {
		rows, err := tx.Query(`SELECT name FROM settings`)
		if err != nil {
			return err
		}
		_ = rows // left open
		_, err = tx.Exec(`INSERT INTO settings (name, value) VALUES ('kept', 'x')`)
		return err
	})
	if err != nil {
		t.Fatalf("a transaction that left rows open: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := other.Folder(ctx, "alice@direct.example", "INBOX"); err != nil {
		t.Fatalf("another replica's transaction after them: %v (the write lock still held?)", err)
	}
	var names []string
	rows, err := s.db.Query(`SELECT name FROM settings WHERE name IN ('panicked', 'kept') ORDER BY name`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var n string
		rows.Scan(&n)
		names = append(names, n)
	}
	rows.Close()
	if len(names) != 1 || names[0] != "kept" {
		t.Fatalf("rows after the two transactions: %v, want only the committed one's", names)
	}
}

// TestPostgresAttemptOwnerLive: an attempt found in the journal comes
// with whether its owner is a live replica, read in the same statement:
// alive while the owner holds its life lock and beats, dead the moment
// its connection closes (a SIGKILL).
func TestPostgresAttemptOwnerLive(t *testing.T) {
	ctx := context.Background()
	url := pgtest.Database(t)
	s, err := OpenPostgres(url)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const lifeKey = int64(-0x1234567890abcdef) // negative: both halves as PostgreSQL shows them
	owner, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := owner.Exec(ctx, `SELECT pg_advisory_lock($1)`, lifeKey); err != nil {
		t.Fatal(err)
	}
	if _, err := owner.Exec(ctx, `INSERT INTO directbridge.replicas (id, started_at, seen_at, addr, life_key, life_pid)
		VALUES ('replica-a', 0, (extract(epoch FROM clock_timestamp()) * 1000)::bigint, '', $1, pg_backend_pid())`, lifeKey); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.BeginUnlessUndecided(ctx, "alice@direct.example", "append:k", "replica-a", 0); err != nil {
		t.Fatal(err)
	}
	check := func(want Liveness) {
		t.Helper()
		id, found, err := s.BeginUnlessUndecided(ctx, "alice@direct.example", "append:k", "replica-b", 0)
		if err != nil || id != 0 || len(found) != 1 || found[0].OwnerLive != want {
			t.Fatalf("found %+v (begun %d, %v); want replica-a's attempt with liveness %d", found, id, err, want)
		}
		got, err := s.UndecidedAttempts(ctx, "alice@direct.example", "append:k", "replica-b")
		if err != nil || len(got) != 1 || got[0].OwnerLive != want {
			t.Fatalf("UndecidedAttempts: %+v, %v; want liveness %d", got, err, want)
		}
	}
	check(OwnerAlive)
	// Another session holding the key for a moment (an older replica's
	// look at a dead owner) is not the owner.
	other, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close(ctx)
	owner.Close(ctx) // its life lock goes with the connection
	if _, err := other.Exec(ctx, `SELECT pg_advisory_lock($1)`, lifeKey); err != nil {
		t.Fatal(err)
	}
	check(OwnerDead)
}

// TestPostgresLaterWritesGoWithCommit: writes queued with Later go out
// with the COMMIT; one that fails fails the commit, and nothing of the
// transaction stays.
func TestPostgresLaterWritesGoWithCommit(t *testing.T) {
	s, err := OpenPostgres(pgtest.Database(t))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	count := func() (n int) {
		if err := s.db.QueryRow(`SELECT count(*) FROM settings WHERE name LIKE 'later-%'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	err = s.tx(ctx, func(tx *sqlstmt.Tx) error {
		if err := tx.Later(`INSERT INTO settings (name, value) VALUES (?, ?)`, "later-1", "x"); err != nil {
			return err
		}
		return tx.Later(`INSERT INTO settings (name, value) VALUES (?, ?)`, "later-2", "x")
	})
	if err != nil || count() != 2 {
		t.Fatalf("two writes with the commit: %v, %d rows; want both", err, count())
	}
	err = s.tx(ctx, func(tx *sqlstmt.Tx) error {
		tx.Later(`INSERT INTO settings (name, value) VALUES (?, ?)`, "later-3", "x")
		return tx.Later(`INSERT INTO settings (name, value) VALUES (?, ?)`, "later-1", "again") // its key is taken
	})
	if err == nil || count() != 2 {
		t.Fatalf("a failing write with the commit: %v, %d rows; want an error and nothing of it", err, count())
	}
	// A statement after Later sees what it wrote.
	var v string
	err = s.tx(ctx, func(tx *sqlstmt.Tx) error {
		tx.Later(`UPDATE settings SET value = ? WHERE name = ?`, "y", "later-2")
		return tx.QueryRow(`SELECT value FROM settings WHERE name = ?`, "later-2").Scan(&v)
	})
	if err != nil || v != "y" {
		t.Fatalf("read after Later: %q, %v; want y", v, err)
	}
}
