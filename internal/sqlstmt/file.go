package sqlstmt

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// PrivateFile makes sure the database file at path exists with mode 0600
// before SQLite opens it: SQLite gives the -wal and -shm files it creates
// later the mode of the database file, so all three stay private to the
// bridge's user (they hold folder names, keywords and Message-IDs). A file
// there already is made 0600 too, with its -wal and -shm; the directory
// 0700 when the bridge owns it.
func PrivateFile(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	// A directory the bridge does not own (a Kubernetes volume's root,
	// group-owned for fsGroup) cannot be chmodded: the files in it are
	// made private all the same, and that is what holds the data.
	if err := os.Chmod(filepath.Dir(path), 0o700); err != nil && !errors.Is(err, os.ErrPermission) {
		return fmt.Errorf("cannot make %s private (mode 0700): %w", filepath.Dir(path), err)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	f.Close()
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		if err := os.Chmod(p, 0o600); err != nil && !os.IsNotExist(err) {
			return fmt.Errorf("cannot make %s private (mode 0600): %w", p, err)
		}
	}
	return nil
}
