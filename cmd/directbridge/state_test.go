package main

import (
	"context"
	"os/exec"
	"strings"
	"testing"

	"github.com/directbridge/directbridge/internal/pgtest"
	"github.com/directbridge/directbridge/internal/state"
)

// TestStateCopy: `directbridge state copy --to URL` copies the data
// directory's state store into an empty PostgreSQL one, the folders'
// UIDVALIDITY unchanged, without printing the URL; a data directory
// without a store is refused, as is a second copy into the full store.
func TestStateCopy(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	src, err := state.OpenStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	inbox, err := src.Folder(ctx, "alice@direct.example", "INBOX")
	if err != nil {
		t.Fatal(err)
	}
	src.Close()
	url := pgtest.Database(t)
	run := func(dataDir string, args ...string) (int, string, string) {
		cmd := exec.Command(binPath, append([]string{"state", "copy"}, args...)...)
		cmd.Env = cleanEnv("DIRECTBRIDGE_DATA_DIR=" + dataDir)
		var out, errOut strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &errOut
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return code, out.String(), errOut.String()
	}
	if code, _, errOut := run(t.TempDir(), "--to", url); code != 1 || !strings.Contains(errOut, "no state store") {
		t.Errorf("copy from a directory without a store: exit %d, %q", code, errOut)
	}
	code, out, errOut := run(dir, "--to", url)
	if code != 0 || !strings.Contains(out, "folder_state 1") || strings.Contains(out+errOut, url) {
		t.Fatalf("copy: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	dst, err := state.OpenPostgres(url)
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Close()
	if got, err := dst.Folder(ctx, "alice@direct.example", "INBOX"); err != nil || got != inbox {
		t.Errorf("INBOX after the copy: %+v, %v; want %+v", got, err, inbox)
	}
	if code, _, errOut := run(dir, "--to", url); code != 1 || !strings.Contains(errOut, "not empty") {
		t.Errorf("a second copy: exit %d, %q; want refused", code, errOut)
	}
	if code, _, _ := run(dir, "--to", "mysql://x"); code != 2 {
		t.Errorf("copy to a URL that is not PostgreSQL: exit %d, want 2", code)
	}
}
