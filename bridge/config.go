package bridge

import (
	"fmt"
	"math"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/directbridge/directbridge/imapbackend"
	"github.com/directbridge/directbridge/internal/state"
	"github.com/directbridge/directbridge/sandbox"
	"github.com/directbridge/directbridge/upstream/directapi"
)

// Off disables a listener when given as its address.
const Off = "off"

// Config is the bridge's configuration: DefaultConfig for an embedder,
// ConfigFromEnv for the daemon, which reads it from the environment with
// envconfig under EnvPrefix (so APIURL is DIRECTBRIDGE_API_URL).
type Config struct {
	APIURL string `envconfig:"API_URL" desc:"provider base URL (https://...); empty: run the embedded sandbox provider"`

	DataDir string `envconfig:"DATA_DIR" desc:"directory for the state store, the generated TLS certificate and the embedded sandbox's mail; default $XDG_STATE_HOME/directbridge or ~/.local/state/directbridge"`
	// StateURL names a PostgreSQL state store instead of the SQLite file
	// in DataDir (internal/state, postgres.go).
	// JournalKey, when set, is the journal key instead of the file in
	// DataDir: replicas sharing a state store must share it too.
	JournalKey directapi.Secret `envconfig:"JOURNAL_KEY" desc:"the key (32 bytes, hex or base64; never printed) the journals' fingerprints are made under, instead of journal.key in DIRECTBRIDGE_DATA_DIR: replicas sharing a PostgreSQL state store must share it (a Secret), or a retry through another replica is not recognised"`
	StateURL   string           `envconfig:"STATE_URL" desc:"the state store in PostgreSQL (postgres://user:password@host/db?sslmode=verify-full; PG* variables fill in the rest) instead of state.db in DIRECTBRIDGE_DATA_DIR; several replicas may share one (README, Running several replicas), each with the same DIRECTBRIDGE_JOURNAL_KEY"`
	// PeerAddr and PeerAdvertise: where this replica serves the messages
	// it holds in memory to the others, and the address they reach it
	// at (peers.go).
	PeerAddr      string `envconfig:"PEER_ADDR" desc:"with DIRECTBRIDGE_STATE_URL: listen address (host:port, e.g. :7144) where this replica gives the others the messages it holds in memory, sealed under a key derived from DIRECTBRIDGE_JOURNAL_KEY, so that a message a client appends through one replica is not downloaded from the provider again by the others. Empty: off"`
	PeerAdvertise string `envconfig:"PEER_ADVERTISE" desc:"the host:port, or the host alone (a pod's IP, IPv6 too; the port is DIRECTBRIDGE_PEER_ADDR's), other replicas reach DIRECTBRIDGE_PEER_ADDR at; empty: DIRECTBRIDGE_PEER_ADDR's host, or when it names none, this machine's first address that is not a loopback one"`
	// Director serves each user's IMAP sessions on one replica
	// (internal/director), over links on the peer port.
	Director bool `envconfig:"DIRECTOR" default:"true" desc:"with DIRECTBRIDGE_PEER_ADDR: serve each user's IMAP sessions on one replica, the user's home among the live ones, whichever replica the balancer gave the connection to: the replica that accepts it checks the password and relays the connection to the home over mutually authenticated TLS on the peer port (a key derived from DIRECTBRIDGE_JOURNAL_KEY), so that one user's folders are mirrored by one replica, not by each"`
	// ProxyProtocolFrom lists the balancers whose connections start with
	// a PROXY protocol header (proxy.go).
	ProxyProtocolFrom string `envconfig:"PROXY_PROTOCOL_FROM" desc:"addresses or CIDR ranges (comma-separated) of TCP balancers in front of the bridge, such as HAProxy with send-proxy-v2: their connections must begin with a PROXY protocol header (v1 or v2), whose client address the per-address limits and the guessing slowdown then count; connections from elsewhere are taken as they are. Empty: none"`

	IMAPAddr  string `envconfig:"IMAP_ADDR" default:"127.0.0.1:1143" desc:"IMAP listener with STARTTLS (host:port or off)"`
	IMAPSAddr string `envconfig:"IMAPS_ADDR" default:"127.0.0.1:1993" desc:"IMAP listener with implicit TLS (host:port or off)"`
	SMTPAddr  string `envconfig:"SMTP_ADDR" default:"127.0.0.1:1587" desc:"SMTP submission listener with STARTTLS (host:port or off)"`
	SMTPSAddr string `envconfig:"SMTPS_ADDR" default:"127.0.0.1:1465" desc:"SMTP submission listener with implicit TLS (host:port or off)"`

	MetricsAddr string `envconfig:"METRICS_ADDR" desc:"HTTP listener (host:port) for /metrics (Prometheus), /healthz (liveness) and /readyz (provider reachable); no authentication, no health data in it; empty or off: none"`

	TLSCert string `envconfig:"TLS_CERT" desc:"PEM certificate file for STARTTLS and TLS; empty: a self-signed certificate for localhost in the data directory"`
	TLSKey  string `envconfig:"TLS_KEY" desc:"PEM private key file matching DIRECTBRIDGE_TLS_CERT"`

	AllowInsecureAuth bool `envconfig:"ALLOW_INSECURE_AUTH" default:"false" desc:"offer password authentication without TLS on non-loopback listeners (loopback always may)"`

	SMTPMaxMessageBytes int64         `envconfig:"SMTP_MAX_MESSAGE_BYTES" default:"0" desc:"largest message accepted by SMTP, in bytes (exactly; told by MAIL FROM SIZE=); 0: the largest that fits DIRECTBRIDGE_API_MAX_REQUEST_BYTES once encoded"`
	SMTPMaxRecipients   int           `envconfig:"SMTP_MAX_RECIPIENTS" default:"100" desc:"most recipients of one SMTP message"`
	Bounces             bool          `envconfig:"BOUNCES" default:"true" desc:"follow every message sent through SMTP until the provider reports each recipient final, and file an RFC 3464 delivery status notification in the sender's INBOX for recipients that failed (Locally Failed, Remotely Failed, NO MDN Received); ESMTP DSN NOTIFY, RET and ENVID are honoured"`
	SMTPFlatten         bool          `envconfig:"SMTP_FLATTEN" default:"false" desc:"send receipts (MDN), bounces (DSN) and signed or encrypted S/MIME messages flattened into the provider's message model (report and signature parts become attachments) instead of refusing them with 554 5.6.3"`
	MaxConnsPerAddress  int           `envconfig:"MAX_CONNS_PER_ADDRESS" default:"0" desc:"connections one client address (IPv4 address, IPv6 /64) may hold on each listener before it has logged in, and one IPv4 /24 or IPv6 /48 four times as many; more are refused at once (IMAP BYE, SMTP 421). 0: 20, or half the pre-login total (half a listener's share of the file-descriptor limit) when that is lower, logged at start. A value set above the pre-login total stops the start"`
	PreAuthTimeout      time.Duration `envconfig:"PREAUTH_TIMEOUT" default:"30s" desc:"time a client has to log in after connecting"`
	SentRetention       time.Duration `envconfig:"SENT_RETENTION" default:"168h" desc:"how long records of sent messages (smtpId, Message-ID, sender) are kept in the state store; the send journal keeps 24 hours"`
	AuthFreeFailures    int           `envconfig:"AUTH_FREE_FAILURES" default:"3" desc:"failed logins (IMAP and SMTP together) a client address may have in 15 minutes before its attempts are delayed: 1 s, doubling per failure"`
	AuthMaxDelay        time.Duration `envconfig:"AUTH_MAX_DELAY" default:"15s" desc:"the longest delay of a login attempt from an address with many failures"`
	AuthRefuseAfter     int           `envconfig:"AUTH_REFUSE_AFTER" default:"20" desc:"failed logins from one client address in 15 minutes after which its attempts are refused (IMAP NO [UNAVAILABLE], SMTP 454 4.7.0) until the 15 minutes have passed"`
	// AuthUserCheckInterval rates the provider checks of a username tried
	// from many addresses (login.GuardConfig.UserCheckInterval).
	AuthUserCheckInterval time.Duration `envconfig:"AUTH_USER_CHECK_INTERVAL" default:"30s" desc:"a username that failed from more than 3 client addresses in 15 minutes has unknown passwords checked with the provider at most once per this interval; other attempts are answered as a wrong password without asking it. A password that worked within a week, and addresses where the user logged in, are not held back"`
	IMAPAttemptHold       time.Duration `envconfig:"IMAP_ATTEMPT_HOLD" default:"2m" desc:"how long after the bridge stopped waiting for an APPEND's or COPY's answer (lost, or the bridge or its replica killed) the provider may still carry it out: a client's retry meanwhile is answered NO [UNAVAILABLE] unless the message or copies show, after which the earlier attempt is taken as not done"`
	SMTPUndecidedHold     time.Duration `envconfig:"SMTP_UNDECIDED_HOLD" default:"2m" desc:"how long a client's retry of a message whose earlier send has an unknown outcome (answer lost, bridge killed) is answered 451 while the provider's Sent copy is looked for, before the message is sent again"`

	PollInterval       time.Duration `envconfig:"POLL_INTERVAL" default:"1s" desc:"how often the provider is asked for new mail in a folder someone has open (one poll per user and folder, shared by all connections; under a request budget one call when nothing is new, and full refreshes get a fiftieth of the polls' budget); stretched so that the polls fit in the request budget, behind every request a client waits for"`
	IMAPCacheBytes     int64         `envconfig:"IMAP_CACHE_BYTES" default:"67108864" desc:"memory for raw messages cached by the IMAP front (never written to disk)"`
	MaxInflightBytes   int64         `envconfig:"MAX_INFLIGHT_MESSAGE_BYTES" default:"134217728" desc:"message bytes (APPEND literals, SMTP DATA) held at once over all connections; a message that would pass it is answered try-later (IMAP NO [LIMIT], SMTP 452 4.3.1). Each byte in flight costs a few bytes of memory; at least the largest message"`
	IMAPAppendLimit    uint32        `envconfig:"IMAP_APPEND_LIMIT" default:"0" desc:"largest IMAP APPEND, in bytes (advertised as APPENDLIMIT); 0: the largest that fits DIRECTBRIDGE_API_MAX_REQUEST_BYTES once encoded"`
	APIMaxRequestBytes int64         `envconfig:"API_MAX_REQUEST_BYTES" default:"67108864" desc:"largest request body the provider accepts; the documents state none, 64 MiB is the sandbox's (DIRECTBRIDGE_SANDBOX_MAX_BODY). SIZE and APPENDLIMIT are derived from it"`
	IMAPMaxConns       int           `envconfig:"IMAP_MAX_CONNECTIONS_PER_USER" default:"20" desc:"most IMAP connections of one user"`
	IMAPLayout         string        `envconfig:"IMAP_LAYOUT" desc:"how folders appear over IMAP: flat (the provider's INBOX.Sent is Sent, folders are created at the top level, as Outlook, Apple Mail and Thunderbird expect) or inbox (every folder below INBOX, as the provider names them); unset: flat for a new data directory, inbox for one IMAP clients used before this setting existed, and afterwards whatever the data directory was last used with"`
	ExpungePolicy      string        `envconfig:"EXPUNGE" default:"trash" desc:"what IMAP EXPUNGE does outside INBOX.Trash: trash (move to INBOX.Trash, recoverable) or forever"`

	// APIRateLimit is the provider budget; read it with RateLimit.
	APIRateLimit string        `envconfig:"API_RATE_LIMIT" desc:"the provider budget: most REST requests per second to the provider, shared by all users, or unlimited (also 0); unset: unlimited on the embedded sandbox, 100 with a real provider (DIRECTBRIDGE_API_URL), the bridge's own courtesy default since the provider's documents state no rate limit"`
	APIBatchSize int           `envconfig:"API_BATCH_SIZE" default:"500" desc:"most UIDs per REST request"`
	APITimeout   time.Duration `envconfig:"API_TIMEOUT" default:"60s" desc:"time limit of one REST request"`

	AdminSocket      string           `envconfig:"ADMIN_SOCKET" desc:"Unix socket of the admin interface (directbridge admin: registration, delivery status, health), mode 0600, absolute path; empty: DATA_DIR/admin.sock; off disables"`
	ResellerUser     string           `envconfig:"RESELLER_USER" desc:"registration account (reseller or T-user) the admin socket provisions patient addresses with; empty with the embedded sandbox: the sandbox's registration account"`
	ResellerPassword directapi.Secret `envconfig:"RESELLER_PASSWORD" desc:"password of DIRECTBRIDGE_RESELLER_USER (never printed)"`

	// The embedded sandbox, used when APIURL is empty; its variables are
	// DIRECTBRIDGE_SANDBOX_*.
	SandboxConfig
}

