package state

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/directbridge/directbridge/internal/sqlstmt"
)

// The provider keeps stable UIDs per folder but no UIDVALIDITY and no
// UIDNEXT, and only one flag (read/unread). The IMAP front needs all of
// them, so the state store keeps, per user and folder name:
//
//   - UIDVALIDITY (RFC 9051 §2.3.1.1), made new whenever the folder's UIDs
//     can no longer be trusted to mean the same messages: the folder was
//     deleted and created again, or UIDs were seen going backwards;
//   - the UIDNEXT high-water mark: one more than the largest UID ever seen,
//     so that UIDNEXT never goes down even after the newest message is gone;
//   - every flag other than \Seen, per UID, under the UIDVALIDITY it
//     belongs to.
//
// The tables (folder_state, flags, validity_counter) are created by
// migration 1 in schema.go.

// FolderState is the bridge's bookkeeping for one folder.
type FolderState struct {
	UIDValidity uint32
	UIDNext     uint32 // one more than the largest UID ever seen
}

// nextValidity hands out UIDVALIDITY values: the current time in seconds,
// or one more than the last value if that is not larger, so values never
// repeat, even across folders or after a clock step back.
func nextValidity(tx *sqlstmt.Tx) (uint32, error) {
	var last int64
	err := tx.QueryRow(`SELECT last FROM validity_counter WHERE id = 1`).Scan(&last)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return 0, err
	}
	v := max(time.Now().Unix(), last+1)
	if v > 0xFFFFFFFF {
		v = last + 1
	}
	_, err = tx.Exec(`INSERT INTO validity_counter (id, last) VALUES (1, ?) ON CONFLICT (id) DO UPDATE SET last = excluded.last`, v)
	return uint32(v), err
}

// tx runs fn in one transaction, one at a time: on SQLite every
// transaction takes the write lock when it begins (OpenStore); on
// PostgreSQL it takes the store's advisory lock first (postgres.go,
// writeLock), across the connections of every replica. The transactions
// read and then write (the UIDVALIDITY counter, kept flags), which is
// safe so. One PostgreSQL ends all the same (a deadlock elsewhere, a
// serialization failure) is run again (retryable).
func (s *Store) tx(ctx context.Context, fn func(*sqlstmt.Tx) error) error {
	for try := 1; ; try++ {
		err := s.txOnce(ctx, fn)
		if err == nil || !s.pg || !retryable(err) || try == maxTxTries || ctx.Err() != nil {
			return err
		}
	}
}

func (s *Store) txOnce(ctx context.Context, fn func(*sqlstmt.Tx) error) error {
	if s.pg {
		// One transaction of this process waits for the write lock at a
		// time, not one per pool connection: waiters holding every
		// connection would starve the statements outside transactions
		// (and /readyz's query).
		if err := s.txMu.Lock(ctx); err != nil {
			return fmt.Errorf("state: state store: %w", err)
		}
		defer s.txMu.Unlock()
	}
	var tx *sqlstmt.Tx
	var err error
	if s.pg {
		tx, err = s.beginLocked(ctx)
	} else {
		tx, err = s.stmts.Begin(ctx, nil)
	}
	if err != nil {
		return fmt.Errorf("state: state store: %w", err)
	}
	// Ended whatever fn does, a panic included (the fronts recover a
	// command's panic and go on): a PostgreSQL transaction left open
	// would hold the write lock of every replica. After Commit or
	// Rollback this does nothing.
	defer tx.Rollback()
	if err := fn(tx); err != nil {
		tx.Rollback()
		return fmt.Errorf("state: state store: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("state: state store: %w", err)
	}
	return nil
}

// Folder returns the state of a folder, creating it (with a fresh
// UIDVALIDITY) on first use.
func (s *Store) Folder(ctx context.Context, username, folder string) (FolderState, error) {
	var st FolderState
	err := s.tx(ctx, func(tx *sqlstmt.Tx) error {
		err := tx.QueryRow(`SELECT uid_validity, uid_next FROM folder_state WHERE username = ? AND folder = ?`,
			username, folder).Scan(&st.UIDValidity, &st.UIDNext)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			st.UIDNext = 1
		case err != nil:
			return err
		case st.UIDValidity != 0:
			return nil
		}
		// New, or the high-water mark of a deleted folder of the name.
		if st.UIDValidity, err = nextValidity(tx); err != nil {
			return err
		}
		_, err = tx.Exec(`INSERT INTO folder_state (username, folder, uid_validity, uid_next) VALUES (?, ?, ?, ?)
			ON CONFLICT (username, folder) DO UPDATE SET uid_validity = excluded.uid_validity`,
			username, folder, st.UIDValidity, st.UIDNext)
		return err
	})
	return st, err
}

