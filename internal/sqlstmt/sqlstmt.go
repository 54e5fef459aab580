// Package sqlstmt keeps SQL statements prepared, for the SQLite databases
// of the state store (package internal/state) and the sandbox, which run the
// same few dozen statements thousands of times a second. SQLite compiles
// a statement's text each time it is prepared, and database/sql prepares
// every Exec and Query anew: under imaptest's stress that compilation was
// 13% of the bridge's CPU, more than running the statements.
//
// Both databases have one connection (SetMaxOpenConns(1)), so a statement
// cannot be prepared on the database while a transaction holds the
// connection: database/sql would wait for the connection forever. A
// statement seen inside a transaction is therefore run unprepared that
// once, and prepared on the database when the transaction ends; from then
// on every transaction reuses it (sql.Tx.StmtContext finds it already
// prepared on the connection).
package sqlstmt

import (
	"context"
	"database/sql"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"
)

// MaxStatements bounds the statements kept. Statements built with a
// varying number of placeholders (IN lists) are distinct texts; past the
// bound new texts simply run unprepared.
const MaxStatements = 512

// Cache holds the prepared statements of one database.
type Cache struct {
	db    *sql.DB
	mu    sync.Mutex
	stmts map[string]*sql.Stmt
	want  map[string]bool // seen in a transaction, to prepare after it
	pg    bool            // PostgreSQL: statements rebound, none kept (NewPostgres)
}

// New returns a cache for db.
func New(db *sql.DB) *Cache {
	return &Cache{db: db, stmts: map[string]*sql.Stmt{}, want: map[string]bool{}}
}

// NewPostgres returns a cache for a PostgreSQL database opened with pgx's
// database/sql driver. Statements are written with ? placeholders, as for
// SQLite, and rebound to $1, $2, ... (rebind). None is kept prepared
// here: pgx keeps the statements of each of its pool's connections
// prepared itself, and a pool has more than one connection.
func NewPostgres(db *sql.DB) *Cache {
	c := New(db)
	c.pg = true
	return c
}

// params are args as the database takes them. PostgreSQL refuses text
// with a NUL byte or invalid UTF-8 (SQLSTATE 22021), where SQLite keeps
// it: such a string (a Message-ID a client wrote with a NUL) is stored
// with U+FFFD in their place. Lookups pass through here too, so a value
// written so is found again by the same bytes.
func (c *Cache) params(args []any) []any {
	if !c.pg {
		return args
	}
	copied := false
	for i, a := range args {
		if s, ok := a.(string); ok && (strings.IndexByte(s, 0) >= 0 || !utf8.ValidString(s)) {
			if !copied { // the caller's slice stays as it was
				args, copied = append([]any(nil), args...), true
			}
			args[i] = strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "\uFFFD")
		}
	}
	return args
}

// text is q as the database takes it.
func (c *Cache) text(q string) string {
	if c.pg {
		return rebind(q)
	}
	return q
}

// rebind numbers the ? placeholders of q ($1, $2, ...), leaving those in
// quoted strings and identifiers alone.
func rebind(q string) string {
	var b strings.Builder
	b.Grow(len(q) + 8)
	n := 0
	var quote byte
	for i := 0; i < len(q); i++ {
		ch := q[i]
		switch {
		case quote != 0:
			if ch == quote {
				quote = 0
			}
		case ch == '\'' || ch == '"':
			quote = ch
		case ch == '?':
			n++
			b.WriteString("$" + strconv.Itoa(n))
			continue
		}
		b.WriteByte(ch)
	}
	return b.String()
}

// Close closes the prepared statements (not the database).
func (c *Cache) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for q, st := range c.stmts {
		st.Close()
		delete(c.stmts, q)
	}
}

