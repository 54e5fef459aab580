package state

import (
	"context"
	"errors"
	"os"
	"sync"
	"testing"

	"github.com/directbridge/directbridge/internal/pgtest"
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