// SeenUIDs raises the UIDNEXT high-water mark to maxUID+1 if it is lower.
func (s *Store) SeenUIDs(ctx context.Context, username, folder string, maxUID uint32) error {
	if maxUID == 0 {
		return nil
	}
	return s.tx(ctx, func(tx *sqlstmt.Tx) error {
		_, err := tx.Exec(`UPDATE folder_state SET uid_next = `+s.greatest+`(uid_next, ?) WHERE username = ? AND folder = ?`,
			int64(maxUID)+1, username, folder)
		return err
	})
}

// ResetFolder gives a folder a new UIDVALIDITY and forgets its flags:
// its UIDs no longer name the messages they named. uidNext is the new
// high-water mark.
func (s *Store) ResetFolder(ctx context.Context, username, folder string, uidNext uint32) (FolderState, error) {
	st := FolderState{UIDNext: max(uidNext, 1)}
	err := s.tx(ctx, func(tx *sqlstmt.Tx) error {
		var err error
		if uidNext == 0 {
			err := tx.QueryRow(`SELECT uid_next FROM folder_state WHERE username = ? AND folder = ?`,
				username, folder).Scan(&st.UIDNext)
			if err != nil && !errors.Is(err, sql.ErrNoRows) {
				return err
			}
		}
		if st.UIDValidity, err = nextValidity(tx); err != nil {
			return err
		}
		if _, err := tx.Exec(`DELETE FROM flags WHERE username = ? AND folder = ?`, username, folder); err != nil {
			return err
		}
		_, err = tx.Exec(`INSERT INTO folder_state (username, folder, uid_validity, uid_next) VALUES (?, ?, ?, ?)
			ON CONFLICT (username, folder) DO UPDATE SET uid_validity = excluded.uid_validity, uid_next = excluded.uid_next`,
			username, folder, st.UIDValidity, st.UIDNext)
		return err
	})
	return st, err
}

// ForgetFolder removes the state of a folder and its sub-folders (after a
// DeleteFolder); a folder created later under the name starts afresh,
// with a new UIDVALIDITY but the old UIDNEXT high-water mark: a provider
// that never reuses a UID in a folder name (the embedded sandbox does
// not) assigns the re-created folder's first message a UID above the
// old ones, and the UIDNEXT the bridge announces should predict it. The
// row stays with UIDVALIDITY 0, which Folder reads as "none".
func (s *Store) ForgetFolder(ctx context.Context, username, folder string) error {
	return s.tx(ctx, func(tx *sqlstmt.Tx) error {
		if _, err := tx.Exec(`DELETE FROM flags WHERE username = ? AND (folder = ? OR substr(folder, 1, length(?)) = ?)`,
			username, folder, folder+".", folder+"."); err != nil {
			return err
		}
		_, err := tx.Exec(`UPDATE folder_state SET uid_validity = 0 WHERE username = ? AND (folder = ? OR substr(folder, 1, length(?)) = ?)`,
			username, folder, folder+".", folder+".")
		return err
	})
}

// RenameFolder moves the state of a folder and its sub-folders to a new
// name (after a MoveFolder, which keeps UIDs): flags survive a rename.
// The old names keep their UIDNEXT high-water marks, as after a delete.
func (s *Store) RenameFolder(ctx context.Context, username, from, to string) error {
	return s.tx(ctx, func(tx *sqlstmt.Tx) error {
		for _, table := range []string{"folder_state", "flags"} {
			if _, err := tx.Exec(`DELETE FROM `+table+` WHERE username = ? AND (folder = ? OR substr(folder, 1, length(?)) = ?)`,
				username, to, to+".", to+"."); err != nil {
				return err
			}
			_, err := tx.Exec(`UPDATE `+table+` SET folder = ? || substr(folder, length(?) + 1) WHERE username = ? AND (folder = ? OR substr(folder, 1, length(?)) = ?)`,
				to, from, username, from, from+".", from+".")
			if err != nil {
				return err
			}
		}
		_, err := tx.Exec(`INSERT INTO folder_state (username, folder, uid_validity, uid_next)
			SELECT username, ? || substr(folder, length(?) + 1), 0, uid_next FROM folder_state
			WHERE username = ? AND (folder = ? OR substr(folder, 1, length(?)) = ?)`,
			from, to, username, to, to+".", to+".")
		return err
	})
}