// DefaultProviderRate is the provider budget, in requests per second, when
// DIRECTBRIDGE_API_RATE_LIMIT is unset and DIRECTBRIDGE_API_URL names a
// real provider. The provider's documents state no rate limit ("Limits":
// "not shown"); this is the bridge's own courtesy to a provider, not a
// limit the provider published. The embedded sandbox is not rate limited
// unless the variable says so.
const DefaultProviderRate = 100

// Unlimited is the spelling of DIRECTBRIDGE_API_RATE_LIMIT (besides 0)
// for no provider budget at all.
const Unlimited = "unlimited"

// RateLimit returns the provider budget in requests per second, 0 meaning
// unlimited: DIRECTBRIDGE_API_RATE_LIMIT when set (a positive number, or
// 0 or "unlimited"), else unlimited for the embedded sandbox and
// DefaultProviderRate for a real provider. One budget covers every request
// to the provider (upstream.Budget spends it by priority and fairly
// between users).
func (c *Config) RateLimit() (float64, error) {
	v := strings.TrimSpace(c.APIRateLimit)
	switch {
	case v == "" && c.APIURL == "":
		return 0, nil
	case v == "":
		return DefaultProviderRate, nil
	case strings.EqualFold(v, Unlimited):
		return 0, nil
	}
	r, err := strconv.ParseFloat(v, 64)
	if err != nil || r < 0 || math.IsNaN(r) || math.IsInf(r, 0) {
		return 0, fmt.Errorf("DIRECTBRIDGE_API_RATE_LIMIT: %q is not a number of requests per second, 0 or unlimited", c.APIRateLimit)
	}
	return r, nil
}

