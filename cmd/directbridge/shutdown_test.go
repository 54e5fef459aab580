package main

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"net"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// bridgeProc is the real binary running the bridge on free loopback ports.
type bridgeProc struct {
	cmd   *exec.Cmd
	logs  *bytes.Buffer
	addrs map[string]string // banner name ("IMAP (STARTTLS)", ...) to address
}

// startBridge runs `directbridge` with its embedded sandbox and returns
// once the banner is printed.
func startBridge(t *testing.T, env ...string) *bridgeProc {
	t.Helper()
	cmd := exec.Command(binPath)
	cmd.Env = cleanEnv(append([]string{"DIRECTBRIDGE_DATA_DIR=" + t.TempDir(),
		"DIRECTBRIDGE_SMTP_ADDR=127.0.0.1:0", "DIRECTBRIDGE_SMTPS_ADDR=127.0.0.1:0",
		"DIRECTBRIDGE_IMAP_ADDR=127.0.0.1:0", "DIRECTBRIDGE_IMAPS_ADDR=127.0.0.1:0",
		"DIRECTBRIDGE_SANDBOX_ADDR=127.0.0.1:0"}, env...)...)
	stdout, _ := cmd.StdoutPipe()
	p := &bridgeProc{cmd: cmd, logs: &bytes.Buffer{}, addrs: map[string]string{}}
	cmd.Stderr = p.logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	line := regexp.MustCompile(`^\s+(.+?):\s+(127\.0\.0\.1:\d+)$`)
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		if m := line.FindStringSubmatch(sc.Text()); m != nil {
			p.addrs[m[1]] = m[2]
		}
		if strings.Contains(sc.Text(), "bob@direct.example") {
			break
		}
	}
	go func() { // keep the pipe drained
		for sc.Scan() {
		}
	}()
	if p.addrs["SMTP submission (STARTTLS)"] == "" {
		t.Fatalf("no SMTP address in the banner; stderr:\n%s", p.logs.String())
	}
	return p
}

// wait waits for the process to exit and returns its error.
func (p *bridgeProc) wait(t *testing.T, limit time.Duration) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- p.cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(limit):
		t.Fatalf("bridge still running %v after SIGTERM", limit)
		return nil
	}
}

// smtpLine sends a command and reads one (possibly multi-line) reply.
func smtpLine(t *testing.T, c net.Conn, r *bufio.Reader, cmd string) string {
	t.Helper()
	if cmd != "" {
		if _, err := c.Write([]byte(cmd + "\r\n")); err != nil {
			t.Fatalf("%s: %v", cmd, err)
		}
	}
	var reply strings.Builder
	for {
		l, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("reading reply to %q: %v (so far %q)", cmd, err, reply.String())
		}
		reply.WriteString(l)
		if len(l) < 4 || l[3] != '-' {
			return reply.String()
		}
	}
}

// TestSIGTERMDuringDATA: a SIGTERM that arrives while a client is in the
// middle of DATA stops the bridge from accepting new connections, but that
// transaction still gets its answer (250, and the message is delivered),
// an idle connection does not hold the shutdown up, and the process exits 0.
func TestSIGTERMDuringDATA(t *testing.T) {
	p := startBridge(t)
	addr := p.addrs["SMTP submission (STARTTLS)"]
	idle, err := net.Dial("tcp", addr) // a connection that never sends anything
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()

	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := bufio.NewReader(c)
	smtpLine(t, c, r, "") // greeting
	smtpLine(t, c, r, "EHLO test.example")
	plain := base64.StdEncoding.EncodeToString([]byte("\x00alice@direct.example\x00sandbox-demo"))
	if got := smtpLine(t, c, r, "AUTH PLAIN "+plain); !strings.HasPrefix(got, "235") {
		t.Fatalf("AUTH: %q", got)
	}
	smtpLine(t, c, r, "MAIL FROM:<alice@direct.example>")
	smtpLine(t, c, r, "RCPT TO:<bob@direct.example>")
	if got := smtpLine(t, c, r, "DATA"); !strings.HasPrefix(got, "354") {
		t.Fatalf("DATA: %q", got)
	}
	c.Write([]byte("From: alice@direct.example\r\nTo: bob@direct.example\r\nSubject: during shutdown\r\n\r\nfirst half\r\n"))
	// go-smtp answers 354 before it hands the message to the session,
	// which counts it in DATA then: the signal waits for that, or the
	// shutdown's log line may count 0 (the drain itself waits for the
	// transaction either way).
	time.Sleep(200 * time.Millisecond)

	p.cmd.Process.Signal(syscall.SIGTERM)
	time.Sleep(300 * time.Millisecond)
	if nc, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		nc.Close()
		t.Error("new SMTP connections are still accepted after SIGTERM")
	}

	c.Write([]byte("second half\r\n.\r\n"))
	if got := smtpLine(t, c, r, ""); !strings.HasPrefix(got, "250 2.0.0") {
		t.Fatalf("the transaction in DATA got %q; want 250", got)
	}
	if err := p.wait(t, 20*time.Second); err != nil {
		t.Fatalf("exit status after SIGTERM: %v\n%s", err, p.logs.String())
	}
	if !strings.Contains(p.logs.String(), "smtp message sent") {
		t.Fatalf("the message was not sent:\n%s", p.logs.String())
	}
	// The shutdown says what it drains and, at its end, how long it took.
	for _, want := range []string{"msg=\"shutting down\"", "smtp_connections=1", "smtp_messages_in_data=1", "msg=stopped", "drained=true", "duration="} {
		if !strings.Contains(p.logs.String(), want) {
			t.Errorf("the shutdown's log lacks %s:\n%s", want, p.logs.String())
		}
	}
}
