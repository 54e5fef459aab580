package restclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/directbridge/directbridge/upstream"
	"github.com/directbridge/directbridge/upstream/directapi"
)

// Defaults. The provider's documents state no limits ("Rate limits ...:
// not shown", messaging-rest.md and registration-rest.md, "Limits"), so
// these are the client's own choices, modest enough for any provider.
const (
	// DefaultRateLimit, in requests per second, is a courtesy to a
	// provider that published no rate limit, not a limit it published.
	DefaultRateLimit       = 100
	DefaultRateBurst       = 10
	DefaultMaxConnsPerHost = 10 // keep-alive connections per client
	DefaultBatchSize       = 500
	DefaultMaxRetries      = 3
	DefaultRequestTimeout  = 60 * time.Second
	DefaultMaxResponseSize = 512 << 20
)

// Unlimited as Options.RateLimit lifts the client's rate limit.
const Unlimited = -1.0

// Options configure a Client. The zero value of every field means its default.
type Options struct {
	// BaseURL is the provider's base URL, e.g. https://hisp.example.
	BaseURL string
	// RegistrationBaseURL, when set, is used for the registration service
	// instead of BaseURL (some providers host it elsewhere).
	RegistrationBaseURL string
	// HTTPClient replaces the pooled client built from the options below.
	HTTPClient *http.Client
	// RateLimit is the most requests per second the client sends; 0 means
	// DefaultRateLimit, and Unlimited (any negative value, or +Inf) means
	// no limit at all: no bucket, no waiting. A process that spends its
	// requests through a scheduler of its own (the bridge's
	// upstream.Budget) gives the client Unlimited.
	RateLimit float64
	// RateBurst is how many requests may go at once after a quiet spell.
	RateBurst int
	// MaxConnsPerHost bounds the keep-alive pool.
	MaxConnsPerHost int
	// BatchSize is the most UIDs (or smtpIds, or raw messages) per request.
	BatchSize int
	// MaxRetries bounds the retries of one request.
	MaxRetries int
	// RequestTimeout bounds one attempt, from sending to the end of the body.
	RequestTimeout time.Duration
	// MaxResponseSize bounds a response body.
	MaxResponseSize int64
	// Clock replaces real time in tests.
	Clock Clock
	// Logger receives one debug line per attempt: operation, HTTP status,
	// duration, never a path, body or credential.
	Logger *slog.Logger
	// Observe, when set, is called after every attempt (for metrics).
	Observe func(Event)
	// UserAgent is sent with every request.
	UserAgent string
}

// Event describes one HTTP attempt, for metrics.
type Event struct {
	Op         string
	Attempt    int // 0 for the first
	StatusCode int // 0 when no HTTP answer came
	Err        error
	Duration   time.Duration
}

// Client calls the provider's messaging and registration services. It is
// safe for concurrent use; one Client should serve a whole process, so that
// its rate limit and connection pool are shared.
type Client struct {
	msgBase, regBase string
	http             *http.Client
	limiter          *limiter
	clock            Clock
	log              *slog.Logger
	observe          func(Event)
	batchSize        int
	maxRetries       int
	timeout          time.Duration
	maxResponse      int64
	userAgent        string
}

