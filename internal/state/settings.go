package state

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// Setting returns a setting the data directory was used with, "" if none
// was recorded. Settings are recorded where changing one under existing
// clients matters (the IMAP layout: every folder would get a new name).
func (s *Store) Setting(ctx context.Context, name string) (string, error) {
	var v string
	err := s.stmts.QueryRow(ctx, `SELECT value FROM settings WHERE name = ?`, name).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("state: settings: %w", err)
	}
	return v, nil
}

// SetSetting records a setting.
func (s *Store) SetSetting(ctx context.Context, name, value string) error {
	if _, err := s.stmts.Exec(ctx, `INSERT INTO settings (name, value) VALUES (?, ?)
		ON CONFLICT (name) DO UPDATE SET value = excluded.value`, name, value); err != nil {
		return fmt.Errorf("state: settings: %w", err)
	}
	return nil
}

// UsedBefore reports whether the store holds folder state: IMAP clients
// have used the data directory.
func (s *Store) UsedBefore(ctx context.Context) (bool, error) {
	var n int
	if err := s.stmts.QueryRow(ctx, `SELECT count(*) FROM (SELECT 1 FROM folder_state LIMIT 1) AS used`).Scan(&n); err != nil {
		return false, fmt.Errorf("state: settings: %w", err)
	}
	return n > 0, nil
}
