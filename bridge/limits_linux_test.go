package bridge_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2/imapclient"

	"github.com/directbridge/directbridge/bridge"
)

// underFileLimit200 runs the test named name again in a child process of
// the test binary with RLIMIT_NOFILE at 200, soft and hard (`ulimit -n
// 200`; a hard limit once lowered cannot be raised again), with child as
// its body there, and returns what the child printed (in the child:
// ok false, and the caller returns).
func underFileLimit200(t *testing.T, name string, child func()) (out string, ok bool) {
	t.Helper()
	if os.Getenv("BRIDGE_TEST_NOFILE_CHILD") == name {
		lim := syscall.Rlimit{Cur: 200, Max: 200}
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
			fmt.Println("SETRLIMIT:", err)
			return "", false
		}
		child()
		return "", false
	}
	cmd := exec.Command(os.Args[0], "-test.run=^"+name+"$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), "BRIDGE_TEST_NOFILE_CHILD="+name)
	b, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, b)
	}
	if strings.Contains(string(b), "SETRLIMIT:") {
		t.Skipf("cannot lower the file limit here:\n%s", b)
	}
	return string(b), true
}

// TestStartRefusedUnderLowFileLimit: under `ulimit -n 200` each listener
// gets 18 connections, 9 before login, fewer than a per-address limit of
// 20 set by the operator; the bridge refuses to start and says what file
// limit would do.
func TestStartRefusedUnderLowFileLimit(t *testing.T) {
	const marker = "NEW ERROR: "
	out, ok := underFileLimit200(t, t.Name(), func() {
		cfg := testConfig(t)
		cfg.MaxConnsPerAddress = 20
		b, err := bridge.New(cfg, nil, nil)
		if err == nil {
			fmt.Println("STARTED")
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			b.Run(ctx)
			return
		}
		fmt.Println(marker + strings.ReplaceAll(err.Error(), "\n", " | "))
	})
	if !ok {
		return
	}
	_, msg, ok := strings.Cut(out, marker)
	if !ok {
		t.Fatalf("the bridge started under a file limit of 200 with 20 connections per address set:\n%s", out)
	}
	for _, want := range []string{"pre-login total 9", "per-address limit 20", "file-descriptor limit 200", "at least 288", "DIRECTBRIDGE_MAX_CONNS_PER_ADDRESS"} {
		if !strings.Contains(msg, want) {
			t.Errorf("the refusal lacks %q: %s", want, msg)
		}
	}
}

// TestStartsUnderLowFileLimit: under `ulimit -n 200` with the default
// per-address limit, the bridge starts with it lowered to 4 and says so
// in a warning naming the file limit that keeps 20; while one address
// holds 20 connections that never log in, a real user from another logs
// in within 5 s.
func TestStartsUnderLowFileLimit(t *testing.T) {
	out, ok := underFileLimit200(t, t.Name(), func() {
		var logs strings.Builder
		b, err := bridge.New(testConfig(t), slog.New(slog.NewTextHandler(&logs, nil)), nil)
		if err != nil {
			fmt.Println("REFUSED:", err)
			return
		}
		runBridge(t, b)
		for _, l := range strings.Split(logs.String(), "\n") {
			if strings.Contains(l, "connection limits") {
				fmt.Println("LOG:", l)
			}
		}
		addr := b.Addr("IMAP (STARTTLS)")
		_, port, _ := net.SplitHostPort(addr)
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}, Timeout: 5 * time.Second}
		for range 20 {
			c, err := d.Dial("tcp", "127.0.0.1:"+port)
			if err != nil {
				fmt.Println("FLOOD DIAL:", err)
				return
			}
			defer c.Close()
		}
		start := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		ic, err := imapclient.DialStartTLS(addr, &imapclient.Options{TLSConfig: &tls.Config{InsecureSkipVerify: true}})
		if err == nil {
			done := make(chan error, 1)
			go func() { done <- ic.Login("alice@direct.example", "sandbox-demo").Wait() }()
			select {
			case err = <-done:
			case <-ctx.Done():
				err = ctx.Err()
			}
			ic.Close()
		}
		if err != nil {
			fmt.Println("LOGIN FAILED:", err)
			return
		}
		fmt.Printf("LOGGED IN after %v\n", time.Since(start).Round(time.Millisecond))
	})
	if !ok {
		return
	}
	if !strings.Contains(out, "LOGGED IN after") {
		t.Fatalf("no login under a file limit of 200:\n%s", out)
	}
	for _, want := range []string{"level=WARN", "per_address=4", "per_address_lowered_from=20", "file_limit_for_default=288"} {
		if !strings.Contains(out, want) {
			t.Errorf("the start-up log lacks %q:\n%s", want, out)
		}
	}
}
