package state

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/directbridge/directbridge/internal/sqlstmt"
)

// ErrNotEmpty refuses a copy into a state store that holds state already.
var ErrNotEmpty = errors.New("the destination state store is not empty")

// copyTables are the tables of the schema's latest version, with their
// columns, in the order Copy writes them. A migration that adds a table
// or a column adds it here (TestCopyCoversSchema checks it).
var copyTables = []struct {
	name     string
	cols     []string
	identity bool // an id column whose sequence follows the copied ids
}{
	{"validity_counter", []string{"id", "last"}, false},
	{"folder_state", []string{"username", "folder", "uid_validity", "uid_next"}, false},
	{"flags", []string{"username", "folder", "uid_validity", "uid", "flags"}, false},
	{"sent", []string{"id", "username", "smtp_id", "message_id", "sent_at"}, true},
	{"submissions", []string{"key", "username", "state", "smtp_id", "match", "first_at", "updated_at", "answered", "deferred"}, false},
	{"reported", []string{"smtp_id", "recipient", "at", "filed", "dsn_id"}, false},
	{"pending_flags", []string{"id", "username", "folder", "msg_id", "size", "flags", "created_at"}, true},
	{"subscriptions", []string{"username", "name"}, false},
	{"settings", []string{"name", "value"}, false},
	{"attempts", []string{"id", "username", "key", "owner", "state", "mark", "created_at", "updated_at"}, true},
	{"tracked", []string{"smtp_id", "username", "sender", "message_id", "env_id", "recipients", "sent_at"}, false},
}

// notCopied are tables whose rows describe running processes, not
// state: a copy made with the bridge stopped has nothing to carry there.
var notCopied = []string{"replicas"}

// CopyStats counts the rows Copy wrote, per table.
type CopyStats map[string]int

// Copy writes everything src holds into dst, which must be empty, in one
// transaction of dst: folder identities keep their UIDVALIDITY and
// UIDNEXT, so that no mail client downloads its mail again, and the
// UIDVALIDITY counter goes along, so that no value is handed out twice.
// The bridge must not run on src meanwhile (stop it first). Both stores
// are at the latest schema version (opening them saw to it).
func Copy(ctx context.Context, src, dst *Store) (CopyStats, error) {
	stats := CopyStats{}
	err := dst.tx(ctx, func(tx *sqlstmt.Tx) error {
		for _, t := range copyTables {
			var n int
			if err := tx.QueryRow(`SELECT count(*) FROM ` + t.name).Scan(&n); err != nil {
				return err
			}
			if n > 0 {
				return fmt.Errorf("%w: its table %s has %d rows", ErrNotEmpty, t.name, n)
			}
		}
		for _, t := range copyTables {
			n, err := copyTable(ctx, src, tx, t.name, t.cols)
			if err != nil {
				return fmt.Errorf("copying %s: %w", t.name, err)
			}
			stats[t.name] = n
			if t.identity && dst.pg {
				// The ids were written as they were: the sequence
				// continues after the largest.
				if _, err := tx.Exec(`SELECT setval(pg_get_serial_sequence('` + t.name + `', 'id'), COALESCE(MAX(id), 0) + 1, false) FROM ` + t.name); err != nil {
					return fmt.Errorf("copying %s: its id sequence: %w", t.name, err)
				}
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("state: copy: %w", err)
	}
	return stats, nil
}

// copyTable copies the rows of one table from src into tx.
func copyTable(ctx context.Context, src *Store, tx *sqlstmt.Tx, table string, cols []string) (int, error) {
	list := strings.Join(cols, ", ")
	rows, err := src.db.QueryContext(ctx, `SELECT `+list+` FROM `+table)
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	insert := `INSERT INTO ` + table + ` (` + list + `) VALUES (` + strings.TrimSuffix(strings.Repeat("?, ", len(cols)), ", ") + `)`
	n := 0
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return n, err
		}
		if _, err := tx.Exec(insert, vals...); err != nil {
			return n, err
		}
		n++
	}
	return n, rows.Err()
}
