package admin_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"log/slog"
	"net"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/directbridge/directbridge/internal/admin"
	"github.com/directbridge/directbridge/internal/observe"
	"github.com/directbridge/directbridge/internal/state"
	"github.com/directbridge/directbridge/restclient"
	"github.com/directbridge/directbridge/sandbox"
	"github.com/directbridge/directbridge/upstream"
	"github.com/directbridge/directbridge/upstream/directapi"
)

// env is an admin server on a real socket in front of a sandbox on real
// HTTP, as the bridge wires them.
type env struct {
	sb     *sandbox.Server
	client *restclient.Client
	store  *state.Store
	srv    *admin.Server
	path   string
	logs   *syncBuffer
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

type option func(*admin.Config, *env)

func withoutRegistrar() option { return func(c *admin.Config, _ *env) { c.Registrar = nil } }

func withRegistrar(user, pw string) option {
	return func(c *admin.Config, e *env) { c.Registrar = e.client.NewRegistrar(user, directapi.Secret(pw)) }
}

func withRequestTimeout(d time.Duration) option {
	return func(c *admin.Config, _ *env) { c.RequestTimeout = d }
}

func withMaxConns(n int) option { return func(c *admin.Config, _ *env) { c.MaxConns = n } }

func newEnv(t *testing.T, opts ...option) *env {
	t.Helper()
	sb, err := sandbox.Open(sandbox.Options{
		Users:     sandbox.DemoUsers("direct.example"),
		Resellers: []sandbox.Account{sandbox.DemoReseller},
	})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(sb)
	t.Cleanup(func() { hs.Close(); sb.Close() })
	client, err := restclient.New(restclient.Options{BaseURL: hs.URL, MaxRetries: -1, RateLimit: -1})
	if err != nil {
		t.Fatal(err)
	}
	store, err := state.OpenStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	e := &env{sb: sb, client: client, store: store, logs: &syncBuffer{}}
	dir := t.TempDir()
	os.Chmod(dir, 0o700) // as the bridge's data directory is
	e.path = filepath.Join(dir, "admin.sock")
	cfg := admin.Config{
		Path:      e.path,
		Client:    client,
		Registrar: client.NewRegistrar(sandbox.DemoReseller.Name, directapi.Secret(sandbox.DemoReseller.Password)),
		Store:     store,
		Logger:    slog.New(slog.NewTextHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Probe:     observe.NewProber(hs.URL, 0, 0).Probe,
	}
	for _, o := range opts {
		o(&cfg, e)
	}
	e.srv, err = admin.Listen(cfg)
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- e.srv.Serve() }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := e.srv.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return e
}

// call dials, runs one request and returns its error (an *admin.Error for
// a failure answer).
func (e *env) call(t *testing.T, op string, args, result any) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := admin.Dial(ctx, e.path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	return c.Call(ctx, op, args, result)
}

// rawConn is a plain connection to the socket, closed at the test's end.
func (e *env) rawConn(t *testing.T) net.Conn {
	t.Helper()
	c, err := net.Dial("unix", e.path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(30 * time.Second))
	return c
}

func (e *env) mustCall(t *testing.T, op string, args, result any) {
	t.Helper()
	if err := e.call(t, op, args, result); err != nil {
		t.Fatalf("%s: %v", op, err)
	}
}

func codeOf(err error) string {
	var ae *admin.Error
	if errors.As(err, &ae) {
		return ae.Code
	}
	return ""
}

const (
	patientPassword = "Pw-for-Jane-8841"
	first, last     = "Zebulonia", "Quarrington"
	ssn4, dob       = "7731", "1931-07-19"
)

func janeArgs() admin.ProvisionArgs {
	return admin.ProvisionArgs{
		Domain:         "direct.example",
		Identity:       admin.Identity{FirstName: first, LastName: last, SSN4: ssn4, DOB: dob},
		DirectUsername: "jane.doe",
		DirectPassword: patientPassword,
	}
}

func TestSocketIsPrivateAndRemoved(t *testing.T) {
	e := newEnv(t)
	fi, err := os.Lstat(e.path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Type() != fs.ModeSocket || fi.Mode().Perm() != 0o600 {
		t.Fatalf("socket mode %v, want a socket with 0600", fi.Mode())
	}
	entries, _ := os.ReadDir(filepath.Dir(e.path))
	if len(entries) != 1 {
		t.Fatalf("directory holds %d entries, want only the socket", len(entries))
	}
	e.srv.Close()
	if _, err := os.Lstat(e.path); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("socket file still there after Close: %v", err)
	}
}

func TestStaleAndLiveSockets(t *testing.T) {
	e := newEnv(t)
	sb := e.client
	// A live socket is refused, not stolen.
	if _, err := admin.Listen(admin.Config{Path: e.path, Client: sb}); err == nil || !strings.Contains(err.Error(), "in use") {
		t.Fatalf("Listen on a live socket: %v", err)
	}
	// A stale socket (its process died) is replaced.
	stale := filepath.Join(t.TempDir(), "admin.sock")
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: stale, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	l.SetUnlinkOnClose(false)
	l.Close()
	srv, err := admin.Listen(admin.Config{Path: stale, Client: sb})
	if err != nil {
		t.Fatalf("Listen over a stale socket: %v", err)
	}
	srv.Close()
	// A file that is not a socket is never removed.
	plain := filepath.Join(t.TempDir(), "admin.sock")
	os.WriteFile(plain, []byte("keep me"), 0o600)
	if _, err := admin.Listen(admin.Config{Path: plain, Client: sb}); err == nil || !strings.Contains(err.Error(), "not a socket") {
		t.Fatalf("Listen over a plain file: %v", err)
	}
	if b, _ := os.ReadFile(plain); string(b) != "keep me" {
		t.Fatal("plain file was touched")
	}
	// Paths that cannot work.
	for _, p := range []string{"relative/admin.sock", "/" + strings.Repeat("d", 120) + "/admin.sock"} {
		if err := admin.CheckPath(p); err == nil {
			t.Errorf("CheckPath(%q) accepted it", p)
		}
	}
}

func TestProvisionAndLookups(t *testing.T) {
	e := newEnv(t)

	var raw json.RawMessage
	e.mustCall(t, admin.OpProvision, janeArgs(), &raw)
	if bytes.Contains(raw, []byte(patientPassword)) {
		t.Fatalf("provision answer echoes the password: %s", raw)
	}
	var prov admin.ProvisionResult
	json.Unmarshal(raw, &prov)
	if len(prov.Users) != 1 || prov.Users[0].Username != "jane.doe" || prov.Users[0].UserStateType != directapi.UserStateActivated {
		t.Fatalf("provision users: %s", raw)
	}
	if prov.PaymentConfirmation == nil || prov.PaymentConfirmation.OrderID == 0 || len(prov.PaymentConfirmation.Products) != 1 {
		t.Fatalf("provision payment confirmation: %s", raw)
	}

	var byName admin.PatientsResult
	e.mustCall(t, admin.OpPatientByUsername, admin.PatientByUsernameArgs{Domain: "direct.example", Username: "jane.doe"}, &byName)
	if len(byName.Patient) != 1 || byName.Patient[0].Email != "jane.doe@direct.example" {
		t.Fatalf("patient-by-username: %+v", byName)
	}
	var byMeta admin.PatientsResult
	e.mustCall(t, admin.OpPatientByMeta, admin.PatientByMetaArgs{Domain: "direct.example",
		Identity: admin.Identity{FirstName: first, LastName: last, SSN4: ssn4, DOB: "07/19/1931"}}, &byMeta)
	if len(byMeta.Patient) != 1 || byMeta.Patient[0].Username != "jane.doe" {
		t.Fatalf("patient-by-meta: %+v", byMeta)
	}
	var nobody admin.PatientsResult
	e.mustCall(t, admin.OpPatientByMeta, admin.PatientByMetaArgs{Domain: "direct.example",
		Identity: admin.Identity{FirstName: "No", LastName: "Body", SSN4: "0000", DOB: "1950-01-01"}}, &nobody)
	if nobody.Patient == nil || len(nobody.Patient) != 0 {
		t.Fatalf("patient-by-meta without a match: %+v", nobody)
	}

	// The new mailbox works with its password, and after set-passwords
	// with the new one only.
	auth := directapi.Authentication{Username: "jane.doe@direct.example", Password: patientPassword}
	if _, err := e.client.GetMessageCount(context.Background(), auth, "INBOX"); err != nil {
		t.Fatalf("new mailbox login: %v", err)
	}
	const newPassword = "Fresh-Password-2291"
	var set admin.SetPasswordsResult
	e.mustCall(t, admin.OpSetPasswords, admin.SetPasswordsArgs{Domain: "direct.example",
		Passwords: []directapi.UserPassword{{Username: "jane.doe", Password: newPassword}}}, &set)
	if len(set.Updated) != 1 || set.Updated[0] != "jane.doe" {
		t.Fatalf("set-passwords: %+v", set)
	}
	if _, err := e.client.GetMessageCount(context.Background(), auth, "INBOX"); !restclient.IsAuthFailure(err) {
		t.Fatalf("old password still works: %v", err)
	}
	auth.Password = newPassword
	if _, err := e.client.GetMessageCount(context.Background(), auth, "INBOX"); err != nil {
		t.Fatalf("new password: %v", err)
	}

	// No PII in the log, but one line per request.
	logs := e.logs.String()
	for _, secret := range []string{patientPassword, newPassword, first, last, ssn4, dob, "07/19/1931", "sandbox-demo"} {
		if strings.Contains(logs, secret) {
			t.Errorf("log contains %q:\n%s", secret, logs)
		}
	}
	if strings.Contains(logs, "level=WARN") {
		t.Errorf("warnings in the log:\n%s", logs)
	}
	if n := strings.Count(logs, "admin request"); n != 5 {
		t.Errorf("%d request lines in the log, want 5:\n%s", n, logs)
	}
}

// TestRegistrarLogsInAgain: a session the provider dropped early ("011")
// is replaced by the Registrar and the request succeeds.
func TestRegistrarLogsInAgain(t *testing.T) {
	e := newEnv(t)
	args := admin.PatientByUsernameArgs{Domain: "direct.example", Username: "alice"}
	e.mustCall(t, admin.OpPatientByUsername, args, nil)
	if n := e.sb.Calls("Login"); n != 1 {
		t.Fatalf("%d logins, want 1", n)
	}
	e.mustCall(t, admin.OpPatientByUsername, args, nil)
	if n := e.sb.Calls("Login"); n != 1 {
		t.Fatalf("session not reused: %d logins", n)
	}
	e.sb.InjectFault("GetPatientAddressByUsername", sandbox.Fault{RegCode: directapi.RegCodeAuthFailed, Times: 1})
	var res admin.PatientsResult
	e.mustCall(t, admin.OpPatientByUsername, args, &res)
	if n := e.sb.Calls("Login"); n != 2 || len(res.Patient) != 1 {
		t.Fatalf("after a dropped session: %d logins, result %+v", n, res)
	}
}

func TestErrorAnswers(t *testing.T) {
	e := newEnv(t)
	noReg := newEnv(t, withoutRegistrar())
	badReseller := newEnv(t, withRegistrar("reseller", "wrong-password"))
	meta := admin.PatientByMetaArgs{Domain: "direct.example", Identity: admin.Identity{FirstName: "A", LastName: "B", SSN4: "1234", DOB: "1970-01-01"}}

	for _, tc := range []struct {
		name string
		env  *env
		op   string
		args any
		code string
	}{
		{"unknown username", e, admin.OpPatientByUsername, admin.PatientByUsernameArgs{Domain: "direct.example", Username: "nobody"}, "210"},
		{"unknown domain", e, admin.OpPatientByUsername, admin.PatientByUsernameArgs{Domain: "elsewhere.example", Username: "alice"}, "208"},
		{"invalid ssn4", e, admin.OpProvision, admin.ProvisionArgs{Domain: "direct.example",
			Identity: admin.Identity{FirstName: "A", LastName: "B", SSN4: "12", DOB: "1970-01-01"}}, "205"},
		{"address taken", e, admin.OpProvision, admin.ProvisionArgs{Domain: "direct.example", DirectUsername: "alice",
			Identity: admin.Identity{FirstName: "A", LastName: "B", SSN4: "1234", DOB: "1970-01-01"}}, "002"},
		{"short password", e, admin.OpSetPasswords, admin.SetPasswordsArgs{Domain: "direct.example",
			Passwords: []directapi.UserPassword{{Username: "alice", Password: "short"}}}, "010"},
		{"set password of nobody", e, admin.OpSetPasswords, admin.SetPasswordsArgs{Domain: "direct.example",
			Passwords: []directapi.UserPassword{{Username: "nobody", Password: "long-enough-1"}}}, "210"},
		{"wrong reseller password", badReseller, admin.OpPatientByMeta, meta, "011"},
		{"no registration account", noReg, admin.OpProvision, janeArgs(), admin.CodeNotConfigured},
		{"wrong mailbox password", e, admin.OpStatus, admin.StatusArgs{User: "alice@direct.example", Password: "wrong", SmtpIDs: []string{"x"}}, "1"},
		{"wrong mailbox password, several ids", e, admin.OpStatus, admin.StatusArgs{User: "alice@direct.example", Password: "wrong", SmtpIDs: []string{"x", "y"}}, "1"},
		{"T-user for no mailbox", e, admin.OpStatusTuser, admin.StatusTuserArgs{User: "reseller", Password: "sandbox-demo",
			DirectAddr: "ghost@direct.example", SmtpIDs: []string{"x"}}, "2"},
		{"unknown op", e, "frobnicate", nil, admin.CodeUnknownOp},
		{"missing domain", e, admin.OpPatientByUsername, admin.PatientByUsernameArgs{Username: "alice"}, admin.CodeBadRequest},
		{"identity incomplete", e, admin.OpPatientByMeta, admin.PatientByMetaArgs{Domain: "direct.example",
			Identity: admin.Identity{FirstName: "A"}}, admin.CodeBadRequest},
		{"unknown argument", e, admin.OpStatus, map[string]any{"user": "alice@direct.example", "password": "x", "smtpID": "y"}, admin.CodeBadRequest},
		{"argument of the wrong type", e, admin.OpProvision, map[string]any{"domain": "direct.example", "id": "seven"}, admin.CodeBadRequest},
		{"status without password", e, admin.OpStatus, admin.StatusArgs{User: "alice@direct.example"}, admin.CodeBadRequest},
		{"status-tuser without ids", e, admin.OpStatusTuser, admin.StatusTuserArgs{User: "reseller", Password: "x", DirectAddr: "alice@direct.example"}, admin.CodeBadRequest},
		{"no passwords", e, admin.OpSetPasswords, admin.SetPasswordsArgs{Domain: "direct.example"}, admin.CodeBadRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.env.call(t, tc.op, tc.args, nil)
			if got := codeOf(err); got != tc.code {
				t.Fatalf("code %q (%v), want %q", got, err, tc.code)
			}
			if ae := (*admin.Error)(nil); errors.As(err, &ae) && ae.Message == "" {
				t.Fatal("error answer without a message")
			}
		})
	}
	if strings.Contains(e.logs.String(), "wrong") || strings.Contains(badReseller.logs.String(), "wrong-password") {
		t.Error("a password reached the log")
	}
}

