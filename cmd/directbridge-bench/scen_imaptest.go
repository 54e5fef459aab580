package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// runImaptest runs ../shared/tools/imaptest/run.sh (Dovecot's imaptest, and
// with -dovecot a private tuned Dovecot in the same run) against the bridge
// on its embedded sandbox with default settings, then once more, stress
// only, with the REST budget at 100 requests/s to count REST calls per IMAP
// command from the bridge's metrics.
func runImaptest(ctx context.Context, b *bench, out *outcome) error {
	if b.o.imaptest == "" {
		out.notes = append(out.notes, "Not run (-quick, or -imaptest empty).")
		for i := range out.rows {
			out.rows[i].measured = "not run"
		}
		return nil
	}
	script, err := filepath.Abs(b.o.imaptest)
	if err == nil {
		_, err = os.Stat(script)
	}
	if err != nil {
		out.notes = append(out.notes, "Not run: "+b.o.imaptest+" not found (pass -imaptest PATH to its run.sh).")
		for i := range out.rows {
			out.rows[i].measured = "not run (no imaptest)"
		}
		return nil
	}
	accts := []account{{user: "it@direct.example", pass: benchPassword}, {user: "it2@direct.example", pass: benchPassword}}

	// Part 1: the comparison, embedded sandbox, default settings.
	br, err := b.startBridge(ctx, "imaptest-bridge", bridgeSpec{embedded: accts})
	if err != nil {
		return err
	}
	args := []string{"--rounds", strconv.Itoa(b.o.imaptestRounds)}
	if b.o.dovecot {
		args = append(args, "--dovecot", "--dovecot-fast")
	}
	sum, err := b.runImaptestScript(ctx, script, "imaptest-run", br, accts, args...)
	br.stop()
	if err != nil {
		return err
	}
	out.appendix = "imaptest `summary.md` of the comparison run (paths are of the temporary work directory):\n\n" + sum
	fetchRow := tableRow(sum, "A logout=0: FETCH/s (Fetc+Fet2)")
	errA, errB := tableRow(sum, "A logout=0: errors"), tableRow(sum, "B default: errors")
	if len(fetchRow) >= 1 {
		switch {
		case len(fetchRow) >= 3 && fetchRow[2] != "" && fetchRow[2] != "-":
			out.rows[0].measured = fmt.Sprintf("%sx (bridge %s FETCH/s, Dovecot %s)", fetchRow[2], fetchRow[0], fetchRow[1])
			if r, err := strconv.ParseFloat(fetchRow[2], 64); err == nil {
				out.rows[0].met = yesNo(r >= 1.0)
				out.rows[3].met = yesNo(r >= 1.5 && errorsIn(sum) == 0)
			}
			out.rows[3].measured = out.rows[0].measured
		default:
			out.rows[0].measured = fmt.Sprintf("bridge %s FETCH/s (no Dovecot in this run)", fetchRow[0])
		}
	}
	if len(errA) >= 1 && len(errB) >= 1 {
		a, _ := strconv.Atoi(errA[0])
		bb, _ := strconv.Atoi(errB[0])
		out.rows[1].measured = fmt.Sprintf("%d (A %d, B %d)", a+bb, a, bb)
		if len(errA) >= 2 && len(errB) >= 2 {
			out.rows[1].measured += fmt.Sprintf("; Dovecot A %s, B %s", errA[1], errB[1])
		}
		out.rows[1].met = yesNo(a+bb == 0)
	}
	out.notes = append(out.notes,
		fmt.Sprintf("`%s` (compliance, then stress A `logout=0` and B (default mix with LOGIN/LOGOUT), 10 clients, %d s each, %d interleaved round(s)%s) against the bridge on its embedded sandbox, default settings (one process; plain IMAP on loopback), mailboxes `imaptest` and `stress` (the flat layout of a new data directory). The stress runs APPEND from an mbox of %d distinct corpus messages (`--mbox`; imaptest's own has six, which it appends over and over), here and in every imaptest run of this program.",
			b.o.imaptest, b.o.imaptestSecs, b.o.imaptestRounds, map[bool]string{true: ", each beside a private Dovecot started by the script with `--dovecot --dovecot-fast`", false: ", no Dovecot"}[b.o.dovecot], b.o.mboxMsgs),
		"FETCH/s ratio and `Error:` lines are read from the script's summary.md (appendix below).")

	// Part 2: REST calls per IMAP command with the budget at 100/s.
	br, err = b.startBridge(ctx, "imaptest-budget-bridge", bridgeSpec{embedded: accts, env: []string{"DIRECTBRIDGE_API_RATE_LIMIT=100"}})
	if err != nil {
		return err
	}
	defer br.stop()
	m0, err := br.scrape(ctx)
	if err != nil {
		return err
	}
	if _, err := b.runImaptestScript(ctx, script, "imaptest-budget", br, accts, "--no-compliance", "--rounds", "1"); err != nil {
		return err
	}
	m1, err := br.scrape(ctx)
	if err != nil {
		return err
	}
	calls := m1.sums[metricREST] - m0.sums[metricREST]
	cmds := m1.sums[metricIMAP] - m0.sums[metricIMAP]
	if cmds <= 0 {
		return fmt.Errorf("imaptest budget run: the bridge counted no IMAP commands")
	}
	per := calls / cmds
	out.rows[2].measured = fmt.Sprintf("%.2f (%.0f REST calls / %.0f IMAP commands)", per, calls, cmds)
	out.rows[2].met = yesNo(per <= 0.35)
	out.rows[4].measured, out.rows[4].met = out.rows[2].measured, yesNo(per <= 0.15)
	out.notes = append(out.notes,
		fmt.Sprintf("REST calls per IMAP command: a second bridge on its embedded sandbox with DIRECTBRIDGE_API_RATE_LIMIT=100, the same script with `--no-compliance --rounds 1` (stress A then B, no Dovecot); `%s` and `%s` read from /metrics before and after: %.0f REST calls (%s), %.0f IMAP commands (%s).",
			metricREST, metricIMAP, calls, opsText(m0, m1), cmds, cmdsText(m0, m1)))
	return nil
}

