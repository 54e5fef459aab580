package smtpbackend

import (
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/emersion/go-smtp"

	"github.com/directbridge/directbridge/internal/delivery"
	"github.com/directbridge/directbridge/internal/limits"
	"github.com/directbridge/directbridge/internal/login"
	"github.com/directbridge/directbridge/internal/observe"
	"github.com/directbridge/directbridge/internal/state"
	"github.com/directbridge/directbridge/upstream"
)

// Defaults of Config.
const (
	DefaultMaxMessageBytes = 50 << 20 // Direct messages carry C-CDA documents and XDM packages
	// DefaultMaxRequestBytes is the bridge's default provider request
	// limit (DIRECTBRIDGE_API_MAX_REQUEST_BYTES), the sandbox's own.
	DefaultMaxRequestBytes = 64 << 20
	DefaultMaxRecipients   = 100
	// DefaultReadTimeout is RFC 5321 §4.5.3.2's five minutes for commands;
	// DATA blocks arrive well within it.
	DefaultReadTimeout  = 5 * time.Minute
	DefaultWriteTimeout = time.Minute
	// DefaultSendTimeout bounds the provider's answer to a send.
	DefaultSendTimeout = 2 * time.Minute
)

// lineSlack is added to the message size limit to make the line limit.
// RFC 5322 §2.1.1 asks for lines of at most 998 characters, but real mail
// (HTML without line breaks, base64 written unwrapped by some exporters)
// has longer ones, and refusing them loses mail. go-smtp's line limit
// cannot be recovered from inside DATA (the connection is dropped while
// the client still writes, which it reads as a temporary failure), so the
// only limit on a line is the size limit on the message, which DATA
// enforces cleanly with 552. Command lines are bounded apart, far
// shorter (cmdlines.go).
const lineSlack = 1024

// Config configures the submission server.
type Config struct {
	// Provider is the mail provider (restclient.Upstream, usually in a budget).
	Provider upstream.Provider
	Verifier *login.Verifier
	// Guard slows down password guessing; nil: a Guard with the default
	// thresholds of package internal/login. Share the IMAP front's, so that
	// failures count across both.
	Guard *login.Guard
	// Store records submitted messages (smtpId, Message-ID, time); nil
	// keeps no record.
	Store state.StateStore
	// Hostname is announced in the greeting.
	Hostname string
	// TLSConfig is needed for STARTTLS and implicit TLS.
	TLSConfig *tls.Config
	// AllowInsecureAuth offers AUTH on clear-text connections to
	// non-loopback listeners. Loopback listeners always offer it.
	AllowInsecureAuth bool
	MaxMessageBytes   int64
	// MaxRequestBytes is the largest request body the provider accepts
	// (DIRECTBRIDGE_API_MAX_REQUEST_BYTES); 0 means
	// DefaultMaxRequestBytes. A message under MaxMessageBytes whose send
	// request would be larger (JSON writes a control character as six
	// bytes) is refused at DATA with 552 5.3.4, its size counted without
	// encoding it, rather than built and refused by the provider.
	MaxRequestBytes int64
	// Messages bounds the bytes of DATA held at once (shared with the
	// IMAP front), counted by their encoded size once known
	// (limits.Reader.Reserve); nil means no bound.
	Messages      *limits.Budget
	MaxRecipients int
	// Connections bounds what a client gets before it authenticates:
	// connections per address and in all for each listener, time and
	// bytes (package limits; zero values are its defaults).
	Connections limits.Limits
	ReadTimeout time.Duration
	// DataIdle cuts a DATA short that receives nothing for this long
	// (datastall.go); 0 means DefaultDataIdle.
	DataIdle     time.Duration
	WriteTimeout time.Duration
	SendTimeout  time.Duration
	// UndecidedHold is how long a retry of a message whose earlier
	// attempt has an unknown outcome is answered 451 rather than sent
	// again (journal.go); default DefaultUndecidedHold.
	UndecidedHold time.Duration
	Limits        Limits
	Logger        *slog.Logger
	// Metrics, when set, receives connection, command, authentication
	// and message events.
	Metrics Metrics
	// Tracker, when set, follows every message sent until its recipients
	// are final and files delivery status notifications (delivery
	// package); ESMTP DSN (RFC 3461) is offered with it. With Store set,
	// it keeps its records there: a sent message's record is written with
	// the journal's completion (delivery.Message.Recorded).
	Tracker Tracker
}

// Tracker follows sent messages (delivery.Tracker).
type Tracker interface {
	Track(delivery.Message)
}

// Server is the SMTP submission front: authenticated clients submit RFC
// 5322 messages, which become the provider's Send calls.
type Server struct {
	cfg     Config
	log     *slog.Logger
	metrics Metrics
	journal state.Submissions
	auth    *login.Guard

	inData atomic.Int64 // transactions between DATA and their answer
	// inTx counts transactions with recipients: one may have sent DATA
	// already, its Data not yet begun (go-smtp writes 354 first), so a
	// shutdown gives them txGrace to get there.
	inTx atomic.Int64

	// answering marks the journal entries whose 250 go-smtp is writing
	// (replyconn.go); tuserIDsReplaced is set once the provider was seen
	// to give a T-user's message another Message-ID than it carried
	// (journal.go: its retries then cannot be found by their status).
	answering        answersInFlight
	tuserIDsReplaced atomic.Bool

	mu      sync.Mutex
	servers []*smtp.Server
	conns   map[*smtp.Conn]struct{}
	closed  bool
}

