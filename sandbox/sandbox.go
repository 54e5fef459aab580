package sandbox

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/directbridge/directbridge/internal/sqlstmt"
)

// DefaultMaxBodyBytes bounds a request body; base64 attachments make Send
// bodies a third larger than the files they carry.
const DefaultMaxBodyBytes = 64 << 20

// Account is a seeded user: a mailbox address or a reseller username.
type Account struct {
	Name     string
	Password string
}

// Options configure a sandbox. The zero value is a usable in-memory
// sandbox for the domain direct.example with no accounts.
type Options struct {
	// Dir holds the database (sandbox.db). Empty means a private temporary
	// directory, removed by Close.
	Dir string
	// Domain is the Direct domain the sandbox hosts; mailbox addresses in
	// other domains may be seeded too and are then hosted as well.
	Domain string
	// Users are mailboxes to create (or whose password to reset) at start.
	Users []Account
	// Resellers are registration accounts (reseller or T-user) to seed.
	Resellers []Account
	// MaxBodyBytes bounds a request body; 0 means DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// StatusAsCSV makes the status operations answer with hasCvData=true
	// and csvData instead of messageLogs, as some provider set-ups do.
	StatusAsCSV bool
	// MintMessageIDs makes every send get a Message-ID the sandbox mints
	// (its smtpId), as some providers do, instead of keeping a valid,
	// unique Message-ID the client gave in SendWithHeader's headers.
	MintMessageIDs bool
	// FoldersChildrenOnly makes GetFolders list the direct children of
	// its root only, as some providers do (the document says "sub-folders
	// of a folder"), instead of the whole tree below it.
	FoldersChildrenOnly bool
	// Clock replaces time.Now, so tests can pass the one-hour MDN timeout
	// or the ten-minute session lifetime without waiting.
	Clock func() time.Time
	// Logger receives one line per request (operation, status, duration).
	Logger *slog.Logger
	// Latency is added to every REST answer of both services, to measure
	// a client against a slow provider (latency.go); SetLatency changes it.
	Latency time.Duration
	// KeepRequests is how many request bodies of each operation Requests
	// returns, for tests that look at what a client sent. 0 keeps none:
	// the bodies hold passwords and whole messages, which a provider does
	// not keep in memory, nor does the embedded sandbox.
	KeepRequests int
}

// Server is the sandbox provider: both REST services on one SQLite
// database. It is an http.Handler; Serve runs it on a listener.
type Server struct {
	db           *sql.DB
	stmts        *sqlstmt.Cache // db's prepared statements
	dir          string
	removeDir    bool
	domain       string
	maxBody      int64
	statusCSV    bool
	mintIDs      bool
	childrenOnly bool
	clock        func() time.Time
	log          *slog.Logger
	mux          *http.ServeMux
	hooks        *testHooks
	latency      atomic.Int64 // time.Duration added to every answer
	wait         func(ctx context.Context, d time.Duration) bool

	sessMu   sync.Mutex
	sessions map[string]session // registration sessions live in memory, like a provider's
}

// Open creates or reopens a sandbox and seeds its accounts.
func Open(opts Options) (*Server, error) {
	s := &Server{
		domain:       strings.ToLower(strings.TrimSpace(opts.Domain)),
		maxBody:      opts.MaxBodyBytes,
		statusCSV:    opts.StatusAsCSV,
		mintIDs:      opts.MintMessageIDs,
		childrenOnly: opts.FoldersChildrenOnly,
		clock:        opts.Clock,
		log:          opts.Logger,
		hooks:        newTestHooks(opts.KeepRequests),
		sessions:     map[string]session{},
		wait:         pause,
	}
	s.SetLatency(opts.Latency)
	if s.domain == "" {
		s.domain = "direct.example"
	}
	if s.maxBody <= 0 {
		s.maxBody = DefaultMaxBodyBytes
	}
	if s.clock == nil {
		s.clock = time.Now
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	s.dir = opts.Dir
	if s.dir == "" {
		tmp, err := os.MkdirTemp("", "directbridge-sandbox-")
		if err != nil {
			return nil, fmt.Errorf("sandbox: %w", err)
		}
		s.dir, s.removeDir = tmp, true
	} else if err := os.MkdirAll(s.dir, 0o700); err != nil {
		return nil, fmt.Errorf("sandbox: data directory: %w", err)
	}
	db, err := openDB(filepath.Join(s.dir, "sandbox.db"))
	if err != nil {
		s.cleanup()
		return nil, err
	}
	s.db, s.stmts = db, sqlstmt.New(db)
	if err := s.seed(context.Background(), opts.Users, opts.Resellers); err != nil {
		s.Close()
		return nil, err
	}
	s.mux = s.routes()
	return s, nil
}

// Domain is the Direct domain the sandbox hosts.
func (s *Server) Domain() string { return s.domain }

// Dir is the directory that holds the database.
func (s *Server) Dir() string { return s.dir }

// Close closes the database and removes a temporary directory.
func (s *Server) Close() error {
	var err error
	if s.db != nil {
		s.stmts.Close()
		err = s.db.Close()
	}
	s.cleanup()
	return err
}

func (s *Server) cleanup() {
	if s.removeDir {
		os.RemoveAll(s.dir)
	}
}

// ServeHTTP answers one REST request.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mux.ServeHTTP(w, r)
}

// Serve answers requests on l until ctx ends, then shuts down gracefully.
func (s *Server) Serve(ctx context.Context, l net.Listener) error {
	hs := &http.Server{
		Handler:           s,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		hs.Shutdown(sctx)
	}()
	err := hs.Serve(l)
	if errors.Is(err, http.ErrServerClosed) {
		<-done
		return nil
	}
	return err
}

// now is the sandbox's clock in UTC.
func (s *Server) now() time.Time { return s.clock().UTC() }
