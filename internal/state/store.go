package state

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	_ "modernc.org/sqlite" // pure-Go SQLite, so builds stay CGO_ENABLED=0

	"github.com/directbridge/directbridge/internal/sqlstmt"
)

// Store is the StateStore kept in SQLite, in the file state.db of the
// data directory: what the provider does not keep but mail clients need.
// It holds no message content: no bodies, subjects or attachment names.
type Store struct {
	db       *sql.DB
	purgedAt atomic.Int64 // Unix ms of the last purge of expired submissions
	// attemptsPurgedAt is the Unix ms of the last purge of expired
	// attempts (attempts.go): at most once a minute, not a write per
	// APPEND.
	attemptsPurgedAt atomic.Int64
	// asyncCommit: PostgreSQL commits without waiting for the disk, but
	// for durableExec (postgres.go, asyncCommits).
	asyncCommit bool
	// pingedAt is the Unix ms of the last successful Ping (0: none, or
	// the last failed).
	pingedAt atomic.Int64
	// sentRetention is how long sent records are kept (SetSentRetention).
	sentRetention atomic.Int64
	// stmts keeps every statement prepared: parsing SQL is most of a
	// small statement's cost (package sqlstmt).
	stmts *sqlstmt.Cache

	// What differs on PostgreSQL (postgres.go): pg is set there
	// (transactions take the write lock), and the two-argument maximum is
	// GREATEST where SQLite's is MAX.
	pg       bool
	greatest string
	txMu     ctxMutex // PostgreSQL: one transaction of the process at a time (txOnce)
}

// OpenStore opens (creating if needed) the state store in dir and brings
// its schema up to date (see migrate.go). A store written by a newer
// bridge is refused with an error wrapping ErrSchemaTooNew.
//
// Transactions take SQLite's write lock when they begin (_txlock=immediate):
// most of them read and then write, and a deferred one could otherwise fail
// with SQLITE_BUSY half-way when another process holds the store too.
func OpenStore(dir string) (*Store, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("state: state directory: %w", err)
	}
	path := filepath.Join(dir, "state.db")
	if err := sqlstmt.PrivateFile(path); err != nil {
		return nil, fmt.Errorf("state: state store: %w", err)
	}
	dsn := "file:" + (&url.URL{Path: path}).EscapedPath() +
		"?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_txlock=immediate"
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("state: opening state store: %w", err)
	}
	db.SetMaxOpenConns(1)
	// Two processes opening a new store at once: the switch to WAL takes
	// a lock SQLite does not wait for (the busy timeout does not apply),
	// so the loser gets SQLITE_BUSY at once. It tries again, briefly.
	err = migrate(context.Background(), db, migrations)
	for try := 0; err != nil && strings.Contains(err.Error(), "SQLITE_BUSY") && try < 50; try++ {
		time.Sleep(20 * time.Millisecond)
		err = migrate(context.Background(), db, migrations)
	}
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("state: state store %s: %w", path, err)
	}
	return &Store{db: db, stmts: sqlstmt.New(db), greatest: "MAX"}, nil
}

// pingFresh is how long a successful Ping answers for the next ones:
// every IMAP LOGIN and SMTP AUTH asks (a round trip to PostgreSQL each,
// a hundred a second under a login storm), and a store that stops
// answering shows within it all the same.
const pingFresh = time.Second

// Ping reports whether the store answers a query, for readiness and the
// fronts' logins; a success within pingFresh answers for it.
func (s *Store) Ping(ctx context.Context) error {
	if last := s.pingedAt.Load(); last != 0 && time.Since(time.UnixMilli(last)) < pingFresh {
		return nil
	}
	var one int
	if err := s.stmts.QueryRow(ctx, `SELECT 1`).Scan(&one); err != nil {
		s.pingedAt.Store(0)
		return fmt.Errorf("state: the state store does not answer: %w", err)
	}
	s.pingedAt.Store(time.Now().UnixMilli())
	return nil
}

