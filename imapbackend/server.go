package imapbackend

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapserver"

	"github.com/directbridge/directbridge/internal/director"
	"github.com/directbridge/directbridge/internal/limits"
	"github.com/directbridge/directbridge/internal/login"
	"github.com/directbridge/directbridge/internal/mailstore"
	"github.com/directbridge/directbridge/internal/observe"
)

// Defaults of Config.
const (
	DefaultAppendLimit     = 50 << 20
	DefaultMaxConnsPerUser = 20
	minAppendLimit         = 4096
	// DefaultCallTimeout bounds the REST calls of one IMAP command.
	DefaultCallTimeout = 2 * time.Minute
)

// Config configures the IMAP front.
type Config struct {
	// Engine is the mail engine (mailstore.New) every command is adapted
	// to: it makes every provider and state-store call, and the front
	// makes none. Whoever made it closes it (Store.Close) after Shutdown.
	Engine    *mailstore.Store
	Verifier  *login.Verifier
	TLSConfig *tls.Config
	// AllowInsecureAuth allows LOGIN without TLS on non-loopback listeners.
	AllowInsecureAuth bool
	// AppendLimit is the largest APPEND (RFC 7889).
	AppendLimit uint32
	// Messages bounds the bytes of APPEND literals held at once (shared
	// with the SMTP front); nil means no bound.
	Messages *limits.Budget
	// MaxConnsPerUser bounds the connections of one user.
	MaxConnsPerUser int
	// DeleteForever makes EXPUNGE outside INBOX.Trash remove messages for
	// good. By default they go to INBOX.Trash (deleteForever=false) and can
	// be recovered, as with Gmail's IMAP; inside INBOX.Trash EXPUNGE always
	// removes for good.
	DeleteForever bool
	// CallTimeout bounds each command (its provider calls and waits).
	CallTimeout time.Duration
	Logger      *slog.Logger
	// Metrics, when set, receives connection, command, authentication
	// and cache events (metrics.go).
	Metrics Metrics
	// Connections bounds what a client gets before it logs in:
	// connections per address and in all for each listener, time and
	// bytes (package limits; zero values are its defaults).
	Connections limits.Limits
	// Guard slows down password guessing; nil: a Guard with the default
	// thresholds of package internal/login.
	Guard *login.Guard
	// Layout is how folder names appear (layout.go); "" is LayoutInbox.
	Layout Layout
	// Director, when set (replicas with DIRECTBRIDGE_PEER_ADDR), serves
	// each user's sessions on one replica: the listeners answer clients
	// until they log in (front.go) and hand them to the user's home.
	Director *director.Director
}

// Server is the IMAP front.
type Server struct {
	cfg    Config
	store  *mailstore.Store  // the folders' mirrors, polling, metadata
	bodies *mailstore.Bodies // store.Bodies()
	guard  *login.Guard      // password guessing (package internal/login)

	nextID atomic.Uint64 // session ids

	// handoff takes the connections the front logged in for users whose
	// home this replica is (directed.go); nil without a Director.
	handoff *director.Queue

	mu        sync.Mutex
	servers   []*imapserver.Server
	listeners []net.Listener          // the fronts' (front.go)
	fronts    map[*frontConn]struct{} // connections not logged in yet at a front
	relays    map[*relay]struct{}     // connections relayed to their home (proxy.go)
	conns     map[string]int          // connections per user
	live      map[*session]struct{}
	closed    bool
}

// caps are the capabilities the front implements. LITERAL+ is not among
// them: go-imap beta.8 refuses an over-limit non-synchronising literal
// without reading its bytes, which it then runs as commands (RFC 7888 §4
// wants them read and discarded); with synchronising literals the refusal
// reaches the client before it sends anything. go-imap still announces
// LITERAL- (literals up to 4096 bytes) on its own.
// caps are the capabilities the front implements (the IMAP4rev1 base plus
// the extensions each backed by a session method).
var caps = imap.CapSet{
	imap.CapIMAP4rev1:      {},
	imap.CapNamespace:      {},
	imap.CapUIDPlus:        {},
	imap.CapESearch:        {},
	imap.CapSearchRes:      {},
	imap.CapListExtended:   {},
	imap.CapListStatus:     {},
	imap.CapMove:           {},
	imap.CapStatusSize:     {},
	imap.CapBinary:         {},
	imap.CapChildren:       {},
	imap.CapSpecialUse:     {},
	imap.CapUnauthenticate: {},
}

