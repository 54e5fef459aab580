package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// bench holds what every scenario shares: the binary, the work directory.
type bench struct {
	o       options
	bin     string
	root    string // repository root (where go build ran)
	work    string // temporary directory, removed at the end unless -keep
	corpus  *corpus
	started time.Time
	// commitRev is the commit built with -rev.
	commitRev string
	// mbox is the imaptest mbox of distinct messages (stressMbox).
	mboxOnce sync.Once
	mbox     string
	mboxErr  error
}

func newBench(ctx context.Context, o options) (*bench, error) {
	work, err := os.MkdirTemp("", "directbridge-bench-")
	if err != nil {
		return nil, err
	}
	b := &bench{o: o, work: work, started: time.Now()}
	out, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err == nil && strings.TrimSpace(string(out)) != "" && strings.TrimSpace(string(out)) != os.DevNull {
		b.root = filepath.Dir(strings.TrimSpace(string(out)))
	}
	b.bin = o.bin
	if b.bin == "" {
		if b.root == "" {
			b.close()
			return nil, errors.New("not inside the directbridge module: run from the repository root or pass -bin")
		}
		b.bin = filepath.Join(work, "directbridge")
		src := b.root
		if o.rev != "" {
			if src, err = b.checkout(ctx, o.rev); err != nil {
				b.close()
				return nil, err
			}
		}
		b.logf("building ./cmd/directbridge in %s", src)
		cmd := exec.CommandContext(ctx, "go", "build", "-o", b.bin, "./cmd/directbridge")
		cmd.Dir = src
		if out, err := cmd.CombinedOutput(); err != nil {
			b.close()
			return nil, fmt.Errorf("go build ./cmd/directbridge: %w\n%s", err, out)
		}
	}
	b.corpus = loadCorpus(o.testdata)
	return b, nil
}

// checkout extracts the tree of a git revision into the work directory
// (git archive: the repository and its worktrees are left alone).
func (b *bench) checkout(ctx context.Context, rev string) (string, error) {
	out, err := exec.CommandContext(ctx, "git", "-C", b.root, "rev-parse", "--verify", rev+"^{commit}").Output()
	if err != nil {
		return "", fmt.Errorf("-rev %s: not a commit of %s", rev, b.root)
	}
	b.commitRev = strings.TrimSpace(string(out))
	dir := filepath.Join(b.work, "src")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	archive := exec.CommandContext(ctx, "git", "-C", b.root, "archive", "--format=tar", b.commitRev)
	untar := exec.CommandContext(ctx, "tar", "-x", "-C", dir)
	pipe, err := archive.StdoutPipe()
	if err != nil {
		return "", err
	}
	untar.Stdin = pipe
	if err := archive.Start(); err != nil {
		return "", err
	}
	if out, err := untar.CombinedOutput(); err != nil {
		archive.Wait()
		return "", fmt.Errorf("-rev %s: tar: %w: %s", rev, err, out)
	}
	if err := archive.Wait(); err != nil {
		return "", fmt.Errorf("-rev %s: git archive: %w", rev, err)
	}
	return dir, nil
}

func (b *bench) close() {
	if b.o.keep {
		fmt.Fprintln(os.Stderr, "directbridge-bench: work directory kept:", b.work)
		return
	}
	os.RemoveAll(b.work)
}

// logf prints progress with -v.
func (b *bench) logf(format string, args ...any) {
	if b.o.verbose {
		fmt.Fprintf(os.Stderr, "[%s] %s\n", time.Since(b.started).Truncate(100*time.Millisecond), fmt.Sprintf(format, args...))
	}
}

// proc is a child process whose output goes to a log file in the work
// directory (neither the bridge nor the sandbox logs message content).
type proc struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
	err  error
	log  string
}

// startProgram runs another program (PostgreSQL's, HAProxy) with env
// added to the caller's environment, its output in the work directory.
func (b *bench) startProgram(name string, env []string, bin string, args ...string) (*proc, error) {
	return b.launch(name, append(os.Environ(), env...), bin, args...)
}

