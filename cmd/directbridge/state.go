package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/directbridge/directbridge/bridge"
	"github.com/directbridge/directbridge/internal/state"
)

const stateUsage = `usage: directbridge state copy [--to postgres://...]

Copies the state store of the data directory (DIRECTBRIDGE_DATA_DIR, its
state.db) into an empty PostgreSQL state store: folder UIDVALIDITY and
UIDNEXT, kept flags, subscriptions, the send journal and sent records,
attempts, bounce tracking, settings. Every folder keeps its UIDVALIDITY, so
no mail client downloads its mail again. Stop the bridge first; then run it
with DIRECTBRIDGE_STATE_URL set to the same database.

--to defaults to DIRECTBRIDGE_STATE_URL. Keep the password out of the
command line (ps, shell history): PGPASSWORD or ~/.pgpass supply it.
`

// runState runs "directbridge state ...".
func runState(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] != "copy" {
		fmt.Fprint(stderr, stateUsage)
		return 2
	}
	fs := flag.NewFlagSet("directbridge state copy", flag.ContinueOnError)
	fs.SetOutput(stderr)
	// No default shown: the flag package prints defaults with -h and on a
	// bad flag, and the URL may hold a password.
	fs.Usage = func() { fmt.Fprint(stderr, stateUsage) }
	to := fs.String("to", "", "PostgreSQL URL of an empty state store (default DIRECTBRIDGE_STATE_URL)")
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if *to == "" {
		*to = os.Getenv(bridge.EnvPrefix + "_STATE_URL")
	}
	if !state.IsPostgresURL(*to) {
		fmt.Fprintln(stderr, "directbridge state copy: --to (or DIRECTBRIDGE_STATE_URL) must be a postgres:// or postgresql:// URL")
		return 2
	}
	cfg, err := bridge.ConfigFromEnv()
	if err != nil {
		fmt.Fprintln(stderr, "directbridge: configuration:", err)
		return 2
	}
	dir := cfg.DataDir
	if dir == "" {
		dir = bridge.DefaultDataDir()
	}
	// OpenStore would make an empty store where there is none: a wrong
	// data directory must not copy nothing and say it did.
	if _, err := os.Stat(filepath.Join(dir, "state.db")); err != nil {
		fmt.Fprintf(stderr, "directbridge state copy: no state store in %s (DIRECTBRIDGE_DATA_DIR): %v\n", dir, err)
		return 1
	}
	src, err := state.OpenStore(dir)
	if err != nil {
		fmt.Fprintln(stderr, "directbridge state copy:", err)
		return 1
	}
	defer src.Close()
	dst, err := state.OpenPostgres(*to)
	if err != nil {
		fmt.Fprintln(stderr, "directbridge state copy:", err)
		return 1
	}
	defer dst.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	stats, err := state.Copy(ctx, src, dst)
	if err != nil {
		fmt.Fprintln(stderr, "directbridge state copy:", err)
		return 1
	}
	var parts []string
	for table, n := range stats {
		parts = append(parts, fmt.Sprintf("%s %d", table, n))
	}
	sort.Strings(parts)
	fmt.Fprintf(stdout, "copied the state store of %s into PostgreSQL (rows: %s)\n", dir, strings.Join(parts, ", "))
	return 0
}
