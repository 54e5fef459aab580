package state

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"
)

// An attempt is one IMAP change asked of the provider (an APPEND, a COPY
// or MOVE), kept from before the request leaves until its outcome is
// known, so that a client's retry of a change whose answer was lost, or
// whose bridge was killed during it, is answered from what the provider
// did, not done a second time (see internal/mailstore/attempts.go). The provider
// may carry a request out after the bridge stopped waiting for it (late
// processing), so "not there yet" does not mean "not done" until a hold
// has passed. It holds a fingerprint only: no message content.

// AttemptState is what the bridge knows of an attempt's outcome.
type AttemptState string

const (
	// AttemptAsking: the request left (or is about to leave) the bridge
	// and no answer came yet. Found by a process other than its owner,
	// it means the owner stopped mid-call.
	AttemptAsking AttemptState = "asking"
	// AttemptUnknown: the request was sent and its answer was lost or
	// came too late; the provider may still carry it out.
	AttemptUnknown AttemptState = "unknown"
)

// Attempt is a journal entry.
type Attempt struct {
	ID       int64
	Username string
	// Key is the fingerprint of what was asked (the operation, the
	// folders, the exact bytes or the source messages).
	Key string
	// Owner names the process that made it: an entry in state asking of
	// another owner was left by a process that stopped.
	Owner string
	State AttemptState
	// Mark is what the caller needs to find the attempt's outcome (for a
	// COPY, the destination's largest UID before it).
	Mark int64
	// Created is when the request was about to leave; Updated when the
	// entry last changed (for an unknown outcome, when the bridge stopped
	// waiting).
	Created, Updated time.Time
	// OwnerLive tells whether Owner was alive when the entry was read:
	// on PostgreSQL, read in the same statement (ownerLiveSQL); on SQLite
	// (one process) Unknown.
	OwnerLive Liveness
}

// Liveness is what the store knows of an attempt's owner.
type Liveness int8

const (
	LivenessUnknown Liveness = iota
	OwnerAlive
	OwnerDead
)

// ReplicaLiveFor is how long after its last heartbeat a replica counts
// as alive: cluster.LiveFor, which writes the heartbeats (a test checks
// that they agree).
const ReplicaLiveFor = 10 * time.Second

// ownerLiveSQL is, in a query over attempts a, whether a's owner is a
// live replica: the server process of its heartbeat's connection holds
// its life lock (an advisory lock whose key and process package cluster
// writes with the heartbeat; PostgreSQL shows a bigint key's halves in
// classid and objid; the process, so that another session taking the
// key for a moment is not taken for the owner) and it beat within
// ReplicaLiveFor. Read in the statement that finds the
// attempt, it is as fresh as the look-up itself, and costs no round
// trip of its own (a question per attempt found was a tenth of a
// replica's CPU under imaptest's identical APPENDs through two replicas).
var ownerLiveSQL = fmt.Sprintf(`EXISTS (SELECT 1 FROM replicas r JOIN pg_locks l ON l.locktype = 'advisory' AND l.granted
		AND l.objsubid = 1 AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
		AND l.classid = ((r.life_key >> 32) & 4294967295)::oid AND l.objid = (r.life_key & 4294967295)::oid AND l.pid = r.life_pid
		WHERE r.id = a.owner AND r.seen_at > (extract(epoch FROM clock_timestamp()) * 1000)::bigint - %d)`, ReplicaLiveFor.Milliseconds())

