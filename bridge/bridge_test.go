package bridge_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"
	"github.com/kelseyhightower/envconfig"

	"github.com/directbridge/directbridge/bridge"
)

// testConfig is the default configuration on free loopback ports.
func testConfig(t *testing.T) bridge.Config {
	t.Helper()
	cfg := bridge.DefaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.SMTPAddr, cfg.SMTPSAddr, cfg.SandboxConfig.Addr = "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0"
	cfg.IMAPAddr, cfg.IMAPSAddr = "127.0.0.1:0", "127.0.0.1:0"
	return cfg
}

func TestConfigValidation(t *testing.T) {
	for _, tc := range []struct {
		name string
		mod  func(*bridge.Config)
		want string
	}{
		{"bad SMTP address", func(c *bridge.Config) { c.SMTPAddr = "localhost" }, "DIRECTBRIDGE_SMTP_ADDR"},
		{"bad SMTPS address", func(c *bridge.Config) { c.SMTPSAddr = "1465" }, "DIRECTBRIDGE_SMTPS_ADDR"},
		{"API URL not http", func(c *bridge.Config) { c.APIURL = "hisp.example" }, "DIRECTBRIDGE_API_URL"},
		{"cert without key", func(c *bridge.Config) { c.TLSCert = "/x.pem" }, "DIRECTBRIDGE_TLS_KEY"},
		{"unreadable certificate", func(c *bridge.Config) { c.TLSCert, c.TLSKey = "/nonexistent/c.pem", "/nonexistent/k.pem" }, "TLS certificate"},
		{"batch too large", func(c *bridge.Config) { c.APIBatchSize = 5000 }, "DIRECTBRIDGE_API_BATCH_SIZE"},
		{"size over the request", func(c *bridge.Config) { c.SMTPMaxMessageBytes = 60 << 20 }, "DIRECTBRIDGE_SMTP_MAX_MESSAGE_BYTES"},
		{"append over the request", func(c *bridge.Config) { c.IMAPAppendLimit = 60 << 20 }, "DIRECTBRIDGE_IMAP_APPEND_LIMIT"},
		{"timeout zero", func(c *bridge.Config) { c.APITimeout = 0 }, "DIRECTBRIDGE_API_TIMEOUT"},
		{"bad IMAP address", func(c *bridge.Config) { c.IMAPAddr = "imap" }, "DIRECTBRIDGE_IMAP_ADDR"},
		{"peer exchange alone", func(c *bridge.Config) { c.PeerAddr = ":7144" }, "DIRECTBRIDGE_PEER_ADDR"},
		{"advertised without a port", func(c *bridge.Config) { c.PeerAdvertise = "replica-1:" }, "DIRECTBRIDGE_PEER_ADVERTISE"},
		{"advertised nonsense", func(c *bridge.Config) { c.PeerAdvertise = "a:b:c" }, "DIRECTBRIDGE_PEER_ADVERTISE"},
		{"poll too fast", func(c *bridge.Config) { c.PollInterval = time.Millisecond }, "DIRECTBRIDGE_POLL_INTERVAL"},
		{"unknown expunge policy", func(c *bridge.Config) { c.ExpungePolicy = "shred" }, "DIRECTBRIDGE_EXPUNGE"},
		{"bad sandbox users", func(c *bridge.Config) { c.Users = "alice" }, "DIRECTBRIDGE_SANDBOX_USERS"},
		{"state URL not PostgreSQL", func(c *bridge.Config) { c.StateURL = "mysql://x" }, "DIRECTBRIDGE_STATE_URL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig(t)
			tc.mod(&cfg)
			b, err := bridge.New(cfg, nil, nil)
			if err == nil {
				t.Fatalf("New accepted the configuration")
			}
			_ = b
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q does not name %s", err, tc.want)
			}
		})
	}
	// Several problems: one line each.
	cfg := testConfig(t)
	cfg.SMTPAddr, cfg.APIBatchSize = "nope", 0
	_, err := bridge.New(cfg, nil, nil)
	if err == nil || len(strings.Split(err.Error(), "\n")) != 2 {
		t.Fatalf("want two problems on two lines, got %v", err)
	}
}

// TestEmbeddedSandboxLatency: DIRECTBRIDGE_SANDBOX_LATENCY reaches the
// embedded sandbox and the banner; a negative value stops start-up.
func TestEmbeddedSandboxLatency(t *testing.T) {
	cfg := testConfig(t)
	cfg.SandboxConfig.Latency = 25 * time.Millisecond
	var banner strings.Builder
	b, err := bridge.New(cfg, nil, &banner)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.Run(ctx) }()
	if got := b.Sandbox().Latency(); got != 25*time.Millisecond {
		t.Errorf("embedded sandbox latency %v, want 25ms", got)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	if !strings.Contains(banner.String(), "25ms added to every sandbox answer") {
		t.Errorf("banner does not show the latency:\n%s", banner.String())
	}

	cfg = testConfig(t)
	cfg.SandboxConfig.Latency = -time.Millisecond
	if _, err := bridge.New(cfg, nil, nil); err == nil || !strings.Contains(err.Error(), "DIRECTBRIDGE_SANDBOX_LATENCY") {
		t.Errorf("negative latency: %v, want an error naming DIRECTBRIDGE_SANDBOX_LATENCY", err)
	}
}

