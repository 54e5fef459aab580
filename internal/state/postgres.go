package state

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/directbridge/directbridge/internal/sqlstmt"
)

// The state store on PostgreSQL, for several replicas sharing one state
// (issue 21). The same Store runs on it: its statements are written for
// both (upsert with ON CONFLICT, RETURNING, ? placeholders that sqlstmt
// rebinds to $n), and what differs is here: the schema (pgMigrations,
// the same versions as SQLite's, in PostgreSQL's types), the migration
// lock, the write lock that makes transactions run one at a time as
// SQLite's do (writeLock), and GREATEST for SQLite's two-argument MAX.
//
// Usernames compare without regard to case, as SQLite's COLLATE NOCASE
// has them: the columns are citext (a trusted extension since
// PostgreSQL 13, which the database owner may create).

// maxConns bounds a replica's connections to PostgreSQL (its default
// server allows 100 in all).
const maxConns = 16

// maxTxTries bounds how often a transaction PostgreSQL could not
// serialize is run again.
const maxTxTries = 10

// retryable reports a transaction PostgreSQL ended because it could not
// be serialized with another, or chose as a deadlock's victim: run again,
// it may succeed (SQLSTATE 40001, 40P01).
func retryable(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "40001" || pe.Code == "40P01")
}

// pgSchema is the PostgreSQL schema the store's tables live in.
const pgSchema = "directbridge"

// migrationLock is the advisory lock key under which replicas starting
// together migrate the schema one after the other ("DBst").
const migrationLock = 0x44427374

// writeLock is the advisory lock every transaction of the store takes
// first ("DBwr"), so that they run one at a time across the connections
// of every replica, as SQLite's do in one process: they read and then
// write (the UIDVALIDITY counter, kept flags), and under READ COMMITTED two
// at once could hand out one UIDVALIDITY twice or lose a flag change.
// SERIALIZABLE transactions were tried first: under imaptest's stress
// they failed to serialize faster than they could be run again (3
// Error: lines in 3 rounds of imaptest's stress on one replica). A lock per user is the refinement when one lock is the
// limit; the statements outside transactions are single statements and
// atomic on their own.
const writeLock = 0x44427772

// OpenPostgres opens the state store in the PostgreSQL database at url
// (postgres://user:password@host/db?sslmode=...; the usual PG*
// variables fill in what it leaves out) and brings its schema up to
// date, under an advisory lock so that replicas starting together
// migrate once. A store written by a newer bridge is refused with an
// error wrapping ErrSchemaTooNew.
func OpenPostgres(url string) (*Store, error) {
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("state: opening the PostgreSQL state store: %w", err)
	}
	// The store's tables live in a schema of their own (pgSchema), apart
	// from whatever else the database holds; public stays on the path for
	// a citext extension a DBA installed there.
	cfg.RuntimeParams["search_path"] = pgSchema + ", public"
	async := asyncCommits(cfg)
	db := stdlib.OpenDB(*cfg)
	// Connections are kept: a PostgreSQL connection is a server process,
	// and one made per statement under load (database/sql closes those
	// over the idle bound) costs more than the statement.
	db.SetMaxOpenConns(maxConns)
	db.SetMaxIdleConns(maxConns)
	db.SetConnMaxIdleTime(5 * time.Minute)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := migratePostgres(ctx, db, pgMigrations); err != nil {
		db.Close()
		return nil, fmt.Errorf("state: PostgreSQL state store: %w", err)
	}
	s := &Store{db: db, stmts: sqlstmt.NewPostgres(db), pg: true, greatest: "GREATEST", asyncCommit: async}
	s.txMu.init()
	return s, nil
}

// beginLockedSQL begins a transaction and takes the write lock in one
// simple-protocol query: one round trip where database/sql's BEGIN and
// a statement for the lock were two. Every transaction of the store
// starts so, and under imaptest's stress they were a third of the
// statements a replica sent; the lock is held until COMMIT, so each
// round trip saved is one the other transactions do not wait for.
var beginLockedSQL = fmt.Sprintf("BEGIN; SELECT pg_advisory_xact_lock(%d)", writeLock)

