package main

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/emersion/go-imap/v2/imapclient"
)

// TestDataDirPrivate: in a data directory created beforehand with mode
// 0755, as an operator or a volume would, the bridge makes the directory
// 0700 and every file it writes there 0600: the state store and the
// sandbox's database with their -wal and -shm, the TLS key and
// certificate, the admin socket.
func TestDataDirPrivate(t *testing.T) {
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	p := startBridge(t, "DIRECTBRIDGE_DATA_DIR="+dir)
	// Write something, so that the databases have their -wal files.
	c, err := imapclient.DialInsecure(p.addrs["IMAP (STARTTLS)"], nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Login("alice@direct.example", "sandbox-demo").Wait(); err != nil {
		t.Fatal(err)
	}
	raw := "Subject: private\r\n\r\nhealth data\r\n"
	ac := c.Append("INBOX", int64(len(raw)), nil)
	ac.Write([]byte(raw))
	ac.Close()
	if _, err := ac.Wait(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Select("INBOX", nil).Wait(); err != nil {
		t.Fatal(err)
	}
	files := 0
	filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			t.Fatal(err)
		}
		info, err := d.Info()
		if err != nil {
			return nil // removed meanwhile (a -shm)
		}
		mode := info.Mode().Perm()
		switch {
		case d.IsDir() && mode != 0o700:
			t.Errorf("%s: directory mode %o; want 0700", path, mode)
		case !d.IsDir() && mode != 0o600:
			t.Errorf("%s: mode %o; want 0600", path, mode)
		case !d.IsDir():
			files++
		}
		return nil
	})
	if files < 5 {
		t.Errorf("only %d files in the data directory; the check saw too little", files)
	}
}