// TestRawProtocol speaks the protocol as a shell script would: several
// requests in one write, blank lines, malformed lines, a last line without
// newline.
func TestRawProtocol(t *testing.T) {
	e := newEnv(t)
	c := e.rawConn(t)
	c.Write([]byte(`{"op":"health"}` + "\n\n" + `not json` + "\n" + `{"op":"patient-by-username","args":{"domain":"direct.example","username":"bob"}}` + "\n" +
		`{"op":"health","args":{"verbose":true}}` + "\n" + `{"op":"health"} {"op":"health"}` + "\n" + `{"op":"health"}`))
	c.(*net.UnixConn).CloseWrite()
	sc := bufio.NewScanner(c)
	var got []admin.Response
	for sc.Scan() {
		var r admin.Response
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("answer %q: %v", sc.Text(), err)
		}
		got = append(got, r)
	}
	want := []struct {
		ok   bool
		code string
	}{{true, ""}, {false, admin.CodeBadRequest}, {true, ""}, {false, admin.CodeBadRequest}, {false, admin.CodeBadRequest}, {true, ""}}
	if len(got) != len(want) {
		t.Fatalf("%d answers, want %d: %+v", len(got), len(want), got)
	}
	for i, w := range want {
		if got[i].OK != w.ok || got[i].Code != w.code {
			t.Errorf("answer %d: %+v, want ok=%v code=%q", i, got[i], w.ok, w.code)
		}
	}
	if !strings.Contains(string(got[2].Result), "bob") {
		t.Errorf("patient-by-username result: %s", got[2].Result)
	}
}

