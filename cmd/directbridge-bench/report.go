package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"sort"
	"strings"
	"time"
)

// row is one line of the results table, as in issue 8's "Targets" table.
type row struct {
	scenario, target string // fixed by the scenario
	measured, met    string // filled by its run
}

// outcome is what one scenario measured.
type outcome struct {
	rows     []row    // measured and met filled, in the scenario's order
	notes    []string // how it was measured, settings, secondary figures
	appendix string   // a longer text (imaptest's summary.md)
}

// scenario is one entry of the table.
type scenario struct {
	name  string // for -run
	title string
	rows  []row // scenario and target of each table row
	fn    func(ctx context.Context, b *bench, out *outcome) error
}

type result struct {
	s   scenario
	out *outcome
	err error
	dur time.Duration
}

type report struct {
	b       *bench
	results []result
	wall    time.Duration
}

func (b *bench) runAll(ctx context.Context) *report {
	rep := &report{b: b}
	t0 := time.Now()
	for _, s := range scenarios() {
		if !b.o.run.MatchString(s.name) {
			continue
		}
		if ctx.Err() != nil {
			break
		}
		b.logf("scenario %s", s.name)
		out := &outcome{rows: append([]row(nil), s.rows...)}
		st := time.Now()
		err := s.fn(ctx, b, out)
		r := result{s: s, out: out, err: err, dur: time.Since(st)}
		if err != nil {
			b.logf("scenario %s failed: %v", s.name, err)
		} else {
			b.logf("scenario %s done in %s", s.name, r.dur.Round(time.Second))
		}
		rep.results = append(rep.results, r)
	}
	rep.wall = time.Since(t0)
	return rep
}

func (r *report) failed() bool {
	for _, x := range r.results {
		if x.err != nil {
			return true
		}
	}
	return false
}

func (r *report) write(path string) error {
	text := r.render()
	if path == "" {
		_, err := os.Stdout.WriteString(text)
		return err
	}
	return os.WriteFile(path, []byte(text), 0o644)
}

func (r *report) render() string {
	var w strings.Builder
	b := r.b
	w.WriteString("# Benchmarks\n\n")
	if b.o.label != "" {
		fmt.Fprintf(&w, "**%s**\n\n", b.o.label)
	}
	w.WriteString("Measured by `cmd/directbridge-bench` (README, \"Benchmarks\", says how to re-run it), from outside the bridge with real protocol clients. The targets are the \"Targets\" tables of issues 8, 21 and 22.")
	if b.o.quick {
		w.WriteString(" **This is a `-quick` run: tiny sizes, its figures mean nothing.**")
	}
	w.WriteString("\n\n")
	w.WriteString("## Machine and run\n\n")
	for _, l := range r.machine() {
		fmt.Fprintf(&w, "- %s\n", l)
	}
	w.WriteString("\n## Results\n\n")
	pv := b.o.before
	if pv != nil {
		fmt.Fprintf(&w, "\"before\" is from %s (%s; %s).\n\n", pv.path, pv.commit, pv.date)
		w.WriteString("| scenario | before | measured | target | met? |\n|---|---|---|---|---|\n")
	} else {
		w.WriteString("| scenario | measured | target | met? |\n|---|---|---|---|\n")
	}
	for _, x := range r.results {
		for _, rw := range x.out.rows {
			if pv != nil {
				old := pv.measured[rw.scenario]
				if old == "" {
					old = "-"
				}
				fmt.Fprintf(&w, "| %s | %s ", rw.scenario, old)
				rw.scenario = ""
			}
			m, met := rw.measured, rw.met
			if x.err != nil && m == "" {
				m, met = "failed: "+oneLine(x.err.Error()), "n/a"
			}
			if m == "" {
				m = "not measured"
			}
			if met == "" {
				met = "n/a"
			}
			if pv == nil {
				fmt.Fprintf(&w, "| %s ", rw.scenario)
			}
			fmt.Fprintf(&w, "| %s | %s | %s |\n", m, rw.target, met)
		}
	}
	w.WriteString("\n## How each figure was measured\n")
	for _, x := range r.results {
		fmt.Fprintf(&w, "\n### %s (`-run %s`, %s)\n\n", x.s.title, x.s.name, x.dur.Round(time.Second))
		for _, n := range x.out.notes {
			fmt.Fprintf(&w, "- %s\n", n)
		}
		if x.err != nil {
			fmt.Fprintf(&w, "- **failed:** %s\n", oneLine(x.err.Error()))
		}
	}
	for _, x := range r.results {
		if x.out.appendix != "" {
			fmt.Fprintf(&w, "\n## Appendix: %s\n\n%s\n", x.s.title, strings.TrimSpace(x.out.appendix))
		}
	}
	return w.String()
}

func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return strings.ReplaceAll(s, "|", "/")
}

