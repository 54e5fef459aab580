package sandbox

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestUsersFile: DIRECTBRIDGE_SANDBOX_USERS_FILE adds the mailboxes of a
// file (one per line, CRLF or LF, blank lines skipped) to those of
// DIRECTBRIDGE_SANDBOX_USERS; with neither, the demo mailboxes are used;
// a file that cannot be read is refused with the variable's name.
func TestUsersFile(t *testing.T) {
	f := filepath.Join(t.TempDir(), "users")
	if err := os.WriteFile(f, []byte("b@direct.example:pw:with:colons\r\n\nc@direct.example:pw3\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	opts, demo, err := Config{Domain: "direct.example", Users: "a@direct.example:pw1", UsersFile: f}.Options()
	if err != nil || demo || len(opts.Users) != 3 || opts.Users[1].Password != "pw:with:colons" || opts.Users[2].Name != "c@direct.example" {
		t.Fatalf("Options: %+v, demo %v, err %v; want a, b and c", opts.Users, demo, err)
	}
	if opts, demo, err := (Config{Domain: "direct.example", UsersFile: f}).Options(); err != nil || demo || len(opts.Users) != 2 {
		t.Fatalf("file alone: %+v, demo %v, err %v; want b and c", opts.Users, demo, err)
	}
	if _, demo, err := (Config{Domain: "direct.example"}).Options(); err != nil || !demo {
		t.Fatalf("neither: demo %v, err %v; want the demo mailboxes", demo, err)
	}
	if _, _, err := (Config{Domain: "direct.example", UsersFile: f + "-missing"}).Options(); err == nil || !strings.Contains(err.Error(), "DIRECTBRIDGE_SANDBOX_USERS_FILE") {
		t.Fatalf("missing file: err %v; want one naming DIRECTBRIDGE_SANDBOX_USERS_FILE", err)
	}
}
