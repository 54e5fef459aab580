package bridge_test

import (
	"context"
	"crypto/tls"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"

	"github.com/directbridge/directbridge/bridge"
	"github.com/directbridge/directbridge/internal/admin"
	"github.com/directbridge/directbridge/upstream/directapi"
)

// startBridge runs b until the test ends and returns a function that stops
// it and reports Run's error.
func startBridge(t *testing.T, b *bridge.Bridge) (stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.Run(ctx) }()
	var once sync.Once
	var runErr error
	stop = func() error {
		// Once, from a test's goroutine and from the cleanup alike.
		once.Do(func() {
			cancel()
			select {
			case runErr = <-done:
			case <-time.After(40 * time.Second):
				runErr = errors.New("Run did not return after cancel")
				t.Error(runErr)
			}
		})
		return runErr
	}
	t.Cleanup(func() { stop() })
	return stop
}

func adminCall(t *testing.T, path, op string, args, result any) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := admin.Dial(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	return c.Call(ctx, op, args, result)
}

// TestAdminSocket: the bridge on its embedded sandbox serves the admin
// socket in its data directory, provisions with the sandbox's reseller
// account, reports the status of what went through SMTP, and removes the
// socket when it stops.
func TestAdminSocket(t *testing.T) {
	cfg := testConfig(t)
	var banner strings.Builder
	b, err := bridge.New(cfg, nil, &banner)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(cfg.DataDir, bridge.AdminSocketName)
	if cfg.AdminSocketPath() != path {
		t.Fatalf("AdminSocketPath %q, want %q", cfg.AdminSocketPath(), path)
	}
	stop := startBridge(t, b)
	if fi, err := os.Lstat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("admin socket: %v %v", fi, err)
	}

	var h admin.HealthResult
	if err := adminCall(t, path, admin.OpHealth, nil, &h); err != nil || !h.Provider.Reachable || !h.Registration {
		t.Fatalf("health: %+v %v", h, err)
	}
	var prov admin.ProvisionResult
	if err := adminCall(t, path, admin.OpProvision, admin.ProvisionArgs{Domain: "direct.example",
		Identity:       admin.Identity{FirstName: "Jane", LastName: "Doe", SSN4: "1234", DOB: "1980-02-03"},
		DirectUsername: "jane.doe", DirectPassword: "jane-password-1"}, &prov); err != nil {
		t.Fatalf("provision: %v", err)
	}
	if len(prov.Users) != 1 || prov.Users[0].Username != "jane.doe" {
		t.Fatalf("provision: %+v", prov)
	}

	// A message through SMTP is recorded, so status needs no smtpId.
	c, err := smtp.DialStartTLS(b.Addr("SMTP submission (STARTTLS)"), &tls.Config{InsecureSkipVerify: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Auth(sasl.NewPlainClient("", "alice@direct.example", "sandbox-demo")); err != nil {
		t.Fatal(err)
	}
	msg := "From: alice@direct.example\r\nTo: jane.doe@direct.example\r\nMessage-ID: <admin-1@direct.example>\r\nSubject: hi\r\n\r\nhello\r\n"
	if err := c.SendMail("alice@direct.example", []string{"jane.doe@direct.example"}, strings.NewReader(msg)); err != nil {
		t.Fatal(err)
	}
	c.Quit()
	var st admin.StatusResult
	if err := adminCall(t, path, admin.OpStatus, admin.StatusArgs{User: "alice@direct.example", Password: "sandbox-demo"}, &st); err != nil {
		t.Fatalf("status: %v", err)
	}
	if len(st.Sent) != 1 || st.Sent[0].MessageID != "<admin-1@direct.example>" ||
		len(st.MessageLogs) != 1 || st.MessageLogs[0].To != "jane.doe@direct.example" || st.MessageLogs[0].Status != directapi.StatusDelivered {
		t.Fatalf("status: %+v", st)
	}

	if err := stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if _, err := os.Lstat(path); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("admin socket left behind: %v", err)
	}
	if !strings.Contains(banner.String(), "admin socket:") || !strings.Contains(banner.String(), path) {
		t.Fatalf("banner lacks the admin socket:\n%s", banner.String())
	}
}

