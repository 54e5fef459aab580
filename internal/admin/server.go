package admin

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/directbridge/directbridge/internal/state"
	"github.com/directbridge/directbridge/restclient"
	"github.com/directbridge/directbridge/upstream"
)

// Defaults of Config.
const (
	DefaultRequestTimeout = 2 * time.Minute
	DefaultHealthTimeout  = 10 * time.Second
	DefaultIdleTimeout    = 5 * time.Minute
	DefaultMaxConns       = 256
)

// writeTimeout bounds writing one response to a client that does not read.
const writeTimeout = 30 * time.Second

// maxSunPath is the longest socket path Linux accepts (sun_path holds 108
// bytes with the terminating NUL); other systems allow 104 and fewer, where
// binding then fails with its own error.
const maxSunPath = 107

// tempDirExtra is how much longer than its directory the private path the
// socket is first bound at may be: "/.s" plus MkdirTemp's up to 10 digits
// plus "/s".
const tempDirExtra = 15

// Config configures a Server. Client is required.
type Config struct {
	// Path is the socket's file name.
	Path string
	// Client reaches the provider (status, health).
	Client *restclient.Client
	// Registrar is the registration account; nil makes the registration
	// operations answer CodeNotConfigured.
	Registrar *restclient.Registrar
	// Store holds the sent records; nil makes "status" require smtpIds.
	Store state.StateStore
	// Budget is the provider request budget the mail fronts spend
	// (upstream.Budget). Every request the admin socket sends to the
	// provider waits for it, one token per HTTP request (registration
	// and its logins, status, forward, stats, messages, the health
	// probe): the socket is no way around the rate the bridge keeps to.
	// Its requests are Interactive (someone waits for the answer) and are
	// all charged to one budget user, BudgetUser, so that a script
	// driving the socket takes one user's turn among the mailboxes' when
	// the budget is short, whoever's mailbox it asks about. Nil or
	// unlimited sends without waiting.
	Budget *upstream.Budget
	// Logger gets one line per request: operation, result code, duration.
	Logger *slog.Logger
	// RequestTimeout bounds one request; zero means DefaultRequestTimeout.
	RequestTimeout time.Duration
	// HealthTimeout bounds the provider probe of "health"; zero means
	// DefaultHealthTimeout.
	HealthTimeout time.Duration
	// Probe checks that the provider answers and returns how long that
	// took: the bridge's one prober (internal/observe), which readiness
	// shares. Nil: "health" says the provider was not checked.
	Probe func(context.Context) (time.Duration, error)
	// IdleTimeout closes a connection that sends no request for that long;
	// zero means DefaultIdleTimeout.
	IdleTimeout time.Duration
	// MaxConns bounds concurrent connections; more are answered CodeBusy.
	// Zero means DefaultMaxConns.
	MaxConns int
}

// BudgetUser is the user the admin socket's requests are charged to in
// Config.Budget: not a Direct address, so no mailbox shares its turn.
const BudgetUser = "(admin socket)"

// Server serves the admin protocol on a Unix socket.
type Server struct {
	cfg     Config
	log     *slog.Logger
	l       *net.UnixListener
	path    string
	file    os.FileInfo // the socket file as created, so only it is removed
	started time.Time
	sem     chan struct{}
	ops     map[string]handler

	ctx    context.Context // canceled when a shutdown runs out of time
	cancel context.CancelFunc

	mu      sync.Mutex
	closing bool
	conns   map[net.Conn]struct{}
	wg      sync.WaitGroup
	remove  sync.Once
}

