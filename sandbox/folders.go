package sandbox

import (
	"database/sql"
	"errors"
	"fmt"
	"sort"
	"strings"
	"unicode"

	"github.com/directbridge/directbridge/internal/sqlstmt"
)

// maxFolderName bounds a folder name in bytes.
const maxFolderName = 512

// validateFolderName applies the document's rule that folder names start
// with "INBOX." (the root being INBOX) and refuses names a mailbox cannot
// hold: empty hierarchy levels ("INBOX..a", "INBOX.a.") and control
// characters.
func validateFolderName(name string) error {
	if name == Inbox {
		return nil
	}
	if !strings.HasPrefix(name, Inbox+".") {
		return errInvalid("folder name %q must start with INBOX.", name)
	}
	if len(name) > maxFolderName {
		return errInvalid("folder name longer than %d bytes", maxFolderName)
	}
	for _, seg := range strings.Split(name, ".") {
		if seg == "" {
			return errInvalid("folder name %q has an empty level", name)
		}
	}
	if strings.ContainsFunc(name, unicode.IsControl) {
		return errInvalid("folder name contains a control character")
	}
	return nil
}

// parentNames lists the ancestors of name below INBOX, outermost first.
func parentNames(name string) []string {
	var out []string
	for i := len(Inbox) + 1; i < len(name); i++ {
		if name[i] == '.' {
			out = append(out, name[:i])
		}
	}
	return out
}

// createFolderRow inserts a folder. Its UIDs continue after the last UID
// any earlier folder of the same name handed out.
func createFolderRow(tx *sqlstmt.Tx, userID int64, name string) (int64, error) {
	next, err := nextUIDFor(tx, userID, name, 1)
	if err != nil {
		return 0, err
	}
	res, err := tx.Exec(`INSERT INTO folders (user_id, name, next_uid) VALUES (?, ?, ?)`, userID, name, next)
	if err != nil {
		return 0, fmt.Errorf("sandbox: creating folder: %w", err)
	}
	return res.LastInsertId()
}

// nextUIDFor returns max(atLeast, high-water mark of name + 1).
func nextUIDFor(tx *sqlstmt.Tx, userID int64, name string, atLeast int64) (int64, error) {
	var last int64
	err := tx.QueryRow(`SELECT last_uid FROM uid_highwater WHERE user_id = ? AND name = ?`, userID, name).Scan(&last)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return 0, err
	}
	return max(atLeast, last+1), nil
}

// rememberHighwater records the last UID of a folder name about to vanish.
func rememberHighwater(tx *sqlstmt.Tx, userID int64, name string, nextUID int64) error {
	_, err := tx.Exec(`INSERT INTO uid_highwater (user_id, name, last_uid) VALUES (?, ?, ?)
		ON CONFLICT (user_id, name) DO UPDATE SET last_uid = MAX(last_uid, excluded.last_uid)`, userID, name, nextUID-1)
	return err
}

// folderID resolves an existing folder; a missing one is code 3.
func folderID(tx *sqlstmt.Tx, u user, name string) (int64, error) {
	var id int64
	err := tx.QueryRow(`SELECT id FROM folders WHERE user_id = ? AND name = ?`, u.id, name).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, errInvalid("folder %q does not exist", name)
	}
	return id, err
}

func folderExists(tx *sqlstmt.Tx, u user, name string) (bool, error) {
	_, err := folderID(tx, u, name)
	var me *msgError
	if errors.As(err, &me) {
		return false, nil
	}
	return err == nil, err
}

// ensureFolder returns the folder's id, creating it and its ancestors.
func ensureFolder(tx *sqlstmt.Tx, u user, name string) (int64, error) {
	for _, p := range append(parentNames(name), name) {
		ok, err := folderExists(tx, u, p)
		if err != nil {
			return 0, err
		}
		if !ok {
			if _, err := createFolderRow(tx, u.id, p); err != nil {
				return 0, err
			}
		}
	}
	return folderID(tx, u, name)
}

// createFolder creates name and any missing ancestors, as IMAP CREATE does
// (RFC 9051 §6.3.4). Reserved or existing names are refused.
func createFolder(tx *sqlstmt.Tx, u user, name string) error {
	if err := validateFolderName(name); err != nil {
		return err
	}
	if isReserved(name) {
		return errInvalid("folder %q is reserved", name)
	}
	if ok, err := folderExists(tx, u, name); err != nil || ok {
		if ok {
			return errInvalid("folder %q already exists", name)
		}
		return err
	}
	_, err := ensureFolder(tx, u, name)
	return err
}

// subtree lists the folder and its descendants as (id, name, next_uid).
type folderRow struct {
	id      int64
	name    string
	nextUID int64
}

func subtree(tx *sqlstmt.Tx, u user, name string) ([]folderRow, error) {
	// SQLite counts characters, not bytes, in substr and length: the
	// prefix test must measure the prefix the same way.
	rows, err := tx.Query(`SELECT id, name, next_uid FROM folders WHERE user_id = ? AND (name = ? OR substr(name, 1, length(?)) = ?)`,
		u.id, name, name+".", name+".")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []folderRow
	for rows.Next() {
		var f folderRow
		if err := rows.Scan(&f.id, &f.name, &f.nextUID); err != nil {
			return nil, err
		}
		out = append(out, f)
	}
	return out, rows.Err()
}