// lookup returns the prepared statement of q, or nil after noting q to be
// prepared later.
func (c *Cache) lookup(q string) *sql.Stmt {
	if c.pg {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if st := c.stmts[q]; st != nil {
		return st
	}
	if len(c.stmts)+len(c.want) < MaxStatements {
		c.want[q] = true
	}
	return nil
}

// prepareWanted prepares the statements noted during transactions. Called
// with no transaction of this goroutine open. A statement that fails to
// prepare (a syntax error shows the same way unprepared) is dropped.
func (c *Cache) prepareWanted(ctx context.Context) {
	c.mu.Lock()
	var qs []string
	for q := range c.want {
		qs = append(qs, q)
	}
	clear(c.want)
	c.mu.Unlock()
	for _, q := range qs {
		st, err := c.db.PrepareContext(context.WithoutCancel(ctx), q)
		if err != nil {
			continue
		}
		c.mu.Lock()
		if c.stmts[q] == nil {
			c.stmts[q] = st
			st = nil
		}
		c.mu.Unlock()
		if st != nil {
			st.Close() // prepared twice at once: keep one
		}
	}
}

// Exec runs q outside a transaction.
func (c *Cache) Exec(ctx context.Context, q string, args ...any) (sql.Result, error) {
	if st := c.lookup(q); st != nil {
		return st.ExecContext(ctx, args...)
	}
	defer c.prepareWanted(ctx)
	return c.db.ExecContext(ctx, c.text(q), c.params(args)...)
}

// Query runs q outside a transaction.
func (c *Cache) Query(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	if st := c.lookup(q); st != nil {
		return st.QueryContext(ctx, args...)
	}
	rows, err := c.db.QueryContext(ctx, c.text(q), c.params(args)...)
	// Not prepared now: the rows hold the only connection until closed.
	return rows, err
}

// QueryRow runs q outside a transaction.
func (c *Cache) QueryRow(ctx context.Context, q string, args ...any) *sql.Row {
	if st := c.lookup(q); st != nil {
		return st.QueryRowContext(ctx, args...)
	}
	return c.db.QueryRowContext(ctx, c.text(q), c.params(args)...)
}

// Tx is a transaction whose Exec, Query and QueryRow (and their Context
// forms) use the cache's statements.
type Tx struct {
	tx  *sql.Tx // begun by Begin
	on  querier // what statements run on: tx, or the connection of BeginOn
	end EndFunc // BeginOn's: ends the transaction
	c   *Cache
	ctx context.Context

	later    []Stmt // BeginOn's: statements of Later not sent yet
	laterErr error  // the first of them that failed, Commit's error

	// BeginOn's: the rows its queries returned, closed before the
	// transaction ends (sql.Tx closes them itself; rows left open on
	// the connection would keep COMMIT from running), and whether it
	// ended.
	mu    sync.Mutex
	rows  []*sql.Rows
	ended bool
}

// Stmt is a statement as the database takes it (placeholders and
// arguments rebound).
type Stmt struct {
	Text string
	Args []any
}

// Bound is st as the database takes it (placeholders and arguments
// rebound), for a caller that sends it through the driver itself.
func (c *Cache) Bound(st Stmt) Stmt {
	return Stmt{Text: c.text(st.Text), Args: c.params(st.Args)}
}

// EndFunc ends a transaction of BeginOn: commits it, with the statements
// of Later not sent yet before the COMMIT (in its round trip), or rolls
// it back.
type EndFunc func(commit bool, later []Stmt) error

// querier runs statements: a *sql.Tx, or a *sql.Conn.
type querier interface {
	ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row
}

// Begin starts a transaction.
func (c *Cache) Begin(ctx context.Context, opts *sql.TxOptions) (*Tx, error) {
	tx, err := c.db.BeginTx(ctx, opts)
	if err != nil {
		return nil, err
	}
	return &Tx{tx: tx, on: tx, c: c, ctx: ctx}, nil
}

// BeginOn is a transaction the caller began on conn by hand (with more
// in the same round trip than database/sql's BEGIN can carry; package
// state's PostgreSQL write lock); end commits it or rolls it back, and
// releases conn. Statements run unprepared by the cache: only
// PostgreSQL's caches use it, which keep none (NewPostgres).
func (c *Cache) BeginOn(ctx context.Context, conn *sql.Conn, end EndFunc) *Tx {
	return &Tx{on: conn, end: end, c: c, ctx: ctx}
}

// Commit commits, then prepares the statements first seen in it.
func (t *Tx) Commit() error {
	if t.end != nil {
		return t.finish(true)
	}
	err := t.tx.Commit()
	t.c.prepareWanted(t.ctx)
	return err
}

// Rollback rolls back, then prepares the statements first seen in it.
func (t *Tx) Rollback() error {
	if t.end != nil {
		return t.finish(false)
	}
	err := t.tx.Rollback()
	t.c.prepareWanted(t.ctx)
	return err
}

// Later runs q, whose result the caller does not need, as part of the
// transaction: in a transaction of BeginOn it goes with the next
// statement's round trip or the COMMIT's, and an error it meets is
// Commit's; elsewhere it runs at once. Writes at the end of a
// transaction cost no round trip of their own so.
func (t *Tx) Later(q string, args ...any) error {
	if t.end == nil {
		_, err := t.ExecContext(t.ctx, q, args...)
		return err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ended {
		return sql.ErrTxDone
	}
	t.later = append(t.later, Stmt{Text: t.c.text(q), Args: t.c.params(args)})
	return nil
}

// flushLater sends the statements of Later before another one (which
// may read what they wrote).
func (t *Tx) flushLater(ctx context.Context) error {
	t.mu.Lock()
	later := t.later
	t.later = nil
	t.mu.Unlock()
	for _, st := range later {
		if _, err := t.on.ExecContext(ctx, st.Text, st.Args...); err != nil {
			t.mu.Lock()
			if t.laterErr == nil {
				t.laterErr = err
			}
			t.mu.Unlock()
			return err
		}
	}
	return nil
}

func (t *Tx) ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error) {
	if err := t.flushLater(ctx); err != nil {
		return nil, err
	}
	if st := t.stmt(ctx, q); st != nil {
		return st.ExecContext(ctx, args...)
	}
	return t.on.ExecContext(ctx, t.c.text(q), t.c.params(args)...)
}

func (t *Tx) QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	if err := t.flushLater(ctx); err != nil {
		return nil, err
	}
	if st := t.stmt(ctx, q); st != nil {
		return st.QueryContext(ctx, args...)
	}
	rows, err := t.on.QueryContext(ctx, t.c.text(q), t.c.params(args)...)
	if err == nil && t.end != nil {
		t.mu.Lock()
		t.rows = append(t.rows, rows)
		t.mu.Unlock()
	}
	return rows, err
}