// Listen creates the socket at cfg.Path (replacing a stale one left by a
// crash, refusing one that a running process answers on) and returns a
// Server ready to Serve.
func Listen(cfg Config) (*Server, error) {
	if cfg.Client == nil {
		return nil, errors.New("admin: Config.Client is nil")
	}
	if cfg.Path == "" {
		return nil, errors.New("admin: Config.Path is empty")
	}
	if err := CheckPath(cfg.Path); err != nil {
		return nil, err
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = DefaultRequestTimeout
	}
	if cfg.HealthTimeout <= 0 {
		cfg.HealthTimeout = DefaultHealthTimeout
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = DefaultIdleTimeout
	}
	if cfg.MaxConns <= 0 {
		cfg.MaxConns = DefaultMaxConns
	}
	l, fi, err := listenPrivate(cfg.Path)
	if err != nil {
		return nil, err
	}
	if dfi, err := os.Stat(filepath.Dir(cfg.Path)); err == nil && dfi.Mode().Perm()&0o077 != 0 {
		cfg.Logger.Warn("the admin socket's directory is open to other users; the socket itself is 0600",
			"dir", filepath.Dir(cfg.Path), "mode", dfi.Mode().Perm().String())
	}
	s := &Server{
		cfg:     cfg,
		log:     cfg.Logger,
		l:       l,
		path:    cfg.Path,
		file:    fi,
		started: time.Now(),
		sem:     make(chan struct{}, cfg.MaxConns),
		conns:   map[net.Conn]struct{}{},
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.ops = s.handlers()
	return s, nil
}

// CheckPath reports a socket path that cannot work: not absolute, or too
// long for a Unix socket.
func CheckPath(path string) error {
	if !filepath.IsAbs(path) {
		return fmt.Errorf("admin socket %q: not an absolute path", path)
	}
	if len(path) > maxSunPath || len(filepath.Dir(path))+tempDirExtra > maxSunPath {
		return fmt.Errorf("admin socket %q: too long for a Unix socket (its directory may have at most %d bytes)",
			path, maxSunPath-tempDirExtra)
	}
	return nil
}

// listenPrivate binds the socket in a fresh 0700 directory, makes it 0600
// and renames it to path, so that it never exists at path with the
// permissions the process umask would give it.
func listenPrivate(path string) (*net.UnixListener, os.FileInfo, error) {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, nil, fmt.Errorf("admin socket: %w", err)
	}
	if err := clearStale(path); err != nil {
		return nil, nil, err
	}
	tmp, err := os.MkdirTemp(dir, ".s")
	if err != nil {
		return nil, nil, fmt.Errorf("admin socket: %w", err)
	}
	defer os.RemoveAll(tmp)
	tmpPath := filepath.Join(tmp, "s")
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: tmpPath, Net: "unix"})
	if err != nil {
		return nil, nil, fmt.Errorf("admin socket %s: %w", path, err)
	}
	l.SetUnlinkOnClose(false) // the file moves; Server removes it by itself
	fail := func(err error) (*net.UnixListener, os.FileInfo, error) {
		l.Close()
		return nil, nil, fmt.Errorf("admin socket %s: %w", path, err)
	}
	if err := os.Chmod(tmpPath, 0o600); err != nil {
		return fail(err)
	}
	if err := os.Rename(tmpPath, path); err != nil {
		return fail(err)
	}
	fi, err := os.Lstat(path)
	if err != nil {
		return fail(err)
	}
	return l, fi, nil
}

// clearStale removes a socket file nobody answers on. A socket a process
// still answers on, or a file that is no socket, is left alone and
// reported.
func clearStale(path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("admin socket: %w", err)
	}
	if fi.Mode().Type() != fs.ModeSocket {
		return fmt.Errorf("admin socket %s: the file exists and is not a socket", path)
	}
	if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
		c.Close()
		return fmt.Errorf("admin socket %s: in use by a running process (another bridge on the same data directory?)", path)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("admin socket: removing a stale socket: %w", err)
	}
	return nil
}

// Path returns the socket's file name.
func (s *Server) Path() string { return s.path }

// Serve accepts connections until Shutdown or Close, then returns nil.
func (s *Server) Serve() error {
	var backoff time.Duration
	for {
		c, err := s.l.AcceptUnix()
		if err != nil {
			if s.isClosing() || errors.Is(err, net.ErrClosed) {
				return nil
			}
			// Out of file descriptors and the like: wait, as net/http does.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			s.log.Warn("admin accept", "err", err)
			time.Sleep(backoff)
			continue
		}
		backoff = 0
		s.mu.Lock()
		if s.closing {
			s.mu.Unlock()
			c.Close()
			return nil
		}
		s.wg.Add(1)
		select {
		case s.sem <- struct{}{}:
			s.conns[c] = struct{}{}
			s.mu.Unlock()
			go s.serveConn(c)
		default:
			s.mu.Unlock()
			go s.refuse(c)
		}
	}
}