// beginLocked begins a transaction holding the write lock
// (beginLockedSQL) on a connection of the pool, which the transaction's
// end returns to it. A connection left inside a transaction (its COMMIT
// or ROLLBACK failed) is not used again: pgx's database/sql driver
// discards a connection that is not idle when it is next taken.
func (s *Store) beginLocked(ctx context.Context) (*sqlstmt.Tx, error) {
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	// run sends q as one simple-protocol query and returns the command
	// tag of its last statement.
	run := func(q string) (tag string, err error) {
		err = conn.Raw(func(dc any) error {
			res, err := dc.(*stdlib.Conn).Conn().PgConn().Exec(ctx, q).ReadAll()
			if err == nil && len(res) > 0 {
				tag = res[len(res)-1].CommandTag.String()
			}
			return err
		})
		return tag, err
	}
	rollback := func() error { return rollbackConn(ctx, conn) }
	if _, err := run(beginLockedSQL); err != nil {
		rollback()
		return nil, fmt.Errorf("beginning and taking the write lock: %w", err)
	}
	return s.stmts.BeginOn(ctx, conn, func(commit bool, later []sqlstmt.Stmt) error {
		if !commit {
			return rollback()
		}
		// COMMIT of a transaction a failed statement aborted succeeds
		// with the tag ROLLBACK (pgx's own Tx reports it so too).
		var tag string
		var err error
		if len(later) > 0 {
			tag, err = commitWith(ctx, conn, later)
		} else {
			tag, err = run("COMMIT")
		}
		switch {
		case err != nil:
			rollback() // the COMMIT may not have been read
		case tag != "COMMIT":
			err = fmt.Errorf("the transaction was rolled back (%s)", tag)
			conn.Close()
		default:
			conn.Close()
		}
		return err
	}), nil
}

// rollbackConn ends the transaction on conn even when ctx is spent, and
// releases conn, closing it when the ROLLBACK fails: a connection back in
// the pool inside a transaction would hold the write lock, and every
// replica's transactions would wait for it until the pool dropped it.
func rollbackConn(ctx context.Context, conn *sql.Conn) error {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	err := conn.Raw(func(dc any) error {
		_, err := dc.(*stdlib.Conn).Conn().PgConn().Exec(rctx, "ROLLBACK").ReadAll()
		if err != nil {
			return driver.ErrBadConn // database/sql closes the connection
		}
		return nil
	})
	conn.Close()
	return err
}

// changeFlagsPG is ChangeFlags on PostgreSQL in two round trips: BEGIN,
// the write lock and the read of the sets kept now go in one pipeline,
// the writes and the COMMIT in another (commitWith). The lock is held
// from the first to the second only: every STORE's kept flags wait for
// it, on every replica. The same statements as changeFlagsBatchTx, which
// SQLite runs.
func (s *Store) changeFlagsPG(ctx context.Context, username, folder string, validity uint32, changes []FlagChange) (map[uint32][]string, error) {
	for try := 1; ; try++ {
		out, err := s.changeFlagsPGOnce(ctx, username, folder, validity, changes)
		if err == nil || !retryable(err) || try == maxTxTries || ctx.Err() != nil {
			if err != nil {
				return nil, fmt.Errorf("state: state store: %w", err)
			}
			return out, nil
		}
	}
}