// New returns a Client for the provider at opts.BaseURL.
func New(opts Options) (*Client, error) {
	base := strings.TrimRight(opts.BaseURL, "/")
	if base == "" {
		return nil, errors.New("restclient: BaseURL is empty")
	}
	regBase := strings.TrimRight(opts.RegistrationBaseURL, "/")
	if regBase == "" {
		regBase = base
	}
	c := &Client{
		msgBase:     base + directapi.MessagingPath,
		regBase:     regBase + directapi.RegistrationPath,
		http:        opts.HTTPClient,
		clock:       opts.Clock,
		log:         opts.Logger,
		observe:     opts.Observe,
		batchSize:   orDefault(opts.BatchSize, DefaultBatchSize),
		maxRetries:  opts.MaxRetries,
		timeout:     opts.RequestTimeout,
		maxResponse: opts.MaxResponseSize,
		userAgent:   opts.UserAgent,
	}
	if c.clock == nil {
		c.clock = realClock{}
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	if c.maxRetries == 0 {
		c.maxRetries = DefaultMaxRetries
	} else if c.maxRetries < 0 {
		c.maxRetries = 0
	}
	if c.timeout <= 0 {
		c.timeout = DefaultRequestTimeout
	}
	if c.maxResponse <= 0 {
		c.maxResponse = DefaultMaxResponseSize
	}
	if c.userAgent == "" {
		c.userAgent = "directbridge"
	}
	rate := opts.RateLimit
	switch {
	case math.IsNaN(rate):
		return nil, errors.New("restclient: RateLimit is not a number")
	case rate == 0:
		rate = DefaultRateLimit
	}
	if rate > 0 && !math.IsInf(rate, 1) {
		c.limiter = newLimiter(c.clock, rate, orDefault(opts.RateBurst, DefaultRateBurst))
	}
	if c.http == nil {
		conns := orDefault(opts.MaxConnsPerHost, DefaultMaxConnsPerHost)
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.MaxConnsPerHost = conns
		tr.MaxIdleConnsPerHost = conns
		tr.MaxIdleConns = 2 * conns
		tr.IdleConnTimeout = 90 * time.Second
		c.http = &http.Client{Transport: tr}
	}
	return c, nil
}

// BatchSize is the most items the client puts in one request.
func (c *Client) BatchSize() int { return c.batchSize }

func orDefault(v, def int) int {
	if v <= 0 {
		return def
	}
	return v
}

// retryClass says when an operation may be sent again.
type retryClass int

const (
	// repeatable operations (reads, marks, folder listing, subscription)
	// give the same result when repeated, so every temporary failure is retried.
	repeatable retryClass = iota
	// once operations (sends, saves, copies, moves, deletes, folder changes)
	// are retried only when the provider surely did not process the request:
	// the connection could not be opened, or it answered 429.
	once
)

// request is one operation call.
type request struct {
	op      string
	method  string
	url     string // fully built and escaped
	body    any    // nil for no body
	payload body   // the body, encoded or written as it is sent, instead of body
	class   retryClass
}

// envelope is a decoded response that can tell success from failure: a
// pointer to a directapi response type, which embeds the envelope of its
// service (APIResponse or ResellerAPIResponseType) and so has its
// Envelope method.
type envelope any

type messagingEnvelope interface {
	Envelope() *directapi.APIResponse
}

type registrationEnvelope interface {
	Envelope() *directapi.ResellerAPIResponseType
}

// apiError returns the failure a decoded response reports, or nil when it
// reports success. ok is false when out holds no envelope at all, which is
// a mistake in this package.
func apiError(op string, out envelope) (ae *APIError, ok bool) {
	switch e := out.(type) {
	case messagingEnvelope:
		r := e.Envelope()
		if r.Success {
			return nil, true
		}
		return &APIError{Op: op, Code: r.Code, Message: r.Message}, true
	case registrationEnvelope:
		r := e.Envelope()
		if r.Success {
			return nil, true
		}
		code := r.Code
		if code == "" {
			code = directapi.RegCodeOther
		}
		return &APIError{Op: op, RegCode: code, Message: r.ErrorMessage}, true
	}
	return nil, false
}

// do sends req, retrying as its class allows, and decodes the answer into out.
func (c *Client) do(ctx context.Context, req request, out envelope) error {
	payload := req.payload
	if req.body != nil {
		encoded, err := encodeJSON(req.body)
		if err != nil {
			return fmt.Errorf("restclient: %s: encoding request: %w", req.op, err)
		}
		payload = jsonBody(encoded)
	}
	began := c.clock.Now()
	var last error // the previous attempt's
	for attempt := 0; ; attempt++ {
		// The provider budget the context carries, if any
		// (upstream.Charge): a token per request sent, so retries and
		// each batch of a batched operation are charged too.
		if err := upstream.Pace(ctx); err != nil {
			if last != nil {
				return last // as when the wait before a retry is cut short
			}
			return fmt.Errorf("restclient: %s: waiting for the request budget: %w", req.op, err)
		}
		if err := c.limiter.wait(ctx); err != nil {
			return fmt.Errorf("restclient: %s: %w", req.op, err)
		}
		start := c.clock.Now()
		status, err := c.attempt(ctx, req, payload, out)
		last = err
		if c.observe != nil {
			c.observe(Event{Op: req.op, Attempt: attempt, StatusCode: status, Err: err, Duration: c.clock.Now().Sub(start)})
		}
		c.log.LogAttrs(ctx, slog.LevelDebug, "rest call", slog.String("op", req.op), slog.Int("attempt", attempt),
			slog.Int("status", status), slog.Duration("duration", c.clock.Now().Sub(start)), slog.Bool("ok", err == nil))
		var te *TemporaryError
		if err == nil || !errors.As(err, &te) || attempt >= c.maxRetries {
			return err
		}
		delay, ok := c.retryDelay(req.class, attempt, te)
		if !ok {
			return err
		}
		if dl, has := ctx.Deadline(); has && c.clock.Now().Add(delay).After(dl) {
			return err // the caller cannot wait that long; let it decide now
		}
		if te.StatusCode == http.StatusServiceUnavailable && te.RetryAfter == 0 && c.clock.Now().Add(delay).Sub(began) >= c.timeout {
			// A provider down for maintenance: a request, its waits
			// included, takes at most the request timeout, so a client's
			// SELECT fails within it and the client tries again itself.
			return err
		}
		if serr := c.clock.Sleep(ctx, delay); serr != nil {
			return err
		}
	}
}

// encodeJSON is the request body of v: JSON as json.Encoder writes it,
// HTML characters not escaped (addresses hold < and >), a final newline.
func encodeJSON(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	err := enc.Encode(v)
	return buf.Bytes(), err
}

// retryDelay is the client's retry policy (the documents show none): 429
// backs off 1 s, 2 s, 4 s
// (or Retry-After); 503 waits 30 to 60 s (or Retry-After); other 5xx and
// transport failures back off 1 s, 2 s, 4 s. Requests of class once are
// retried only when they surely were not processed.
func (c *Client) retryDelay(class retryClass, attempt int, te *TemporaryError) (time.Duration, bool) {
	if class == once && te.MayHaveReached {
		return 0, false
	}
	backoff := time.Second << attempt
	switch {
	case te.RetryAfter > 0:
		return min(te.RetryAfter, 2*time.Minute), true
	case te.StatusCode == http.StatusServiceUnavailable:
		return 30*time.Second + time.Duration(rand.Int64N(int64(30*time.Second))), true
	default:
		return backoff, true
	}
}

// attempt makes one HTTP exchange. It returns the HTTP status (0 if none).
func (c *Client) attempt(ctx context.Context, req request, payload body, out envelope) (int, error) {
	actx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	hreq, err := http.NewRequestWithContext(actx, req.method, req.url, nil)
	if err != nil {
		return 0, fmt.Errorf("restclient: %s: building request: %w", req.op, errors.Unwrap(err))
	}
	if payload != nil {
		hreq.Body = io.NopCloser(payload.Open())
		hreq.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(payload.Open()), nil }
		hreq.ContentLength = payload.Len()
		hreq.Header.Set("Content-Type", "application/json")
	}
	hreq.Header.Set("Accept", "application/json")
	hreq.Header.Set("User-Agent", c.userAgent)

	resp, err := c.http.Do(hreq)
	if err != nil {
		return 0, c.transportError(ctx, req.op, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, c.maxResponse+1))
	if err != nil {
		return resp.StatusCode, c.transportError(ctx, req.op, err)
	}
	if int64(len(data)) > c.maxResponse {
		return resp.StatusCode, &ProtocolError{Op: req.op, StatusCode: resp.StatusCode,
			Err: fmt.Errorf("response larger than %d bytes", c.maxResponse)}
	}
	if resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500 {
		return resp.StatusCode, &TemporaryError{
			Op:             req.op,
			StatusCode:     resp.StatusCode,
			RetryAfter:     parseRetryAfter(resp.Header.Get("Retry-After"), c.clock.Now()),
			MayHaveReached: resp.StatusCode != http.StatusTooManyRequests,
			Err:            fmt.Errorf("HTTP %d", resp.StatusCode),
		}
	}
	if err := json.Unmarshal(data, out); err != nil {
		return resp.StatusCode, &ProtocolError{Op: req.op, StatusCode: resp.StatusCode, Err: fmt.Errorf("decoding response: %w", err)}
	}
	ae, ok := apiError(req.op, out)
	if !ok {
		return resp.StatusCode, &ProtocolError{Op: req.op, StatusCode: resp.StatusCode,
			Err: fmt.Errorf("%T is not a response type", out)}
	}
	if ae != nil {
		if !hasSuccessField(data) {
			// Not the provider's envelope (e.g. a container's JSON error
			// page for a 404): success=false only by default.
			return resp.StatusCode, &ProtocolError{Op: req.op, StatusCode: resp.StatusCode,
				Err: errors.New("response has no success field")}
		}
		return resp.StatusCode, ae
	}
	if resp.StatusCode >= 300 {
		// success=true with an error status: believe the body, the status
		// may come from a proxy that rewrote it.
		c.log.LogAttrs(ctx, slog.LevelWarn, "rest call succeeded with HTTP error status",
			slog.String("op", req.op), slog.Int("status", resp.StatusCode))
	}
	return resp.StatusCode, nil
}

