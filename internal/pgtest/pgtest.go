// Package pgtest starts a throwaway PostgreSQL server for tests, from the
// binaries of the machine's own PostgreSQL (Debian's postgresql package:
// initdb and pg_ctl under /usr/lib/postgresql/<version>/bin), in a
// temporary directory, listening on a Unix socket there only, with trust
// authentication: nothing of the machine's own clusters is touched.
//
// A package whose tests use it runs them through Main, which starts the
// server once for the package (initdb takes a second or two) and stops it
// at the end; each test gets a database of its own from Database. Without
// PostgreSQL installed the tests that ask for it are skipped, with one
// line saying how to run them, unless DIRECTBRIDGE_REQUIRE_POSTGRES is
// set (as .ci/run sets it): then they fail, so that CI never skips them.
//
// PostgreSQL refuses to run as root; when the tests do, the server runs
// as the postgres user (or nobody) through runuser.
package pgtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// RequireEnv, when set, makes a missing PostgreSQL a test failure.
const RequireEnv = "DIRECTBRIDGE_REQUIRE_POSTGRES"

// server is the package's running PostgreSQL, started by Main.
type server struct {
	dir, bin string
	runAs    []string // runuser prefix when running as root
	host     string   // the socket directory
}

var (
	current  *server
	startErr error // why there is no server
	once     sync.Once
	dbs      atomic.Int64
)

// Main runs m and stops the server, if one was started; use it from
// TestMain: os.Exit(pgtest.Main(m)).
func Main(m *testing.M) int {
	code := m.Run()
	if current != nil {
		current.stop()
	}
	return code
}

// Database returns the URL of a new, empty database on the package's
// server, which it starts the first time. It skips (or fails, see
// RequireEnv) the test when PostgreSQL cannot be run here.
func Database(t testing.TB) string {
	t.Helper()
	once.Do(func() { current, startErr = start() })
	if startErr != nil {
		if os.Getenv(RequireEnv) != "" {
			t.Fatalf("PostgreSQL is required (%s) but cannot be started: %v", RequireEnv, startErr)
		}
		t.Skipf("PostgreSQL tests skipped: %v (apt-get install postgresql to run them; %s=1 makes this a failure)", startErr, RequireEnv)
	}
	name := fmt.Sprintf("t%d_%d", os.Getpid(), dbs.Add(1))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, current.url("postgres"))
	if err != nil {
		t.Fatalf("pgtest: connecting: %v", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	return current.url(name)
}

// url is the connection URL of database db, over the server's socket.
func (s *server) url(db string) string {
	return "postgres://postgres@/" + db + "?host=" + s.host + "&sslmode=disable"
}

// start makes and starts a cluster in a new temporary directory.
func start() (*server, error) {
	bin, err := findBin()
	if err != nil {
		return nil, err
	}
	reapStale(bin)
	dir, err := os.MkdirTemp("", fmt.Sprintf("%s%d-", dirPrefix, os.Getpid()))
	if err != nil {
		return nil, err
	}
	s := &server{dir: dir, bin: bin, host: dir}
	if os.Geteuid() == 0 {
		name, uid, gid, err := unprivileged()
		if err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
		if err := os.Chown(dir, uid, gid); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
		s.runAs = []string{"runuser", "-u", name, "--"}
	}
	data := filepath.Join(dir, "data")
	if out, err := s.run("initdb", "-D", data, "-U", "postgres", "--auth=trust", "--no-sync", "-E", "UTF8", "--locale=C"); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("initdb: %v: %s", err, lastLine(out))
	}
	opts := "-c listen_addresses='' -c unix_socket_directories=" + dir + " -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200"
	if out, err := s.run("pg_ctl", "-D", data, "-l", filepath.Join(dir, "log"), "-o", opts, "-w", "-t", "60", "start"); err != nil {
		log, _ := os.ReadFile(filepath.Join(dir, "log"))
		os.RemoveAll(dir)
		return nil, fmt.Errorf("pg_ctl start: %v: %s %s", err, lastLine(out), lastLine(log))
	}
	return s, nil
}

// dirPrefix starts the name of a server's directory, followed by the pid
// of the test process that made it.
const dirPrefix = "directbridge-pgtest-"

// reapStale stops and removes the servers of test processes that ended
// without stopping them (a panic, a timeout, a signal: Main's stop did not
// run), found by their directories' names. Those of live processes (other
// packages' tests running beside) are left alone.
func reapStale(bin string) {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), dirPrefix+"*"))
	for _, dir := range dirs {
		rest := strings.TrimPrefix(filepath.Base(dir), dirPrefix)
		pid, err := strconv.Atoi(strings.SplitN(rest, "-", 2)[0])
		if err != nil || pid == os.Getpid() || processAlive(pid) {
			continue
		}
		s := &server{dir: dir, bin: bin}
		if os.Geteuid() == 0 {
			if name, _, _, err := unprivileged(); err == nil {
				s.runAs = []string{"runuser", "-u", name, "--"}
			}
		}
		s.stop()
	}
}

// processAlive reports whether a process with pid exists.
func processAlive(pid int) bool {
	p, err := os.FindProcess(pid)
	if err != nil {
		return false
	}
	err = p.Signal(syscall.Signal(0))
	return err == nil || errors.Is(err, os.ErrPermission)
}

// stop stops the server at once and removes its directory.
func (s *server) stop() {
	s.run("pg_ctl", "-D", filepath.Join(s.dir, "data"), "-m", "immediate", "-w", "stop")
	os.RemoveAll(s.dir)
}

// run runs a PostgreSQL program as the server's user.
func (s *server) run(prog string, args ...string) ([]byte, error) {
	argv := append(append(append([]string{}, s.runAs...), filepath.Join(s.bin, prog)), args...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = s.dir
	return cmd.CombinedOutput()
}

// findBin finds the directory of initdb and pg_ctl: on PATH, else the
// newest /usr/lib/postgresql/<version>/bin (Debian keeps them there).
func findBin() (string, error) {
	if p, err := exec.LookPath("initdb"); err == nil {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			p = real
		}
		return filepath.Dir(p), nil
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return version(dirs[i]) > version(dirs[j]) })
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d, nil
		}
	}
	return "", errors.New("PostgreSQL is not installed (no initdb on PATH or in /usr/lib/postgresql)")
}

// version is the major version in a /usr/lib/postgresql/<version>/bin path.
func version(dir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(dir)))
	return n
}

// unprivileged names a user the server may run as when the tests run as
// root: postgres, which the package makes, else nobody.
func unprivileged() (name string, uid, gid int, err error) {
	for _, name := range []string{"postgres", "nobody"} {
		u, err := user.Lookup(name)
		if err != nil {
			continue
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if _, err := exec.LookPath("runuser"); err != nil {
			return "", 0, 0, errors.New("running as root without runuser to start PostgreSQL as another user")
		}
		return name, uid, gid, nil
	}
	return "", 0, 0, errors.New("running as root with no postgres or nobody user to start PostgreSQL as")
}

// lastLine is the last non-empty line of out, for an error.
func lastLine(out []byte) string {
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	return lines[len(lines)-1]
}