// Attempts is the journal of IMAP changes whose outcome may be unknown.
type Attempts interface {
	// BeginAttempt records an attempt in state asking, owned by owner,
	// with the caller's mark, and returns its id. One write per change.
	BeginAttempt(ctx context.Context, username, key, owner string, mark int64) (int64, error)
	// UnknownAttempt records that the attempt's answer was lost.
	UnknownAttempt(ctx context.Context, id int64) error
	// EndAttempts forgets attempts whose outcome is known, in one
	// statement (the bridge ends answered APPENDs in batches).
	EndAttempts(ctx context.Context, ids ...int64) error
	// UndecidedAttempts returns the attempts of key whose outcome is not
	// known: unknown ones, and those in state asking of another owner.
	// Attempts of owner still asking are under way in the caller's own
	// process and are left out (two identical APPENDs at once are two
	// messages). Entries older than AttemptTTL are dropped on the way.
	UndecidedAttempts(ctx context.Context, username, key, owner string) ([]Attempt, error)
	// BeginUnlessUndecided is UndecidedAttempts, then BeginAttempt when
	// it found none: id is the attempt begun, or 0 with the undecided
	// attempts found. On PostgreSQL one statement (one round trip for
	// nearly every APPEND and COPY).
	BeginUnlessUndecided(ctx context.Context, username, key, owner string, mark int64) (id int64, undecided []Attempt, err error)
}

// AttemptTTL is how long an undecided attempt is remembered: a client
// retries within minutes, and after hours the answer is long decided.
const AttemptTTL = 24 * time.Hour

func (s *Store) BeginAttempt(ctx context.Context, username, key, owner string, mark int64) (int64, error) {
	now := time.Now().UnixMilli()
	var id int64
	err := s.stmts.QueryRow(ctx, `INSERT INTO attempts (username, key, owner, state, mark, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING id`,
		strings.ToLower(username), key, owner, AttemptAsking, mark, now, now).Scan(&id)
	if err != nil {
		return 0, fmt.Errorf("state: attempts: %w", err)
	}
	return id, nil
}

func (s *Store) UnknownAttempt(ctx context.Context, id int64) error {
	if _, err := s.stmts.Exec(ctx, `UPDATE attempts SET state = ?, updated_at = ? WHERE id = ?`,
		AttemptUnknown, time.Now().UnixMilli(), id); err != nil {
		return fmt.Errorf("state: attempts: %w", err)
	}
	return nil
}

// roundUpPow2 is the least power of two at or above n (n >= 1).
func roundUpPow2(n int) int {
	p := 1
	for p < n {
		p <<= 1
	}
	return p
}

// maxEndBatch bounds the ids one DELETE names (SQLite's default bound on
// a statement's parameters is 32766, PostgreSQL's 65535).
const maxEndBatch = 1024

func (s *Store) EndAttempts(ctx context.Context, ids ...int64) error {
	for len(ids) > 0 {
		n := min(len(ids), maxEndBatch)
		// The list is padded to a power of two with its last id, so
		// that the statements prepared (PostgreSQL caches one per text)
		// are a handful, not one per batch size.
		args := make([]any, roundUpPow2(n))
		for i := range args {
			args[i] = ids[min(i, n-1)]
		}
		if _, err := s.stmts.Exec(ctx, `DELETE FROM attempts WHERE id IN (`+placeholders(len(args))+`)`, args...); err != nil {
			return fmt.Errorf("state: attempts: %w", err)
		}
		ids = ids[n:]
	}
	return nil
}

func (s *Store) UndecidedAttempts(ctx context.Context, username, key, owner string) ([]Attempt, error) {
	now := time.Now()
	if err := s.purgeAttempts(ctx, now); err != nil {
		return nil, err
	}
	live := ""
	if s.pg {
		live = ", " + ownerLiveSQL + " AS live"
	}
	rows, err := s.stmts.Query(ctx, `SELECT id, username, key, owner, state, mark, created_at, updated_at`+live+` FROM attempts a
		WHERE username = ? AND key = ? AND (state = ? OR owner <> ?) AND created_at >= ? ORDER BY id`,
		strings.ToLower(username), key, AttemptUnknown, owner, now.Add(-AttemptTTL).UnixMilli())
	if err != nil {
		return nil, fmt.Errorf("state: attempts: %w", err)
	}
	_, out, err := scanAttempts(rows)
	return out, err
}