func (s *Store) changeFlagsPGOnce(ctx context.Context, username, folder string, validity uint32, changes []FlagChange) (map[uint32][]string, error) {
	if err := s.txMu.Lock(ctx); err != nil { // as txOnce
		return nil, err
	}
	defer s.txMu.Unlock()
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	out, uids := flagSetsOf(changes)
	reads := flagReads(username, folder, validity, uids)
	err = conn.Raw(func(dc any) error {
		b := &pgx.Batch{}
		b.Queue("BEGIN")
		b.Queue("SELECT pg_advisory_xact_lock($1)", int64(writeLock))
		for _, q := range reads {
			q = s.stmts.Bound(q)
			b.Queue(q.Text, q.Args...)
		}
		br := dc.(*stdlib.Conn).Conn().SendBatch(ctx, b)
		defer br.Close()
		for range 2 {
			if _, err := br.Exec(); err != nil {
				return err
			}
		}
		for range reads {
			rows, err := br.Query()
			if err != nil {
				return err
			}
			for rows.Next() {
				var uid int64
				var fl string
				if err := rows.Scan(&uid, &fl); err != nil {
					rows.Close()
					return err
				}
				out[uint32(uid)] = strings.Fields(fl)
			}
			rows.Close()
			if err := rows.Err(); err != nil {
				return err
			}
		}
		return br.Close()
	})
	if err != nil {
		rollbackConn(ctx, conn)
		return nil, err
	}
	writes := applyFlagChanges(out, uids, changes, username, folder, validity)
	for i := range writes {
		writes[i] = s.stmts.Bound(writes[i])
	}
	tag, err := commitWith(ctx, conn, writes)
	switch {
	case err != nil:
		rollbackConn(ctx, conn)
		return nil, err
	case tag != "COMMIT":
		conn.Close()
		return nil, fmt.Errorf("the transaction was rolled back (%s)", tag)
	}
	conn.Close()
	return out, nil
}

// commitWith sends later (the transaction's writes whose results are
// not needed, sqlstmt.Tx.Later) and COMMIT in one round trip (a pgx
// batch: one pipeline, one Sync), and returns the COMMIT's tag. A write
// that fails skips the rest, the COMMIT included: the caller rolls back.
func commitWith(ctx context.Context, conn *sql.Conn, later []sqlstmt.Stmt) (tag string, err error) {
	err = conn.Raw(func(dc any) error {
		b := &pgx.Batch{}
		for _, st := range later {
			b.Queue(st.Text, st.Args...)
		}
		b.Queue("COMMIT")
		br := dc.(*stdlib.Conn).Conn().SendBatch(ctx, b)
		for range later {
			if _, err := br.Exec(); err != nil {
				br.Close()
				return err
			}
		}
		ct, err := br.Exec()
		if cerr := br.Close(); err == nil {
			err = cerr
		}
		tag = ct.String()
		return err
	})
	return tag, err
}

// asyncCommits makes the store's commits asynchronous unless the URL or
// PGOPTIONS says otherwise, and reports whether it did.
//
// A synchronous commit waits for PostgreSQL to flush its log to disk: a
// millisecond or more, on every STORE, APPEND and EXPUNGE, which made one
// replica on PostgreSQL half as fast as on SQLite under imaptest's
// stress. SQLite runs the state store in WAL mode with synchronous=NORMAL,
// whose commits do not wait for the disk either; with
// synchronous_commit=off PostgreSQL gives the same promise: a change the
// bridge committed survives the bridge's crash, and one committed in the
// last moment (at most about three wal_writer_delay, 0.6 s by default)
// before PostgreSQL's own crash or a power loss may be lost, never
// half-applied. The send journal's claim made before a message goes to
// the provider (a lost claim could let a retry send it twice, to another
// organisation) is always committed synchronously (durableExec). An
// APPEND's or COPY's journal entry is not (one more disk wait on every
// APPEND): a PostgreSQL crash in that moment while the provider carries
// the change out could let a retry do it twice in the user's own mailbox,
// as SQLite's power loss could. An operator who wants every commit
// durable sets synchronous_commit in the URL (options=-c
// synchronous_commit=on) or in PGOPTIONS, which is then left alone.
func asyncCommits(cfg *pgx.ConnConfig) bool {
	if _, set := cfg.RuntimeParams["synchronous_commit"]; set || strings.Contains(cfg.RuntimeParams["options"], "synchronous_commit") {
		return false
	}
	cfg.RuntimeParams["synchronous_commit"] = "off"
	return true
}

