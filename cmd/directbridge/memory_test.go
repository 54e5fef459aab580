package main

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/emersion/go-imap/v2/imapclient"
)

// TestAppendMemoryBounded: a 20 MB APPEND on the embedded sandbox raises
// the process's peak memory (VmHWM, what the kernel counts against a
// container's limit) by at most 100 MB (SECURITY.md, "Memory per
// message"). The message is read into one buffer of its size, streamed
// base64-encoded into the provider request (restclient/body.go), and the
// embedded sandbox decodes it as the request streams in
// (sandbox/rawsave.go). Measured: about 84 MB.
func TestAppendMemoryBounded(t *testing.T) {
	if _, err := os.Stat("/proc/self/status"); err != nil {
		t.Skip("no /proc to read the peak memory from")
	}
	p := startBridge(t)
	c, err := imapclient.DialInsecure(p.addrs["IMAP (STARTTLS)"], nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Login("alice@direct.example", "sandbox-demo").Wait(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Select("INBOX", nil).Wait(); err != nil {
		t.Fatal(err)
	}
	raw := filler("From: alice@direct.example\r\nSubject: a large document\r\n\r\n", 20_000_000)
	before := peakMemory(t, p.cmd.Process.Pid)
	ac := c.Append("INBOX", int64(len(raw)), nil)
	ac.Write(raw)
	ac.Close()
	if _, err := ac.Wait(); err != nil {
		t.Fatalf("APPEND of 20 MB: %v", err)
	}
	added := peakMemory(t, p.cmd.Process.Pid) - before
	t.Logf("a 20 MB APPEND raised the peak by %.1f MB", float64(added)/1e6)
	if added > 100e6 {
		t.Errorf("a 20 MB APPEND raised the peak memory by %.1f MB; the bound is 100 MB", float64(added)/1e6)
	}
}

// peakMemory is the VmHWM of a process, in bytes.
func peakMemory(t *testing.T, pid int) int64 {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmHWM in /proc/<pid>/status")
	return 0
}