func TestRequestTooLarge(t *testing.T) {
	e := newEnv(t)
	c := e.rawConn(t)
	go func() {
		// More than 1 MiB without a newline; the server stops reading.
		c.Write([]byte(`{"op":"health","args":{"x":"` + strings.Repeat("a", admin.MaxRequestBytes) + `"}}` + "\n"))
	}()
	line, err := bufio.NewReader(c).ReadBytes('\n')
	if err != nil {
		t.Fatal(err)
	}
	var r admin.Response
	json.Unmarshal(line, &r)
	if r.OK || r.Code != admin.CodeTooLarge {
		t.Fatalf("answer %s", line)
	}
	// Just under the limit is fine (and an unknown field, so an error).
	c2, err := admin.Dial(context.Background(), e.path)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	big := map[string]string{"pad": strings.Repeat("b", admin.MaxRequestBytes-100)}
	if err := c2.Call(context.Background(), admin.OpHealth, big, nil); codeOf(err) != admin.CodeBadRequest {
		t.Fatalf("request just under the limit: %v", err)
	}
}

func TestRequestTimeout(t *testing.T) {
	e := newEnv(t, withRequestTimeout(300*time.Millisecond))
	e.sb.InjectFault("GetPatientAddressByUsername", sandbox.Fault{Latency: 3 * time.Second, Times: 1})
	start := time.Now()
	err := e.call(t, admin.OpPatientByUsername, admin.PatientByUsernameArgs{Domain: "direct.example", Username: "alice"}, nil)
	if codeOf(err) != admin.CodeTimeout {
		t.Fatalf("slow provider: %v", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("answer took %s", d)
	}
	// A provisioning that times out says it may have happened.
	e.sb.InjectFault("ProvisionIDProofedPatient", sandbox.Fault{Latency: 3 * time.Second, Times: 1})
	err = e.call(t, admin.OpProvision, janeArgs(), nil)
	if codeOf(err) != admin.CodeTimeout || !strings.Contains(err.Error(), "may have been provisioned") {
		t.Fatalf("slow provisioning: %v", err)
	}
}

func TestProviderUnavailable(t *testing.T) {
	e := newEnv(t)
	e.sb.InjectFault("GetPatientAddressByUsername", sandbox.Fault{Status: 503})
	err := e.call(t, admin.OpPatientByUsername, admin.PatientByUsernameArgs{Domain: "direct.example", Username: "alice"}, nil)
	if codeOf(err) != admin.CodeUnavailable {
		t.Fatalf("503: %v", err)
	}
	e.sb.ClearFaults()
	e.sb.InjectFault("GetPatientAddressByUsername", sandbox.Fault{Malformed: true})
	err = e.call(t, admin.OpPatientByUsername, admin.PatientByUsernameArgs{Domain: "direct.example", Username: "alice"}, nil)
	if codeOf(err) != admin.CodeProtocol {
		t.Fatalf("malformed answer: %v", err)
	}
}

func TestHealth(t *testing.T) {
	e := newEnv(t)
	var h admin.HealthResult
	e.mustCall(t, admin.OpHealth, nil, &h)
	if !h.Provider.Reachable || h.Provider.Error != "" || !h.Registration || h.Uptime == "" || h.Started.IsZero() {
		t.Fatalf("health: %+v", h)
	}
	if n := e.sb.TotalCalls(); n != 1 {
		t.Fatalf("health made %d provider calls, want 1", n)
	}
	e.sb.InjectFault("*", sandbox.Fault{Status: 500})
	e.mustCall(t, admin.OpHealth, nil, &h)
	if h.Provider.Reachable || !strings.Contains(h.Provider.Error, "500") {
		t.Fatalf("health with a failing provider: %+v", h)
	}
	noReg := newEnv(t, withoutRegistrar())
	noReg.mustCall(t, admin.OpHealth, nil, &h)
	if h.Registration {
		t.Fatal("health claims a registration account")
	}
}

// TestStatus sends through the provider as the SMTP front does and asks
// for the delivery status: a sandbox mailbox gets it (Delivered), another
// provider's has not confirmed it (Waiting).
func TestStatus(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	alice := directapi.Authentication{Username: "alice@direct.example", Password: sandbox.DemoPassword}
	send := func(to string) string {
		id, err := e.client.Send(ctx, alice, directapi.Message{Sender: alice.Username, Subject: "Referral", Body: "see attached",
			Recipients: []directapi.Recipient{{Email: to, Type: directapi.TO}}})
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	toBob, toOther := send("bob@direct.example"), send("someone@other.example")
	statusOf := func(logs []directapi.DirectMessageLog) map[string]string {
		m := map[string]string{}
		for _, l := range logs {
			m[l.To] = l.Status
		}
		return m
	}
	want := map[string]string{"bob@direct.example": directapi.StatusDelivered, "someone@other.example": directapi.StatusWaiting}

	var res admin.StatusResult
	e.mustCall(t, admin.OpStatus, admin.StatusArgs{User: alice.Username, Password: alice.Password, SmtpIDs: []string{toBob, toOther}}, &res)
	if got := statusOf(res.MessageLogs); len(got) != 2 || got["bob@direct.example"] != want["bob@direct.example"] || got["someone@other.example"] != want["someone@other.example"] {
		t.Fatalf("status: %+v", res.MessageLogs)
	}
	e.mustCall(t, admin.OpStatus, admin.StatusArgs{User: alice.Username, Password: alice.Password, SmtpIDs: []string{toOther}}, &res)
	if len(res.MessageLogs) != 1 || res.MessageLogs[0].Status != directapi.StatusWaiting || res.MessageLogs[0].MessageID == "" {
		t.Fatalf("status of one: %+v", res.MessageLogs)
	}

	// A T-user (the sandbox accepts the reseller account) acting for alice.
	e.mustCall(t, admin.OpStatusTuser, admin.StatusTuserArgs{User: "reseller", Password: sandbox.DemoPassword,
		DirectAddr: alice.Username, SmtpIDs: []string{toBob, toOther}}, &res)
	if got := statusOf(res.MessageLogs); got["bob@direct.example"] != directapi.StatusDelivered || got["someone@other.example"] != directapi.StatusWaiting {
		t.Fatalf("status-tuser: %+v", res.MessageLogs)
	}

	// Without smtpIds: the messages the bridge recorded for alice recently.
	now := time.Now()
	e.store.RecordSent(ctx, state.SentRecord{Username: alice.Username, SmtpID: toBob, MessageID: "<1@x>", SentAt: now.Add(-time.Minute)})
	e.store.RecordSent(ctx, state.SentRecord{Username: alice.Username, SmtpID: toOther, MessageID: "<2@x>", SentAt: now})
	e.store.RecordSent(ctx, state.SentRecord{Username: alice.Username, SmtpID: "old", MessageID: "<0@x>", SentAt: now.Add(-30 * 24 * time.Hour)})
	e.store.RecordSent(ctx, state.SentRecord{Username: "carol@direct.example", SmtpID: "carols", MessageID: "<3@x>", SentAt: now})
	res = admin.StatusResult{}
	e.mustCall(t, admin.OpStatus, admin.StatusArgs{User: "Alice@Direct.Example", Password: alice.Password}, &res)
	if len(res.Sent) != 2 || res.Sent[0].SmtpID != toOther || res.Sent[1].MessageID != "<1@x>" {
		t.Fatalf("recent sent records: %+v", res.Sent)
	}
	if got := statusOf(res.MessageLogs); len(got) != 2 || got["bob@direct.example"] != directapi.StatusDelivered {
		t.Fatalf("status of recent messages: %+v", res.MessageLogs)
	}
	// Nothing recent: an empty answer, not an error; but the password
	// is checked all the same.
	res = admin.StatusResult{}
	e.mustCall(t, admin.OpStatus, admin.StatusArgs{User: "bob@direct.example", Password: sandbox.DemoPassword}, &res)
	if res.MessageLogs == nil || len(res.MessageLogs) != 0 || len(res.Sent) != 0 {
		t.Fatalf("no recent messages: %+v", res)
	}
	if err := e.call(t, admin.OpStatus, admin.StatusArgs{User: "bob@direct.example", Password: "wrong"}, nil); codeOf(err) != "1" {
		t.Fatalf("no recent messages, wrong password: %v", err)
	}
	if strings.Contains(e.logs.String(), sandbox.DemoPassword) {
		t.Error("the mailbox password reached the log")
	}
}

// TestManyClients runs many connections at once, each with several
// requests, and one more than the limit.
func TestManyClients(t *testing.T) {
	e := newEnv(t, withMaxConns(64))
	var wg sync.WaitGroup
	errs := make(chan error, 64*3)
	for i := 0; i < 64; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := admin.Dial(context.Background(), e.path)
			if err != nil {
				errs <- err
				return
			}
			defer c.Close()
			for j := 0; j < 3; j++ {
				var res admin.PatientsResult
				if err := c.Call(context.Background(), admin.OpPatientByUsername,
					admin.PatientByUsernameArgs{Domain: "direct.example", Username: "bob"}, &res); err != nil || len(res.Patient) != 1 {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}

	// Hold the limit's worth of connections open: the next is told to wait.
	var held []*admin.Client
	for i := 0; i < 64; i++ {
		c, err := admin.Dial(context.Background(), e.path)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		held = append(held, c)
		if err := c.Call(context.Background(), admin.OpHealth, nil, nil); err != nil { // make sure it is being served
			t.Fatal(err)
		}
	}
	err := e.call(t, admin.OpHealth, nil, nil)
	if codeOf(err) != admin.CodeBusy {
		t.Fatalf("connection over the limit: %v", err)
	}
	held[0].Close()
	time.Sleep(100 * time.Millisecond)
	if err := e.call(t, admin.OpHealth, nil, nil); err != nil {
		t.Fatalf("after one closed: %v", err)
	}
}

// TestShutdown: idle connections do not hold a shutdown up, a request
// under way is answered, and the socket file goes.
func TestShutdown(t *testing.T) {
	e := newEnv(t)
	idle, err := net.Dial("unix", e.path)
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	e.sb.InjectFault("GetPatientAddressByUsername", sandbox.Fault{Latency: 500 * time.Millisecond, Times: 1})
	answered := make(chan error, 1)
	go func() {
		answered <- e.call(t, admin.OpPatientByUsername, admin.PatientByUsernameArgs{Domain: "direct.example", Username: "bob"}, nil)
	}()
	time.Sleep(150 * time.Millisecond) // the request is under way
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	start := time.Now()
	if err := e.srv.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("Shutdown took %s", d)
	}
	if err := <-answered; err != nil {
		t.Fatalf("request under way at shutdown: %v", err)
	}
	if _, err := os.Lstat(e.path); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("socket still there: %v", err)
	}
	if _, err := net.Dial("unix", e.path); err == nil {
		t.Fatal("still accepting")
	}

	// A shutdown that runs out of time cancels what is under way.
	e2 := newEnv(t)
	e2.sb.InjectFault("GetPatientAddressByUsername", sandbox.Fault{Latency: 5 * time.Second, Times: 1})
	go func() {
		answered <- e2.call(t, admin.OpPatientByUsername, admin.PatientByUsernameArgs{Domain: "direct.example", Username: "bob"}, nil)
	}()
	time.Sleep(150 * time.Millisecond)
	ctx2, cancel2 := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel2()
	if err := e2.srv.Shutdown(ctx2); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("forced Shutdown: %v", err)
	}
	if err := <-answered; err == nil {
		t.Fatal("canceled request answered ok")
	}
}

