package bridge

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/directbridge/directbridge/imapbackend"
	"github.com/directbridge/directbridge/internal/admin"
	"github.com/directbridge/directbridge/internal/cluster"
	"github.com/directbridge/directbridge/internal/delivery"
	"github.com/directbridge/directbridge/internal/director"
	"github.com/directbridge/directbridge/internal/limits"
	"github.com/directbridge/directbridge/internal/login"
	"github.com/directbridge/directbridge/internal/mailstore"
	"github.com/directbridge/directbridge/internal/observe"
	"github.com/directbridge/directbridge/internal/peerfetch"
	"github.com/directbridge/directbridge/internal/state"
	"github.com/directbridge/directbridge/restclient"
	"github.com/directbridge/directbridge/sandbox"
	"github.com/directbridge/directbridge/smtpbackend"
	"github.com/directbridge/directbridge/upstream"
)

// shutdownGrace bounds a clean stop: SMTP transactions in DATA get this
// long to be answered.
const shutdownGrace = 30 * time.Second

// Bridge is the whole daemon: the protocol listeners, the state store, and
// (without a provider URL) the embedded sandbox provider.
type Bridge struct {
	cfg Config
	log *slog.Logger
	out io.Writer

	sandbox   *sandbox.Server
	sandboxL  net.Listener
	demo      bool
	client    *restclient.Client
	budget    *upstream.Budget // the provider's request budget, shared by all
	store     *state.Store
	cluster   *cluster.Cluster  // the replicas sharing a PostgreSQL state store; nil on SQLite
	peerSrv   *peerfetch.Server // serves the messages this replica holds to the others (peers.go); nil when off
	peerLn    net.Listener      // its listener until served
	linksLn   net.Listener      // the director's links on the peer port until served (internal/director)
	certs     *certSource
	smtp      *smtpbackend.Server
	tracker   *delivery.Tracker // nil when bounces are off
	engine    *mailstore.Store  // the mail engine the IMAP front adapts to
	imap      *imapbackend.Server
	listeners []namedListener
	obs       *observer // metrics and health; nil when off
	prober    *observe.Prober
	admin     *admin.Server
}

type namedListener struct {
	name  string
	l     net.Listener
	serve func(net.Listener) error
}

// New validates cfg, opens the state store (and the embedded sandbox when
// cfg.APIURL is empty) and binds every listener, so that address problems
// show before Run. Banner lines (addresses, demo credentials, certificate
// fingerprint; never a configured secret) go to out.
func New(cfg Config, log *slog.Logger, out io.Writer) (*Bridge, error) {
	if errs := cfg.Validate(); len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if out == nil {
		out = io.Discard
	}
	if cfg.DataDir == "" {
		cfg.DataDir = DefaultDataDir()
	}
	b := &Bridge{cfg: cfg, log: log, out: out}
	b.obs = newObserver(cfg)
	if err := b.open(); err != nil {
		b.close()
		return nil, err
	}
	return b, nil
}

