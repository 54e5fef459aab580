package state

import (
	"context"
	"fmt"
	"slices"
	"strings"
)

// IMAP subscriptions are names, not folders: a client may subscribe a
// name no folder has, and deleting a folder leaves its name subscribed
// (RFC 9051 §6.3.7, "the server MUST NOT unilaterally remove an existing
// mailbox name from the subscription list"). The provider keeps a
// subscribed flag on each folder it holds (SetFoldersSubscribed), so it
// can hold the subscriptions of existing folders and no others. The
// bridge keeps the rest here: the subscribed names that have no folder
// at the provider, in the provider's spelling. Folder names only.

// Subscriptions keeps the subscribed names that have no folder.
type Subscriptions interface {
	// Subscribed returns the names kept for username, sorted.
	Subscribed(ctx context.Context, username string) ([]string, error)
	// Subscribe keeps name; it is no error if it is kept already.
	Subscribe(ctx context.Context, username, name string) error
	// Unsubscribe forgets names and reports how many were kept.
	Unsubscribe(ctx context.Context, username string, names ...string) (int, error)
}

func (s *Store) Subscribed(ctx context.Context, username string) ([]string, error) {
	// Sorted here, by bytes: ORDER BY follows the database's collation,
	// which on PostgreSQL may be a locale's.
	rows, err := s.stmts.Query(ctx, `SELECT name FROM subscriptions WHERE username = ?`, strings.ToLower(username))
	if err != nil {
		return nil, fmt.Errorf("state: subscriptions: %w", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			return nil, fmt.Errorf("state: subscriptions: %w", err)
		}
		out = append(out, n)
	}
	slices.Sort(out)
	return out, rows.Err()
}

func (s *Store) Subscribe(ctx context.Context, username, name string) error {
	if _, err := s.stmts.Exec(ctx, `INSERT INTO subscriptions (username, name) VALUES (?, ?) ON CONFLICT DO NOTHING`,
		strings.ToLower(username), name); err != nil {
		return fmt.Errorf("state: subscriptions: %w", err)
	}
	return nil
}

func (s *Store) Unsubscribe(ctx context.Context, username string, names ...string) (int, error) {
	n := 0
	for _, name := range names {
		res, err := s.stmts.Exec(ctx, `DELETE FROM subscriptions WHERE username = ? AND name = ?`, strings.ToLower(username), name)
		if err != nil {
			return n, fmt.Errorf("state: subscriptions: %w", err)
		}
		k, err := res.RowsAffected()
		if err != nil {
			return n, fmt.Errorf("state: subscriptions: %w", err)
		}
		n += int(k)
	}
	return n, nil
}