// TestForwardAndStats: "forward" has the provider forward a stored message
// (Forward), and "stats" reports each folder's message, unread and
// deleted counts (GetDeletedMessageCount among them).
func TestForwardAndStats(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	alice := directapi.Authentication{Username: "alice@direct.example", Password: sandbox.DemoPassword}
	bob := directapi.Authentication{Username: "bob@direct.example", Password: sandbox.DemoPassword}
	raw := "From: carol@direct.example\r\nTo: alice@direct.example\r\nSubject: lab\r\nMessage-ID: <lab@x>\r\n\r\nresults\r\n"
	for range 3 {
		if err := e.client.SaveRawMessages(ctx, alice, "INBOX", []directapi.RawMessage{directapi.NewRawMessage([]byte(raw))}); err != nil {
			t.Fatal(err)
		}
	}
	uids, err := e.client.GetUIDs(ctx, alice, "INBOX")
	if err != nil || len(uids) < 3 {
		t.Fatalf("uids %v, %v", uids, err)
	}
	if err := e.client.DeleteMessagesByUIDs(ctx, alice, "INBOX", uids[:1], false); err != nil {
		t.Fatal(err)
	}
	before, _ := e.client.GetMessageCount(ctx, bob, "INBOX")
	var fw admin.ForwardResult
	e.mustCall(t, admin.OpForward, admin.ForwardArgs{User: alice.Username, Password: alice.Password, Folder: "INBOX",
		UIDs: uids[1:2], Recipients: []string{"bob@direct.example"}}, &fw)
	if fw.SmtpID == "" {
		t.Fatal("forward: no smtpId")
	}
	if after, _ := e.client.GetMessageCount(ctx, bob, "INBOX"); after != before+1 {
		t.Errorf("bob's INBOX %d -> %d; want one forwarded message", before, after)
	}
	var st admin.StatsResult
	e.mustCall(t, admin.OpStats, admin.StatsArgs{User: alice.Username, Password: alice.Password, Folders: []string{"INBOX"}}, &st)
	if len(st.Folders) != 1 || st.Folders[0].Deleted != 1 || st.Folders[0].Messages != len(uids)-1 || st.Folders[0].Unread != len(uids)-1 {
		t.Errorf("stats %+v (%d messages saved, one deleted)", st, len(uids))
	}
	var all admin.StatsResult
	e.mustCall(t, admin.OpStats, admin.StatsArgs{User: alice.Username, Password: alice.Password}, &all)
	if len(all.Folders) < 2 {
		t.Errorf("stats of every folder: %+v", all)
	}
	if err := e.call(t, admin.OpForward, admin.ForwardArgs{User: alice.Username, Password: "wrong", Folder: "INBOX",
		UIDs: uids[1:2], Recipients: []string{"bob@direct.example"}}, nil); codeOf(err) != "1" {
		t.Errorf("forward with a wrong password: %v", err)
	}
}