// deleteFolder removes a non-reserved folder, its sub-folders and all
// their messages, for good (document operation 24).
func deleteFolder(tx *sqlstmt.Tx, u user, name string) error {
	if err := validateFolderName(name); err != nil {
		return err
	}
	if isReserved(name) {
		return errInvalid("folder %q is reserved", name)
	}
	tree, err := subtree(tx, u, name)
	if err != nil {
		return err
	}
	if !containsName(tree, name) {
		return errInvalid("folder %q does not exist", name)
	}
	for _, f := range tree {
		if err := rememberHighwater(tx, u.id, f.name, f.nextUID); err != nil {
			return err
		}
		if _, err := tx.Exec(`DELETE FROM folders WHERE id = ?`, f.id); err != nil {
			return err
		}
	}
	return nil
}

func containsName(tree []folderRow, name string) bool {
	for _, f := range tree {
		if f.name == name {
			return true
		}
	}
	return false
}

// moveFolder renames a non-reserved folder with its sub-folders (document
// operation 23). Messages keep their UIDs; ancestors of the new name are
// created as IMAP RENAME does (RFC 9051 §6.3.6).
func moveFolder(tx *sqlstmt.Tx, u user, from, to string) error {
	for _, n := range []string{from, to} {
		if err := validateFolderName(n); err != nil {
			return err
		}
		if isReserved(n) {
			return errInvalid("folder %q is reserved", n)
		}
	}
	if to == from || strings.HasPrefix(to, from+".") {
		return errInvalid("cannot move folder %q into itself", from)
	}
	tree, err := subtree(tx, u, from)
	if err != nil {
		return err
	}
	if !containsName(tree, from) {
		return errInvalid("folder %q does not exist", from)
	}
	if ok, err := folderExists(tx, u, to); err != nil || ok {
		if ok {
			return errInvalid("folder %q already exists", to)
		}
		return err
	}
	for _, p := range parentNames(to) {
		if _, err := ensureFolder(tx, u, p); err != nil {
			return err
		}
	}
	for _, f := range tree {
		newName := to + strings.TrimPrefix(f.name, from)
		if err := validateFolderName(newName); err != nil {
			return err
		}
		if err := rememberHighwater(tx, u.id, f.name, f.nextUID); err != nil {
			return err
		}
		next, err := nextUIDFor(tx, u.id, newName, f.nextUID)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(`UPDATE folders SET name = ?, next_uid = ? WHERE id = ?`, newName, next, f.id); err != nil {
			return err
		}
	}
	return nil
}

// listFolders returns the sub-folders (all levels) of root, sorted.
func listFolders(tx *sqlstmt.Tx, u user, root string, subscribedOnly, childrenOnly bool) ([]string, error) {
	if err := validateFolderName(root); err != nil {
		return nil, err
	}
	tree, err := subtree(tx, u, root)
	if err != nil {
		return nil, err
	}
	if !containsName(tree, root) {
		return nil, errInvalid("folder %q does not exist", root)
	}
	var sub map[int64]bool
	if subscribedOnly {
		ids, err := column[int64](tx, `SELECT id FROM folders WHERE user_id = ? AND subscribed = 1`, u.id)
		if err != nil {
			return nil, err
		}
		sub = map[int64]bool{}
		for _, id := range ids {
			sub[id] = true
		}
	}
	out := []string{}
	for _, f := range tree {
		if f.name == root || subscribedOnly && !sub[f.id] {
			continue
		}
		if childrenOnly && strings.Contains(strings.TrimPrefix(f.name, root+"."), ".") {
			continue // a grandchild: Options.FoldersChildrenOnly
		}
		out = append(out, f.name)
	}
	sort.Strings(out)
	return out, nil
}

// setSubscribed changes the subscription of folders, all or none, and
// returns the names of all subscribed folders afterwards.
func setSubscribed(tx *sqlstmt.Tx, u user, names []string, subscribed bool) ([]string, error) {
	if len(names) == 0 {
		return nil, errInvalid("folders missing")
	}
	for _, n := range names {
		id, err := folderID(tx, u, n)
		if err != nil {
			return nil, err
		}
		if _, err := tx.Exec(`UPDATE folders SET subscribed = ? WHERE id = ?`, subscribed, id); err != nil {
			return nil, err
		}
	}
	return column[string](tx, `SELECT name FROM folders WHERE user_id = ? AND subscribed = 1 ORDER BY name`, u.id)
}

// allocUIDs reserves n consecutive UIDs of a folder and returns the first.
func allocUIDs(tx *sqlstmt.Tx, folderID int64, n int) (int64, error) {
	var first int64
	err := tx.QueryRow(`UPDATE folders SET next_uid = next_uid + ? WHERE id = ? RETURNING next_uid - ?`, n, folderID, n).Scan(&first)
	return first, err
}