// New returns a Server.
func New(cfg Config) (*Server, error) {
	if cfg.Engine == nil || cfg.Verifier == nil {
		return nil, errors.New("imapbackend: Engine and Verifier are required")
	}
	if cfg.AppendLimit == 0 {
		cfg.AppendLimit = DefaultAppendLimit
	}
	// Never below what LITERAL- lets a client send unannounced (RFC 7888
	// §4): go-imap refuses an over-limit literal without reading it, and
	// the unread bytes would be taken for commands.
	cfg.AppendLimit = max(cfg.AppendLimit, minAppendLimit)
	if cfg.MaxConnsPerUser <= 0 {
		cfg.MaxConnsPerUser = DefaultMaxConnsPerUser
	}
	if cfg.CallTimeout <= 0 {
		cfg.CallTimeout = DefaultCallTimeout
	}
	layout, ok := ParseLayout(string(cfg.Layout))
	if !ok {
		return nil, fmt.Errorf("imapbackend: unknown layout %q (inbox or flat)", cfg.Layout)
	}
	cfg.Layout = layout
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Metrics == nil {
		cfg.Metrics = nopMetrics{}
	}
	s := &Server{cfg: cfg, conns: map[string]int{}, live: map[*session]struct{}{},
		fronts: map[*frontConn]struct{}{}, relays: map[*relay]struct{}{}}
	s.store = cfg.Engine
	s.bodies = s.store.Bodies()
	s.guard = cfg.Guard
	if s.guard == nil {
		s.guard = login.NewGuard(login.GuardConfig{})
	}
	s.bodies.OnLookup(cfg.Metrics.CacheLookup)
	s.bodies.OnHeld(cfg.Metrics.PeerMessages)
	if cfg.Director != nil {
		s.handoff = director.NewQueue(&net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
		go s.serve(s.handoff, nil, true)
	}
	return s, nil
}

// ServePlain serves IMAP with STARTTLS (RFC 9051 §6.2.1) on l. LOGIN is
// refused before STARTTLS (LOGINDISABLED), except on loopback listeners or
// with AllowInsecureAuth.
func (s *Server) ServePlain(l net.Listener) error {
	insecure := s.cfg.AllowInsecureAuth || isLoopback(l.Addr())
	if s.cfg.Director != nil {
		return s.serveFront(corkListener{s.guardConns(l)}, false, insecure)
	}
	return s.serve(corkListener{s.guardConns(l)}, s.cfg.TLSConfig, insecure)
}

// ServeTLS serves IMAP over implicit TLS (RFC 8314 §3.2) on l.
func (s *Server) ServeTLS(l net.Listener) error {
	if s.cfg.TLSConfig == nil {
		return errors.New("imapbackend: implicit TLS needs a TLS configuration")
	}
	tl := tls.NewListener(corkListener{s.guardConns(l)}, s.cfg.TLSConfig)
	if s.cfg.Director != nil {
		return s.serveFront(tl, true, true)
	}
	return s.serve(tl, s.cfg.TLSConfig, true)
}

// AcceptLinks takes the links other replicas open on l (the replicas'
// peer port, director.Split) through their TLS handshake and Hello, and
// returns the listener ServeLinks serves. Called before this replica
// announces its address: a link that comes before the IMAP server runs
// waits for it instead of failing.
func AcceptLinks(d *director.Director, l net.Listener) net.Listener {
	// Not corked: the session's side of a link gathers its answers
	// itself (director's frameWriter), and the link's reads, a pump's,
	// would never flush a corked connection.
	return d.Listen(l)
}

// ServeLinks serves the sessions other replicas' fronts hand to this
// one, their users' home, on l (AcceptLinks). Shutdown stops taking
// them first.
func (s *Server) ServeLinks(l net.Listener) error {
	if s.cfg.Director == nil {
		l.Close()
		return errors.New("imapbackend: links need a Director")
	}
	if !s.addListener(l) {
		return nil
	}
	return s.serve(l, nil, true)
}

// serve runs go-imap on l. tlsConfig is for STARTTLS: nil where the
// connections are past it (implicit TLS keeps it, for go-imap's answer
// to a STARTTLS on TLS).
func (s *Server) serve(l net.Listener, tlsConfig *tls.Config, insecureAuth bool) error {
	srv := imapserver.New(&imapserver.Options{
		NewSession: func(c *imapserver.Conn) (imapserver.Session, *imapserver.GreetingData, error) {
			sess := &session{srv: s, conn: c, id: s.nextID.Add(1)}
			directed, err := sess.preauth(c.NetConn())
			if err != nil {
				return nil, nil, err
			}
			s.mu.Lock()
			s.live[sess] = struct{}{}
			s.mu.Unlock()
			return newMeteredSession(sess, s.cfg.Metrics), &imapserver.GreetingData{PreAuth: directed}, nil
		},
		Caps:         caps,
		Logger:       observe.LibraryLogger(s.cfg.Logger, "imap library"), // no client input in logs
		TLSConfig:    tlsConfig,
		InsecureAuth: insecureAuth,
	})
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		l.Close()
		return nil
	}
	s.servers = append(s.servers, srv)
	s.mu.Unlock()
	err := srv.Serve(l)
	if s.isClosed() {
		return nil
	}
	return err
}