func (s *Server) isClosing() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closing
}

// refuse answers a connection over the limit and closes it.
func (s *Server) refuse(c net.Conn) {
	defer s.wg.Done()
	defer c.Close()
	c.SetWriteDeadline(time.Now().Add(time.Second))
	writeResponse(c, failure(errorf(CodeBusy, "too many admin connections (%d); try again", s.cfg.MaxConns)))
}

// serveConn answers the requests of one connection in order.
func (s *Server) serveConn(c net.Conn) {
	defer func() {
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
		c.Close()
		<-s.sem
		s.wg.Done()
	}()
	r := bufio.NewReaderSize(c, 64<<10)
	for {
		// Under mu, so that Shutdown's wake-up deadline cannot be
		// overwritten by a later idle deadline.
		s.mu.Lock()
		if s.closing {
			s.mu.Unlock()
			return
		}
		c.SetReadDeadline(time.Now().Add(s.cfg.IdleTimeout))
		s.mu.Unlock()

		line, rerr := readLine(r, MaxRequestBytes)
		if errors.Is(rerr, errTooLarge) {
			c.SetWriteDeadline(time.Now().Add(writeTimeout))
			writeResponse(c, failure(errorf(CodeTooLarge, "request longer than %d bytes", MaxRequestBytes)))
			return
		}
		line = bytes.TrimSpace(line)
		if len(line) > 0 {
			resp := s.handle(line)
			c.SetWriteDeadline(time.Now().Add(writeTimeout))
			if err := writeResponse(c, resp); err != nil {
				return
			}
		}
		if rerr != nil {
			return // end of input, idle timeout, or shutdown
		}
	}
}

var errTooLarge = errors.New("admin: request too large")

// readLine reads up to and including '\n', at most max bytes. At the end
// of input it returns what it read (a last request need not end in a
// newline) with the error.
func readLine(r *bufio.Reader, max int) ([]byte, error) {
	var line []byte
	for {
		frag, err := r.ReadSlice('\n')
		if len(line)+len(frag) > max {
			return nil, errTooLarge
		}
		line = append(line, frag...)
		if !errors.Is(err, bufio.ErrBufferFull) {
			return line, err
		}
	}
}

func writeResponse(w io.Writer, resp Response) error {
	b, err := marshal(resp)
	if err != nil {
		b, _ = marshal(failure(errorf(CodeInternal, "encoding the answer: %v", err)))
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// marshal is json.Marshal without HTML escaping, so Message-IDs read
// <like@this> rather than \u003clike@this\u003e.
func marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

func failure(e *Error) Response { return Response{OK: false, Error: e.Message, Code: e.Code} }

// Shutdown stops accepting, closes idle connections, lets requests under
// way finish until ctx ends (then cancels them), and removes the socket
// file. It returns ctx's error when requests had to be canceled.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	first := !s.closing
	s.closing = true
	for c := range s.conns {
		c.SetReadDeadline(time.Unix(1, 0)) // wakes a connection waiting for its next request
	}
	s.mu.Unlock()
	if first {
		s.l.Close()
	}
	done := make(chan struct{})
	go func() {
		s.wg.Wait()
		close(done)
	}()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		err = ctx.Err()
		s.cancel()
		s.mu.Lock()
		for c := range s.conns {
			c.Close()
		}
		s.mu.Unlock()
		<-done
	}
	s.cancel()
	s.remove.Do(s.removeSocket)
	return err
}

// Close stops the server at once, canceling requests under way, and
// removes the socket file.
func (s *Server) Close() error {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	s.Shutdown(ctx)
	return nil
}

// removeSocket removes the socket file if it is still the one this server
// created (another process may have replaced it after a forced stop).
func (s *Server) removeSocket() {
	if fi, err := os.Lstat(s.path); err == nil && os.SameFile(fi, s.file) {
		if err := os.Remove(s.path); err != nil {
			s.log.Warn("removing the admin socket", "err", err)
		}
	}
}
