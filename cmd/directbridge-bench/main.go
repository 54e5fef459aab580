// Command directbridge-bench measures the bridge from outside, with real
// protocol clients, and writes BENCHMARKS.md: the machine, the date, the
// commit, and every figure of issue 8's "Targets" table beside its target.
//
// It builds the directbridge binary (or uses -bin), starts the sandbox
// provider as a process of its own (`directbridge sandbox`) and the bridge
// as another, pointed at the sandbox as at a real provider
// (DIRECTBRIDGE_API_URL), so that the bridge's memory (VmRSS and VmHWM from
// /proc) is measured apart from the sandbox's. Where a scenario says
// "embedded sandbox, default settings" the bridge runs on its embedded
// sandbox instead. Mailboxes are seeded through the provider's REST API
// (SaveRawMessages in batches); added provider latency comes from a small
// delaying reverse proxy between the bridge and the sandbox. REST calls are
// read from the bridge's /metrics (directbridge_rest_requests_total), IMAP
// commands from directbridge_imap_commands_total.
//
// Reproduce (from the repository root):
//
//	go run ./cmd/directbridge-bench -out BENCHMARKS.md            # full run, 15-25 minutes on 2 cores
//	go run ./cmd/directbridge-bench -quick -out /tmp/bench.md      # small sizes, under a minute, what CI runs
//	go run ./cmd/directbridge-bench -run 'sync10k|idle' -out /tmp/b.md
//	go run ./cmd/directbridge-bench -rev cd284d7 -out /tmp/before.md  # measure an older commit
//	go run ./cmd/directbridge-bench -before BENCHMARKS.md -out BENCHMARKS.md  # keep the old figures as a "before" column
//
// The full run compares with Dovecot (-dovecot, on by default; skipped with
// a note when dovecot is not installed) and runs imaptest through
// ../shared/tools/imaptest/run.sh (-imaptest PATH; skipped when absent).
// Figures are never asserted in go test: time is measured only here.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"regexp"
	"syscall"
	"time"
)

// options are the command-line settings of one run.
type options struct {
	quick    bool
	run      *regexp.Regexp
	out      string
	bin      string
	rev      string
	before   *previous
	dovecot  bool
	imaptest string
	label    string
	keep     bool
	verbose  bool
	testdata string

	imaptestSecs, imaptestRounds int
	mboxMsgs                     int
	replicaParts                 string // the replicas scenario's parts to run (-replicas-parts)

	oneByOneMsgs int

	sync10kMsgs, syncBodies int
	sync10kLatency          time.Duration

	sync50kMsgs int

	idleUsers, idleSamples int
	idleGap                time.Duration
	idlePoll               string

	manyUsers, manySamples int
	manyLatency            time.Duration

	hugeUsers, pollSamples, fetchmailMsgs int
	pollGap                               time.Duration

	connMsgs, connCount int

	smtpClients, smtpMsgs int
}

func main() {
	os.Exit(run())
}

