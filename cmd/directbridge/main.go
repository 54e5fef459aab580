// Command directbridge runs the bridge between mail software and a Direct
// provider's REST API, and the local sandbox provider.
//
// Usage:
//
//	directbridge [serve]   run the bridge (on the embedded sandbox without DIRECTBRIDGE_API_URL)
//	directbridge sandbox   run the sandbox provider alone (both REST services)
//	directbridge admin     registration, delivery status and health through the running bridge's admin socket
//	directbridge version   print the version
//	directbridge help      list every environment variable with its default
//
// All configuration comes from environment variables prefixed DIRECTBRIDGE_.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"
	"text/tabwriter"

	"github.com/kelseyhightower/envconfig"

	"github.com/directbridge/directbridge/bridge"
	"github.com/directbridge/directbridge/internal/admin"
	"github.com/directbridge/directbridge/internal/gctune"
	"github.com/directbridge/directbridge/sandbox"
)

// version is set at build time with -ldflags "-X main.version=v1.2.3".
var version = ""

// envPrefix is the prefix of every environment variable.
const envPrefix = bridge.EnvPrefix

// commonConfig holds what every subcommand reads.
type commonConfig struct {
	LogLevel  string `envconfig:"LOG_LEVEL" default:"info" desc:"log level: debug, info, warn or error"`
	LogFormat string `envconfig:"LOG_FORMAT" default:"text" desc:"log format: text or json"`
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run executes a subcommand and returns the exit status: 0 success,
// 1 failure while running, 2 bad usage or configuration.
func run(args []string, stdout, stderr io.Writer) int {
	cmd := "serve"
	if len(args) > 0 {
		cmd = args[0]
	}
	switch cmd {
	case "serve":
		return runServe(stdout, stderr)
	case "sandbox":
		return runSandbox(stdout, stderr)
	case "admin":
		return runAdmin(args[1:], os.Stdin, stdout, stderr)
	case "state":
		return runState(args[1:], stdout, stderr)
	case "version", "-version", "--version":
		fmt.Fprintln(stdout, "directbridge", versionString())
		return 0
	case "help", "-h", "-help", "--help":
		usage(stdout)
		return 0
	default:
		fmt.Fprintf(stderr, "directbridge: unknown command %q\n\n", cmd)
		usage(stderr)
		return 2
	}
}

func usage(w io.Writer) {
	fmt.Fprint(w, `directbridge bridges mail software (IMAP, SMTP) to a Direct provider's REST API.

Commands:
  serve     run the bridge (the default); without DIRECTBRIDGE_API_URL it runs on
            an embedded sandbox provider with demo mailboxes
  sandbox   run the local sandbox provider alone (messaging and registration REST services)
  admin     talk to the running bridge over its admin socket: provision patient
            addresses, look them up, set passwords, delivery status, health
            (directbridge admin help)
  state     state copy --to postgres://...: move the data directory's state
            store into PostgreSQL, UIDVALIDITYs unchanged (directbridge state)
  version   print the version
  help      print this help

Configuration is read from these environment variables:

`)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "VARIABLE\tDEFAULT\tMEANING")
	for _, spec := range []any{&commonConfig{}, &bridge.Config{}} {
		envconfig.Usagef(envPrefix, spec, tw, "{{range .}}{{usage_key .}}\t{{usage_default .}}\t{{usage_description .}}\n{{end}}")
	}
	tw.Flush()
}

func versionString() string {
	if version != "" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		if bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			return bi.Main.Version
		}
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 12 {
				return "devel-" + s.Value[:12]
			}
		}
	}
	return "devel"
}

// newLogger builds the process logger from the common configuration.
func newLogger(c commonConfig, w io.Writer) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(c.LogLevel)); err != nil {
		return nil, fmt.Errorf("DIRECTBRIDGE_LOG_LEVEL: %q is not debug, info, warn or error", c.LogLevel)
	}
	opts := &slog.HandlerOptions{Level: level}
	switch strings.ToLower(c.LogFormat) {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("DIRECTBRIDGE_LOG_FORMAT: %q is not text or json", c.LogFormat)
}

// readConfig fills specs from the environment and builds the logger. It
// prints one line per problem and reports whether there was none.
func readConfig(stderr io.Writer, specs ...any) (*slog.Logger, bool) {
	var common commonConfig
	var problems []string
	for _, spec := range append([]any{&common}, specs...) {
		if err := bridge.ReadEnv(spec); err != nil {
			problems = append(problems, err.Error())
		}
	}
	log, err := newLogger(common, stderr)
	if err != nil {
		problems = append(problems, err.Error())
	}
	for _, p := range problems {
		fmt.Fprintln(stderr, "directbridge: configuration:", p)
	}
	return log, len(problems) == 0
}

