package state

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/directbridge/directbridge/internal/sqlstmt"
)

// The provider copies and moves messages without their flags other than
// \Seen, which the bridge keeps itself under the new UIDs; those UIDs are
// known only after the provider's call. Were the bridge killed in
// between, a moved message would lose \Flagged and its keywords. So the
// flags are written down first, under the destination folder and the
// message's Message-ID and size (which the copy keeps), and taken back
// once they are on the new UIDs; a refresh of the destination that finds
// new messages while some wait applies them (package mailstore). Message
// ids and flags only: no content.

// PendingFlag is the flags a message copied or moved into a folder is to
// get.
type PendingFlag struct {
	ID      int64 // set by the store
	MsgID   string
	Size    int
	Flags   []string
	Created time.Time
}

// PendingFlags keeps them (see above).
type PendingFlags interface {
	// AddPendingFlags records flags for messages about to arrive in
	// folder and returns their ids.
	AddPendingFlags(ctx context.Context, username, folder string, pf []PendingFlag) ([]int64, error)
	// PendingFlagsOf returns what waits for folder, dropping entries
	// older than PendingFlagsTTL.
	PendingFlagsOf(ctx context.Context, username, folder string) ([]PendingFlag, error)
	// DropPendingFlags forgets entries applied (or given up).
	DropPendingFlags(ctx context.Context, ids []int64) error
}

// PendingFlagsTTL is how long flags wait for their message: a copy
// either lands within a call's time or the bridge is restarted and the
// folder refreshed within a day.
const PendingFlagsTTL = 24 * time.Hour

func (s *Store) AddPendingFlags(ctx context.Context, username, folder string, pf []PendingFlag) ([]int64, error) {
	ids := make([]int64, 0, len(pf))
	err := s.tx(ctx, func(tx *sqlstmt.Tx) error {
		ids = ids[:0] // a transaction run again starts over
		for _, p := range pf {
			var id int64
			if err := tx.QueryRowContext(ctx, `INSERT INTO pending_flags (username, folder, msg_id, size, flags, created_at)
				VALUES (?, ?, ?, ?, ?, ?) RETURNING id`, strings.ToLower(username), folder, p.MsgID, p.Size,
				strings.Join(p.Flags, " "), time.Now().UnixMilli()).Scan(&id); err != nil {
				return err
			}
			ids = append(ids, id)
		}
		return nil
	})
	return ids, err
}

func (s *Store) PendingFlagsOf(ctx context.Context, username, folder string) ([]PendingFlag, error) {
	user := strings.ToLower(username)
	if _, err := s.stmts.Exec(ctx, `DELETE FROM pending_flags WHERE username = ? AND folder = ? AND created_at < ?`,
		user, folder, time.Now().Add(-PendingFlagsTTL).UnixMilli()); err != nil {
		return nil, fmt.Errorf("state: pending flags: %w", err)
	}
	rows, err := s.stmts.Query(ctx, `SELECT id, msg_id, size, flags, created_at FROM pending_flags WHERE username = ? AND folder = ? ORDER BY id`,
		user, folder)
	if err != nil {
		return nil, fmt.Errorf("state: pending flags: %w", err)
	}
	defer rows.Close()
	var out []PendingFlag
	for rows.Next() {
		var p PendingFlag
		var flags string
		var created int64
		if err := rows.Scan(&p.ID, &p.MsgID, &p.Size, &flags, &created); err != nil {
			return nil, fmt.Errorf("state: pending flags: %w", err)
		}
		p.Flags, p.Created = strings.Fields(flags), time.UnixMilli(created)
		out = append(out, p)
	}
	return out, rows.Err()
}

func (s *Store) DropPendingFlags(ctx context.Context, ids []int64) error {
	for _, id := range ids {
		if _, err := s.stmts.Exec(ctx, `DELETE FROM pending_flags WHERE id = ?`, id); err != nil {
			return fmt.Errorf("state: pending flags: %w", err)
		}
	}
	return nil
}