// Flags returns the kept flags of a folder by UID.
func (s *Store) Flags(ctx context.Context, username, folder string, validity uint32) (map[uint32][]string, error) {
	return s.FlagsFrom(ctx, username, folder, validity, 0)
}

// FlagsFrom returns the kept flags of a folder's UIDs from from on (a
// range of the primary key).
func (s *Store) FlagsFrom(ctx context.Context, username, folder string, validity, from uint32) (map[uint32][]string, error) {
	return s.FlagsBetween(ctx, username, folder, validity, from, math.MaxUint32)
}

// FlagsBetween returns the kept flags of a folder's UIDs from lo to hi.
func (s *Store) FlagsBetween(ctx context.Context, username, folder string, validity, lo, hi uint32) (map[uint32][]string, error) {
	rows, err := s.stmts.Query(ctx, `SELECT uid, flags FROM flags WHERE username = ? AND folder = ? AND uid_validity = ? AND uid >= ? AND uid <= ?`,
		username, folder, validity, lo, hi)
	if err != nil {
		return nil, fmt.Errorf("state: state store: %w", err)
	}
	defer rows.Close()
	out := map[uint32][]string{}
	for rows.Next() {
		var uid uint32
		var flags string
		if err := rows.Scan(&uid, &flags); err != nil {
			return nil, fmt.Errorf("state: state store: %w", err)
		}
		out[uid] = strings.Fields(flags)
	}
	return out, rows.Err()
}

// SetFlags replaces the kept flags of some messages; an empty list removes
// the entry. All changes are one transaction.
func (s *Store) SetFlags(ctx context.Context, username, folder string, validity uint32, flags map[uint32][]string) error {
	if len(flags) == 0 {
		return nil
	}
	changes := make([]FlagChange, 0, len(flags))
	for _, uid := range slices.Sorted(maps.Keys(flags)) {
		changes = append(changes, FlagChange{UID: uid, Replace: true, Add: flags[uid]})
	}
	return s.tx(ctx, func(tx *sqlstmt.Tx) error {
		// A few statements whatever the number (changeFlagsBatchTx): an
		// EXPUNGE of many flagged messages drops their sets at once.
		_, err := changeFlagsBatchTx(tx, username, folder, validity, changes)
		return err
	})
}

// FlagChange is one message's change of kept flags, applied to the set
// kept at the moment the change is written (ChangeFlags): Replace sets
// the list to Add; otherwise Add is added and Del taken away. Keywords
// compare without regard to ASCII case (RFC 9051 §9 note 1): one already
// kept in another spelling keeps its spelling.
type FlagChange struct {
	UID      uint32
	Replace  bool
	Add, Del []string
}

