package main

import (
	"bytes"
	"crypto/tls"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"
)

func TestHelpListsAdmin(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run([]string{"help"}, &out, &errOut); code != 0 {
		t.Fatalf("help exit %d", code)
	}
	for _, v := range []string{"DIRECTBRIDGE_ADMIN_SOCKET", "DIRECTBRIDGE_RESELLER_USER", "DIRECTBRIDGE_RESELLER_PASSWORD", "admin "} {
		if !strings.Contains(out.String(), v) {
			t.Errorf("help does not list %s", v)
		}
	}
	out.Reset()
	if code := run([]string{"admin", "help"}, &out, &errOut); code != 0 || !strings.Contains(out.String(), "DIRECTBRIDGE_ADMIN_PASSWORD") {
		t.Fatalf("admin help: exit %d\n%s", code, out.String())
	}
}

// TestAdminUsage: mistakes on the command line exit 2 before anything is
// asked of a bridge (there is none here).
func TestAdminUsage(t *testing.T) {
	t.Setenv("DIRECTBRIDGE_ADMIN_SOCKET", filepath.Join(t.TempDir(), "none.sock"))
	for _, args := range [][]string{
		{},
		{"frobnicate"},
		{"provision", "--domain", "direct.example"},
		{"provision", "--first", "A", "--last", "B", "--ssn4", "1234", "--dob", "1980-01-01"},
		{"provision", "--domain", "d", "--id", "7", "--first", "A"},
		{"provision", "--domain", "d", "--id", "7", "--password", "secret"},
		{"patient", "--domain", "d"},
		{"patient", "--domain", "d", "--username", "u", "--id", "3"},
		{"set-password", "--domain", "d"},
		{"status"},
		{"status", "--user", "a@d", "--direct-addr", "b@d"},
		{"health", "extra"},
	} {
		var out, errOut bytes.Buffer
		if code := runAdmin(args, strings.NewReader(""), &out, &errOut); code != 2 {
			t.Errorf("admin %q: exit %d, want 2\n%s", args, code, errOut.String())
		}
		if out.Len() != 0 {
			t.Errorf("admin %q printed on stdout: %s", args, out.String())
		}
	}
	// Well formed, but no bridge answers: 1.
	var out, errOut bytes.Buffer
	if code := runAdmin([]string{"health"}, strings.NewReader(""), &out, &errOut); code != 1 || !strings.Contains(errOut.String(), "is the bridge running") {
		t.Fatalf("no bridge: exit %d\n%s", code, errOut.String())
	}
	t.Setenv("DIRECTBRIDGE_ADMIN_SOCKET", "off")
	if code := runAdmin([]string{"health"}, strings.NewReader(""), &out, &errOut); code != 2 {
		t.Fatalf("socket off: exit %d", code)
	}
}

