package sandbox

import (
	"context"
	"fmt"

	"github.com/directbridge/directbridge/internal/sqlstmt"
	"github.com/directbridge/directbridge/upstream/directapi"
)

// This file holds Go-only operations that stand for what happens outside
// the REST API at a real provider: mail arriving from another HISP, an
// operator creating a mailbox or changing its state. Tests and the
// embedded bridge use them; no HTTP client can reach them.

// AddUser creates a mailbox (or resets its password) with the initial folders.
func (s *Server) AddUser(ctx context.Context, address, password string) error {
	addr, err := normAddress(address)
	if err != nil {
		return fmt.Errorf("sandbox: %w", err)
	}
	return s.tx(ctx, func(tx *sqlstmt.Tx) error {
		_, err := s.createOrResetMailbox(tx, addr, password)
		return err
	})
}

// SetUserState sets a mailbox's UserStateType. "disabled" users fail
// authentication; users whose certificate expired or was revoked can
// connect, but their messages in and out are rejected.
func (s *Server) SetUserState(ctx context.Context, address string, state directapi.UserStateType) error {
	res, err := s.stmts.Exec(ctx, `UPDATE users SET state = ? WHERE address = ?`, string(state), address)
	if err != nil {
		return fmt.Errorf("sandbox: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("sandbox: no mailbox %s", address)
	}
	return nil
}

// Deliver stores raw as newly arrived, unread mail in folder of the mailbox
// address, as mail from another provider would arrive, and returns its UID.
func (s *Server) Deliver(ctx context.Context, address, folder string, raw []byte) (int64, error) {
	var uid int64
	err := s.tx(ctx, func(tx *sqlstmt.Tx) error {
		var u user
		if err := tx.QueryRow(`SELECT id, address FROM users WHERE address = ?`, address).Scan(&u.id, &u.address); err != nil {
			return fmt.Errorf("sandbox: no mailbox %s: %w", address, err)
		}
		fid, err := folderID(tx, u, folder)
		if err != nil {
			return fmt.Errorf("sandbox: %w", err)
		}
		uid, err = insertMessage(tx, fid, raw, true, s.now(), "")
		return err
	})
	return uid, err
}

// SetNextUID makes the next message filed in folder of the mailbox address
// get UID uid (never lower than the folder's current next UID). Tests use
// it to produce UIDs a real provider may reach, such as values beyond 32
// bits.
func (s *Server) SetNextUID(ctx context.Context, address, folder string, uid int64) error {
	return s.tx(ctx, func(tx *sqlstmt.Tx) error {
		var u user
		if err := tx.QueryRow(`SELECT id, address FROM users WHERE address = ?`, address).Scan(&u.id, &u.address); err != nil {
			return fmt.Errorf("sandbox: no mailbox %s: %w", address, err)
		}
		fid, err := folderID(tx, u, folder)
		if err != nil {
			return fmt.Errorf("sandbox: %w", err)
		}
		_, err = tx.Exec(`UPDATE folders SET next_uid = MAX(next_uid, ?) WHERE id = ?`, uid, fid)
		return err
	})
}