func (b *Bridge) open() error {
	// First: a bridge that cannot keep its connection limits stops
	// before it opens anything.
	conns, err := b.connectionLimits()
	if err != nil {
		return err
	}
	apiURL := b.cfg.APIURL
	if apiURL == "" {
		opts, demo, err := b.cfg.SandboxConfig.Options()
		if err != nil {
			return err
		}
		if opts.Dir == "" {
			opts.Dir = filepath.Join(b.cfg.DataDir, "sandbox")
		}
		opts.Logger = b.log.With("component", "sandbox")
		if b.sandbox, err = sandbox.Open(opts); err != nil {
			return err
		}
		b.demo = demo
		l, err := net.Listen("tcp", b.cfg.SandboxConfig.Addr)
		if err != nil {
			// The embedded provider need not be reachable from outside;
			// a busy port is no reason to fail.
			b.log.Warn("sandbox address busy, using a free loopback port", "addr", b.cfg.SandboxConfig.Addr)
			if l, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
				return fmt.Errorf("embedded sandbox: %w", err)
			}
		}
		b.sandboxL = l
		apiURL = "http://" + l.Addr().String()
	}
	b.client, err = restclient.New(restclient.Options{
		BaseURL: apiURL,
		// The budget (below) spends the rate, by priority and fairly
		// between users; the client itself need not wait as well.
		RateLimit:      restclient.Unlimited,
		BatchSize:      b.cfg.APIBatchSize,
		RequestTimeout: b.cfg.APITimeout,
		Logger:         b.log.With("component", "restclient"),
		UserAgent:      "directbridge",
		Observe:        b.obs.restObserver(),
	})
	if err != nil {
		return err
	}
	if b.cfg.StateURL != "" {
		b.store, err = state.OpenPostgres(b.cfg.StateURL)
	} else {
		b.store, err = state.OpenStore(b.cfg.DataDir)
	}
	if err != nil {
		return err
	}
	b.store.SetSentRetention(b.cfg.SentRetention)
	journalKey, err := b.journalKey()
	if err != nil {
		return err
	}
	certFile, keyFile := b.cfg.TLSCert, b.cfg.TLSKey
	if certFile == "" {
		if certFile, keyFile, err = selfSigned(b.cfg.DataDir, listenHosts(b.cfg.IMAPAddr, b.cfg.IMAPSAddr, b.cfg.SMTPAddr, b.cfg.SMTPSAddr)...); err != nil {
			return fmt.Errorf("self-signed certificate: %w", err)
		}
	}
	if b.certs, err = loadCertSource(certFile, keyFile); err != nil {
		return err
	}
	rate, err := b.cfg.RateLimit() // checked by Validate
	if err != nil {
		return err
	}
	b.budget = upstream.NewBudget(rate)
	peerLn, peerAdvertise, err := b.listenPeers()
	if err != nil {
		return err
	}
	b.peerLn = peerLn // closed by close() if what follows fails
	var dir *director.Director
	if peerLn != nil && b.cfg.Director {
		// One port for both: links begin with a TLS handshake,
		// peerfetch's requests do not. Links are taken from now on,
		// before cluster.Open tells the others this replica's address:
		// one that comes early waits for the IMAP server.
		members := func() (string, map[string]string) { return b.cluster.Members() }
		live := func(ctx context.Context, id string) bool { return b.cluster.Live(ctx, id) }
		if dir, err = director.New(journalKey, members, live); err != nil {
			return err
		}
		var linksLn net.Listener
		linksLn, peerLn = director.Split(peerLn)
		b.linksLn = imapbackend.AcceptLinks(dir, linksLn) // closed by close() if what follows fails
	}
	if b.cfg.StateURL != "" {
		// Replicas on one PostgreSQL: each spends its share of the
		// budget, and they tell each other their changes (issue 21).
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		b.cluster, err = cluster.Open(ctx, b.cfg.StateURL, cluster.Options{Addr: peerAdvertise, Log: b.log.With("component", "cluster")})
		cancel()
		if err != nil {
			return err
		}
		b.cluster.OnShare(b.budget.SetShare)
	}
	// Under a budget, read markings, deletions and saves that wait for it
	// at once on one folder go out as one request (upstream/coalesce.go);
	// a merged save is one request of the client's batch size at most.
	provider := upstream.WithCoalescing(upstream.WithBudget(restclient.Upstream(b.client), b.budget), b.budget,
		upstream.SaveBatchMax(b.cfg.APIBatchSize))
	var tracker smtpbackend.Tracker
	checker := provider
	if b.cfg.Bounces {
		b.tracker = delivery.New(delivery.Config{Provider: provider, Store: b.store,
			Hostname: reportingName(), Logger: b.log.With("component", "delivery")})
		tracker = b.tracker
		// A login resumes the messages sent before a restart, which
		// wait for their sender's credentials.
		checker = b.tracker.WatchLogins(provider)
	}
	verifier := login.NewVerifier(checker, 0) // shared: an IMAP login and an SMTP AUTH cost one check
	// Shared too: failures count across IMAP and SMTP.
	guard := login.NewGuard(login.GuardConfig{FreeFailures: b.cfg.AuthFreeFailures, MaxDelay: b.cfg.AuthMaxDelay, RefuseAfter: b.cfg.AuthRefuseAfter,
		UserCheckInterval: b.cfg.AuthUserCheckInterval})
	// The guard also decides which unknown credentials the verifier may
	// check with the provider: a username tried from many addresses is
	// checked at a bounded rate, whatever the number of addresses.
	verifier.SetGate(guard)
	var peers mailstore.Peers
	var holders mailstore.Holders
	if b.cluster != nil {
		peers = b.cluster
		// Messages another replica holds are asked of it first, when
		// this one takes part in the exchange (DIRECTBRIDGE_PEER_ADDR).
		if peerLn != nil {
			if holders, err = peerfetch.NewClient(journalKey, b.cluster.Addr); err != nil {
				return err
			}
		}
		// The slowdown holds for the whole cluster: each replica's
		// failures count on every other.
		guard.ShareFailures(func(p []byte) { b.cluster.Publish(login.Topic, p) })
		b.cluster.Handle(login.Topic, guard.Receive, nil)
	}
	// One budget for the message bytes both fronts hold (limits.Budget).
	messages := limits.NewBudget(b.cfg.MaxInflightBytes)
	layout, err := b.imapLayout(context.Background())
	if err != nil {
		return err
	}
	b.engine = mailstore.New(mailstore.Config{
		Provider:     provider,
		State:        b.store,
		Budget:       b.budget,
		PollInterval: b.cfg.PollInterval,
		OnPoll:       b.obs.pollObserver(),
		CacheBytes:   b.cfg.IMAPCacheBytes,
		// A real provider may list direct children only; the embedded
		// sandbox lists whole trees unless told otherwise.
		FolderWalk:  b.cfg.APIURL != "" || b.cfg.SandboxConfig.ChildrenOnly,
		JournalKey:  journalKey,
		AttemptHold: b.cfg.IMAPAttemptHold,
		Peers:       peers,
		Holders:     holders,
		Logger:      b.log.With("component", "imap"),
	})
	if peerLn != nil {
		if err := b.servePeers(peerLn, journalKey); err != nil {
			return err
		}
	}
	if b.cluster != nil {
		b.cluster.Handle(mailstore.Topic, b.engine.Receive, b.engine.Missed)
	}
	b.imap, err = imapbackend.New(imapbackend.Config{
		Layout:            layout,
		Engine:            b.engine,
		Verifier:          verifier,
		Guard:             guard,
		Connections:       conns,
		TLSConfig:         b.certs.tlsConfig(),
		AllowInsecureAuth: b.cfg.AllowInsecureAuth,
		AppendLimit:       b.cfg.AppendLimit(),
		Messages:          messages,
		MaxConnsPerUser:   b.cfg.IMAPMaxConns,
		DeleteForever:     b.cfg.ExpungePolicy == "forever",
		Logger:            b.log.With("component", "imap"),
		Metrics:           b.obs.imapMetrics(),
		Director:          dir,
	})
	if err != nil {
		return err
	}
	if b.linksLn != nil {
		go b.imap.ServeLinks(b.linksLn)
		b.linksLn = nil // the IMAP server's now
	}
	b.obs.engine(b.imap, b.budget)
	b.smtp, err = smtpbackend.New(smtpbackend.Config{
		Provider:          provider,
		Verifier:          verifier,
		Guard:             guard,
		Connections:       conns,
		Store:             smtpbackend.WithJournalKey(b.store, journalKey),
		TLSConfig:         b.certs.tlsConfig(),
		AllowInsecureAuth: b.cfg.AllowInsecureAuth,
		MaxMessageBytes:   b.cfg.SMTPSize(),
		MaxRequestBytes:   b.cfg.APIMaxRequestBytes, // checked on each message's encoded size
		Messages:          messages,
		MaxRecipients:     b.cfg.SMTPMaxRecipients,
		UndecidedHold:     b.cfg.SMTPUndecidedHold,
		Limits:            smtpbackend.Limits{Flatten: b.cfg.SMTPFlatten},
		Tracker:           tracker,
		Logger:            b.log.With("component", "smtp"),
		Metrics:           b.obs.smtpMetrics(),
	})
	if err != nil {
		return err
	}
	for _, ln := range []struct {
		name, addr string
		serve      func(net.Listener) error
	}{
		{"IMAP (STARTTLS)", b.cfg.IMAPAddr, b.imap.ServePlain},
		{"IMAP (TLS)", b.cfg.IMAPSAddr, b.imap.ServeTLS},
		{"SMTP submission (STARTTLS)", b.cfg.SMTPAddr, b.smtp.ServeSubmission},
		{"SMTP submission (TLS)", b.cfg.SMTPSAddr, b.smtp.ServeImplicitTLS},
	} {
		if ln.addr == Off {
			continue
		}
		l, err := net.Listen("tcp", ln.addr)
		if err != nil {
			return fmt.Errorf("%s: %w", ln.name, err)
		}
		wrapped, err := b.behindBalancer(l)
		if err != nil {
			l.Close()
			return err
		}
		l = wrapped
		b.listeners = append(b.listeners, namedListener{ln.name, l, ln.serve})
	}
	// One provider probe, shared by readiness (/readyz, run every few
	// seconds by the observer) and the admin socket's health.
	b.prober = observe.NewProber(apiURL, 0, 0)
	if err := b.openAdmin(); err != nil {
		return err
	}
	return b.obs.open(b)
}

