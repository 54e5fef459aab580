//go:build pprof

package main

// Built with -tags pprof, the daemon serves net/http/pprof on the
// loopback address in DIRECTBRIDGE_PPROF_ADDR (e.g. 127.0.0.1:6060), for
// profiling under load (BENCHMARKS.md's figures were investigated so).
// Never in a release build: profiles can hold message data.

import (
	"log/slog"
	"net"
	"net/http"
	_ "net/http/pprof"
	"os"
	"runtime"
	"time"
)

func init() {
	addr := os.Getenv("DIRECTBRIDGE_PPROF_ADDR")
	if addr == "" {
		return
	}
	if host, _, err := net.SplitHostPort(addr); err != nil || !net.ParseIP(host).IsLoopback() {
		slog.Error("DIRECTBRIDGE_PPROF_ADDR must be a loopback address", "addr", addr)
		return
	}
	// Where commands wait (locks, channels) rather than spend CPU:
	// /debug/pprof/block and /debug/pprof/mutex, sampled finely enough
	// to tell one wait from another under imaptest's stress.
	runtime.SetBlockProfileRate(int(100 * time.Microsecond))
	runtime.SetMutexProfileFraction(10)
	go func() {
		if err := http.ListenAndServe(addr, nil); err != nil {
			slog.Error("pprof listener", "err", err)
		}
	}()
}