// start runs the bridge binary with args and exactly the DIRECTBRIDGE_*
// variables given (the caller's own DIRECTBRIDGE_* variables are
// dropped).
func (b *bench) start(name string, env []string, args ...string) (*proc, error) {
	var all []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "DIRECTBRIDGE_") {
			all = append(all, kv)
		}
	}
	return b.launch(name, append(all, env...), b.bin, args...)
}

// launch runs bin with exactly env, its output in the work directory.
func (b *bench) launch(name string, env []string, bin string, args ...string) (*proc, error) {
	logPath := filepath.Join(b.work, name+".log")
	f, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, done: make(chan struct{}), log: logPath}
	go func() {
		p.err = cmd.Wait()
		f.Close()
		close(p.done)
	}()
	return p, nil
}

// stop sends SIGTERM and waits up to 20 s, then kills.
func (p *proc) stop() {
	if p == nil {
		return
	}
	select {
	case <-p.done:
		return
	default:
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(20 * time.Second):
		p.cmd.Process.Kill()
		<-p.done
	}
}

// exited reports an early exit with the tail of the process's log.
func (p *proc) exited() error {
	select {
	case <-p.done:
		tail, _ := os.ReadFile(p.log)
		if len(tail) > 2000 {
			tail = tail[len(tail)-2000:]
		}
		return fmt.Errorf("%s exited (%v):\n%s", p.name, p.err, tail)
	default:
		return nil
	}
}