// durableExec runs one statement whose commit must reach the disk before
// it returns, whatever the store's commits otherwise do (asyncCommits).
func (s *Store) durableExec(ctx context.Context, q string, args ...any) (sql.Result, error) {
	if !s.asyncCommit {
		return s.stmts.Exec(ctx, q, args...)
	}
	tx, err := s.stmts.Begin(ctx, nil)
	if err != nil {
		return nil, err
	}
	if _, err := tx.Exec(`SELECT set_config('synchronous_commit', 'on', true)`); err != nil {
		tx.Rollback()
		return nil, err
	}
	res, err := tx.Exec(q, args...)
	if err != nil {
		tx.Rollback()
		return nil, err
	}
	return res, tx.Commit()
}

// IsPostgresURL reports whether a state store setting names PostgreSQL.
func IsPostgresURL(s string) bool {
	return strings.HasPrefix(s, "postgres://") || strings.HasPrefix(s, "postgresql://")
}

// migratePostgres brings the schema up to date in one transaction that
// holds the migration lock.
func migratePostgres(ctx context.Context, db *sql.DB, list []migration) error {
	if err := checkMigrations(list); err != nil {
		return err
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock($1)`, migrationLock); err != nil {
		return fmt.Errorf("taking the migration lock: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `CREATE SCHEMA IF NOT EXISTS `+pgSchema); err != nil {
		return fmt.Errorf("creating the schema %s: %w", pgSchema, err)
	}
	if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_version (
	version    BIGINT PRIMARY KEY,
	name       TEXT NOT NULL,
	applied_at BIGINT NOT NULL
)`); err != nil {
		return fmt.Errorf("creating the version table: %w", err)
	}
	var current int
	if err := tx.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_version`).Scan(&current); err != nil {
		return fmt.Errorf("reading the schema version: %w", err)
	}
	if current > 0 {
		// The schema's history must be this store's: its first version
		// carries the name the bridge gave it.
		var first string
		err := tx.QueryRowContext(ctx, `SELECT name FROM schema_version WHERE version = 1`).Scan(&first)
		if err != nil || first != list[0].name {
			return fmt.Errorf("%w (schema %s: its version 1 is %q)", ErrNotStateStore, pgSchema, first)
		}
	}
	if current > len(list) {
		return fmt.Errorf("%w: its schema version is %d, this program knows versions up to %d; run a newer directbridge",
			ErrSchemaTooNew, current, len(list))
	}
	for _, m := range list[current:] {
		if _, err := tx.ExecContext(ctx, m.sql); err != nil {
			return fmt.Errorf("migration %d (%s): %w", m.version, m.name, err)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO schema_version (version, name, applied_at) VALUES ($1, $2, $3)`,
			m.version, m.name, time.Now().UnixMilli()); err != nil {
			return fmt.Errorf("migration %d (%s): recording it: %w", m.version, m.name, err)
		}
	}
	return tx.Commit()
}

