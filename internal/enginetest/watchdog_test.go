package enginetest

import (
	"bytes"
	"fmt"
	"runtime/pprof"
	"sort"
	"strings"
	"time"
)

// deadline is how long any command may take. Every command of the test
// is answered in milliseconds; one that takes this long waits for
// something that will not come.
const deadline = 10 * time.Second

// watch starts the deadline of a command and returns the function that
// stops it. When it passes, the run fails with a dump of the bridge's
// goroutines, and every client connection is closed, so that the
// sessions stop and the run ends.
func (r *run) watch(what string) (stop func()) {
	t := time.AfterFunc(deadline, func() {
		if !r.hung.CompareAndSwap(false, true) {
			return
		}
		r.fail("%s: not answered within %v. The bridge's goroutines:\n%s", what, deadline, bridgeGoroutines())
		r.closeClients()
	})
	return func() { t.Stop() }
}

// bridgeGoroutines returns the stacks of the goroutines that run the
// bridge's code (imapbackend, mailstore, seqview), the deepest in it
// first, at most maxGoroutines of them, each cut to maxFrames lines.
// Idle ones are left out: connections waiting for a command (IO wait)
// and pollers waiting for their next round.
func bridgeGoroutines() string {
	const maxGoroutines, maxFrames = 12, 60
	var buf bytes.Buffer
	pprof.Lookup("goroutine").WriteTo(&buf, 2)
	all := strings.Split(strings.TrimSpace(buf.String()), "\n\n")
	type stack struct {
		text  string
		depth int // lines in the bridge's code
	}
	var shown []stack
	idle := 0
	for _, g := range all {
		depth := strings.Count(g, "directbridge/mailstore") + strings.Count(g, "directbridge/imapbackend") +
			strings.Count(g, "directbridge/seqview")
		if depth == 0 {
			continue
		}
		lines := strings.Split(g, "\n")
		if strings.Contains(lines[0], "[IO wait") || len(lines) > 1 && strings.Contains(lines[1], "mailstore.(*Folder).poll(") {
			idle++
			continue
		}
		if len(lines) > maxFrames {
			lines = append(lines[:maxFrames], "\t...")
		}
		shown = append(shown, stack{strings.Join(lines, "\n"), depth})
	}
	sort.SliceStable(shown, func(i, j int) bool { return shown[i].depth > shown[j].depth })
	var out []string
	for i, st := range shown {
		if i == maxGoroutines {
			out = append(out, fmt.Sprintf("... and %d more", len(shown)-maxGoroutines))
			break
		}
		out = append(out, st.text)
	}
	return fmt.Sprintf("(%d goroutines in all; %d of the bridge shown, deepest first; %d idle left out)\n%s",
		len(all), min(len(shown), maxGoroutines), idle, strings.Join(out, "\n\n"))
}
