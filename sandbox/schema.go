package sandbox

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"

	_ "modernc.org/sqlite" // pure-Go SQLite, so builds stay CGO_ENABLED=0

	"github.com/directbridge/directbridge/internal/sqlstmt"
)

// schema is the sandbox database. Times are epoch milliseconds (UTC).
// Folder names are stored exactly; UIDs are per folder and come from
// folders.next_uid, which never goes down, and uid_highwater keeps the last
// UID a folder name ever handed out, so a folder deleted and re-created
// does not reuse UIDs either.
const schema = `
CREATE TABLE IF NOT EXISTS users (
	id          INTEGER PRIMARY KEY,
	address     TEXT NOT NULL UNIQUE COLLATE NOCASE,
	pw_salt     BLOB NOT NULL,
	pw_hash     BLOB NOT NULL,
	state       TEXT NOT NULL DEFAULT 'activated',
	user_type   TEXT NOT NULL DEFAULT 'SMTP',
	first_name  TEXT NOT NULL DEFAULT '',
	last_name   TEXT NOT NULL DEFAULT '',
	email       TEXT NOT NULL DEFAULT '',
	patient_id  INTEGER REFERENCES patients(id),
	created_at  INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS folders (
	id          INTEGER PRIMARY KEY,
	user_id     INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
	name        TEXT NOT NULL,
	subscribed  INTEGER NOT NULL DEFAULT 1,
	next_uid    INTEGER NOT NULL DEFAULT 1,
	UNIQUE (user_id, name)
);
CREATE TABLE IF NOT EXISTS uid_highwater (
	user_id     INTEGER NOT NULL,
	name        TEXT NOT NULL,
	last_uid    INTEGER NOT NULL,
	PRIMARY KEY (user_id, name)
);
CREATE TABLE IF NOT EXISTS messages (
	id           INTEGER PRIMARY KEY,
	folder_id    INTEGER NOT NULL REFERENCES folders(id) ON DELETE CASCADE,
	uid          INTEGER NOT NULL,
	raw          BLOB NOT NULL,
	size         INTEGER NOT NULL,
	unread       INTEGER NOT NULL DEFAULT 1,
	received_at  INTEGER NOT NULL,
	sent_at      INTEGER,
	msgid        TEXT,
	from_hdr     TEXT NOT NULL DEFAULT '',
	subject      TEXT NOT NULL DEFAULT '',
	trashed_from TEXT,
	UNIQUE (folder_id, uid)
);
-- Listings choose their rows from these indexes without reading the rows,
-- whose raw bytes come first and spill into overflow pages (messages.go,
-- loadMessages): messages_state serves the unread state and the sender
-- and subject filters, messages_received the received-date searches.
CREATE INDEX IF NOT EXISTS messages_state ON messages (folder_id, uid, unread, from_hdr, subject);
CREATE INDEX IF NOT EXISTS messages_received ON messages (folder_id, received_at, uid);
CREATE TABLE IF NOT EXISTS delivery_logs (
	id          INTEGER PRIMARY KEY,
	smtp_id     TEXT NOT NULL,
	sender      TEXT NOT NULL COLLATE NOCASE,
	recipient   TEXT NOT NULL,
	size        INTEGER NOT NULL,
	status      TEXT NOT NULL,
	details     TEXT NOT NULL DEFAULT '',
	ts          INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS delivery_logs_smtp ON delivery_logs (smtp_id);
CREATE TABLE IF NOT EXISTS resellers (
	username    TEXT PRIMARY KEY COLLATE NOCASE,
	pw_salt     BLOB NOT NULL,
	pw_hash     BLOB NOT NULL
);
CREATE TABLE IF NOT EXISTS patients (
	id          INTEGER PRIMARY KEY,
	first_name  TEXT NOT NULL,
	last_name   TEXT NOT NULL,
	ssn4        TEXT NOT NULL,
	dob         TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS orders (
	id          INTEGER PRIMARY KEY AUTOINCREMENT,
	reseller    TEXT NOT NULL,
	created_at  INTEGER NOT NULL
);
`

// openDB opens (creating if needed) the database at path. One connection
// serialises all access: each REST operation is one short transaction, and
// a single writer never meets SQLITE_BUSY.
func openDB(path string) (*sql.DB, error) {
	if err := sqlstmt.PrivateFile(path); err != nil {
		return nil, fmt.Errorf("sandbox: database: %w", err)
	}
	dsn := "file:" + (&url.URL{Path: path}).EscapedPath() +
		"?_pragma=foreign_keys(1)&_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)"
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("sandbox: opening database: %w", err)
	}
	db.SetMaxOpenConns(1)
	if _, err := db.Exec(schema); err != nil {
		db.Close()
		return nil, fmt.Errorf("sandbox: creating schema: %w", err)
	}
	return db, nil
}

// tx runs fn in one transaction: every operation is all or nothing.
func (s *Server) tx(ctx context.Context, fn func(*sqlstmt.Tx) error) error {
	tx, err := s.stmts.Begin(ctx, nil)
	if err != nil {
		return fmt.Errorf("sandbox: begin: %w", err)
	}
	if err := fn(tx); err != nil {
		tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("sandbox: commit: %w", err)
	}
	return nil
}

// column runs a one-column query and returns its values; never nil, so
// an empty result is written as [] in JSON answers.
func column[T any](tx *sqlstmt.Tx, query string, args ...any) ([]T, error) {
	rows, err := tx.Query(query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []T{}
	for rows.Next() {
		var v T
		if err := rows.Scan(&v); err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}
