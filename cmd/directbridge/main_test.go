package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/directbridge/directbridge/internal/pgtest"
)

// binPath is the real command, compiled once for all tests by TestMain.
var binPath string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "directbridge-bin-")
	if err != nil {
		panic(err)
	}
	binPath = filepath.Join(dir, "directbridge")
	cmd := exec.Command("go", "build", "-o", binPath, ".")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		panic("go build: " + err.Error() + "\n" + string(out))
	}
	code := pgtest.Main(m) // m.Run, then the throwaway PostgreSQL stops
	os.RemoveAll(dir)
	os.Exit(code)
}

// cleanEnv is the environment without any DIRECTBRIDGE_ variable.
func cleanEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "DIRECTBRIDGE_") {
			env = append(env, kv)
		}
	}
	return append(env, extra...)
}

func TestHelpListsEveryVariable(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run([]string{"help"}, &out, &errOut); code != 0 {
		t.Fatalf("help exit %d", code)
	}
	for _, v := range []string{
		"DIRECTBRIDGE_LOG_LEVEL", "DIRECTBRIDGE_LOG_FORMAT",
		"DIRECTBRIDGE_SANDBOX_ADDR", "DIRECTBRIDGE_SANDBOX_DATA", "DIRECTBRIDGE_SANDBOX_DOMAIN",
		"DIRECTBRIDGE_SANDBOX_USERS", "DIRECTBRIDGE_SANDBOX_RESELLER", "DIRECTBRIDGE_SANDBOX_MAX_BODY",
		"DIRECTBRIDGE_SANDBOX_STATUS_CSV", "DIRECTBRIDGE_SANDBOX_LATENCY",
	} {
		if !strings.Contains(out.String(), v) {
			t.Errorf("help does not list %s", v)
		}
	}
	if !strings.Contains(out.String(), "127.0.0.1:8080") {
		t.Error("help does not show the default sandbox address")
	}
}

func TestVersionAndUnknownCommand(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run([]string{"version"}, &out, &errOut); code != 0 || !strings.HasPrefix(out.String(), "directbridge ") {
		t.Fatalf("version: exit %d, %q", code, out.String())
	}
	out.Reset()
	if code := run([]string{"frobnicate"}, &out, &errOut); code != 2 || !strings.Contains(errOut.String(), "unknown command") {
		t.Fatalf("unknown command: exit %d, %q", code, errOut.String())
	}
}

func TestBadConfigurationExits2(t *testing.T) {
	bin := binPath
	for _, tc := range []struct{ env, want string }{
		{"DIRECTBRIDGE_SANDBOX_USERS=nopassword", "DIRECTBRIDGE_SANDBOX_USERS"},
		{"DIRECTBRIDGE_SANDBOX_RESELLER=:x", "DIRECTBRIDGE_SANDBOX_RESELLER"},
		{"DIRECTBRIDGE_LOG_LEVEL=loud", "DIRECTBRIDGE_LOG_LEVEL"},
		{"DIRECTBRIDGE_LOG_FORMAT=xml", "DIRECTBRIDGE_LOG_FORMAT"},
		{"DIRECTBRIDGE_SANDBOX_MAX_BODY=lots", "SANDBOX_MAX_BODY"},
		{"DIRECTBRIDGE_SANDBOX_LATENCY=slow", "SANDBOX_LATENCY"},
		{"DIRECTBRIDGE_SANDBOX_LATENCY=-20ms", "DIRECTBRIDGE_SANDBOX_LATENCY"},
		{"DIRECTBRIDGE_SANDBOX_ADDR=256.1.1.1:99999", "sandbox"},
	} {
		cmd := exec.Command(bin, "sandbox")
		cmd.Env = cleanEnv(tc.env)
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if err == nil || !errorsAs(err, &ee) || ee.ExitCode() != 2 {
			t.Errorf("%s: want exit 2, got %v\n%s", tc.env, err, out)
			continue
		}
		if !strings.Contains(string(out), tc.want) {
			t.Errorf("%s: output does not name %s:\n%s", tc.env, tc.want, out)
		}
	}
}

func errorsAs(err error, target **exec.ExitError) bool {
	ee, ok := err.(*exec.ExitError)
	*target = ee
	return ok
}