// New returns a Server; it serves nothing until ServeSubmission or
// ServeImplicitTLS is called.
func New(cfg Config) (*Server, error) {
	if cfg.Provider == nil || cfg.Verifier == nil {
		return nil, errors.New("smtpbackend: Provider and Verifier are required")
	}
	if cfg.Hostname == "" {
		cfg.Hostname = "localhost"
	}
	if cfg.MaxMessageBytes <= 0 {
		cfg.MaxMessageBytes = DefaultMaxMessageBytes
	}
	if cfg.MaxRequestBytes <= 0 {
		cfg.MaxRequestBytes = DefaultMaxRequestBytes
	}
	if cfg.MaxRecipients <= 0 {
		cfg.MaxRecipients = DefaultMaxRecipients
	}
	if cfg.DataIdle <= 0 {
		cfg.DataIdle = DefaultDataIdle
	}
	if cfg.ReadTimeout <= 0 {
		cfg.ReadTimeout = DefaultReadTimeout
	}
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = DefaultWriteTimeout
	}
	if cfg.SendTimeout <= 0 {
		cfg.SendTimeout = DefaultSendTimeout
	}
	if cfg.UndecidedHold <= 0 {
		cfg.UndecidedHold = DefaultUndecidedHold
	}
	var journal state.Submissions = &memJournal{m: map[string]state.Submission{}}
	if cfg.Store != nil {
		journal = cfg.Store
	}
	lg := cfg.Logger
	if lg == nil {
		lg = slog.New(slog.DiscardHandler)
	}
	m := cfg.Metrics
	if m == nil {
		m = nopMetrics{}
	}
	guard := cfg.Guard
	if guard == nil {
		guard = login.NewGuard(login.GuardConfig{})
	}
	return &Server{cfg: cfg, log: lg, metrics: m, journal: journal, auth: guard, conns: map[*smtp.Conn]struct{}{}}, nil
}

// ServeSubmission serves message submission (RFC 6409) with STARTTLS
// (RFC 3207) on l until Shutdown. AUTH is offered only after STARTTLS,
// except on loopback or when AllowInsecureAuth is set.
func (s *Server) ServeSubmission(l net.Listener) error {
	return s.serve(watchReplies(s.countConns(s.guard(l))), false)
}

// ServeImplicitTLS serves submission over implicit TLS (RFC 8314 §3.3) on l.
func (s *Server) ServeImplicitTLS(l net.Listener) error {
	if s.cfg.TLSConfig == nil {
		return errors.New("smtpbackend: implicit TLS needs a TLS configuration")
	}
	return s.serve(tls.NewListener(watchReplies(s.countConns(s.guard(l))), s.cfg.TLSConfig), true)
}

func (s *Server) serve(l net.Listener, implicitTLS bool) error {
	srv := smtp.NewServer(smtp.BackendFunc(s.newSession))
	srv.Domain = s.cfg.Hostname
	srv.TLSConfig = s.cfg.TLSConfig
	srv.AllowInsecureAuth = s.cfg.AllowInsecureAuth || implicitTLS || isLoopback(l.Addr())
	// No srv.MaxMessageBytes: the bridge checks the size itself (size.go).
	srv.MaxRecipients = s.cfg.MaxRecipients
	srv.EnableDSN = s.cfg.Tracker != nil // RFC 3461: NOTIFY, RET, ENVID
	srv.MaxLineLength = int(s.cfg.MaxMessageBytes) + lineSlack
	srv.ReadTimeout = s.cfg.ReadTimeout
	srv.WriteTimeout = s.cfg.WriteTimeout
	srv.ErrorLog = observe.LibraryLogger(s.log, "smtp library") // no client input in logs
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		l.Close()
		return smtp.ErrServerClosed
	}
	s.servers = append(s.servers, srv)
	s.mu.Unlock()
	err := srv.Serve(l)
	if errors.Is(err, smtp.ErrServerClosed) {
		return nil
	}
	return err
}

// Shutdown stops accepting connections at once, lets every transaction
// already in DATA get its answer (until ctx ends), then closes the
// remaining connections, idle or between commands, which their clients
// retry later.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.closed = true
	servers := s.servers
	s.mu.Unlock()
	// go-smtp's Shutdown closes the listeners first, then waits for every
	// connection to end by itself, idle ones included; it runs aside
	// until Close below ends the connections.
	for _, srv := range servers {
		go srv.Shutdown(context.Background())
	}
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	var err error
	start := time.Now()
wait:
	for s.inData.Load() > 0 || s.inTx.Load() > 0 && time.Since(start) < txGrace {
		select {
		case <-ctx.Done():
			err = ctx.Err()
			break wait
		case <-t.C:
		}
	}
	// go-smtp's Close would do nothing after its Shutdown: close the
	// connections that are left one by one.
	s.mu.Lock()
	conns := make([]*smtp.Conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	for _, c := range conns {
		c.Close()
	}
	return err
}

// Open reports the SMTP connections open and, of their transactions,
// those in DATA (a message being read or sent), for the shutdown's log
// line.
func (s *Server) Open() (conns, inData int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns), int(s.inData.Load())
}

// txGrace is how long a shutdown waits for transactions with recipients
// to reach DATA (see inTx); an idle client after RCPT holds it no longer.
const txGrace = time.Second

func (s *Server) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

func isLoopback(a net.Addr) bool {
	tcp, ok := a.(*net.TCPAddr)
	return ok && tcp.IP.IsLoopback()
}
