// The bridge's Prometheus metrics: connections,
// protocol commands, REST calls to the provider, authentication failures,
// SMTP messages and the IMAP raw-message cache.
//
// Every label value comes from a fixed set known here; anything else is
// recorded as "other". No label ever carries a user address, folder name,
// subject or any other health data, so the metrics may be scraped by
// systems that must not see protected health information.
//
// The protocol fronts do not use the registry: each defines a small
// Metrics interface, which IMAP and SMTP (returned by Registry.IMAP and
// Registry.SMTP) satisfy.

package observe

import (
	"errors"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/directbridge/directbridge/restclient"
	"github.com/directbridge/directbridge/upstream"
)

// Namespace prefixes every metric name of the bridge.
const Namespace = "directbridge"

// Label values of fixed sets.
const (
	ProtocolIMAP = "imap"
	ProtocolSMTP = "smtp"

	// IMAP command results: the tagged status response.
	ResultOK  = "ok"
	ResultNo  = "no"
	ResultBad = "bad"

	// SMTP command results: the reply's class (2xx/3xx, 4xx, 5xx).
	ResultTemporary = "temporary"
	ResultPermanent = "permanent"

	// REST call results.
	ResultAPIError = "api_error" // the provider answered success=false
	ResultProtocol = "protocol"  // an answer that is not the documented JSON
	ResultCanceled = "canceled"  // the caller gave up (a client disconnected, shutdown)

	// Authentication failure reasons.
	ReasonCredentials = "credentials" // the provider refused them
	ReasonUnavailable = "unavailable" // the provider could not be asked
	ReasonRefused     = "refused"     // too many failures from the client's address (internal/login)

	// Why a connection was turned away before it could log in
	// (package limits).
	TurnedRefused   = "refused"   // over a per-address, per-prefix or total limit on arrival
	TurnedDisplaced = "displaced" // a stranger let go to make room for a newcomer

	// SMTP message results.
	MessageSent      = "sent"
	MessageRefused   = "refused"   // answered 5xx: the client must not retry
	MessageTemporary = "temporary" // answered 4xx: the client keeps it and retries

	// Other stands for any value outside a label's fixed set.
	Other = "other"
)

// IMAPCommands are the IMAP commands counted, as the front names them.
var IMAPCommands = []string{
	"LOGIN", "UNAUTHENTICATE", "NAMESPACE",
	"SELECT", "EXAMINE", "CREATE", "DELETE", "RENAME", "SUBSCRIBE", "UNSUBSCRIBE",
	"LIST", "STATUS", "APPEND", "IDLE",
	"UNSELECT", "EXPUNGE", "SEARCH", "FETCH", "STORE", "COPY", "MOVE",
}

// SMTPCommands are the SMTP commands counted.
var SMTPCommands = []string{"AUTH", "MAIL", "RCPT", "DATA"}

// restLatencyBuckets span a fast read (milliseconds) to the request
// timeout (a minute by default).
var restLatencyBuckets = []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}

// Registry holds the bridge's metrics in a registry of its own (not
// Prometheus' global default), with the Go runtime and process collectors.
type Registry struct {
	reg *prometheus.Registry

	connsOpen     *prometheus.GaugeVec
	connsAccepted *prometheus.CounterVec
	imapCommands  *prometheus.CounterVec
	smtpCommands  *prometheus.CounterVec
	restRequests  *prometheus.CounterVec
	restRetries   *prometheus.CounterVec
	restLatency   *prometheus.HistogramVec
	authFailures  *prometheus.CounterVec
	smtpMessages  *prometheus.CounterVec
	cacheLookups  *prometheus.CounterVec
	peerMessages  *prometheus.CounterVec
	directed      *prometheus.CounterVec
	turnedAway    *prometheus.CounterVec
	pollLag       *prometheus.HistogramVec

	imapCmdSet, smtpCmdSet map[string]bool
}

