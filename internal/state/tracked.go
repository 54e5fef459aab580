package state

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// Tracking keeps the sent messages the delivery tracker follows
// (delivery.Tracker), so that a restart does not forget them and their
// bounces are still filed. A record is the envelope only: the smtpId, the
// account and sender, the Message-ID (as the sent records hold it), the
// recipients with their NOTIFY parameters and the ENVID, and when it was
// sent; no subject, no other header, no content, no credentials. What was
// filed is in Reported, which already keeps a DSN from being filed twice.
type Tracking interface {
	// TrackMessage records m, replacing a record of its smtpId. One write
	// per message sent.
	TrackMessage(ctx context.Context, m TrackedMessage) error
	// UntrackMessage forgets smtpID: every recipient is final, or the
	// tracker gave up on it. Forgetting one not recorded is no error.
	UntrackMessage(ctx context.Context, smtpID string) error
	// TrackedMessages returns the messages recorded that were sent at or
	// after since, oldest first; older ones are dropped on the way.
	TrackedMessages(ctx context.Context, since time.Time) ([]TrackedMessage, error)
}

// TrackedMessage is a sent message the delivery tracker follows.
type TrackedMessage struct {
	SmtpID    string
	Username  string // the account that sent it, whose credentials follow it
	Sender    string // the address it came from
	MessageID string // the client's Message-ID with brackets, for threading the DSN
	EnvID     string // ESMTP ENVID (RFC 3461 §4.4)
	SentAt    time.Time
	// Recipients in the order given, with what each asked to be told.
	Recipients []TrackedRecipient
}

// TrackedRecipient is a recipient of a tracked message.
type TrackedRecipient struct {
	Address string `json:"to"`
	// Notify is the RCPT's NOTIFY parameter as RFC 3461 §4.1 spells it
	// ("NEVER", "SUCCESS,FAILURE"...), "" when none was given.
	Notify string `json:"notify,omitempty"`
}

func (s *Store) TrackMessage(ctx context.Context, m TrackedMessage) error {
	return trackIn(ctx, s.stmts.Exec, m)
}

// trackIn writes m's record with exec: the store's own statement, or one
// of a transaction (CompleteSubmission).
func trackIn(ctx context.Context, exec func(context.Context, string, ...any) (sql.Result, error), m TrackedMessage) error {
	rcpts, err := json.Marshal(m.Recipients)
	if err != nil {
		return fmt.Errorf("state: tracked: %w", err)
	}
	if _, err := exec(ctx, `INSERT INTO tracked (smtp_id, username, sender, message_id, env_id, recipients, sent_at)
		VALUES (?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (smtp_id) DO UPDATE SET username = excluded.username, sender = excluded.sender,
			message_id = excluded.message_id, env_id = excluded.env_id, recipients = excluded.recipients, sent_at = excluded.sent_at`,
		m.SmtpID, strings.ToLower(m.Username), strings.ToLower(m.Sender), m.MessageID, m.EnvID, string(rcpts), m.SentAt.UnixMilli()); err != nil {
		return fmt.Errorf("state: tracked: %w", err)
	}
	return nil
}

func (s *Store) UntrackMessage(ctx context.Context, smtpID string) error {
	if _, err := s.stmts.Exec(ctx, `DELETE FROM tracked WHERE smtp_id = ?`, smtpID); err != nil {
		return fmt.Errorf("state: tracked: %w", err)
	}
	return nil
}

func (s *Store) TrackedMessages(ctx context.Context, since time.Time) ([]TrackedMessage, error) {
	if _, err := s.stmts.Exec(ctx, `DELETE FROM tracked WHERE sent_at < ?`, since.UnixMilli()); err != nil {
		return nil, fmt.Errorf("state: tracked: %w", err)
	}
	rows, err := s.stmts.Query(ctx, `SELECT smtp_id, username, sender, message_id, env_id, recipients, sent_at FROM tracked
		ORDER BY sent_at, smtp_id`)
	if err != nil {
		return nil, fmt.Errorf("state: tracked: %w", err)
	}
	defer rows.Close()
	var out []TrackedMessage
	for rows.Next() {
		var m TrackedMessage
		var rcpts string
		var at int64
		if err := rows.Scan(&m.SmtpID, &m.Username, &m.Sender, &m.MessageID, &m.EnvID, &rcpts, &at); err != nil {
			return nil, fmt.Errorf("state: tracked: %w", err)
		}
		if err := json.Unmarshal([]byte(rcpts), &m.Recipients); err != nil {
			return nil, fmt.Errorf("state: tracked message %s: recipients: %w", m.SmtpID, err)
		}
		m.SentAt = time.UnixMilli(at).UTC()
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("state: tracked: %w", err)
	}
	return out, nil
}