// TestAdminCommand starts the real binary on its embedded sandbox and
// drives it with `directbridge admin`, as README shows: health, provision
// a patient, find the new mailbox, set its password from standard input,
// delivery status of what went through SMTP; errors exit 1 with the
// provider's code; nothing identifying reaches the log; the socket goes
// with the bridge.
func TestAdminCommand(t *testing.T) {
	data := t.TempDir()
	p := startBridge(t, "DIRECTBRIDGE_DATA_DIR="+data, "DIRECTBRIDGE_LOG_LEVEL=debug")
	socket := filepath.Join(data, "admin.sock")
	if fi, err := os.Lstat(socket); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("admin socket: %v %v", fi, err)
	}

	// admin runs the binary's admin command with the bridge's data
	// directory (so the default socket) and the given stdin.
	admin := func(stdin string, extraEnv []string, args ...string) (string, string, int) {
		t.Helper()
		c := exec.Command(binPath, append([]string{"admin"}, args...)...)
		c.Env = append(cleanEnv("DIRECTBRIDGE_DATA_DIR="+data), extraEnv...)
		c.Stdin = strings.NewReader(stdin)
		var out, errOut bytes.Buffer
		c.Stdout, c.Stderr = &out, &errOut
		err := c.Run()
		code := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return out.String(), errOut.String(), code
	}
	var decoded map[string]any
	decode := func(s string) map[string]any {
		t.Helper()
		decoded = nil
		if err := json.Unmarshal([]byte(s), &decoded); err != nil {
			t.Fatalf("output is not JSON: %v\n%s", err, s)
		}
		return decoded
	}

	out, errOut, code := admin("", nil, "health")
	if code != 0 || decode(out)["provider"].(map[string]any)["reachable"] != true {
		t.Fatalf("health: exit %d\n%s%s", code, out, errOut)
	}

	const (
		first, last, ssn4, dob = "Zebulonia", "Quarrington", "7731", "1931-07-19"
		password, newPassword  = "Initial-Secret-4471", "Changed-Secret-9902"
	)
	out, errOut, code = admin("", []string{"DIRECTBRIDGE_ADMIN_PASSWORD=" + password}, "provision",
		"--domain", "direct.example", "--first", first, "--last", last, "--ssn4", ssn4, "--dob", dob, "--username", "jane.doe")
	if code != 0 || strings.Contains(out, password) || !strings.Contains(out, `"paymentConfirmation"`) {
		t.Fatalf("provision: exit %d\n%s%s", code, out, errOut)
	}
	if users := decode(out)["users"].([]any); len(users) != 1 || users[0].(map[string]any)["username"] != "jane.doe" {
		t.Fatalf("provision: %s", out)
	}
	// status without --smtp-id checks the mailbox's password: jane's works.
	if out, errOut, code = admin(password+"\n", nil, "status", "--user", "jane.doe@direct.example"); code != 0 {
		t.Fatalf("the new mailbox does not take its password: exit %d\n%s%s", code, out, errOut)
	}

	out, errOut, code = admin("", nil, "patient", "--domain", "direct.example", "--username", "jane.doe")
	if code != 0 || !strings.Contains(out, `"activated"`) || !strings.Contains(out, "jane.doe@direct.example") {
		t.Fatalf("patient by username: exit %d\n%s%s", code, out, errOut)
	}
	out, errOut, code = admin("", nil, "patient", "--domain", "direct.example", "--first", first, "--last", last, "--ssn4", ssn4, "--dob", dob)
	if code != 0 || !strings.Contains(out, "jane.doe") {
		t.Fatalf("patient by identity: exit %d\n%s%s", code, out, errOut)
	}
	out, errOut, code = admin("", nil, "patient", "--domain", "direct.example", "--username", "nobody")
	if code != 1 || out != "" || !strings.Contains(errOut, "code 210") {
		t.Fatalf("unknown patient: exit %d\n%s%s", code, out, errOut)
	}

	// The new password from standard input, as a script pipes it.
	out, errOut, code = admin(newPassword+"\n", nil, "set-password", "--domain", "direct.example", "--username", "jane.doe")
	if code != 0 || strings.Contains(out, newPassword) {
		t.Fatalf("set-password: exit %d\n%s%s", code, out, errOut)
	}
	if out, errOut, code = admin(newPassword+"\n", nil, "status", "--user", "jane.doe@direct.example"); code != 0 {
		t.Fatalf("the new password does not work: exit %d\n%s%s", code, out, errOut)
	}
	if out, errOut, code = admin(password+"\n", nil, "status", "--user", "jane.doe@direct.example"); code != 1 || !strings.Contains(errOut, "code 1)") {
		t.Fatalf("the old password still works: exit %d\n%s%s", code, out, errOut)
	}
	if _, _, code = admin("", nil, "set-password", "--domain", "direct.example", "--username", "jane.doe"); code != 2 {
		t.Fatalf("set-password without a password: exit %d", code)
	}

	// Delivery status of a message alice sent to jane and to another
	// provider's user through the bridge's SMTP.
	c, err := smtp.DialStartTLS(p.addrs["SMTP submission (STARTTLS)"], &tls.Config{InsecureSkipVerify: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Auth(sasl.NewPlainClient("", "alice@direct.example", "sandbox-demo")); err != nil {
		t.Fatal(err)
	}
	rcpts := []string{"jane.doe@direct.example", "someone@other.example"}
	msg := "From: alice@direct.example\r\nTo: " + strings.Join(rcpts, ", ") + "\r\nMessage-ID: <cli-1@direct.example>\r\nSubject: s\r\n\r\nb\r\n"
	if err := c.SendMail("alice@direct.example", rcpts, strings.NewReader(msg)); err != nil {
		t.Fatal(err)
	}
	c.Quit()
	out, errOut, code = admin("sandbox-demo\n", nil, "status", "--user", "alice@direct.example")
	if code != 0 || !strings.Contains(out, `"Delivered"`) || !strings.Contains(out, `"Waiting"`) || !strings.Contains(out, "<cli-1@direct.example>") {
		t.Fatalf("status of recent messages: exit %d\n%s%s", code, out, errOut)
	}
	smtpID, _ := decode(out)["sent"].([]any)[0].(map[string]any)["smtpId"].(string)
	out, errOut, code = admin("sandbox-demo\n", nil, "status", "--user", "alice@direct.example", "--smtp-id", smtpID)
	if code != 0 || len(decode(out)["messageLogs"].([]any)) != 2 || !strings.Contains(out, `"Waiting"`) {
		t.Fatalf("status by smtpId: exit %d\n%s%s", code, out, errOut)
	}
	out, errOut, code = admin("wrong-password\n", nil, "status", "--user", "alice@direct.example", "--smtp-id", smtpID)
	if code != 1 || !strings.Contains(errOut, "code 1)") {
		t.Fatalf("status with a wrong password: exit %d\n%s%s", code, out, errOut)
	}

	p.cmd.Process.Signal(syscall.SIGTERM)
	if err := p.wait(t, 40*time.Second); err != nil {
		t.Fatalf("exit after SIGTERM: %v\n%s", err, p.logs.String())
	}
	if _, err := os.Lstat(socket); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("admin socket left behind: %v", err)
	}
	logs := p.logs.String()
	if !strings.Contains(logs, "op=provision") {
		t.Fatalf("the log lacks the admin requests:\n%s", logs)
	}
	for _, secret := range []string{first, last, dob, password, newPassword, "wrong-password", "sandbox-demo"} {
		if strings.Contains(logs, secret) {
			t.Errorf("log contains %q", secret)
		}
	}
	if regexp.MustCompile(`ssn4|\b` + ssn4 + `\b`).MatchString(logs) {
		t.Errorf("log may contain the SSN4:\n%s", logs)
	}
}