// finish ends a transaction of BeginOn once: a Rollback after Commit (a
// deferred one) does nothing, as sql.Tx's returns ErrTxDone.
func (t *Tx) finish(commit bool) error {
	t.mu.Lock()
	if t.ended {
		t.mu.Unlock()
		return sql.ErrTxDone
	}
	t.ended = true
	rows, later, failed := t.rows, t.later, t.laterErr
	t.rows, t.later = nil, nil
	t.mu.Unlock()
	for _, r := range rows {
		r.Close()
	}
	if failed != nil && commit {
		t.end(false, nil)
		return failed
	}
	return t.end(commit, later)
}

func (t *Tx) QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row {
	// A failure of what Later queued aborts the transaction: this query
	// fails for it, and Commit returns it (flushLater keeps it).
	t.flushLater(ctx)
	if st := t.stmt(ctx, q); st != nil {
		return st.QueryRowContext(ctx, args...)
	}
	return t.on.QueryRowContext(ctx, t.c.text(q), t.c.params(args)...)
}

// stmt is q's prepared statement in the transaction, or nil.
func (t *Tx) stmt(ctx context.Context, q string) *sql.Stmt {
	if t.tx == nil {
		return nil
	}
	if st := t.c.lookup(q); st != nil {
		return t.tx.StmtContext(ctx, st)
	}
	return nil
}

func (t *Tx) Exec(q string, args ...any) (sql.Result, error) { return t.ExecContext(t.ctx, q, args...) }

func (t *Tx) Query(q string, args ...any) (*sql.Rows, error) {
	return t.QueryContext(t.ctx, q, args...)
}

func (t *Tx) QueryRow(q string, args ...any) *sql.Row { return t.QueryRowContext(t.ctx, q, args...) }