// freeAddr returns a loopback address nothing listens on now.
func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// waitListening waits until addr accepts connections (and, when greeting is
// set, sends a first line starting with it).
func waitListening(ctx context.Context, p *proc, addr, greeting string, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		if err := p.exited(); err != nil {
			return err
		}
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			ok := true
			if greeting != "" {
				c.SetReadDeadline(time.Now().Add(5 * time.Second))
				line, _ := bufio.NewReader(c).ReadString('\n')
				ok = strings.HasPrefix(line, greeting)
			}
			c.Close()
			if ok {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: nothing answers on %s after %s (log %s)", p.name, addr, limit, p.log)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// account is a mailbox of the sandbox.
type account struct{ user, pass string }

// benchPassword is the password of every throwaway mailbox of a run.
const benchPassword = "bench-pw-not-secret"

func accounts(prefix string, n int) []account {
	out := make([]account, n)
	for i := range out {
		out[i] = account{user: fmt.Sprintf("%s%04d@direct.example", prefix, i+1), pass: benchPassword}
	}
	return out
}

func usersEnv(accts []account) string {
	parts := make([]string, len(accts))
	for i, a := range accts {
		parts[i] = a.user + ":" + a.pass
	}
	return strings.Join(parts, ",")
}

// sandboxProc is `directbridge sandbox` running as its own process.
type sandboxProc struct {
	*proc
	url string
}

func (b *bench) startSandbox(ctx context.Context, name string, accts []account) (*sandboxProc, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(b.work, name+"-data")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	// The accounts go in a file: thousands of them are more than one
	// environment variable may hold.
	users := filepath.Join(b.work, name+"-users")
	if err := os.WriteFile(users, []byte(strings.ReplaceAll(usersEnv(accts), ",", "\n")), 0o600); err != nil {
		return nil, err
	}
	p, err := b.start(name, []string{
		"DIRECTBRIDGE_SANDBOX_ADDR=" + addr,
		"DIRECTBRIDGE_SANDBOX_DATA=" + dir,
		"DIRECTBRIDGE_SANDBOX_USERS_FILE=" + users,
		"DIRECTBRIDGE_LOG_LEVEL=warn",
	}, "sandbox")
	if err != nil {
		return nil, err
	}
	if err := waitListening(ctx, p, addr, "", 60*time.Second); err != nil {
		p.stop()
		return nil, err
	}
	return &sandboxProc{proc: p, url: "http://" + addr}, nil
}

// bridgeProc is the bridge (`directbridge serve`) running as its own process.
type bridgeProc struct {
	*proc
	imapAddr, smtpAddr string
	metricsURL         string
	sandboxURL         string // the embedded sandbox's URL, when embedded
}

// bridgeSpec says how a bridge is started: against apiURL, or on its
// embedded sandbox with the given accounts when apiURL is empty; env adds
// or overrides DIRECTBRIDGE_* settings.
type bridgeSpec struct {
	apiURL   string
	embedded []account
	env      []string
	// host and ports (IMAP, SMTP, metrics), when set, are where the
	// bridge listens instead of free ports on 127.0.0.1 (replicas on
	// 127.0.0.2 and 127.0.0.3 behind a balancer on the same ports).
	host  string
	ports [3]string
}

func (b *bench) startBridge(ctx context.Context, name string, s bridgeSpec) (*bridgeProc, error) {
	var addrs [3]string
	for i := range addrs {
		if s.host != "" {
			addrs[i] = net.JoinHostPort(s.host, s.ports[i])
			continue
		}
		a, err := freeAddr()
		if err != nil {
			return nil, err
		}
		addrs[i] = a
	}
	data := filepath.Join(b.work, name+"-data")
	if err := os.MkdirAll(data, 0o700); err != nil {
		return nil, err
	}
	env := []string{
		"DIRECTBRIDGE_DATA_DIR=" + data,
		"DIRECTBRIDGE_IMAP_ADDR=" + addrs[0],
		"DIRECTBRIDGE_IMAPS_ADDR=off",
		"DIRECTBRIDGE_SMTP_ADDR=" + addrs[1],
		"DIRECTBRIDGE_SMTPS_ADDR=off",
		"DIRECTBRIDGE_METRICS_ADDR=" + addrs[2],
		"DIRECTBRIDGE_ADMIN_SOCKET=off",
		"DIRECTBRIDGE_LOG_LEVEL=warn",
	}
	bp := &bridgeProc{imapAddr: addrs[0], smtpAddr: addrs[1], metricsURL: "http://" + addrs[2] + "/metrics"}
	if s.apiURL != "" {
		env = append(env, "DIRECTBRIDGE_API_URL="+s.apiURL)
		// A bridge pointed at a provider by URL gets the real-provider
		// budget (100 requests/s) by default; the sandbox process stands
		// in for the embedded one, which has none, unless the scenario
		// sets a budget itself.
		if !slices.ContainsFunc(s.env, func(e string) bool { return strings.HasPrefix(e, "DIRECTBRIDGE_API_RATE_LIMIT=") }) {
			env = append(env, "DIRECTBRIDGE_API_RATE_LIMIT=unlimited")
		}
	} else {
		sb, err := freeAddr()
		if err != nil {
			return nil, err
		}
		env = append(env, "DIRECTBRIDGE_SANDBOX_ADDR="+sb, "DIRECTBRIDGE_SANDBOX_USERS="+usersEnv(s.embedded))
		bp.sandboxURL = "http://" + sb
	}
	env = append(env, s.env...)
	p, err := b.start(name, env, "serve")
	if err != nil {
		return nil, err
	}
	bp.proc = p
	greeting := "* OK"
	if s.host != "" {
		greeting = "" // a replica wants a PROXY header from 127.0.0.1 first
	}
	if err := waitListening(ctx, p, bp.imapAddr, greeting, 90*time.Second); err != nil {
		p.stop()
		return nil, err
	}
	return bp, nil
}

// memStatus reads VmRSS and VmHWM (bytes) of a process from /proc.
func memStatus(pid int) (rss, hwm int64, err error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok || (k != "VmRSS" && k != "VmHWM") {
			continue
		}
		f := strings.Fields(v)
		if len(f) < 1 {
			continue
		}
		n, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("/proc/%d/status %s: %w", pid, k, err)
		}
		if k == "VmRSS" {
			rss = n * 1024
		} else {
			hwm = n * 1024
		}
	}
	return rss, hwm, nil
}

func (p *proc) pid() int { return p.cmd.Process.Pid }
