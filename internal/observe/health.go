// Liveness and readiness checks. Liveness says the
// process serves; readiness says the provider answered a cheap request
// recently, so that an orchestrator sends mail clients only to a bridge
// that can reach its provider.

package observe

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/directbridge/directbridge/upstream"
	"github.com/directbridge/directbridge/upstream/directapi"
)

// Defaults of NewProber.
const (
	DefaultInterval = 15 * time.Second
	DefaultTimeout  = 5 * time.Second
)

// probeBody asks with empty credentials: the provider answers with its
// JSON envelope (success=false, code 1), which proves it is there, and no
// account is concerned.
var probeBody = []byte(`{"username":"","password":""}` + "\n")

// maxProbeBody bounds the answer read.
const maxProbeBody = 64 << 10

// Result is the outcome of one provider check.
type Result struct {
	Reachable bool      `json:"reachable"`
	CheckedAt time.Time `json:"checked_at"`
	// Duration of the check in seconds.
	Duration   float64 `json:"duration_seconds"`
	HTTPStatus int     `json:"http_status,omitempty"`
	// Error says why the provider counts as unreachable; it names no
	// URL and no credential.
	Error string `json:"error,omitempty"`
}

// Prober checks the provider every interval with an unauthenticated
// GetMessageCount(INBOX): any answer in the provider's JSON envelope,
// success or not, means reachable; a transport failure, a timeout, HTTP 5xx
// or an answer that is not the provider's (a proxy's error page, a wrong
// base URL) means unreachable. Its requests bypass the REST client, so they
// do not show in its metrics, and the periodic ones do not wait for the
// provider budget; one asked for the admin socket does (Check).
type Prober struct {
	url      string
	http     *http.Client
	interval time.Duration
	timeout  time.Duration
	now      func() time.Time

	mu   sync.Mutex
	last Result
}

// NewProber returns a Prober for the provider at baseURL (the same base URL
// as the REST client's). Zero interval or timeout means the default.
func NewProber(baseURL string, interval, timeout time.Duration) *Prober {
	if interval <= 0 {
		interval = DefaultInterval
	}
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 1
	return &Prober{
		url:      strings.TrimRight(baseURL, "/") + directapi.MessagingPath + "/GetMessageCount/INBOX",
		http:     &http.Client{Transport: tr, Timeout: timeout},
		interval: interval,
		timeout:  timeout,
		now:      time.Now,
	}
}

// Run checks at once and then every interval until ctx ends.
func (p *Prober) Run(ctx context.Context) {
	t := time.NewTicker(p.interval)
	defer t.Stop()
	for {
		p.Check(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Check asks the provider once and remembers the result. A check cut
// short by ctx is not remembered.
func (p *Prober) Check(ctx context.Context) Result {
	// A check asked for someone (the admin socket's health) first waits
	// for the provider budget its context carries (upstream.Charge), out
	// of the check's time and timeout: a busy budget is not an
	// unreachable provider. The periodic check carries none.
	if err := upstream.Pace(ctx); err != nil {
		return Result{CheckedAt: p.now(), Error: "waiting for the provider budget: " + err.Error()}
	}
	start := p.now()
	status, err := p.ask(ctx)
	r := Result{Reachable: err == nil, CheckedAt: start, Duration: p.now().Sub(start).Seconds(), HTTPStatus: status}
	if err != nil {
		r.Error = err.Error()
	}
	if ctx.Err() == nil {
		p.mu.Lock()
		p.last = r
		p.mu.Unlock()
	}
	return r
}

func (p *Prober) ask(ctx context.Context) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.url, bytes.NewReader(probeBody))
	if err != nil {
		return 0, errors.New("bad provider URL")
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "directbridge-health")
	resp, err := p.http.Do(req)
	if err != nil {
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err // without the URL
		}
		return 0, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxProbeBody))
	if err != nil {
		return resp.StatusCode, fmt.Errorf("reading the answer: %w", err)
	}
	if resp.StatusCode >= 500 {
		return resp.StatusCode, fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	var env struct {
		Success *bool `json:"success"`
	}
	if json.Unmarshal(data, &env) != nil || env.Success == nil {
		return resp.StatusCode, fmt.Errorf("HTTP %d without the provider's JSON envelope", resp.StatusCode)
	}
	return resp.StatusCode, nil
}

// Probe is Check as the admin socket's health takes it: how long the
// check took, and why the provider counts as unreachable, if it does.
func (p *Prober) Probe(ctx context.Context) (time.Duration, error) {
	r := p.Check(ctx)
	d := time.Duration(r.Duration * float64(time.Second))
	if !r.Reachable {
		return d, errors.New(r.Error)
	}
	return d, nil
}

// Last returns the latest result (the zero Result before the first check).
func (p *Prober) Last() Result {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.last
}

// Ready reports whether the latest check found the provider reachable and
// is recent: not older than two intervals plus a timeout, so that a stuck
// checker does not keep an old success alive. The reason is empty when ready.
func (p *Prober) Ready() (ready bool, reason string) {
	last := p.Last()
	switch {
	case last.CheckedAt.IsZero():
		return false, "provider not checked yet"
	case p.now().Sub(last.CheckedAt) > 2*p.interval+p.timeout:
		return false, "last provider check too old"
	case !last.Reachable:
		return false, "provider unreachable"
	}
	return true, ""
}

// Reachable is Ready without the reason, e.g. for a metrics gauge.
func (p *Prober) Reachable() bool {
	ok, _ := p.Ready()
	return ok
}

// readiness is the body of a readiness answer.
type readiness struct {
	Ready    bool    `json:"ready"`
	Reason   string  `json:"reason,omitempty"`
	Provider *Result `json:"provider,omitempty"`
	// State is the state store's answer, when the handler checks one.
	State *Dependency `json:"state,omitempty"`
}

// Dependency is what a local dependency of readiness answered.
type Dependency struct {
	Reachable bool   `json:"reachable"`
	Error     string `json:"error,omitempty"`
}

// stateCheckTimeout bounds the state store's check in a readiness answer.
const stateCheckTimeout = 2 * time.Second

// ReadyHandler answers 200 when Ready, else 503, with the latest check as
// JSON in both cases. With state, the state store is asked too, at each
// request (a local call: cheap), and a store that does not answer makes
// the bridge not ready: a replica that cannot reach its state store could
// only guess UIDs and journal entries, and the balancer should send
// clients elsewhere.
func (p *Prober) ReadyHandler(state func(context.Context) error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ready, reason := p.Ready()
		body := readiness{Ready: ready, Reason: reason}
		if last := p.Last(); !last.CheckedAt.IsZero() {
			body.Provider = &last
		}
		if state != nil {
			ctx, cancel := context.WithTimeout(r.Context(), stateCheckTimeout)
			err := state(ctx)
			cancel()
			body.State = &Dependency{Reachable: err == nil}
			if err != nil {
				// Not the error's text: an unauthenticated endpoint,
				// and a driver's error names users, databases, hosts.
				body.State.Error = "does not answer a query"
				if body.Ready {
					body.Ready, body.Reason = false, "state store unreachable"
				}
			}
		}
		ready = body.Ready
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		if !ready {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		json.NewEncoder(w).Encode(body)
	})
}

// LiveHandler answers 200 "ok" for as long as the process serves HTTP.
func LiveHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		io.WriteString(w, "ok\n")
	})
}