// TestMessagesReachesProviderListings: "messages" reaches each of the
// provider's listing and search operations, and reports metadata only.
func TestMessagesReachesProviderListings(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	alice := directapi.Authentication{Username: "alice@direct.example", Password: sandbox.DemoPassword}
	raw := "From: carol@direct.example\r\nTo: alice@direct.example\r\nSubject: lab results\r\nMessage-ID: <m1@x>\r\n\r\nconfidential body\r\n"
	if err := e.client.SaveRawMessages(ctx, alice, "INBOX", []directapi.RawMessage{directapi.NewRawMessage([]byte(raw))}); err != nil {
		t.Fatal(err)
	}
	since, before := time.Now().Add(-time.Hour), time.Now().Add(time.Hour)
	for _, tc := range []struct {
		args admin.MessagesArgs
		op   string
	}{
		{admin.MessagesArgs{Since: since, Before: before}, "SearchMessagesMetadataByReceivedDate"},
		{admin.MessagesArgs{Since: since, Before: before, UTC: true}, "SearchMessagesMetadataByReceivedDateUTC"},
		{admin.MessagesArgs{Since: since, Before: before, Full: true}, "GetMessagesByReceivedDate"},
		{admin.MessagesArgs{Since: since, Before: before, Full: true, UTC: true}, "GetMessagesByReceivedDateUTC"},
		{admin.MessagesArgs{Sender: "carol@direct.example"}, "GetMessagesBySender"},
		{admin.MessagesArgs{Subject: "lab results"}, "GetMessagesBySubject"},
		{admin.MessagesArgs{All: true, Full: true}, "GetMessages"},
		{admin.MessagesArgs{All: true}, "GetMessageMetaData"},
	} {
		a := tc.args
		a.User, a.Password, a.Folder = alice.Username, alice.Password, "INBOX"
		before := e.sb.Calls(tc.op)
		var res admin.MessagesResult
		e.mustCall(t, admin.OpMessages, a, &res)
		if res.Operation != tc.op || e.sb.Calls(tc.op) != before+1 {
			t.Errorf("%+v: operation %q, %d calls of %s", tc.args, res.Operation, e.sb.Calls(tc.op)-before, tc.op)
		}
		found := false
		for _, m := range res.Messages {
			found = found || m.MessageID == "<m1@x>"
		}
		if !found {
			t.Errorf("%s: the message is not listed: %+v", tc.op, res.Messages)
		}
	}
	if err := e.call(t, admin.OpMessages, admin.MessagesArgs{User: alice.Username, Password: alice.Password, Folder: "INBOX"}, nil); codeOf(err) != admin.CodeBadRequest {
		t.Errorf("no selection: %v", err)
	}
	if strings.Contains(e.logs.String(), "confidential") || strings.Contains(e.logs.String(), "lab results") {
		t.Error("message content in the logs")
	}
}