// ChangeFlags applies changes to the kept flags of some messages in one
// transaction, each to the set kept at that moment, and returns the sets
// that result. Two connections that add different keywords to one message
// at once therefore both keep theirs: the read, the change and the write
// are one step for the store (the transaction takes SQLite's write lock
// when it begins, see OpenStore).
func (s *Store) ChangeFlags(ctx context.Context, username, folder string, validity uint32, changes []FlagChange) (map[uint32][]string, error) {
	if s.pg {
		return s.changeFlagsPG(ctx, username, folder, validity, changes)
	}
	var out map[uint32][]string
	err := s.tx(ctx, func(tx *sqlstmt.Tx) error {
		var err error
		out, err = changeFlagsBatchTx(tx, username, folder, validity, changes)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// batchUIDs bounds the UIDs of one statement of changeFlagsBatchTx, well
// under both databases' limits on parameters.
const batchUIDs = 400

// changeFlagsBatchTx applies changes to the kept flags, each to the set
// kept at that moment, in a few statements whatever their number: one read of the sets kept now, the
// changes applied in order, one delete of the sets left empty and one
// upsert of the others, per batchUIDs messages. On PostgreSQL each
// statement is a round trip made while the STORE's folder waits (flagMu,
// internal/mailstore): a change of 50 messages was 100 of them.
func changeFlagsBatchTx(tx *sqlstmt.Tx, username, folder string, validity uint32, changes []FlagChange) (map[uint32][]string, error) {
	out, uids := flagSetsOf(changes)
	for _, q := range flagReads(username, folder, validity, uids) {
		rows, err := tx.Query(q.Text, q.Args...)
		if err != nil {
			return nil, err
		}
		for rows.Next() {
			var uid uint32
			var fl string
			if err := rows.Scan(&uid, &fl); err != nil {
				rows.Close()
				return nil, err
			}
			out[uid] = strings.Fields(fl)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, err
		}
	}
	// The writes go with the COMMIT (Later): on PostgreSQL a STORE's
	// transaction is three round trips, not five.
	for _, q := range applyFlagChanges(out, uids, changes, username, folder, validity) {
		if err := tx.Later(q.Text, q.Args...); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// flagSetsOf is the messages changes name, in order, each with no set yet.
func flagSetsOf(changes []FlagChange) (map[uint32][]string, []uint32) {
	out := make(map[uint32][]string, len(changes))
	var uids []uint32
	for _, c := range changes {
		if _, seen := out[c.UID]; !seen {
			out[c.UID] = nil
			uids = append(uids, c.UID)
		}
	}
	return out, uids
}

// flagReads are the reads of the sets kept for uids (columns uid, flags),
// batchUIDs a statement, with ? placeholders.
func flagReads(username, folder string, validity uint32, uids []uint32) []sqlstmt.Stmt {
	var out []sqlstmt.Stmt
	for chunk := range slices.Chunk(uids, batchUIDs) {
		args := []any{username, folder, validity}
		for _, u := range chunk {
			args = append(args, u)
		}
		out = append(out, sqlstmt.Stmt{Text: `SELECT uid, flags FROM flags WHERE username = ? AND folder = ? AND uid_validity = ? AND uid IN (` +
			placeholders(len(chunk)) + `)`, Args: args})
	}
	return out
}

// applyFlagChanges applies changes in order to the sets read (out, for
// uids), and returns the writes that keep the result: a delete of the
// sets left empty and an upsert of the others, per batchUIDs messages,
// with ? placeholders.
func applyFlagChanges(out map[uint32][]string, uids []uint32, changes []FlagChange, username, folder string, validity uint32) []sqlstmt.Stmt {
	for _, c := range changes {
		out[c.UID] = ApplyFlagChange(out[c.UID], c)
	}
	var empty, kept []uint32
	for _, u := range uids {
		if len(out[u]) == 0 {
			empty = append(empty, u)
		} else {
			kept = append(kept, u)
		}
	}
	var writes []sqlstmt.Stmt
	for chunk := range slices.Chunk(empty, batchUIDs) {
		args := []any{username, folder, validity}
		for _, u := range chunk {
			args = append(args, u)
		}
		writes = append(writes, sqlstmt.Stmt{Text: `DELETE FROM flags WHERE username = ? AND folder = ? AND uid_validity = ? AND uid IN (` +
			placeholders(len(chunk)) + `)`, Args: args})
	}
	for chunk := range slices.Chunk(kept, batchUIDs) {
		var args []any
		rows := make([]string, 0, len(chunk))
		for _, u := range chunk {
			rows = append(rows, "(?, ?, ?, ?, ?)")
			args = append(args, username, folder, validity, u, strings.Join(out[u], " "))
		}
		writes = append(writes, sqlstmt.Stmt{Text: `INSERT INTO flags (username, folder, uid_validity, uid, flags) VALUES ` + strings.Join(rows, ", ") + `
			ON CONFLICT (username, folder, uid_validity, uid) DO UPDATE SET flags = excluded.flags`, Args: args})
	}
	return writes
}

// placeholders is n ? placeholders, separated by commas.
func placeholders(n int) string {
	return strings.TrimSuffix(strings.Repeat("?, ", n), ", ")
}

// ApplyFlagChange returns have changed by c, sorted and without
// duplicates (ASCII case-insensitive). Every state store implementation
// applies changes with it, so that they agree on spelling and order.
func ApplyFlagChange(have []string, c FlagChange) []string {
	if c.Replace {
		have = nil
	}
	same := func(a, b string) bool { return strings.EqualFold(a, b) }
	out := make([]string, 0, len(have)+len(c.Add))
	for _, f := range have {
		if !slices.ContainsFunc(c.Del, func(d string) bool { return same(d, f) }) &&
			!slices.ContainsFunc(out, func(g string) bool { return same(g, f) }) {
			out = append(out, f)
		}
	}
	for _, f := range c.Add {
		if !slices.ContainsFunc(out, func(g string) bool { return same(g, f) }) {
			out = append(out, f)
		}
	}
	slices.Sort(out)
	return out
}

// RefreshWrite is what one refresh of a folder learnt that the state
// store keeps, written at once (WriteRefresh).
type RefreshWrite struct {
	// Flags are the kept flags of messages new to the folder's mirror:
	// arrivals paired with their UIDs, copies whose flags were written
	// down before the copy. They are added to what the messages hold by
	// then (a COPY's or a STORE's flags written meanwhile stay).
	Flags map[uint32][]string
	// DropPending are the pending-flag entries (PendingFlags) whose
	// flags are now on their messages.
	DropPending []int64
	// MaxUID is the largest UID seen, for the UIDNEXT high-water mark
	// (SeenUIDs); 0 when none is new.
	MaxUID uint32
}

// Empty reports a write with nothing in it.
func (w RefreshWrite) Empty() bool {
	return len(w.Flags) == 0 && len(w.DropPending) == 0 && w.MaxUID == 0
}

// WriteRefresh writes what a refresh learnt, in one transaction: a
// bridge killed half-way leaves either all of it or none.
func (s *Store) WriteRefresh(ctx context.Context, username, folder string, validity uint32, w RefreshWrite) (uint32, error) {
	if w.Empty() {
		return 0, nil
	}
	var changes []FlagChange
	for _, uid := range slices.Sorted(maps.Keys(w.Flags)) {
		if fl := w.Flags[uid]; len(fl) > 0 {
			changes = append(changes, FlagChange{UID: uid, Add: fl})
		}
	}
	if len(changes) == 0 && len(w.DropPending) == 0 {
		// The high-water mark alone: one statement, atomic on its own;
		// no transaction (on PostgreSQL four round trips fewer for most
		// refreshes that found mail).
		before, err := s.raiseUIDNext(ctx, nil, username, folder, w.MaxUID)
		if err != nil {
			return 0, fmt.Errorf("state: state store: %w", err)
		}
		return before, nil
	}
	var before uint32
	err := s.tx(ctx, func(tx *sqlstmt.Tx) error {
		if len(changes) > 0 {
			if _, err := changeFlagsBatchTx(tx, username, folder, validity, changes); err != nil {
				return err
			}
		}
		for _, id := range w.DropPending {
			if _, err := tx.Exec(`DELETE FROM pending_flags WHERE id = ?`, id); err != nil {
				return err
			}
		}
		if w.MaxUID != 0 {
			var err error
			before, err = s.raiseUIDNext(ctx, tx, username, folder, w.MaxUID)
			return err
		}
		return nil
	})
	return before, err
}

// raiseUIDNext raises a folder's UIDNEXT high-water mark to maxUID+1 (in
// tx, if not nil) and returns the mark it found on PostgreSQL, where
// replicas share it (the row locked first, so that of two replicas
// raising it at once each learns the other's); 0 on SQLite.
func (s *Store) raiseUIDNext(ctx context.Context, tx *sqlstmt.Tx, username, folder string, maxUID uint32) (uint32, error) {
	if !s.pg {
		q, args := `UPDATE folder_state SET uid_next = MAX(uid_next, ?) WHERE username = ? AND folder = ?`, []any{int64(maxUID) + 1, username, folder}
		var err error
		if tx != nil {
			_, err = tx.Exec(q, args...)
		} else {
			_, err = s.stmts.Exec(ctx, q, args...)
		}
		return 0, err
	}
	q := `WITH old AS (SELECT uid_next FROM folder_state WHERE username = ? AND folder = ? FOR UPDATE)
		UPDATE folder_state SET uid_next = GREATEST(folder_state.uid_next, ?) FROM old
		WHERE folder_state.username = ? AND folder_state.folder = ?
		RETURNING old.uid_next`
	args := []any{username, folder, int64(maxUID) + 1, username, folder}
	var before int64
	var err error
	if tx != nil {
		err = tx.QueryRow(q, args...).Scan(&before)
	} else {
		err = s.stmts.QueryRow(ctx, q, args...).Scan(&before)
	}
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil // no state for the folder: nothing raised
	}
	return uint32(before), err
}