// TestSandboxCommand is README's first command as a test: the real binary
// starts, prints its base URL and demo accounts, answers documented
// operations, keeps data in DIRECTBRIDGE_SANDBOX_DATA across a restart,
// and stops cleanly on SIGTERM.
func TestSandboxCommand(t *testing.T) {
	bin := binPath
	data := t.TempDir()
	base, stop := startSandbox(t, bin, data)

	auth := `{"username":"alice@direct.example","password":"sandbox-demo"}`
	resp := post(t, "PUT", base+"/message-rest/api/message/Send", `{"authentication":`+auth+`,
		"message":{"sender":"alice@direct.example","subject":"Referral","body":"See patient","htmlBody":false,
		"recipients":[{"email":"bob@direct.example","type":"TO"}]}}`)
	if resp["success"] != true || resp["smtpId"] == "" {
		t.Fatalf("Send: %v", resp)
	}
	bob := `{"username":"bob@direct.example","password":"sandbox-demo"}`
	resp = post(t, "POST", base+"/message-rest/api/message/GetMessageCount/INBOX", bob)
	if resp["count"] != 1.0 {
		t.Fatalf("bob's INBOX count: %v", resp)
	}
	resp = post(t, "POST", base+"/DirectRegistrationRESTful/rest/Patient/login", `{"username":"reseller","password":"sandbox-demo"}`)
	if resp["success"] != true || resp["code"] != "000" {
		t.Fatalf("login: %v", resp)
	}

	// The same data directory after a restart still holds bob's message.
	stop()
	base, _ = startSandbox(t, bin, data)
	resp = post(t, "POST", base+"/message-rest/api/message/GetMessageCount/INBOX", bob)
	if resp["count"] != 1.0 {
		t.Fatalf("after restart, bob's INBOX count: %v", resp)
	}
}

// TestSandboxCommandLatency: DIRECTBRIDGE_SANDBOX_LATENCY makes the real
// binary say so and answer no sooner than that (a lower bound, which the
// delay guarantees; how much later is not asserted).
func TestSandboxCommandLatency(t *testing.T) {
	base, banner, _ := startSandboxBanner(t, binPath, t.TempDir(), "DIRECTBRIDGE_SANDBOX_LATENCY=60ms")
	if !strings.Contains(banner, "latency:       60ms added to every answer") {
		t.Errorf("banner does not show the latency:\n%s", banner)
	}
	start := time.Now()
	resp := post(t, "POST", base+"/message-rest/api/message/GetMessageCount/INBOX", `{"username":"bob@direct.example","password":"sandbox-demo"}`)
	if el := time.Since(start); resp["success"] != true || el < 60*time.Millisecond {
		t.Errorf("GetMessageCount answered %v after %v, want success no sooner than 60ms", resp, el)
	}
}

// startSandbox runs the binary on a free port and returns its base URL and
// a function that stops it with SIGTERM (also run at cleanup); the process
// must then exit 0.
func startSandbox(t *testing.T, bin, data string, env ...string) (string, func()) {
	t.Helper()
	base, _, stop := startSandboxBanner(t, bin, data, env...)
	return base, stop
}

// startSandboxBanner is startSandbox that also returns the banner.
func startSandboxBanner(t *testing.T, bin, data string, env ...string) (string, string, func()) {
	t.Helper()
	cmd := exec.Command(bin, "sandbox")
	cmd.Env = cleanEnv(append([]string{"DIRECTBRIDGE_SANDBOX_ADDR=127.0.0.1:0", "DIRECTBRIDGE_SANDBOX_DATA=" + data}, env...)...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	var base string
	var banner []string
	timeout := time.After(30 * time.Second)
	// The banner ends with the registration account.
	for base == "" || len(banner) == 0 || !strings.Contains(banner[len(banner)-1], "registration:  account") {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("sandbox exited early: %s\n%s", strings.Join(banner, "\n"), stderr.String())
			}
			banner = append(banner, l)
			if m := regexp.MustCompile(`base URL:\s+(\S+)`).FindStringSubmatch(l); m != nil {
				base = m[1]
			}
		case <-timeout:
			t.Fatalf("no banner within 30 s: %s", strings.Join(banner, "\n"))
		}
	}
	all := strings.Join(banner, "\n")
	for _, want := range []string{"alice@direct.example", "bob@direct.example", "sandbox-demo", "reseller", data} {
		if !strings.Contains(all, want) {
			t.Errorf("banner lacks %q:\n%s", want, all)
		}
	}
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("sandbox exit after SIGTERM: %v\n%s", err, stderr.String())
			}
		case <-time.After(15 * time.Second):
			cmd.Process.Kill()
			t.Error("sandbox did not stop within 15 s of SIGTERM")
		}
	}
	t.Cleanup(stop)
	return base, all, stop
}