func TestAdminConfig(t *testing.T) {
	// Off: no socket, no banner line.
	cfg := testConfig(t)
	cfg.AdminSocket = bridge.Off
	var banner strings.Builder
	b, err := bridge.New(cfg, nil, &banner)
	if err != nil {
		t.Fatal(err)
	}
	if err := startBridge(t, b)(); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(banner.String(), "admin socket") || cfg.AdminSocketPath() != "" {
		t.Fatalf("admin socket off, but banner says:\n%s", banner.String())
	}
	if _, err := os.Lstat(filepath.Join(cfg.DataDir, bridge.AdminSocketName)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("socket created although off: %v", err)
	}

	// A configured path and a configured reseller account, which wins over
	// the sandbox's.
	cfg = testConfig(t)
	cfg.AdminSocket = filepath.Join(t.TempDir(), "ctl", "db.sock")
	cfg.ResellerUser, cfg.ResellerPassword = "reseller", "not-the-password"
	banner.Reset()
	b, err = bridge.New(cfg, nil, &banner)
	if err != nil {
		t.Fatal(err)
	}
	stop := startBridge(t, b)
	err = adminCall(t, cfg.AdminSocket, admin.OpPatientByUsername, admin.PatientByUsernameArgs{Domain: "direct.example", Username: "alice"}, nil)
	var ae *admin.Error
	if !errors.As(err, &ae) || ae.Code != directapi.RegCodeAuthFailed {
		t.Fatalf("with a wrong reseller password: %v", err)
	}

	// Two bridges on one socket: the second is refused.
	cfg2 := testConfig(t)
	cfg2.AdminSocket = cfg.AdminSocket
	if _, err := bridge.New(cfg2, nil, nil); err == nil || !strings.Contains(err.Error(), "in use") {
		t.Fatalf("second bridge on the same socket: %v", err)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(banner.String(), "admin socket:") || !strings.Contains(banner.String(), cfg.AdminSocket) {
		t.Fatalf("banner lacks the admin socket:\n%s", banner.String())
	}
	if strings.Contains(banner.String(), "not-the-password") {
		t.Fatal("banner shows the reseller password")
	}

	// A relative data directory gives an absolute socket path.
	rel := bridge.Config{DataDir: "state"}
	if p := rel.AdminSocketPath(); !filepath.IsAbs(p) || !strings.HasSuffix(p, filepath.Join("state", bridge.AdminSocketName)) {
		t.Errorf("AdminSocketPath with a relative data directory: %q", p)
	}
	// A data directory too deep for a socket path says what to do.
	deep := testConfig(t)
	deep.DataDir = filepath.Join(deep.DataDir, strings.Repeat("d", 100))
	if _, err := bridge.New(deep, nil, nil); err == nil || !strings.Contains(err.Error(), "DIRECTBRIDGE_ADMIN_SOCKET") {
		t.Errorf("deep data directory: %v", err)
	}

	// Invalid settings, one line each.
	for _, tc := range []struct {
		mod  func(*bridge.Config)
		want string
	}{
		{func(c *bridge.Config) { c.AdminSocket = "admin.sock" }, "DIRECTBRIDGE_ADMIN_SOCKET"},
		{func(c *bridge.Config) { c.AdminSocket = "/" + strings.Repeat("x", 200) }, "DIRECTBRIDGE_ADMIN_SOCKET"},
		{func(c *bridge.Config) { c.ResellerUser = "reseller" }, "DIRECTBRIDGE_RESELLER_PASSWORD"},
		{func(c *bridge.Config) { c.ResellerPassword = "x" }, "DIRECTBRIDGE_RESELLER_USER"},
	} {
		cfg := testConfig(t)
		tc.mod(&cfg)
		if _, err := bridge.New(cfg, nil, nil); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("want an error naming %s, got %v", tc.want, err)
		}
	}
}

// TestAdminSocketSpendsBudget: the admin socket's provider requests go
// through the bridge's request budget (DIRECTBRIDGE_API_RATE_LIMIT), as
// the mail fronts' do: its granted tokens grow by the requests a status
// and a registration look-up make.
func TestAdminSocketSpendsBudget(t *testing.T) {
	cfg := testConfig(t)
	cfg.APIRateLimit = "1000"
	cfg.MetricsAddr = "127.0.0.1:0"
	b, err := bridge.New(cfg, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	startBridge(t, b)
	const granted = `directbridge_budget_granted_total{priority="interactive"}`
	tokens := func() float64 {
		_, scrape := httpGet(t, "http://"+b.Addr(bridge.MetricsListener)+"/metrics")
		return metricValue(scrape, granted)
	}
	path := cfg.AdminSocketPath()
	for _, tc := range []struct {
		op       string
		args     any
		requests float64
	}{
		{admin.OpStatus, admin.StatusArgs{User: "alice@direct.example", Password: "sandbox-demo", SmtpIDs: []string{"nothing-sent"}}, 1},
		{admin.OpPatientByUsername, admin.PatientByUsernameArgs{Domain: "direct.example", Username: "alice"}, 2}, // and the login
	} {
		before := tokens()
		if err := adminCall(t, path, tc.op, tc.args, nil); err != nil {
			t.Fatalf("%s: %v", tc.op, err)
		}
		if got := tokens() - before; got != tc.requests {
			t.Errorf("%s spent %v tokens of the bridge's budget, want %v", tc.op, got, tc.requests)
		}
	}
}