// machine describes the machine, the date, the commit and the settings.
func (r *report) machine() []string {
	b := r.b
	var out []string
	cpu := "unknown"
	if data, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(data), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				cpu = strings.TrimSpace(v)
				break
			}
		}
	}
	ram := "unknown"
	if data, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, l := range strings.Split(string(data), "\n") {
			if f := strings.Fields(l); len(f) >= 2 && f[0] == "MemTotal:" {
				var kb int64
				fmt.Sscan(f[1], &kb)
				ram = fmt.Sprintf("%.1f GiB", float64(kb)/(1<<20))
			}
		}
	}
	kernel := "unknown"
	if data, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		kernel = strings.TrimSpace(string(data))
	}
	out = append(out, fmt.Sprintf("machine: %s, %d cores, %s RAM, Linux %s, %s/%s", cpu, runtime.NumCPU(), ram, kernel, runtime.GOOS, runtime.GOARCH))
	if load, err := os.ReadFile("/proc/loadavg"); err == nil {
		out = append(out, "load average at the end (1, 5, 15 min): "+strings.Join(strings.Fields(string(load))[:3], ", ")+" (the machine is shared: other work was running)")
	}
	out = append(out, "date: "+time.Now().UTC().Format("2006-01-02 15:04 UTC")+fmt.Sprintf("; wall time of the run: %s", r.wall.Round(time.Second)))
	out = append(out, "commit: "+r.commit())
	if v, err := exec.Command(b.bin, "version").Output(); err == nil {
		out = append(out, "binary: `"+strings.TrimSpace(string(v))+"`")
	}
	out = append(out, "Go: "+runtime.Version())
	args := []string{"go run ./cmd/directbridge-bench"}
	for _, a := range os.Args[1:] {
		if strings.ContainsAny(a, " \"'|*()") {
			a = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
		args = append(args, a)
	}
	out = append(out, "command: `"+strings.Join(args, " ")+"`")
	out = append(out, "messages: "+b.corpus.source+"; bodies of 1.5-4 KB of synthetic text, every 8th/40th/200th message with a 5.6/23/48 KB attachment (base64)")
	return out
}

// commit is the measured source's commit and whether its tree was dirty
// (BENCHMARKS.md itself does not count).
func (r *report) commit() string {
	b := r.b
	if b.o.bin != "" {
		return "binary given with -bin (" + b.o.bin + "); its source commit is not known here"
	}
	rev := "HEAD"
	if b.commitRev != "" {
		rev = b.commitRev
	}
	head, err := exec.Command("git", "-C", b.root, "rev-parse", rev).Output()
	if err != nil {
		return "unknown (not a git checkout)"
	}
	var dirty []string
	if b.commitRev == "" {
		st, _ := exec.Command("git", "-C", b.root, "status", "--porcelain").Output()
		for _, l := range strings.Split(strings.TrimSpace(string(st)), "\n") {
			if l != "" && !strings.HasSuffix(l, "BENCHMARKS.md") {
				dirty = append(dirty, strings.TrimSpace(l))
			}
		}
	}
	s := strings.TrimSpace(string(head))
	if subj, err := exec.Command("git", "-C", b.root, "log", "-1", "--format=%s", s).Output(); err == nil {
		s = "`" + s + "` (" + strings.TrimSpace(string(subj)) + ")"
	}
	if b.commitRev != "" {
		s += ", built with `-rev` from `git archive` of that commit (clean by construction)"
		return s
	}
	if len(dirty) > 0 {
		sort.Strings(dirty)
		s += fmt.Sprintf(", **dirty** (%d changed files)", len(dirty))
	} else {
		s += ", clean tree"
	}
	return s
}

// percentile returns the q-quantile (0..1) of ds by nearest rank.
func percentile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	k := int(q*float64(len(s)) + 0.999999999)
	if k < 1 {
		k = 1
	}
	if k > len(s) {
		k = len(s)
	}
	return s[k-1]
}

func yesNo(ok bool) string {
	if ok {
		return "yes"
	}
	return "**no**"
}

func mib(n int64) string { return fmt.Sprintf("%.1f MB", float64(n)/1e6) }

func secs(d time.Duration) string { return fmt.Sprintf("%.2f s", d.Seconds()) }

// previous is an earlier report's figures (-before).
type previous struct {
	path, commit, date string
	measured           map[string]string // by scenario text
}

// readPrevious reads the results table of a report this program wrote
// (with or without its own "before" column).
func readPrevious(path string) (*previous, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	p := &previous{path: path, commit: "commit unknown", date: "date unknown", measured: map[string]string{}}
	col := -1
	for _, l := range strings.Split(string(data), "\n") {
		if c, ok := strings.CutPrefix(l, "- commit: "); ok && p.commit == "commit unknown" {
			p.commit = "commit " + strings.TrimSpace(strings.SplitN(c, " (", 2)[0])
		}
		if d, ok := strings.CutPrefix(l, "- date: "); ok && p.date == "date unknown" {
			p.date = strings.TrimSpace(strings.SplitN(d, ";", 2)[0])
		}
		if !strings.HasPrefix(l, "|") {
			continue
		}
		cells := strings.Split(strings.Trim(strings.TrimSpace(l), "|"), "|")
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		if len(cells) > 0 && cells[0] == "scenario" {
			col = -1
			for i, c := range cells {
				if c == "measured" {
					col = i
				}
			}
			continue
		}
		// The first table is the newest run; earlier runs kept below it
		// in the same file must not overwrite its figures.
		if _, seen := p.measured[cells[0]]; !seen && col > 0 && col < len(cells) && cells[0] != "" && !strings.HasPrefix(cells[0], "---") {
			p.measured[cells[0]] = cells[col]
		}
	}
	if len(p.measured) == 0 {
		return nil, fmt.Errorf("%s: no results table found", path)
	}
	return p, nil
}