// Sandbox returns the embedded sandbox provider, or nil when the bridge
// talks to a real provider.
func (b *Bridge) Sandbox() *sandbox.Server { return b.sandbox }

// Addr returns the bound address of the listener whose name starts with
// prefix (e.g. "SMTP submission (STARTTLS)"), or "".
func (b *Bridge) Addr(name string) string {
	for _, l := range b.listeners {
		if l.name == name {
			return l.l.Addr().String()
		}
	}
	return ""
}

// Run serves until ctx ends, then stops accepting, lets SMTP transactions
// finish within a bounded time, and closes everything. It returns nil
// after a clean stop.
func (b *Bridge) Run(ctx context.Context) error {
	b.banner()
	errc := make(chan error, len(b.listeners)+1)
	// The embedded provider stops last: sends in flight still need it.
	sandboxCtx, stopSandbox := context.WithCancel(context.Background())
	defer stopSandbox()
	sandboxDone := make(chan struct{})
	if b.sandbox != nil {
		go func() {
			defer close(sandboxDone)
			if err := b.sandbox.Serve(sandboxCtx, b.sandboxL); err != nil {
				errc <- fmt.Errorf("embedded sandbox: %w", err)
			}
		}()
	} else {
		close(sandboxDone)
	}
	var wg sync.WaitGroup
	for _, nl := range b.listeners {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := nl.serve(nl.l); err != nil {
				errc <- fmt.Errorf("%s: %w", nl.name, err)
			}
		}()
	}
	b.serveAdmin(&wg)
	var runErr error
	select {
	case <-ctx.Done():
	case runErr = <-errc:
	}
	// What the shutdown drains, said before it starts and when it ends,
	// so that an operator sees what a SIGTERM cost and how long it took.
	stopAt := time.Now()
	smtpConns, smtpInData := b.smtp.Open()
	b.log.Info("shutting down", "imap_sessions", b.imap.Sessions(), "smtp_connections", smtpConns,
		"smtp_messages_in_data", smtpInData, "grace", shutdownGrace)
	sctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	// Every front stops at once, each within the same grace: a slow one
	// (an IMAP client that stopped reading) must not eat another's time.
	var stopping sync.WaitGroup
	var cutShort atomic.Bool
	for name, stop := range map[string]func(context.Context) error{
		"imap": b.imap.Shutdown, "smtp": b.smtp.Shutdown, "metrics": b.obs.shutdown,
		"admin": func(ctx context.Context) error { b.shutdownAdmin(ctx); return nil },
	} {
		stopping.Add(1)
		go func() {
			defer stopping.Done()
			if err := stop(sctx); err != nil {
				b.log.Warn("shutdown", "part", name, "err", err)
				cutShort.Store(true)
			}
		}()
	}
	stopping.Wait()
	wg.Wait()
	// No command runs now: the engine sends what waits (the read marking
	// of appended messages) while the provider is still there, then stops.
	b.closeEngine()
	stopSandbox()
	<-sandboxDone
	b.close()
	b.log.Info("stopped", "duration", time.Since(stopAt).Round(time.Millisecond),
		"drained", !cutShort.Load()) // false: a part ran out of the grace (logged above)
	return runErr
}