func (s *Server) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// Sessions is the number of IMAP connections open, for the shutdown's
// log line.
func (s *Server) Sessions() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.live)
}

// Shutdown stops the listeners and closes every connection (go-imap sends
// BYE to each).
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.closed = true
	servers := s.servers
	live := make([]*session, 0, len(s.live))
	for sess := range s.live {
		live = append(live, sess)
	}
	listeners, fronts, relays := s.listeners, mapKeys(s.fronts), mapKeys(s.relays)
	s.mu.Unlock()
	for _, l := range listeners {
		l.Close()
	}
	if s.handoff != nil {
		s.handoff.Close()
	}
	for _, f := range fronts {
		go f.bye("[UNAVAILABLE] Server shutting down; reconnect later")
	}
	for _, r := range relays {
		go r.drain() // CloseWrite waits for a write under way
	}
	// go-imap closes connections without a word; say BYE first (RFC 9051
	// §7.1.5), so clients know to reconnect later rather than report an error.
	// In parallel and bounded by ctx: Bye waits for the connection's write
	// lock, which a client that stopped reading can hold for minutes.
	said := make(chan struct{})
	go func() {
		var wg sync.WaitGroup
		for _, sess := range live {
			wg.Add(1)
			go func() {
				defer wg.Done()
				// UNAVAILABLE (RFC 5530 §3): the server cannot serve
				// now; a client reconnects, and a balancer sends it to
				// a replica that still runs.
				sess.conn.Bye("[UNAVAILABLE] Server shutting down; reconnect later")
			}()
		}
		wg.Wait()
		close(said)
	}()
	select {
	case <-said:
	case <-ctx.Done():
	}
	for _, r := range relays {
		select {
		case <-r.done:
		case <-ctx.Done():
			r.cut()
		}
	}
	var errs []error
	for _, srv := range servers {
		if err := srv.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// addConn counts a user's connection; false when over the limit.
func (s *Server) addConn(user string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conns[user] >= s.cfg.MaxConnsPerUser {
		return false
	}
	s.conns[user]++
	return true
}

// slotWait is how long a LOGIN over the user's limit waits for a slot
// to come free before it is refused. A client that sends LOGOUT and
// connects again at once (imaptest does, and so do scripts) would
// otherwise find its own old slot still taken: go-imap answers LOGOUT
// before it closes the session, which gives the slot back.
const slotWait = time.Second

// awaitConn is addConn that waits up to slotWait, or ctx, for a slot.
func (s *Server) awaitConn(ctx context.Context, user string) bool {
	deadline := time.Now().Add(slotWait)
	for !s.addConn(user) {
		if time.Now().After(deadline) {
			return false
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(20 * time.Millisecond):
		}
	}
	return true
}

func (s *Server) dropConn(user string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conns[user]--; s.conns[user] <= 0 {
		delete(s.conns, user)
	}
}

// addListener registers l for Shutdown, which closes it first; false,
// and l closed, once shut down.
func (s *Server) addListener(l net.Listener) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		l.Close()
		return false
	}
	s.listeners = append(s.listeners, l)
	return true
}

// track registers k in set (a set of s's, guarded by s.mu) for
// Shutdown; false once shut down.
func track[K comparable](s *Server, set map[K]struct{}, k K) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	set[k] = struct{}{}
	return true
}

// untrack takes k out of set (track).
func untrack[K comparable](s *Server, set map[K]struct{}, k K) {
	s.mu.Lock()
	delete(set, k)
	s.mu.Unlock()
}

func mapKeys[K comparable, V any](m map[K]V) []K {
	out := make([]K, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

func isLoopback(a net.Addr) bool {
	tcp, ok := a.(*net.TCPAddr)
	return ok && tcp.IP.IsLoopback()
}

// PollStats reports how many folders are polled and how often each is,
// for metrics: an interval above the configured one means the provider
// budget stretched it.
func (s *Server) PollStats() (folders int, interval time.Duration) { return s.store.PollStats() }

// guardConns applies the limits on strangers (package limits); a
// connection over them gets BYE (RFC 9051 §7.1.5) and is closed.
func (s *Server) guardConns(l net.Listener) net.Listener {
	return limits.ObservedListener(l, s.cfg.Connections, "* BYE Too many connections from your address or in all; try again later\r\n", s.cfg.Metrics.TurnedAway)
}
