package mailbox

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// Reported records the delivery status notifications the bridge filed,
// per sent message and recipient, so that each failure is reported once,
// across restarts (delivery.Tracker). It holds ids and addresses only.
type Reported interface {
	MarkReported(ctx context.Context, smtpID, recipient string) (first bool, err error)
	UnmarkReported(ctx context.Context, smtpID, recipient string) error
}

// MarkReported records a DSN about smtpID's recipient; first is false
// when one was recorded before.
func (s *Store) MarkReported(ctx context.Context, smtpID, recipient string) (bool, error) {
	res, err := s.stmts.Exec(ctx, `INSERT INTO reported (smtp_id, recipient, at) VALUES (?, ?, ?) ON CONFLICT DO NOTHING`,
		smtpID, strings.ToLower(recipient), time.Now().UnixMilli())
	if err != nil {
		return false, fmt.Errorf("mailbox: reported: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("mailbox: reported: %w", err)
	}
	return n == 1, nil
}

// UnmarkReported takes a record back: the DSN could not be filed.
func (s *Store) UnmarkReported(ctx context.Context, smtpID, recipient string) error {
	if _, err := s.stmts.Exec(ctx, `DELETE FROM reported WHERE smtp_id = ? AND recipient = ?`, smtpID, strings.ToLower(recipient)); err != nil {
		return fmt.Errorf("mailbox: reported: %w", err)
	}
	return nil
}