// pgMigrations is migrations (schema.go) in PostgreSQL's terms: the same
// versions, names, tables and columns; BIGINT for SQLite's 64-bit
// INTEGER, identity columns for its row ids, citext for COLLATE NOCASE.
// Append only, in step with migrations.
var pgMigrations = []migration{
	{version: 1, name: migrations[0].name, sql: `
CREATE EXTENSION IF NOT EXISTS citext;
CREATE TABLE sent (
	id          BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
	username    CITEXT NOT NULL,
	smtp_id     TEXT NOT NULL,
	message_id  TEXT NOT NULL,
	sent_at     BIGINT NOT NULL
);
CREATE INDEX sent_by_message_id ON sent (username, message_id);
CREATE INDEX sent_by_smtp_id ON sent (smtp_id);
CREATE TABLE folder_state (
	username     CITEXT NOT NULL,
	folder       TEXT NOT NULL,
	uid_validity BIGINT NOT NULL,
	uid_next     BIGINT NOT NULL,
	PRIMARY KEY (username, folder)
);
CREATE TABLE flags (
	username     CITEXT NOT NULL,
	folder       TEXT NOT NULL,
	uid_validity BIGINT NOT NULL,
	uid          BIGINT NOT NULL,
	flags        TEXT NOT NULL,
	PRIMARY KEY (username, folder, uid_validity, uid)
);
CREATE TABLE validity_counter (
	id   BIGINT PRIMARY KEY CHECK (id = 1),
	last BIGINT NOT NULL
);
`}, {version: 2, name: migrations[1].name, sql: `
CREATE TABLE submissions (
	key        TEXT PRIMARY KEY,
	username   CITEXT NOT NULL,
	state      TEXT NOT NULL,
	smtp_id    TEXT NOT NULL,
	match      TEXT NOT NULL,
	first_at   BIGINT NOT NULL,
	updated_at BIGINT NOT NULL
);
CREATE INDEX submissions_by_age ON submissions (first_at);
`}, {version: 3, name: migrations[2].name, sql: `
CREATE TABLE reported (
	smtp_id   TEXT NOT NULL,
	recipient TEXT NOT NULL,
	at        BIGINT NOT NULL,
	PRIMARY KEY (smtp_id, recipient)
);
`}, {version: 4, name: migrations[3].name, sql: `
CREATE TABLE pending_flags (
	id         BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
	username   CITEXT NOT NULL,
	folder     TEXT NOT NULL,
	msg_id     TEXT NOT NULL,
	size       BIGINT NOT NULL,
	flags      TEXT NOT NULL,
	created_at BIGINT NOT NULL
);
CREATE INDEX pending_flags_by_folder ON pending_flags (username, folder);
`}, {version: 5, name: migrations[4].name, sql: `
CREATE TABLE subscriptions (
	username CITEXT NOT NULL,
	name     TEXT NOT NULL,
	PRIMARY KEY (username, name)
);
`}, {version: 6, name: migrations[5].name, sql: `
CREATE TABLE settings (
	name  TEXT PRIMARY KEY,
	value TEXT NOT NULL
);
`}, {version: 7, name: migrations[6].name, sql: `
CREATE TABLE attempts (
	id         BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
	username   CITEXT NOT NULL,
	key        TEXT NOT NULL,
	owner      TEXT NOT NULL,
	state      TEXT NOT NULL,
	mark       BIGINT NOT NULL,
	created_at BIGINT NOT NULL,
	updated_at BIGINT NOT NULL
);
CREATE INDEX attempts_by_key ON attempts (username, key);
CREATE INDEX attempts_by_age ON attempts (created_at);
`}, {version: 8, name: migrations[7].name, sql: `
CREATE TABLE tracked (
	smtp_id    TEXT PRIMARY KEY,
	username   CITEXT NOT NULL,
	sender     TEXT NOT NULL,
	message_id TEXT NOT NULL,
	env_id     TEXT NOT NULL,
	recipients TEXT NOT NULL,
	sent_at    BIGINT NOT NULL
);
CREATE INDEX tracked_by_age ON tracked (sent_at);
`}, {version: 9, name: migrations[8].name, sql: `
ALTER TABLE submissions ADD COLUMN answered BIGINT NOT NULL DEFAULT 0;
ALTER TABLE submissions ADD COLUMN deferred BIGINT NOT NULL DEFAULT 0;
`}, {version: 10, name: migrations[9].name, sql: `
ALTER TABLE reported ADD COLUMN filed BIGINT NOT NULL DEFAULT 1;
ALTER TABLE reported ADD COLUMN dsn_id TEXT NOT NULL DEFAULT '';
`}, {version: 11, name: migrations[10].name, sql: `
CREATE TABLE replicas (
	id         TEXT PRIMARY KEY,
	started_at BIGINT NOT NULL,
	seen_at    BIGINT NOT NULL
);
`}, {version: 12, name: migrations[11].name, sql: `
ALTER TABLE replicas ADD COLUMN addr TEXT NOT NULL DEFAULT '';
`}, {version: 13, name: migrations[12].name, sql: `
ALTER TABLE replicas ADD COLUMN life_key BIGINT NOT NULL DEFAULT 0;
ALTER TABLE replicas ADD COLUMN life_pid INTEGER NOT NULL DEFAULT 0;
`},
}