func post(t *testing.T, method, url, body string) map[string]any {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	return m
}

// TestServeCommand is README's first command as a test: the real binary
// with no settings but free ports runs the bridge on its embedded sandbox,
// prints what a mail client needs, takes a message over SMTP, keeps
// passwords, subjects and bodies out of its debug log, and stops on SIGTERM.
func TestServeCommand(t *testing.T) {
	data := t.TempDir()
	cmd := exec.Command(binPath)
	cmd.Env = cleanEnv("DIRECTBRIDGE_DATA_DIR="+data, "DIRECTBRIDGE_SMTP_ADDR=127.0.0.1:0",
		"DIRECTBRIDGE_SMTPS_ADDR=127.0.0.1:0", "DIRECTBRIDGE_SANDBOX_ADDR=127.0.0.1:0", "DIRECTBRIDGE_LOG_LEVEL=debug",
		"DIRECTBRIDGE_IMAP_ADDR=127.0.0.1:0", "DIRECTBRIDGE_IMAPS_ADDR=127.0.0.1:0")
	stdout, _ := cmd.StdoutPipe()
	var logs bytes.Buffer
	cmd.Stderr = &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	sc := bufio.NewScanner(stdout)
	var banner []string
	var smtpAddr, sandboxURL string
	for sc.Scan() {
		l := sc.Text()
		banner = append(banner, l)
		if m := regexp.MustCompile(`\(STARTTLS\):\s+(\S+)`).FindStringSubmatch(l); m != nil {
			smtpAddr = m[1]
		}
		if m := regexp.MustCompile(`embedded sandbox at (\S+)`).FindStringSubmatch(l); m != nil {
			sandboxURL = m[1]
		}
		if strings.Contains(l, "bob@direct.example") {
			break
		}
	}
	all := strings.Join(banner, "\n")
	for _, want := range []string{"SHA-256", "alice@direct.example", "sandbox-demo", "(TLS):"} {
		if !strings.Contains(all, want) {
			t.Errorf("banner lacks %q:\n%s", want, all)
		}
	}
	if smtpAddr == "" || sandboxURL == "" {
		t.Fatalf("no SMTP address or sandbox URL in banner:\n%s", all)
	}

	const subject, body = "Confidential-Subject-7731", "Confidential-Body-5519"
	msg := "From: alice@direct.example\r\nTo: bob@direct.example\r\nSubject: " + subject + "\r\n\r\n" + body + "\r\n"
	py := `import smtplib, ssl, sys
s = smtplib.SMTP(sys.argv[1].rsplit(":", 1)[0], int(sys.argv[1].rsplit(":", 1)[1]))
s.starttls(context=ssl._create_unverified_context())
s.login("alice@direct.example", "sandbox-demo")
s.sendmail("alice@direct.example", ["bob@direct.example"], sys.argv[2].encode())
s.quit()`
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 not installed")
	}
	if out, err := exec.Command("python3", "-c", py, smtpAddr, msg).CombinedOutput(); err != nil {
		t.Fatalf("smtplib: %v\n%s", err, out)
	}
	resp := post(t, "POST", sandboxURL+"/message-rest/api/message/GetMessages/INBOX", `{"username":"bob@direct.example","password":"sandbox-demo"}`)
	msgs, _ := resp["messages"].([]any)
	if len(msgs) != 1 || msgs[0].(map[string]any)["subject"] != subject {
		t.Fatalf("bob's INBOX: %v", resp)
	}

	cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v\n%s", err, logs.String())
		}
	case <-time.After(40 * time.Second):
		t.Fatal("no exit within 40 s of SIGTERM")
	}
	if !strings.Contains(logs.String(), "smtp message sent") {
		t.Fatalf("debug log lacks the send event:\n%s", logs.String())
	}
	for _, secret := range []string{"sandbox-demo", subject, body} {
		if strings.Contains(logs.String(), secret) {
			t.Errorf("log contains %q", secret)
		}
	}
}