// NewRegistry returns a Registry with every metric registered and the label
// combinations of the small fixed sets present at zero, so that rates and
// alerts work from the first scrape.
func NewRegistry() *Registry {
	r := &Registry{
		reg: prometheus.NewRegistry(),
		connsOpen: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: Namespace, Name: "connections_open",
			Help: "Client connections open now, by protocol.",
		}, []string{"protocol"}),
		connsAccepted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "connections_accepted_total",
			Help: "Client connections accepted, by protocol.",
		}, []string{"protocol"}),
		imapCommands: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "imap_commands_total",
			Help: "IMAP commands handled by the backend, by command (UID variants counted with their base command) and result (ok, no, bad).",
		}, []string{"command", "result"}),
		smtpCommands: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "smtp_commands_total",
			Help: "SMTP commands handled by the backend (AUTH, MAIL, RCPT, DATA), by result (ok, temporary for 4xx, permanent for 5xx).",
		}, []string{"command", "result"}),
		restRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "rest_requests_total",
			Help: "HTTP requests to the provider (one per attempt), by operation and result (ok, api_error, temporary, protocol, canceled).",
		}, []string{"op", "result"}),
		restRetries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "rest_retries_total",
			Help: "HTTP requests to the provider that repeated a failed attempt, by operation.",
		}, []string{"op"}),
		restLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: Namespace, Name: "rest_request_duration_seconds",
			Help:    "Duration of one HTTP request to the provider, by operation.",
			Buckets: restLatencyBuckets,
		}, []string{"op"}),
		authFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "auth_failures_total",
			Help: "Failed logins, by protocol and reason (credentials: refused by the provider; unavailable: the provider could not be asked).",
		}, []string{"protocol", "reason"}),
		smtpMessages: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "smtp_messages_total",
			Help: "Messages submitted over SMTP, by result (sent, refused, temporary).",
		}, []string{"result"}),
		cacheLookups: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "imap_cache_lookups_total",
			Help: "Lookups in the IMAP front's raw-message memory cache, by result (hit, miss).",
		}, []string{"result"}),
		peerMessages: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "imap_peer_messages_total",
			Help: "Messages asked of the other replica that said it holds them in memory (DIRECTBRIDGE_PEER_ADDR), by result (held: it gave them; missing: it no longer had them; failed: it did not answer, or not in time). Missing and failed ones come from the provider.",
		}, []string{"result"}),
		directed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "imap_directed_logins_total",
			Help: "IMAP logins the director handed to the user's home replica (DIRECTBRIDGE_PEER_ADDR), by where the home is (local: this replica; remote: another, whose bytes this replica relays). A replica whose home did not answer serves the login itself, as local.",
		}, []string{"home"}),
		turnedAway: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "connections_turned_away_total",
			Help: "Connections turned away before login by the limits on strangers, by protocol and reason (refused: over a limit on arrival; displaced: let go for a newcomer). A steady rise is a flood or a scan.",
		}, []string{"protocol", "reason"}),
		pollLag: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: Namespace, Name: "poll_lag_seconds",
			Help:    "How long a polled folder had gone without a look at the provider when its poll began (how long new mail may have waited), by kind (peek: one call for what was received since; full: the refresh that also finds what other clients changed) and result (found: the peek found new mail; nothing).",
			Buckets: pollLagBuckets,
		}, []string{"kind", "result"}),
		imapCmdSet: set(IMAPCommands),
		smtpCmdSet: set(SMTPCommands),
	}
	r.reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		r.connsOpen, r.connsAccepted, r.imapCommands, r.smtpCommands,
		r.restRequests, r.restRetries, r.restLatency,
		r.authFailures, r.smtpMessages, r.cacheLookups, r.peerMessages, r.directed, r.turnedAway,
		r.pollLag,
	)
	for _, p := range []string{ProtocolIMAP, ProtocolSMTP} {
		r.connsOpen.WithLabelValues(p)
		r.connsAccepted.WithLabelValues(p)
		for _, reason := range []string{ReasonCredentials, ReasonUnavailable} {
			r.authFailures.WithLabelValues(p, reason)
		}
		for _, reason := range []string{TurnedRefused, TurnedDisplaced} {
			r.turnedAway.WithLabelValues(p, reason)
		}
	}
	for _, res := range []string{MessageSent, MessageRefused, MessageTemporary} {
		r.smtpMessages.WithLabelValues(res)
	}
	r.cacheLookups.WithLabelValues("hit")
	r.cacheLookups.WithLabelValues("miss")
	r.pollLag.WithLabelValues("peek", "nothing")
	r.pollLag.WithLabelValues("peek", "found")
	r.pollLag.WithLabelValues("full", "nothing")
	for _, res := range []string{"held", "missing", "failed"} {
		r.peerMessages.WithLabelValues(res)
	}
	r.directed.WithLabelValues("local")
	r.directed.WithLabelValues("remote")
	return r
}

