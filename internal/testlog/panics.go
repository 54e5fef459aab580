// Package testlog holds a slog handler for tests that must notice a panic
// the protocol libraries recover: go-imap and go-smtp recover a panic in
// a connection and only log it.
package testlog

import (
	"context"
	"log/slog"
	"strings"
	"sync"
)

// Panics records log lines whose message mentions a panic.
type Panics struct {
	mu     sync.Mutex
	panics []string
}

// Seen returns the panic lines logged so far.
func (p *Panics) Seen() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.panics...)
}

func (p *Panics) Enabled(context.Context, slog.Level) bool { return true }

func (p *Panics) Handle(_ context.Context, r slog.Record) error {
	if strings.Contains(strings.ToLower(r.Message), "panic") {
		p.mu.Lock()
		p.panics = append(p.panics, r.Message)
		p.mu.Unlock()
	}
	return nil
}

func (p *Panics) WithAttrs([]slog.Attr) slog.Handler { return p }
func (p *Panics) WithGroup(string) slog.Handler      { return p }
