package state

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Reported records the delivery status notifications the bridge files,
// per sent message and recipient, so that each failure is reported once,
// across restarts (delivery.Tracker). It holds ids and addresses only.
//
// A record is made before the DSN is saved (a claim: no two trackers file
// it), and marked filed once the provider took it. A claim left unfiled
// (the bridge stopped between the two, or the save's answer was lost)
// names the DSN's Message-ID, by which the tracker looks in the sender's
// INBOX whether it arrived before it files it again: a failure is then
// neither lost nor reported twice.
type Reported interface {
	ClaimReport(ctx context.Context, smtpID, recipient, dsnID string) (ReportClaim, error)
	MarkFiled(ctx context.Context, smtpID string, recipients []string) error
	UnmarkReported(ctx context.Context, smtpID, recipient string) error
}

// ReportClaim is the record of a DSN about one recipient.
type ReportClaim struct {
	First bool      // made by this ClaimReport: the caller files the DSN
	Filed bool      // the provider took the DSN
	DSNID string    // the Message-ID (no brackets) of the DSN being filed
	At    time.Time // when the claim was made
}

// ClaimReport records that a DSN about smtpID's recipient, with
// Message-ID dsnID, is about to be filed; when a record exists it is
// returned as it is (First false).
func (s *Store) ClaimReport(ctx context.Context, smtpID, recipient, dsnID string) (ReportClaim, error) {
	now := time.Now()
	recipient = strings.ToLower(recipient)
	res, err := s.stmts.Exec(ctx, `INSERT INTO reported (smtp_id, recipient, at, filed, dsn_id) VALUES (?, ?, ?, 0, ?) ON CONFLICT DO NOTHING`,
		smtpID, recipient, now.UnixMilli(), dsnID)
	if err != nil {
		return ReportClaim{}, fmt.Errorf("state: reported: %w", err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return ReportClaim{}, fmt.Errorf("state: reported: %w", err)
	} else if n == 1 {
		return ReportClaim{First: true, DSNID: dsnID, At: now}, nil
	}
	var c ReportClaim
	var at int64
	var filed int
	err = s.stmts.QueryRow(ctx, `SELECT at, filed, dsn_id FROM reported WHERE smtp_id = ? AND recipient = ?`, smtpID, recipient).Scan(&at, &filed, &c.DSNID)
	if errors.Is(err, sql.ErrNoRows) {
		// Taken back between the two statements: try once more.
		return s.ClaimReport(ctx, smtpID, recipient, dsnID)
	}
	if err != nil {
		return ReportClaim{}, fmt.Errorf("state: reported: %w", err)
	}
	c.Filed, c.At = filed != 0, time.UnixMilli(at)
	return c, nil
}

// MarkFiled records that the DSN about smtpID's recipients was filed.
func (s *Store) MarkFiled(ctx context.Context, smtpID string, recipients []string) error {
	for _, r := range recipients {
		if _, err := s.stmts.Exec(ctx, `UPDATE reported SET filed = 1 WHERE smtp_id = ? AND recipient = ?`, smtpID, strings.ToLower(r)); err != nil {
			return fmt.Errorf("state: reported: %w", err)
		}
	}
	return nil
}

// UnmarkReported takes a record back: the DSN could not be filed.
func (s *Store) UnmarkReported(ctx context.Context, smtpID, recipient string) error {
	if _, err := s.stmts.Exec(ctx, `DELETE FROM reported WHERE smtp_id = ? AND recipient = ?`, smtpID, strings.ToLower(recipient)); err != nil {
		return fmt.Errorf("state: reported: %w", err)
	}
	return nil
}