func set(values []string) map[string]bool {
	m := make(map[string]bool, len(values))
	for _, v := range values {
		m[v] = true
	}
	return m
}

// oneOf returns v when it is one of allowed, else Other.
func oneOf(v string, allowed ...string) string {
	for _, a := range allowed {
		if v == a {
			return v
		}
	}
	return Other
}

// Handler serves the metrics in the Prometheus exposition format.
func (r *Registry) Handler() http.Handler {
	return promhttp.HandlerFor(r.reg, promhttp.HandlerOpts{Registry: r.reg})
}

// Gatherer gives access to the collected metrics, e.g. for tests or to
// merge them into an embedding program's own exposition.
func (r *Registry) Gatherer() prometheus.Gatherer { return r.reg }

// ProviderReachable registers directbridge_provider_reachable, a gauge
// that is 1 while reachable reports true (the readiness check's view of
// the provider) and 0 otherwise. Call it at most once.
func (r *Registry) ProviderReachable(reachable func() bool) {
	r.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: Namespace, Name: "provider_reachable",
		Help: "1 when the provider answered the last readiness check recently, else 0.",
	}, func() float64 {
		if reachable() {
			return 1
		}
		return 0
	}))
}

// ObserveREST records one HTTP attempt of the REST client; it is meant for
// restclient.Options.Observe.
func (r *Registry) ObserveREST(e restclient.Event) {
	op := opLabel(e.Op)
	r.restRequests.WithLabelValues(op, RESTResult(e.Err)).Inc()
	r.restLatency.WithLabelValues(op).Observe(e.Duration.Seconds())
	if e.Attempt > 0 {
		r.restRetries.WithLabelValues(op).Inc()
	}
}

// RESTResult classifies the outcome of one REST attempt.
func RESTResult(err error) string {
	var ce *restclient.CanceledError
	switch {
	case err == nil:
		return ResultOK
	case restclient.IsAPIError(err):
		return ResultAPIError
	case restclient.IsTemporary(err):
		return ResultTemporary
	case errors.As(err, &ce):
		return ResultCanceled
	default:
		// A ProtocolError, or a request that could not even be built.
		return ResultProtocol
	}
}

// opLabel passes the REST client's operation names, which are identifiers
// such as "GetMessageCount" fixed in its code, and nothing else.
func opLabel(op string) string {
	if op == "" || len(op) > 64 {
		return Other
	}
	for i := 0; i < len(op); i++ {
		c := op[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || i > 0 && '0' <= c && c <= '9') {
			return Other
		}
	}
	return op
}

// front is what the two protocol recorders share: connections and
// authentication failures, labelled with the protocol.
type front struct {
	r        *Registry
	protocol string
}

// ConnOpened counts a new connection.
func (f front) ConnOpened() {
	f.r.connsAccepted.WithLabelValues(f.protocol).Inc()
	f.r.connsOpen.WithLabelValues(f.protocol).Inc()
}

// ConnClosed counts the end of a connection.
func (f front) ConnClosed() { f.r.connsOpen.WithLabelValues(f.protocol).Dec() }

// TurnedAway counts a connection turned away before login: reason
// refused or displaced.
func (f front) TurnedAway(reason string) {
	f.r.turnedAway.WithLabelValues(f.protocol, oneOf(reason, TurnedRefused, TurnedDisplaced)).Inc()
}

// AuthFailed counts a failed login: reason credentials, unavailable or
// refused.
func (f front) AuthFailed(reason string) {
	f.r.authFailures.WithLabelValues(f.protocol, oneOf(reason, ReasonCredentials, ReasonUnavailable, ReasonRefused)).Inc()
}

// IMAP records the IMAP front's events; it satisfies imapbackend.Metrics.
type IMAP struct{ front }

// IMAP returns the recorder for the IMAP front.
func (r *Registry) IMAP() *IMAP { return &IMAP{front{r, ProtocolIMAP}} }