func withBudget(b *upstream.Budget) option { return func(c *admin.Config, _ *env) { c.Budget = b } }

// TestProviderRequestsSpendBudget: the admin socket's provider requests
// (delivery status, registration with its login, the health probe) wait
// for the bridge's request budget like the mail fronts' do, one token per
// HTTP request, at Interactive priority; with the budget spent, an
// operation waits for it until its time limit and reaches no provider.
func TestProviderRequestsSpendBudget(t *testing.T) {
	b := upstream.NewBudget(1000)
	e := newEnv(t, withBudget(b))
	ctx := context.Background()
	alice := directapi.Authentication{Username: "alice@direct.example", Password: sandbox.DemoPassword}
	var ids []string
	for _, to := range []string{"bob@direct.example", "someone@other.example"} {
		id, err := e.client.Send(ctx, alice, directapi.Message{Sender: alice.Username, Subject: "s", Body: "b",
			Recipients: []directapi.Recipient{{Email: to, Type: directapi.TO}}})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	for _, tc := range []struct {
		op       string
		args     any
		requests int
	}{
		{admin.OpStatus, admin.StatusArgs{User: alice.Username, Password: alice.Password, SmtpIDs: ids}, 1},
		{admin.OpStatusTuser, admin.StatusTuserArgs{User: "reseller", Password: sandbox.DemoPassword, DirectAddr: alice.Username, SmtpIDs: ids}, 2},
		{admin.OpPatientByUsername, admin.PatientByUsernameArgs{Domain: "direct.example", Username: "alice"}, 2}, // Login first
		{admin.OpPatientByUsername, admin.PatientByUsernameArgs{Domain: "direct.example", Username: "bob"}, 1},   // the session kept
		{admin.OpStats, admin.StatsArgs{User: alice.Username, Password: alice.Password, Folders: []string{"INBOX"}}, 3},
		{admin.OpHealth, nil, 1},
	} {
		before, sent := b.Stats().Granted, e.sb.TotalCalls()
		e.mustCall(t, tc.op, tc.args, nil)
		after, requests := b.Stats().Granted, e.sb.TotalCalls()-sent
		if tokens := after[upstream.Interactive] - before[upstream.Interactive]; int(tokens) != requests || requests != tc.requests {
			t.Errorf("%s: %d interactive tokens for %d provider requests; want %d of each", tc.op, tokens, requests, tc.requests)
		}
		if after[upstream.Poll] != before[upstream.Poll] || after[upstream.ReadAhead] != before[upstream.ReadAhead] {
			t.Errorf("%s: tokens of another priority spent: %v -> %v", tc.op, before, after)
		}
	}

	// The budget spent (by the mail fronts, say): the operation waits
	// and times out, and the provider never sees it.
	spent := upstream.NewBudget(0.5)
	if err := spent.Wait(ctx, "alice@direct.example"); err != nil {
		t.Fatal(err)
	}
	short := newEnv(t, withBudget(spent), withRequestTimeout(300*time.Millisecond))
	err := short.call(t, admin.OpStatus, admin.StatusArgs{User: alice.Username, Password: alice.Password, SmtpIDs: ids[:1]}, nil)
	if codeOf(err) != admin.CodeTimeout {
		t.Fatalf("status with the budget spent: %v; want %s", err, admin.CodeTimeout)
	}
	if n := short.sb.TotalCalls(); n != 0 {
		t.Errorf("the provider saw %d requests made without the budget's leave", n)
	}
}
