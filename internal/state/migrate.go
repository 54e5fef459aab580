package state

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// The state store's schema is versioned: the schema_version table holds
// one row per migration applied, and the store's version is the largest.
// OpenStore applies the migrations the database lacks, in order, each in
// its own transaction, so a failure leaves the database at the last
// version that completed, never between two. A database whose version is
// newer than this program's migrations is refused rather than written to,
// because an older program cannot know what a newer schema means.

// ErrSchemaTooNew is returned (wrapped) by OpenStore for a state store
// written by a newer version of the bridge.
var ErrSchemaTooNew = errors.New("state store was written by a newer directbridge")

// ErrNotStateStore is returned (wrapped) by OpenStore for an SQLite file
// that another application marked as its own.
var ErrNotStateStore = errors.New("file is not a directbridge state store")

// applicationID marks the file as a directbridge state store in the SQLite
// header (PRAGMA application_id; "DBst").
const applicationID = 0x44427374

// migration is one step of the schema history.
type migration struct {
	version int    // 1, 2, ...: its place in the history
	name    string // what it does, kept in schema_version
	sql     string // statements run in one transaction
}

const versionTableSQL = `CREATE TABLE IF NOT EXISTS schema_version (
	version    INTEGER PRIMARY KEY,
	name       TEXT NOT NULL,
	applied_at INTEGER NOT NULL
)`

// checkMigrations makes sure list is numbered 1, 2, ... in order.
func checkMigrations(list []migration) error {
	for i, m := range list {
		if m.version != i+1 {
			return fmt.Errorf("migration %d (%q) is numbered %d", i+1, m.name, m.version)
		}
	}
	return nil
}

// migrate brings db to the last version of list. Each step runs in its own
// transaction, which the DSN makes IMMEDIATE (it takes the write lock at
// once), so two processes opening the same store at the same time apply
// each migration once: the second waits, then finds it done.
func migrate(ctx context.Context, db *sql.DB, list []migration) error {
	if err := checkMigrations(list); err != nil {
		return err
	}
	for {
		done, err := migrateStep(ctx, db, list)
		if err != nil || done {
			return err
		}
	}
}

// migrateStep applies the first migration of list the database lacks and
// reports done when there is none left.
func migrateStep(ctx context.Context, db *sql.DB, list []migration) (done bool, err error) {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return false, err
	}
	defer func() {
		if err != nil || done {
			tx.Rollback()
		}
	}()
	var appID int64
	if err := tx.QueryRowContext(ctx, `PRAGMA application_id`).Scan(&appID); err != nil {
		return false, fmt.Errorf("reading the application id: %w", err)
	}
	if appID != 0 && appID != applicationID {
		return false, fmt.Errorf("%w (application id %#x)", ErrNotStateStore, appID)
	}
	current, err := schemaVersion(ctx, tx)
	if err != nil {
		return false, err
	}
	switch {
	case current > len(list):
		return false, fmt.Errorf("%w: its schema version is %d, this program knows versions up to %d; run a newer directbridge, or move the data directory aside",
			ErrSchemaTooNew, current, len(list))
	case current == len(list):
		return true, nil
	}
	m := list[current]
	if appID == 0 {
		if _, err := tx.ExecContext(ctx, fmt.Sprintf(`PRAGMA application_id = %d`, applicationID)); err != nil {
			return false, fmt.Errorf("setting the application id: %w", err)
		}
	}
	if _, err := tx.ExecContext(ctx, versionTableSQL); err != nil {
		return false, fmt.Errorf("creating the version table: %w", err)
	}
	if _, err := tx.ExecContext(ctx, m.sql); err != nil {
		return false, fmt.Errorf("migration %d (%s): %w", m.version, m.name, err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO schema_version (version, name, applied_at) VALUES (?, ?, ?)`,
		m.version, m.name, time.Now().UnixMilli()); err != nil {
		return false, fmt.Errorf("migration %d (%s): recording it: %w", m.version, m.name, err)
	}
	if err := tx.Commit(); err != nil {
		return false, fmt.Errorf("migration %d (%s): %w", m.version, m.name, err)
	}
	return false, nil
}

// querier is what schemaVersion needs of a *sql.DB or *sql.Tx.
type querier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// schemaVersion returns the database's schema version: 0 for a database
// made before versioning (or a new, empty one).
func schemaVersion(ctx context.Context, q querier) (int, error) {
	var n int
	err := q.QueryRowContext(ctx, `SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = 'schema_version'`).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("reading the schema version: %w", err)
	}
	if n == 0 {
		return 0, nil
	}
	var v int
	if err := q.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_version`).Scan(&v); err != nil {
		return 0, fmt.Errorf("reading the schema version: %w", err)
	}
	return v, nil
}