// Close closes the store.
func (s *Store) Close() error {
	s.pingedAt.Store(0)
	s.stmts.Close()
	return s.db.Close()
}

// SentRecord links a message the bridge submitted to what the provider
// made of it.
type SentRecord struct {
	Username  string
	SmtpID    string // the provider's id of the sent message
	MessageID string // the Message-ID the client wrote, with angle brackets
	SentAt    time.Time
}

// RecordSent remembers a submitted message. The IMAP front uses it to
// recognise a client's APPEND of its own copy to Sent (the provider files
// one already); delivery status builds on it.
func (s *Store) RecordSent(ctx context.Context, r SentRecord) error {
	_, err := s.stmts.Exec(ctx, `INSERT INTO sent (username, smtp_id, message_id, sent_at) VALUES (?, ?, ?, ?)`,
		strings.ToLower(r.Username), r.SmtpID, r.MessageID, r.SentAt.UnixMilli())
	if err != nil {
		return fmt.Errorf("state: recording sent message: %w", err)
	}
	return nil
}

// FindSent returns the latest record of user's message with messageID
// sent at or after since, or ok false.
func (s *Store) FindSent(ctx context.Context, username, messageID string, since time.Time) (rec SentRecord, ok bool, err error) {
	var at int64
	err = s.stmts.QueryRow(ctx, `SELECT username, smtp_id, message_id, sent_at FROM sent
		WHERE username = ? AND message_id = ? AND sent_at >= ? ORDER BY sent_at DESC LIMIT 1`,
		strings.ToLower(username), messageID, since.UnixMilli()).Scan(&rec.Username, &rec.SmtpID, &rec.MessageID, &at)
	if errors.Is(err, sql.ErrNoRows) {
		return SentRecord{}, false, nil
	}
	if err != nil {
		return SentRecord{}, false, fmt.Errorf("state: looking up sent message: %w", err)
	}
	rec.SentAt = time.UnixMilli(at).UTC()
	return rec, true, nil
}

// KnownSmtpID reports whether a sent record holds smtpID: the bridge
// answered 250 for that message.
func (s *Store) KnownSmtpID(ctx context.Context, smtpID string) (bool, error) {
	var n int
	err := s.stmts.QueryRow(ctx, `SELECT COUNT(*) FROM sent WHERE smtp_id = ?`, smtpID).Scan(&n)
	if err != nil {
		return false, fmt.Errorf("state: looking up sent message: %w", err)
	}
	return n > 0, nil
}

// RecentSent returns user's sent records at or after since, newest first,
// at most limit of them. The admin socket's status operation uses it when
// asked about a mailbox's recent messages without naming them.
func (s *Store) RecentSent(ctx context.Context, username string, since time.Time, limit int) ([]SentRecord, error) {
	rows, err := s.stmts.Query(ctx, `SELECT username, smtp_id, message_id, sent_at FROM sent
		WHERE username = ? AND sent_at >= ? ORDER BY sent_at DESC, id DESC LIMIT ?`,
		strings.ToLower(username), since.UnixMilli(), limit)
	if err != nil {
		return nil, fmt.Errorf("state: listing sent messages: %w", err)
	}
	defer rows.Close()
	var out []SentRecord
	for rows.Next() {
		var rec SentRecord
		var at int64
		if err := rows.Scan(&rec.Username, &rec.SmtpID, &rec.MessageID, &at); err != nil {
			return nil, fmt.Errorf("state: listing sent messages: %w", err)
		}
		rec.SentAt = time.UnixMilli(at).UTC()
		out = append(out, rec)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("state: listing sent messages: %w", err)
	}
	return out, nil
}

// ctxMutex is a mutex whose Lock gives up with its context.
type ctxMutex struct{ ch chan struct{} }

func (m *ctxMutex) init() { m.ch = make(chan struct{}, 1) }

// Lock takes the mutex, or returns ctx's error when ctx ends first.
func (m *ctxMutex) Lock(ctx context.Context) error {
	select {
	case m.ch <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Unlock lets the mutex go.
func (m *ctxMutex) Unlock() { <-m.ch }