// hasSuccessField reports whether a JSON object carries a success member.
func hasSuccessField(data []byte) bool {
	var probe struct {
		Success *bool `json:"success"`
	}
	return json.Unmarshal(data, &probe) == nil && probe.Success != nil
}

// transportError classifies a failure with no HTTP answer. The URL, which
// may hold a registration sessionId, is dropped from the error chain.
func (c *Client) transportError(ctx context.Context, op string, err error) error {
	if ctx.Err() != nil {
		// The caller gave up; that is its decision, not a provider fault,
		// but the request may still have been carried out.
		return &CanceledError{Op: op, MayHaveReached: !notSent(err), Err: ctx.Err()}
	}
	var uerr *url.Error
	if errors.As(err, &uerr) {
		err = uerr.Err
	}
	return &TemporaryError{Op: op, MayHaveReached: !notSent(err), Err: err}
}

// notSent reports failures that happen before a request can reach the
// server: the connection was refused or could not be set up.
func notSent(err error) bool {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return true
	}
	var dns *net.DNSError
	return errors.As(err, &dns) || errors.Is(err, syscall.ECONNREFUSED)
}

// parseRetryAfter reads delta-seconds or an HTTP date (RFC 9110 §10.2.3).
func parseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if s, err := strconv.Atoi(v); err == nil && s >= 0 {
		return time.Duration(s) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}