func run() int {
	raiseFileLimit()
	var o options
	var runRE, beforePath string
	flag.BoolVar(&o.quick, "quick", false, "small sizes, no Dovecot, no imaptest: a few seconds to under a minute (what CI runs)")
	flag.StringVar(&runRE, "run", "", "regular expression selecting scenarios by name: imaptest, onebyone, sync10k, sync50k, idle, manyidle, connmem, smtp, replicas, smtpsizes, polling")
	flag.StringVar(&o.out, "out", "", "file to write the report to (e.g. BENCHMARKS.md); empty: standard output")
	flag.StringVar(&o.bin, "bin", "", "directbridge binary to measure; empty: go build ./cmd/directbridge into a temporary directory")
	flag.StringVar(&o.rev, "rev", "", "git revision of this repository to build and measure (e.g. a commit before a change, for a before/after pair on one machine); empty: the working tree")
	flag.BoolVar(&o.dovecot, "dovecot", true, "compare with a private Dovecot where the table asks for it (skipped with a note when dovecot is not installed; off in -quick)")
	flag.StringVar(&o.imaptest, "imaptest", "../shared/tools/imaptest/run.sh", "imaptest run.sh (see its README); skipped with a note when absent; empty or -quick: skipped")
	flag.IntVar(&o.imaptestSecs, "imaptest-secs", 10, "length of each imaptest stress run, seconds")
	flag.IntVar(&o.imaptestRounds, "imaptest-rounds", 2, "imaptest interleaved stress rounds")
	flag.IntVar(&o.mboxMsgs, "imaptest-mbox-msgs", 5000, "distinct messages in the mbox imaptest's stress runs APPEND from")
	flag.StringVar(&o.replicaParts, "replicas-parts", "idle,calls,kill,copy,imaptest", "the parts of the replicas scenario to run (rows of parts left out read \"not run\"), for working on one of them")
	flag.StringVar(&beforePath, "before", "", "an earlier report (e.g. BENCHMARKS.md with the baseline figures, read before -out is written): its figures become a \"before\" column")
	flag.StringVar(&o.label, "label", "", "a line printed at the top of the report (e.g. \"Baseline: main before the mailstore engine\")")
	flag.BoolVar(&o.keep, "keep", false, "keep the work directory (logs of bridge, sandbox, Dovecot, imaptest)")
	flag.BoolVar(&o.verbose, "v", false, "progress on standard error")
	flag.StringVar(&o.testdata, "testdata", "../shared/testdata", "directory of real documents used as attachments (see its README for licences); synthetic ones when absent")
	flag.IntVar(&o.oneByOneMsgs, "onebyone-msgs", 2000, "messages of the one-message-per-command fetch")
	flag.IntVar(&o.sync10kMsgs, "sync10k-msgs", 10000, "messages of the first-sync scenario with added latency")
	flag.IntVar(&o.syncBodies, "sync-bodies", 200, "bodies fetched at the end of a first sync")
	flag.DurationVar(&o.sync10kLatency, "sync10k-latency", 20*time.Millisecond, "added provider latency of the first-sync scenario")
	flag.IntVar(&o.sync50kMsgs, "sync50k-msgs", 50000, "messages of the large-folder scenario")
	flag.IntVar(&o.idleUsers, "idle-users", 8, "IDLE clients (one user each) receiving new mail in parallel")
	flag.IntVar(&o.idleSamples, "idle-samples", 40, "new-mail samples in all (spread over the IDLE users)")
	flag.DurationVar(&o.idleGap, "idle-gap", 20*time.Second, "largest random wait before each new message")
	flag.StringVar(&o.idlePoll, "idle-poll", "", "DIRECTBRIDGE_POLL_INTERVAL of the IDLE scenario; empty: the bridge's default")
	flag.IntVar(&o.manyUsers, "many-users", 1000, "idle users of the many-idle-users scenario")
	flag.IntVar(&o.manySamples, "many-samples", 150, "uncached fetches of the active user")
	flag.DurationVar(&o.manyLatency, "many-latency", 20*time.Millisecond, "added provider latency of the many-idle-users scenario")
	flag.IntVar(&o.hugeUsers, "poll-huge-users", 4800, "idle users of the largest polling case (issue 22 asks for 5,000; a bridge gives each of its four listeners a quarter of the file limit, and this machine's hard limit of 20,000 leaves about 4,950 IMAP connections)")
	flag.IntVar(&o.pollSamples, "poll-samples", 100, "new-mail samples of the 1,000- and 5,000-user polling cases")
	flag.DurationVar(&o.pollGap, "poll-gap", 30*time.Second, "largest random wait before each new message of the 1,000-user polling case (twice that for the largest)")
	flag.IntVar(&o.fetchmailMsgs, "fetchmail-msgs", 2300, "read messages of the fetchmail-style session")
	flag.IntVar(&o.connMsgs, "connmem-msgs", 10000, "messages of the folder the idle connections select")
	flag.IntVar(&o.connCount, "connmem-conns", 200, "idle connections whose memory is measured")
	flag.IntVar(&o.smtpClients, "smtp-clients", 4, "parallel SMTP clients and parallel direct Send callers")
	flag.IntVar(&o.smtpMsgs, "smtp-msgs", 200, "messages sent each way")
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "directbridge-bench: unexpected arguments:", flag.Args())
		return 2
	}
	if o.quick {
		o.applyQuick()
	}
	re, err := regexp.Compile(runRE)
	if err != nil {
		fmt.Fprintln(os.Stderr, "directbridge-bench: -run:", err)
		return 2
	}
	o.run = re
	if beforePath != "" {
		if o.before, err = readPrevious(beforePath); err != nil {
			fmt.Fprintln(os.Stderr, "directbridge-bench: -before:", err)
			return 2
		}
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	b, err := newBench(ctx, o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "directbridge-bench:", err)
		return 1
	}
	defer b.close()
	rep := b.runAll(ctx)
	if err := rep.write(o.out); err != nil {
		fmt.Fprintln(os.Stderr, "directbridge-bench:", err)
		return 1
	}
	if rep.failed() {
		fmt.Fprintln(os.Stderr, "directbridge-bench: some scenarios failed (see the report)")
		return 1
	}
	return 0
}

// applyQuick shrinks every size so that the whole program runs in well under
// a minute with only Go and python3 installed: it checks that the program
// still works, not how fast the bridge is.
func (o *options) applyQuick() {
	set := map[string]bool{}
	flag.Visit(func(f *flag.Flag) { set[f.Name] = true })
	def := func(name string, p *int, v int) {
		if !set[name] {
			*p = v
		}
	}
	def("onebyone-msgs", &o.oneByOneMsgs, 60)
	def("sync10k-msgs", &o.sync10kMsgs, 300)
	def("sync-bodies", &o.syncBodies, 20)
	def("sync50k-msgs", &o.sync50kMsgs, 500)
	def("idle-users", &o.idleUsers, 2)
	def("idle-samples", &o.idleSamples, 4)
	def("many-users", &o.manyUsers, 20)
	def("many-samples", &o.manySamples, 20)
	def("poll-huge-users", &o.hugeUsers, 40)
	def("poll-samples", &o.pollSamples, 10)
	def("fetchmail-msgs", &o.fetchmailMsgs, 100)
	def("connmem-msgs", &o.connMsgs, 300)
	def("connmem-conns", &o.connCount, 10)
	def("smtp-msgs", &o.smtpMsgs, 20)
	if !set["idle-gap"] {
		o.idleGap = 500 * time.Millisecond
	}
	if !set["poll-gap"] {
		o.pollGap = 2 * time.Second
	}
	if !set["idle-poll"] {
		o.idlePoll = "1s"
	}
	if !set["many-latency"] {
		o.manyLatency = 5 * time.Millisecond
	}
	if !set["sync10k-latency"] {
		o.sync10kLatency = 5 * time.Millisecond
	}
	o.dovecot = false
	o.imaptest = ""
}

// raiseFileLimit lifts this process's file limit, soft and hard, to
// 65,536 when it may (root), else the soft one to the hard: the polling
// scenario holds 5,000 IMAP connections on each side, and the bridges
// it starts inherit the limit (a bridge gives each of its four
// listeners a quarter of it, internal/limits).
func raiseFileLimit() {
	var lim syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim) != nil {
		return
	}
	want := max(lim.Max, 65536)
	if syscall.Setrlimit(syscall.RLIMIT_NOFILE, &syscall.Rlimit{Cur: want, Max: want}) != nil {
		lim.Cur = lim.Max
		syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim)
	}
}