// Command counts a command's result: ok, no or bad.
func (m *IMAP) Command(name, result string) {
	if !m.r.imapCmdSet[name] {
		name = Other
	}
	m.r.imapCommands.WithLabelValues(name, oneOf(result, ResultOK, ResultNo, ResultBad)).Inc()
}

// CacheLookup counts a raw-message cache hit or miss.
func (m *IMAP) CacheLookup(hit bool) {
	if hit {
		m.r.cacheLookups.WithLabelValues("hit").Inc()
	} else {
		m.r.cacheLookups.WithLabelValues("miss").Inc()
	}
}

// PeerMessages counts n messages asked of another replica with result
// "held", "missing" or "failed".
func (m *IMAP) PeerMessages(result string, n int) {
	m.r.peerMessages.WithLabelValues(result).Add(float64(n))
}

// Directed counts a login the director handed to the user's home:
// "local" or "remote".
func (m *IMAP) Directed(home string) {
	m.r.directed.WithLabelValues(oneOf(home, "local", "remote")).Inc()
}

// SMTP records the SMTP front's events; it satisfies smtpbackend.Metrics.
type SMTP struct{ front }

// SMTP returns the recorder for the SMTP front.
func (r *Registry) SMTP() *SMTP { return &SMTP{front{r, ProtocolSMTP}} }

// Command counts a command's result: ok, temporary or permanent.
func (m *SMTP) Command(name, result string) {
	if !m.r.smtpCmdSet[name] {
		name = Other
	}
	m.r.smtpCommands.WithLabelValues(name, oneOf(result, ResultOK, ResultTemporary, ResultPermanent)).Inc()
}

// Message counts a submitted message's result: sent, refused or temporary.
func (m *SMTP) Message(result string) {
	m.r.smtpMessages.WithLabelValues(oneOf(result, MessageSent, MessageRefused, MessageTemporary)).Inc()
}

// Polling registers directbridge_poll_folders (folders polled because a
// connection has them selected) and directbridge_poll_interval_seconds
// (how often each is polled now). An interval above the configured one
// means the provider budget stretched it: polls take what the clients'
// requests leave. Call it at most once.
func (r *Registry) Polling(stats func() (folders int, interval time.Duration)) {
	r.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: Namespace, Name: "poll_folders",
		Help: "Folders polled for changes (selected by at least one connection).",
	}, func() float64 {
		n, _ := stats()
		return float64(n)
	}))
	r.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: Namespace, Name: "poll_interval_seconds",
		Help: "Seconds between two polls of a folder now; above the configured interval when the provider budget stretches it.",
	}, func() float64 {
		_, d := stats()
		return d.Seconds()
	}))
}

// pollLagBuckets span a poll interval of one second (a few users) to
// minutes (thousands of users on a tight budget).
var pollLagBuckets = []float64{0.5, 1, 1.5, 2, 3, 5, 10, 15, 20, 30, 45, 60, 120, 300}

// ObservePoll records one poll of a folder (mailstore.Config.OnPoll):
// lag since the folder's last look, its kind, and whether a peek found
// news.
func (r *Registry) ObservePoll(lag time.Duration, kind string, found bool) {
	result := "nothing"
	if found {
		result = "found"
	}
	r.pollLag.WithLabelValues(oneOf(kind, "peek", "full"), result).Observe(lag.Seconds())
}

// Budget registers directbridge_budget_granted_total and
// directbridge_budget_wait_seconds_total, per priority (interactive,
// readahead, poll): requests let through by the provider budget and the
// time they waited for it. Call it at most once.
func (r *Registry) Budget(b *upstream.Budget) {
	for _, p := range []upstream.Priority{upstream.Interactive, upstream.ReadAhead, upstream.Poll} {
		labels := prometheus.Labels{"priority": p.String()}
		r.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
			Namespace: Namespace, Name: "budget_granted_total", ConstLabels: labels,
			Help: "Provider requests let through by the request budget, by priority.",
		}, func() float64 { return float64(b.Stats().Granted[p]) }))
		r.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
			Namespace: Namespace, Name: "budget_wait_seconds_total", ConstLabels: labels,
			Help: "Time provider requests waited for the request budget, by priority.",
		}, func() float64 { return b.Stats().Waited[p].Seconds() }))
	}
}
