package enginetest

import (
	"context"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/directbridge/directbridge/imapbackend"
	"github.com/directbridge/directbridge/internal/login"
	"github.com/directbridge/directbridge/internal/mailstore"
	"github.com/directbridge/directbridge/internal/state"
	"github.com/directbridge/directbridge/upstream"
)

// startBridge serves the bridge's IMAP front on a loopback listener, on
// provider p, with a state store of its own, polling selected folders
// every poll (paced by a provider budget of budget requests a second
// when not 0: most polls then peek), and logging to log. It returns the address to dial and a
// function that stops the bridge and closes its store.
//
// It is the one place that knows how the engine is put together: when
// imapbackend.Config changes, this function changes and nothing else.
func startBridge(t testing.TB, p upstream.Provider, poll time.Duration, budget float64, log *slog.Logger) (addr string, stop func()) {
	t.Helper()
	store, err := state.OpenStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	cfg := mailstore.Config{Provider: p, State: store, PollInterval: poll, Logger: log}
	if budget > 0 {
		cfg.Budget = upstream.NewBudget(budget)
	}
	engine := mailstore.New(cfg)
	srv, err := imapbackend.New(imapbackend.Config{Engine: engine, Verifier: login.NewVerifier(p, time.Minute), Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan struct{})
	go func() {
		defer close(served)
		srv.ServePlain(l) // loopback: LOGIN without TLS
	}()
	return l.Addr().String(), func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
		<-served
		engine.Close(ctx)
		store.Close()
	}
}