// purgeAttempts drops expired entries, at most once a minute.
func (s *Store) purgeAttempts(ctx context.Context, now time.Time) error {
	if last := s.attemptsPurgedAt.Load(); now.UnixMilli()-last > time.Minute.Milliseconds() && s.attemptsPurgedAt.CompareAndSwap(last, now.UnixMilli()) {
		if _, err := s.stmts.Exec(ctx, `DELETE FROM attempts WHERE created_at < ?`, now.Add(-AttemptTTL).UnixMilli()); err != nil {
			return fmt.Errorf("state: attempts: %w", err)
		}
	}
	return nil
}

// scanAttempts reads rows of (made, id, username, key, owner, state,
// mark, created_at, updated_at), or of the same without made: the id of
// a row made, and the others.
func scanAttempts(rows *sql.Rows) (made int64, found []Attempt, err error) {
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return 0, nil, fmt.Errorf("state: attempts: %w", err)
	}
	withMade := cols[0] == "made"
	withLive := cols[len(cols)-1] == "live"
	for rows.Next() {
		var a Attempt
		var created, updated int64
		var isMade, live bool
		dest := []any{&a.ID, &a.Username, &a.Key, &a.Owner, &a.State, &a.Mark, &created, &updated}
		if withMade {
			dest = append([]any{&isMade}, dest...)
		}
		if withLive {
			dest = append(dest, &live)
		}
		if err := rows.Scan(dest...); err != nil {
			return 0, nil, fmt.Errorf("state: attempts: %w", err)
		}
		if isMade {
			made = a.ID
			continue
		}
		a.Created, a.Updated = time.UnixMilli(created), time.UnixMilli(updated)
		if withLive {
			a.OwnerLive = OwnerDead
			if live {
				a.OwnerLive = OwnerAlive
			}
		}
		found = append(found, a)
	}
	if err := rows.Err(); err != nil && !errors.Is(err, sql.ErrNoRows) {
		return 0, nil, fmt.Errorf("state: attempts: %w", err)
	}
	return made, found, nil
}

func (s *Store) BeginUnlessUndecided(ctx context.Context, username, key, owner string, mark int64) (int64, []Attempt, error) {
	if !s.pg {
		found, err := s.UndecidedAttempts(ctx, username, key, owner)
		if err != nil || len(found) > 0 {
			return 0, found, err
		}
		id, err := s.BeginAttempt(ctx, username, key, owner, mark)
		return id, nil, err
	}
	now := time.Now()
	if err := s.purgeAttempts(ctx, now); err != nil {
		return 0, nil, err
	}
	user, ms := strings.ToLower(username), now.UnixMilli()
	// PostgreSQL runs the insert only when the look-up found nothing, in
	// one statement (a data-modifying WITH).
	rows, err := s.stmts.Query(ctx, `WITH found AS (
		SELECT id, username, key, owner, state, mark, created_at, updated_at, `+ownerLiveSQL+` AS live FROM attempts a
		WHERE username = ? AND key = ? AND (state = ? OR owner <> ?) AND created_at >= ?
	), made AS (
		INSERT INTO attempts (username, key, owner, state, mark, created_at, updated_at)
		SELECT CAST(? AS TEXT), CAST(? AS TEXT), CAST(? AS TEXT), CAST(? AS TEXT), CAST(? AS BIGINT), CAST(? AS BIGINT), CAST(? AS BIGINT)
		WHERE NOT EXISTS (SELECT 1 FROM found)
		RETURNING id, username, key, owner, state, mark, created_at, updated_at
	)
	SELECT true AS made, id, username, key, owner, state, mark, created_at, updated_at, true AS live FROM made
	UNION ALL SELECT false, id, username, key, owner, state, mark, created_at, updated_at, live FROM found ORDER BY 2`,
		user, key, AttemptUnknown, owner, now.Add(-AttemptTTL).UnixMilli(),
		user, key, owner, AttemptAsking, mark, ms, ms)
	if err != nil {
		return 0, nil, fmt.Errorf("state: attempts: %w", err)
	}
	return scanAttempts(rows)
}
