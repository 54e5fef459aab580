package bridge

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/directbridge/directbridge/imapbackend"
	"github.com/directbridge/directbridge/internal/observe"
	"github.com/directbridge/directbridge/restclient"
	"github.com/directbridge/directbridge/smtpbackend"
	"github.com/directbridge/directbridge/upstream"
)

// MetricsListener is the name of the metrics and health listener, for Addr.
const MetricsListener = "Metrics and health (HTTP)"

// observer is the metrics and health HTTP server: /metrics (Prometheus),
// /healthz (liveness) and /readyz (readiness: the provider answers). A nil
// observer (DIRECTBRIDGE_METRICS_ADDR empty or off) does nothing.
type observer struct {
	metrics *observe.Registry
	srv     *http.Server
	prober  *observe.Prober
	ctx     context.Context // ends the prober
	stop    context.CancelFunc
}

// newObserver returns the observer with its metrics registry, or nil when
// DIRECTBRIDGE_METRICS_ADDR is empty or off.
func newObserver(cfg Config) *observer {
	if cfg.MetricsAddr == "" || cfg.MetricsAddr == Off {
		return nil
	}
	return &observer{metrics: observe.NewRegistry()}
}

// restObserver feeds REST attempts to the metrics (nil when off).
func (o *observer) restObserver() func(restclient.Event) {
	if o == nil {
		return nil
	}
	return o.metrics.ObserveREST
}

// imapMetrics and smtpMetrics return the fronts' recorders, or an untyped
// nil when metrics are off.
func (o *observer) imapMetrics() imapbackend.Metrics {
	if o == nil {
		return nil
	}
	return o.metrics.IMAP()
}

// engine registers the gauges of the IMAP engine's polling and of the
// provider budget.
func (o *observer) engine(imap *imapbackend.Server, budget *upstream.Budget) {
	if o == nil {
		return
	}
	o.metrics.Polling(imap.PollStats)
	o.metrics.Budget(budget)
}

// pollObserver feeds the engine's polls to the metrics (nil when off).
func (o *observer) pollObserver() func(time.Duration, string, bool) {
	if o == nil {
		return nil
	}
	return o.metrics.ObservePoll
}

func (o *observer) smtpMetrics() smtpbackend.Metrics {
	if o == nil {
		return nil
	}
	return o.metrics.SMTP()
}

// open binds the metrics and health listener and adds it to b's listeners,
// which Run serves; the readiness check is b's prober, run from here.
func (o *observer) open(b *Bridge) error {
	if o == nil {
		return nil
	}
	l, err := net.Listen("tcp", b.cfg.MetricsAddr)
	if err != nil {
		return fmt.Errorf("%s: %w", MetricsListener, err)
	}
	o.prober = b.prober
	o.ctx, o.stop = context.WithCancel(context.Background())
	o.metrics.ProviderReachable(o.prober.Reachable)
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", o.metrics.Handler())
	mux.Handle("GET /healthz", observe.LiveHandler())
	mux.Handle("GET /readyz", o.prober.ReadyHandler(b.store.Ping))
	o.srv = &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(b.log.With("component", "metrics").Handler(), slog.LevelWarn),
	}
	b.listeners = append(b.listeners, namedListener{MetricsListener, l, o.serve})
	return nil
}

// serve answers HTTP on l and checks the provider until shutdown.
func (o *observer) serve(l net.Listener) error {
	done := make(chan struct{})
	go func() {
		defer close(done)
		o.prober.Run(o.ctx)
	}()
	err := o.srv.Serve(l)
	o.stop()
	<-done
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// shutdown stops the server (answering requests in progress until ctx
// ends) and the provider checks. It does nothing when the server is off.
func (o *observer) shutdown(ctx context.Context) error {
	if o == nil || o.srv == nil {
		return nil
	}
	o.stop()
	return o.srv.Shutdown(ctx)
}