// runServe runs the bridge until SIGINT or SIGTERM.
func runServe(stdout, stderr io.Writer) int {
	tuneGC()
	log, ok := readConfig(stderr)
	cfg, err := bridge.ConfigFromEnv()
	if err != nil {
		fmt.Fprintln(stderr, "directbridge: configuration:", err)
		ok = false
	}
	if !ok {
		return 2
	}
	b, err := bridge.New(cfg, log, stdout)
	if err != nil {
		for _, line := range strings.Split(err.Error(), "\n") {
			fmt.Fprintln(stderr, "directbridge:", line)
		}
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := b.Run(ctx); err != nil {
		fmt.Fprintln(stderr, "directbridge:", err)
		return 1
	}
	return 0
}

// runSandbox serves the sandbox provider until SIGINT or SIGTERM.
func runSandbox(stdout, stderr io.Writer) int {
	var cfg sandbox.Config
	log, ok := readConfig(stderr, &cfg)
	if !ok {
		return 2
	}
	opts, demo, err := cfg.Options()
	if err != nil {
		fmt.Fprintln(stderr, "directbridge: configuration:", err)
		return 2
	}
	opts.Logger = log
	l, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		fmt.Fprintln(stderr, "directbridge: sandbox:", err)
		return 2
	}
	srv, err := sandbox.Open(opts)
	if err != nil {
		l.Close()
		fmt.Fprintln(stderr, "directbridge:", err)
		return 1
	}
	defer srv.Close()

	base := "http://" + l.Addr().String()
	fmt.Fprintf(stdout, "directbridge sandbox %s\n", versionString())
	fmt.Fprintf(stdout, "  base URL:      %s\n", base)
	fmt.Fprintf(stdout, "  messaging:     %s%s/...\n", base, "/message-rest/api/message")
	fmt.Fprintf(stdout, "  registration:  %s%s/...\n", base, "/DirectRegistrationRESTful/rest/Patient")
	fmt.Fprintf(stdout, "  domain:        %s\n", srv.Domain())
	if d := srv.Latency(); d > 0 {
		fmt.Fprintf(stdout, "  latency:       %s added to every answer\n", d)
	}
	if cfg.Data == "" {
		fmt.Fprintln(stdout, "  data:          temporary (removed at exit; set DIRECTBRIDGE_SANDBOX_DATA to keep it)")
	} else {
		fmt.Fprintf(stdout, "  data:          %s\n", srv.Dir())
	}
	for _, u := range opts.Users {
		if demo {
			fmt.Fprintf(stdout, "  mailbox:       %s  password %s (demo)\n", u.Name, u.Password)
		} else {
			fmt.Fprintf(stdout, "  mailbox:       %s\n", u.Name)
		}
	}
	for _, r := range opts.Resellers {
		if r == sandbox.DemoReseller {
			fmt.Fprintf(stdout, "  registration:  account %s  password %s (demo)\n", r.Name, r.Password)
		} else {
			fmt.Fprintf(stdout, "  registration:  account %s\n", r.Name)
		}
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := srv.Serve(ctx, l); err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintln(stderr, "directbridge: sandbox:", err)
		return 1
	}
	return 0
}

// tuneGC sets the daemon's garbage-collection target when GOGC is not
// set: after each collection the heap may grow by 16 MiB, or by half
// of what is live when that is more, at most 300% (package gctune;
// 16 MiB keeps a 20 MB APPEND within its memory bound, memory_test.go). Go's default
// share of 100% left the first sync of a 50,000-message folder 30%
// larger (BENCHMARKS.md, scenario 4), and a share of 50% alone made a
// small heap under many short commands collect every few megabytes,
// a tenth of the CPU. GOGC and GOMEMLIMIT, when set, are the
// operator's and win. Set in the daemon only: a program that embeds the
// bridge keeps its own.
func tuneGC() {
	if _, set := os.LookupEnv("GOGC"); !set {
		gctune.Start(gctune.Config{Percent: 50, Headroom: 16 << 20, MaxPercent: 300})
	}
}

// runAdmin runs `directbridge admin ...` (package internal/admin) with the
// daemon's rule for where the socket is.
func runAdmin(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return admin.RunCLI(args, stdin, stdout, stderr, func() string {
		cfg := bridge.Config{AdminSocket: os.Getenv("DIRECTBRIDGE_ADMIN_SOCKET"), DataDir: os.Getenv("DIRECTBRIDGE_DATA_DIR")}
		return cfg.AdminSocketPath()
	})
}
