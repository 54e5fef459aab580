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
}

// Attempts is the journal of IMAP changes whose outcome may be unknown.
type Attempts interface {
	// BeginAttempt records an attempt in state asking, owned by owner,
	// with the caller's mark, and returns its id. One write per change.
	BeginAttempt(ctx context.Context, username, key, owner string, mark int64) (int64, error)
	// UnknownAttempt records that the attempt's answer was lost.
	UnknownAttempt(ctx context.Context, id int64) error
	// EndAttempt forgets an attempt whose outcome is known.
	EndAttempt(ctx context.Context, id int64) error
	// UndecidedAttempts returns the attempts of key whose outcome is not
	// known: unknown ones, and those in state asking of another owner.
	// Attempts of owner still asking are under way in the caller's own
	// process and are left out (two identical APPENDs at once are two
	// messages). Entries older than AttemptTTL are dropped on the way.
	UndecidedAttempts(ctx context.Context, username, key, owner string) ([]Attempt, error)
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

func (s *Store) EndAttempt(ctx context.Context, id int64) error {
	if _, err := s.stmts.Exec(ctx, `DELETE FROM attempts WHERE id = ?`, id); err != nil {
		return fmt.Errorf("state: attempts: %w", err)
	}
	return nil
}

func (s *Store) UndecidedAttempts(ctx context.Context, username, key, owner string) ([]Attempt, error) {
	now := time.Now()
	if last := s.attemptsPurgedAt.Load(); now.UnixMilli()-last > time.Minute.Milliseconds() && s.attemptsPurgedAt.CompareAndSwap(last, now.UnixMilli()) {
		if _, err := s.stmts.Exec(ctx, `DELETE FROM attempts WHERE created_at < ?`, now.Add(-AttemptTTL).UnixMilli()); err != nil {
			return nil, fmt.Errorf("state: attempts: %w", err)
		}
	}
	rows, err := s.stmts.Query(ctx, `SELECT id, username, key, owner, state, mark, created_at, updated_at FROM attempts
		WHERE username = ? AND key = ? AND (state = ? OR owner <> ?) AND created_at >= ? ORDER BY id`,
		strings.ToLower(username), key, AttemptUnknown, owner, now.Add(-AttemptTTL).UnixMilli())
	if err != nil {
		return nil, fmt.Errorf("state: attempts: %w", err)
	}
	defer rows.Close()
	var out []Attempt
	for rows.Next() {
		var a Attempt
		var created, updated int64
		if err := rows.Scan(&a.ID, &a.Username, &a.Key, &a.Owner, &a.State, &a.Mark, &created, &updated); err != nil {
			return nil, fmt.Errorf("state: attempts: %w", err)
		}
		a.Created, a.Updated = time.UnixMilli(created), time.UnixMilli(updated)
		out = append(out, a)
	}
	if err := rows.Err(); err != nil && !errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("state: attempts: %w", err)
	}
	return out, nil
}