// SandboxConfig is the embedded sandbox's part of Config.
type SandboxConfig = sandbox.Config

// DefaultDataDir is the per-user state directory.
func DefaultDataDir() string {
	if d := os.Getenv("XDG_STATE_HOME"); d != "" {
		return filepath.Join(d, "directbridge")
	}
	if home, err := os.UserHomeDir(); err == nil {
		return filepath.Join(home, ".local", "state", "directbridge")
	}
	return filepath.Join(os.TempDir(), "directbridge")
}

// Validate returns one error per problem, each naming its variable.
func (c *Config) Validate() []error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if c.JournalKey != "" {
		if _, err := decodeJournalKey(string(c.JournalKey)); err != nil {
			bad("DIRECTBRIDGE_JOURNAL_KEY: %v", err)
		}
	}
	if c.StateURL != "" && !state.IsPostgresURL(c.StateURL) {
		bad("DIRECTBRIDGE_STATE_URL must be a postgres:// or postgresql:// URL (leave it empty for the SQLite store in DIRECTBRIDGE_DATA_DIR)")
	}
	if c.MaxConnsPerAddress < 0 || c.PreAuthTimeout < time.Second {
		bad("DIRECTBRIDGE_MAX_CONNS_PER_ADDRESS (%d) must be at least 0 (0: derived) and DIRECTBRIDGE_PREAUTH_TIMEOUT (%s) at least 1s", c.MaxConnsPerAddress, c.PreAuthTimeout)
	}
	if c.AuthFreeFailures < 1 || c.AuthRefuseAfter <= c.AuthFreeFailures || c.AuthMaxDelay < time.Second {
		bad("DIRECTBRIDGE_AUTH_FREE_FAILURES (%d) must be at least 1, DIRECTBRIDGE_AUTH_REFUSE_AFTER (%d) above it, and DIRECTBRIDGE_AUTH_MAX_DELAY (%s) at least 1s",
			c.AuthFreeFailures, c.AuthRefuseAfter, c.AuthMaxDelay)
	}
	if c.AuthUserCheckInterval < time.Second {
		bad("DIRECTBRIDGE_AUTH_USER_CHECK_INTERVAL (%s) must be at least 1s", c.AuthUserCheckInterval)
	}
	if c.PeerAddr != "" && c.StateURL == "" {
		bad("DIRECTBRIDGE_PEER_ADDR is for replicas sharing a PostgreSQL state store (DIRECTBRIDGE_STATE_URL)")
	}
	if _, _, err := net.SplitHostPort(c.PeerAddr); c.PeerAddr != "" && err != nil {
		bad("DIRECTBRIDGE_PEER_ADDR: %v", err)
	}
	if c.PeerAdvertise != "" {
		if a, err := advertised(c.PeerAdvertise, ":0", "1"); err != nil || !validHostPort(a) {
			bad("DIRECTBRIDGE_PEER_ADVERTISE: %q is not a host or host:port", c.PeerAdvertise)
		}
	}
	if _, err := proxyRanges(c.ProxyProtocolFrom); err != nil {
		bad("DIRECTBRIDGE_PROXY_PROTOCOL_FROM: %v", err)
	}
	if c.APIURL != "" && !strings.HasPrefix(c.APIURL, "https://") && !strings.HasPrefix(c.APIURL, "http://") {
		bad("DIRECTBRIDGE_API_URL: %q is not an http(s) URL", c.APIURL)
	}
	for name, addr := range map[string]string{"DIRECTBRIDGE_SMTP_ADDR": c.SMTPAddr, "DIRECTBRIDGE_SMTPS_ADDR": c.SMTPSAddr,
		"DIRECTBRIDGE_IMAP_ADDR": c.IMAPAddr, "DIRECTBRIDGE_IMAPS_ADDR": c.IMAPSAddr} {
		if addr == Off {
			continue
		}
		if _, port, err := net.SplitHostPort(addr); err != nil || port == "" {
			bad("%s: %q is not host:port or off", name, addr)
		}
	}
	if c.MetricsAddr != "" && c.MetricsAddr != Off {
		if _, port, err := net.SplitHostPort(c.MetricsAddr); err != nil || port == "" {
			bad("DIRECTBRIDGE_METRICS_ADDR: %q is not host:port, empty or off", c.MetricsAddr)
		}
	}
	if (c.TLSCert == "") != (c.TLSKey == "") {
		bad("DIRECTBRIDGE_TLS_CERT and DIRECTBRIDGE_TLS_KEY must be set together")
	}
	fit := c.MessageFit()
	switch {
	case c.APIMaxRequestBytes < 1<<20:
		bad("DIRECTBRIDGE_API_MAX_REQUEST_BYTES (%d) must be at least 1 MiB", c.APIMaxRequestBytes)
	case c.SMTPMaxMessageBytes < 0:
		bad("DIRECTBRIDGE_SMTP_MAX_MESSAGE_BYTES must not be negative")
	case c.SMTPMaxMessageBytes > fit:
		bad("DIRECTBRIDGE_SMTP_MAX_MESSAGE_BYTES (%d) is more than fits a provider request of DIRECTBRIDGE_API_MAX_REQUEST_BYTES (%d) once encoded: at most %d",
			c.SMTPMaxMessageBytes, c.APIMaxRequestBytes, fit)
	case int64(c.IMAPAppendLimit) > fit:
		bad("DIRECTBRIDGE_IMAP_APPEND_LIMIT (%d) is more than fits a provider request of DIRECTBRIDGE_API_MAX_REQUEST_BYTES (%d) once encoded: at most %d",
			c.IMAPAppendLimit, c.APIMaxRequestBytes, fit)
	}
	if c.SMTPMaxRecipients <= 0 {
		bad("DIRECTBRIDGE_SMTP_MAX_RECIPIENTS must be positive")
	}
	if c.APIBatchSize < 1 || c.APIBatchSize > 500 {
		bad("DIRECTBRIDGE_API_BATCH_SIZE must be between 1 and 500")
	}
	if c.IMAPAttemptHold < time.Second || c.SMTPUndecidedHold < time.Second {
		bad("DIRECTBRIDGE_IMAP_ATTEMPT_HOLD (%s) and DIRECTBRIDGE_SMTP_UNDECIDED_HOLD (%s) must be at least 1s", c.IMAPAttemptHold, c.SMTPUndecidedHold)
	}
	if c.PollInterval < time.Second {
		bad("DIRECTBRIDGE_POLL_INTERVAL must be at least 1s")
	}
	if big := max(c.SMTPSize(), int64(c.AppendLimit())); c.MaxInflightBytes < big {
		bad("DIRECTBRIDGE_MAX_INFLIGHT_MESSAGE_BYTES (%d) must be at least the largest message (%d)", c.MaxInflightBytes, big)
	}
	if c.IMAPCacheBytes <= 0 {
		bad("DIRECTBRIDGE_IMAP_CACHE_BYTES must be positive")
	}
	if c.IMAPMaxConns <= 0 {
		bad("DIRECTBRIDGE_IMAP_MAX_CONNECTIONS_PER_USER must be positive")
	}
	if c.IMAPLayout != "" {
		if _, ok := imapbackend.ParseLayout(c.IMAPLayout); !ok {
			bad("DIRECTBRIDGE_IMAP_LAYOUT: %q is not flat or inbox", c.IMAPLayout)
		}
	}
	if c.ExpungePolicy != "trash" && c.ExpungePolicy != "forever" {
		bad("DIRECTBRIDGE_EXPUNGE: %q is not trash or forever", c.ExpungePolicy)
	}
	if c.APITimeout <= 0 {
		bad("DIRECTBRIDGE_API_TIMEOUT must be positive")
	}
	if _, err := c.RateLimit(); err != nil {
		errs = append(errs, err)
	}
	errs = append(errs, c.validateAdmin()...)
	return errs
}

// requestOverhead is what a request carries beside one message: the JSON
// field names, credentials, folder and headers.
const requestOverhead = 64 << 10

// MessageFit is the largest message that fits a provider request of
// APIMaxRequestBytes once encoded: APPEND sends it base64 encoded
// (SaveRawMessages), which adds a third, and an SMTP message's
// attachments travel base64 encoded too. A message under SIZE or
// APPENDLIMIT is therefore never refused by the provider for its size
// (one made mostly of control characters, which JSON writes as six
// bytes, excepted).
func (c *Config) MessageFit() int64 {
	return max(0, (c.APIMaxRequestBytes-requestOverhead)/4*3)
}

// SMTPSize is the SIZE limit: the setting, or MessageFit.
func (c *Config) SMTPSize() int64 {
	if c.SMTPMaxMessageBytes > 0 {
		return c.SMTPMaxMessageBytes
	}
	return c.MessageFit()
}

// AppendLimit is APPENDLIMIT: the setting, or MessageFit.
func (c *Config) AppendLimit() uint32 {
	if c.IMAPAppendLimit > 0 {
		return c.IMAPAppendLimit
	}
	return uint32(min(c.MessageFit(), 1<<32-1))
}