// TestSendThroughEmbeddedSandbox runs the bridge as README's first command
// does and submits a message over STARTTLS and over implicit TLS.
func TestSendThroughEmbeddedSandbox(t *testing.T) {
	cfg := testConfig(t)
	var banner strings.Builder
	b, err := bridge.New(cfg, nil, &banner)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.Run(ctx) }()

	send := func(c *smtp.Client, subject string) {
		t.Helper()
		if err := c.Auth(sasl.NewPlainClient("", "alice@direct.example", "sandbox-demo")); err != nil {
			t.Fatal(err)
		}
		msg := "From: alice@direct.example\r\nTo: bob@direct.example\r\nSubject: " + subject + "\r\n\r\nhello\r\n"
		if err := c.SendMail("alice@direct.example", []string{"bob@direct.example"}, strings.NewReader(msg)); err != nil {
			t.Fatal(err)
		}
		c.Quit()
	}
	tlsCfg := &tls.Config{InsecureSkipVerify: true}
	c, err := smtp.DialStartTLS(b.Addr("SMTP submission (STARTTLS)"), tlsCfg)
	if err != nil {
		t.Fatal(err)
	}
	send(c, "one")
	c, err = smtp.DialTLS(b.Addr("SMTP submission (TLS)"), tlsCfg)
	if err != nil {
		t.Fatal(err)
	}
	send(c, "two")

	for _, want := range []string{"127.0.0.1", "SHA-256", "alice@direct.example", "sandbox-demo", "embedded sandbox"} {
		if !strings.Contains(banner.String(), want) {
			t.Errorf("banner lacks %q:\n%s", want, banner.String())
		}
	}
	if n := b.Sandbox().Calls("Send"); n != 2 {
		t.Errorf("%d Send calls; want 2", n)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(40 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
	// The mail stays in the data directory.
	if _, err := os.Stat(filepath.Join(cfg.DataDir, "sandbox", "sandbox.db")); err != nil {
		t.Fatal(err)
	}
}

// Example embeds the bridge in another Go program: configure, New, Run
// until the context ends.
func Example() {
	cfg := bridge.DefaultConfig()
	dir, _ := os.MkdirTemp("", "bridge-example-")
	defer os.RemoveAll(dir)
	cfg.DataDir = dir
	cfg.SMTPAddr, cfg.SMTPSAddr, cfg.SandboxConfig.Addr = "127.0.0.1:0", "off", "127.0.0.1:0"
	cfg.IMAPAddr, cfg.IMAPSAddr = "127.0.0.1:0", "off"

	b, err := bridge.New(cfg, nil, io.Discard)
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	err = b.Run(ctx) // returns after ctx ends and everything has stopped
	fmt.Println("stopped cleanly:", err == nil)
	// Output: stopped cleanly: true
}

// TestDefaultConfig: DefaultConfig is what envconfig gives with nothing
// set (every default tag parses), and ConfigFromEnv takes a variable of
// the environment.
func TestDefaultConfig(t *testing.T) {
	var want bridge.Config
	if err := envconfig.Process("DIRECTBRIDGE_TEST_UNSET", &want); err != nil {
		t.Fatal(err)
	}
	if got := bridge.DefaultConfig(); !reflect.DeepEqual(got, want) {
		t.Errorf("DefaultConfig() = %+v\nenvconfig with nothing set = %+v", got, want)
	}
	if d := bridge.DefaultConfig(); d.IMAPAddr != "127.0.0.1:1143" || d.APITimeout != time.Minute || d.APIBatchSize != 500 {
		t.Errorf("DefaultConfig(): IMAP %q, API timeout %v, batch %d", d.IMAPAddr, d.APITimeout, d.APIBatchSize)
	}
	t.Setenv("DIRECTBRIDGE_IMAP_ADDR", "127.0.0.1:2143")
	// Variables without the prefix belong to other programs: envconfig
	// would take them when the prefixed one is unset.
	t.Setenv("SMTP_ADDR", "0.0.0.0:25")
	t.Setenv("SANDBOX_DOMAIN", "elsewhere.example")
	t.Setenv("API_TIMEOUT", "30") // not even a duration: must not stop the start
	t.Setenv("POLL_INTERVAL", "")
	cfg, err := bridge.ConfigFromEnv()
	if err != nil || cfg.IMAPAddr != "127.0.0.1:2143" || cfg.SMTPAddr != "127.0.0.1:1587" ||
		cfg.SandboxConfig.Domain != "direct.example" || cfg.APITimeout != time.Minute {
		t.Errorf("ConfigFromEnv() = IMAP %q SMTP %q sandbox domain %q API timeout %v, %v; want the unprefixed variables ignored",
			cfg.IMAPAddr, cfg.SMTPAddr, cfg.SandboxConfig.Domain, cfg.APITimeout, err)
	}
	t.Setenv("DIRECTBRIDGE_API_TIMEOUT", "30")
	if _, err := bridge.ConfigFromEnv(); err == nil || !strings.Contains(err.Error(), "DIRECTBRIDGE_API_TIMEOUT") {
		t.Errorf("ConfigFromEnv() with DIRECTBRIDGE_API_TIMEOUT=30: %v; want an error naming it", err)
	}
}
