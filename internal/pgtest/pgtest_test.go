package pgtest_test

import (
	"context"
	"os"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/directbridge/directbridge/internal/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// TestDatabasesApart: two databases of the throwaway server take
// connections, and a table made in one is not in the other.
func TestDatabasesApart(t *testing.T) {
	ctx := context.Background()
	a, b := pgtest.Database(t), pgtest.Database(t)
	ca, err := pgx.Connect(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	defer ca.Close(ctx)
	cb, err := pgx.Connect(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	defer cb.Close(ctx)
	if _, err := ca.Exec(ctx, "CREATE TABLE folders (name text PRIMARY KEY, uidvalidity bigint NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	if _, err := ca.Exec(ctx, "INSERT INTO folders VALUES ($1, $2)", "INBOX", 1700000000); err != nil {
		t.Fatal(err)
	}
	var v int64
	if err := ca.QueryRow(ctx, "SELECT uidvalidity FROM folders WHERE name = $1", "INBOX").Scan(&v); err != nil || v != 1700000000 {
		t.Fatalf("UIDVALIDITY read back: %d, %v", v, err)
	}
	var exists bool
	if err := cb.QueryRow(ctx, "SELECT to_regclass('folders') IS NOT NULL").Scan(&exists); err != nil || exists {
		t.Fatalf("the second database sees the first's table: %v, %v", exists, err)
	}
	var version string
	if err := cb.QueryRow(ctx, "SHOW server_version").Scan(&version); err != nil {
		t.Fatal(err)
	}
	t.Logf("PostgreSQL %s", version)
}