// runImaptestScript runs run.sh against br and returns its summary.md.
func (b *bench) runImaptestScript(ctx context.Context, script, name string, br *bridgeProc, accts []account, extra ...string) (string, error) {
	dir := filepath.Join(b.work, name)
	_, port, _ := strings.Cut(br.imapAddr, ":")
	mbox, err := b.stressMbox()
	if err != nil {
		return "", err
	}
	args := []string{"--host", "127.0.0.1", "--port", port, "--user", accts[0].user, "--pass", accts[0].pass,
		"--user2", accts[1].user, "--pass2", accts[1].pass, "--mailbox", "imaptest", "--stress-mailbox", "stress",
		"--secs", strconv.Itoa(b.o.imaptestSecs), "--out", dir, "--mbox", mbox}
	args = append(args, extra...)
	cctx, cancel := context.WithTimeout(ctx, 45*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(cctx, script, args...)
	logf, err := os.Create(filepath.Join(b.work, name+".log"))
	if err != nil {
		return "", err
	}
	defer logf.Close()
	cmd.Stdout, cmd.Stderr = logf, logf
	shown := append([]string(nil), cmd.Args...)
	for i := range shown {
		if i > 0 && (shown[i-1] == "--pass" || shown[i-1] == "--pass2") {
			shown[i] = "***"
		}
	}
	b.logf("%s: %s", name, strings.Join(shown, " "))
	runErr := cmd.Run()
	sum, err := os.ReadFile(filepath.Join(dir, "summary.md"))
	if err != nil {
		return "", fmt.Errorf("%s: no summary.md (run.sh: %v; log %s)", name, runErr, logf.Name())
	}
	if runErr != nil {
		b.logf("%s: run.sh: %v (summary written; see its warnings)", name, runErr)
	}
	return string(sum), nil
}

// tableRow returns the cells after the label of the markdown table row
// whose first cell is label.
func tableRow(md, label string) []string {
	for _, l := range strings.Split(md, "\n") {
		cells := strings.Split(strings.Trim(strings.TrimSpace(l), "|"), "|")
		if len(cells) < 2 || strings.TrimSpace(cells[0]) != label {
			continue
		}
		out := make([]string, 0, len(cells)-1)
		for _, c := range cells[1:] {
			out = append(out, strings.TrimSpace(c))
		}
		return out
	}
	return nil
}

// cmdsText lists the IMAP commands between two scrapes.
func cmdsText(m0, m1 metricsSnapshot) string {
	cm := byLabel(m0, m1, metricIMAP, "command")
	var parts []string
	for _, k := range []string{"LOGIN", "SELECT", "FETCH", "STORE", "EXPUNGE", "APPEND", "SEARCH", "COPY", "NOOP", "IDLE", "STATUS", "LIST", "LOGOUT", "CHECK"} {
		if v, ok := cm[k]; ok {
			parts = append(parts, fmt.Sprintf("%s %.0f", k, v))
			delete(cm, k)
		}
	}
	other := 0.0
	for _, v := range cm {
		other += v
	}
	if other > 0 {
		parts = append(parts, fmt.Sprintf("other %.0f", other))
	}
	return strings.Join(parts, ", ")
}

// stressMbox writes, once, the mbox of distinct messages every imaptest
// run APPENDs from (corpus.writeMbox), and returns its path.
func (b *bench) stressMbox() (string, error) {
	b.mboxOnce.Do(func() {
		b.mbox = filepath.Join(b.work, "stress.mbox")
		b.mboxErr = b.corpus.writeMbox(b.mbox, b.o.mboxMsgs)
	})
	return b.mbox, b.mboxErr
}

// errorsIn sums the stress `Error:` lines of the bridge (A and B) in a
// summary.md.
func errorsIn(sum string) int {
	n := 0
	for _, name := range []string{"A logout=0: errors", "B default: errors"} {
		if r := tableRow(sum, name); len(r) >= 1 {
			v, _ := strconv.Atoi(r[0])
			n += v
		}
	}
	return n
}