// closeEngine ends the mail engine (its pollers and timers) before the
// state store closes; at most engineCloseTimeout.
func (b *Bridge) closeEngine() {
	if b.engine == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), engineCloseTimeout)
	defer cancel()
	if err := b.engine.Close(ctx); err != nil {
		b.log.Warn("shutdown", "part", "engine", "err", err)
	}
}

// engineCloseTimeout bounds the engine's last provider calls at shutdown.
const engineCloseTimeout = 10 * time.Second

func (b *Bridge) close() {
	b.closeAdmin()
	b.closePeers()
	b.closeEngine() // a second time is harmless: nothing waits any more
	if b.tracker != nil {
		b.tracker.Close()
	}
	if b.cluster != nil {
		b.cluster.Close() // after the engine: its pollers let go of their leases
	}
	for _, l := range b.listeners {
		l.l.Close()
	}
	if b.sandboxL != nil {
		b.sandboxL.Close()
	}
	if b.sandbox != nil {
		b.sandbox.Close()
	}
	if b.store != nil {
		b.store.Close()
	}
}

// banner prints what a user needs to connect a mail client.
func (b *Bridge) banner() {
	w := b.out
	fmt.Fprintln(w, "directbridge is running")
	if b.sandbox != nil {
		fmt.Fprintf(w, "  provider:      embedded sandbox at http://%s (mail kept in %s)\n", b.sandboxL.Addr(), b.sandbox.Dir())
		if d := b.sandbox.Latency(); d > 0 {
			fmt.Fprintf(w, "  latency:       %s added to every sandbox answer\n", d)
		}
	} else {
		fmt.Fprintf(w, "  provider:      %s\n", b.cfg.APIURL)
	}
	if rate := b.budget.Rate(); rate > 0 {
		fmt.Fprintf(w, "  budget:        %g requests/s to the provider\n", rate)
	} else {
		fmt.Fprintln(w, "  budget:        unlimited requests to the provider")
	}
	for _, l := range b.listeners {
		fmt.Fprintf(w, "  %-28s %s\n", l.name+":", l.l.Addr())
	}
	b.bannerAdmin(w)
	fmt.Fprintf(w, "  TLS certificate SHA-256:     %s\n", b.certs.fingerprint())
	if b.sandbox != nil {
		opts, _, _ := b.cfg.SandboxConfig.Options()
		for _, u := range opts.Users {
			if b.demo {
				fmt.Fprintf(w, "  demo mailbox:                %s  password %s\n", u.Name, u.Password)
			} else {
				fmt.Fprintf(w, "  mailbox:                     %s\n", u.Name)
			}
		}
	}
}

// reportingName is the host name a DSN gives as its Reporting-MTA.
func reportingName() string {
	if h, err := os.Hostname(); err == nil && h != "" {
		return h
	}
	return "directbridge"
}
