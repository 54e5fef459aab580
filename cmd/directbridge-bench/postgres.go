package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
)

// pgServer is a throwaway PostgreSQL for the replicas scenario, from the
// machine's own binaries (Debian's postgresql package), listening on a
// Unix socket in its directory only, trust authentication.
type pgServer struct {
	b    *bench
	dir  string
	bin  string
	user string // the system user it runs as ("" for this process's)
	n    int
}

// startPostgres starts the server, as the postgres user when run as root
// (PostgreSQL refuses root).
func (b *bench) startPostgres(ctx context.Context) (*pgServer, error) {
	initdb, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	bin := ""
	if len(initdb) > 0 {
		bin = filepath.Dir(initdb[len(initdb)-1])
	} else if p, err := exec.LookPath("initdb"); err == nil {
		bin = filepath.Dir(p)
	} else {
		return nil, errors.New("PostgreSQL is not installed (apt-get install postgresql)")
	}
	// Outside the work directory, which only this user may enter.
	dir, err := os.MkdirTemp("", "directbridge-bench-pg-")
	if err != nil {
		return nil, err
	}
	pg := &pgServer{b: b, dir: dir, bin: bin}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("running as root and no postgres user: %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
		pg.user = "postgres"
	}
	if err := pg.run(ctx, "initdb", "-D", filepath.Join(dir, "data"), "-U", "postgres", "--auth=trust", "--no-sync", "-E", "UTF8", "--locale=C"); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	if err := pg.run(ctx, "pg_ctl", "-D", filepath.Join(dir, "data"), "-l", filepath.Join(dir, "log"), "-w", "start",
		"-o", "-c listen_addresses='' -c unix_socket_directories="+dir+" -c max_connections=300"); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return pg, nil
}

// run runs one of the server's programs as its user.
func (pg *pgServer) run(ctx context.Context, prog string, args ...string) error {
	path := filepath.Join(pg.bin, prog)
	var cmd *exec.Cmd
	if pg.user != "" {
		cmd = exec.CommandContext(ctx, "runuser", append([]string{"-u", pg.user, "--", path}, args...)...)
	} else {
		cmd = exec.CommandContext(ctx, path, args...)
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s: %w\n%s", prog, err, out)
	}
	return nil
}

// database creates a fresh database and returns its URL. The previous
// one is dropped first (the parts use one at a time): autovacuum working
// through an earlier run's churned tables would take CPU from the next
// measurement on the same two cores.
func (pg *pgServer) database(ctx context.Context) (string, error) {
	if pg.n > 0 {
		prev := fmt.Sprintf("bench%d", pg.n)
		if err := pg.run(ctx, "psql", "-h", pg.dir, "-U", "postgres", "-q", "-c", "DROP DATABASE IF EXISTS "+prev+" WITH (FORCE)"); err != nil {
			return "", err
		}
	}
	pg.n++
	name := fmt.Sprintf("bench%d", pg.n)
	if err := pg.run(ctx, "psql", "-h", pg.dir, "-U", "postgres", "-q", "-c", "CREATE DATABASE "+name); err != nil {
		return "", err
	}
	// Each measurement starts from the same server state: what the parts
	// before wrote (the dropped database's pages, the kill test's
	// thousands of transactions) is flushed now, not by a checkpoint in
	// the middle of the next part, on the same 2 cores.
	if err := pg.run(ctx, "psql", "-h", pg.dir, "-U", "postgres", "-q", "-c", "CHECKPOINT"); err != nil {
		return "", err
	}
	return "postgres://postgres@/" + name + "?host=" + pg.dir + "&sslmode=disable", nil
}

// stop stops the server at once and removes its files.
func (pg *pgServer) stop() {
	if pg == nil {
		return
	}
	pg.run(context.Background(), "pg_ctl", "-D", filepath.Join(pg.dir, "data"), "-m", "immediate", "stop")
	os.RemoveAll(pg.dir)
}
