package bridge_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2/imapclient"
	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"

	"github.com/directbridge/directbridge/bridge"
)

// runBridge starts b.Run and stops it at cleanup, checking that it returns nil.
func runBridge(t *testing.T, b *bridge.Bridge) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(40 * time.Second):
			t.Error("Run did not return after cancel")
		}
	})
}

// httpGet returns the status and body of GET url.
func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	c := &http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// waitReady polls /readyz until it answers want, and returns its last body.
func waitReady(t *testing.T, base string, want int) string {
	t.Helper()
	var code int
	var body string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if code, body = httpGet(t, base+"/readyz"); code == want {
			return body
		}
	}
	t.Fatalf("/readyz: %d %s; want %d", code, body, want)
	return ""
}

// metricValue returns the value of the sample line that starts with series
// (name and labels as exposed), or -1.
func metricValue(scrape, series string) float64 {
	for _, line := range strings.Split(scrape, "\n") {
		if rest, ok := strings.CutPrefix(line, series+" "); ok {
			v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			if err != nil {
				return -1
			}
			return v
		}
	}
	return -1
}

// TestMetricsAndHealth runs the bridge on the embedded sandbox with the
// metrics listener, does an IMAP login and select and an SMTP send, and
// checks what /metrics, /healthz and /readyz say.
func TestMetricsAndHealth(t *testing.T) {
	cfg := testConfig(t)
	cfg.MetricsAddr = "127.0.0.1:0"
	var banner strings.Builder
	b, err := bridge.New(cfg, nil, &banner)
	if err != nil {
		t.Fatal(err)
	}
	addr := b.Addr(bridge.MetricsListener)
	if addr == "" {
		t.Fatal("no metrics listener")
	}
	base := "http://" + addr
	runBridge(t, b)

	const subject = "Lab results for patient Zq7Xw"
	const password = "sandbox-demo"

	// IMAP: login and select over STARTTLS.
	tlsCfg := &tls.Config{InsecureSkipVerify: true}
	ic, err := imapclient.DialStartTLS(b.Addr("IMAP (STARTTLS)"), &imapclient.Options{TLSConfig: tlsCfg})
	if err != nil {
		t.Fatal(err)
	}
	if err := ic.Login("alice@direct.example", password).Wait(); err != nil {
		t.Fatal(err)
	}
	if _, err := ic.Select("INBOX", nil).Wait(); err != nil {
		t.Fatal(err)
	}
	ic.Logout().Wait()
	ic.Close()
	// A wrong IMAP password.
	ic, err = imapclient.DialStartTLS(b.Addr("IMAP (STARTTLS)"), &imapclient.Options{TLSConfig: tlsCfg})
	if err != nil {
		t.Fatal(err)
	}
	if err := ic.Login("bob@direct.example", "not-the-password").Wait(); err == nil {
		t.Fatal("LOGIN with a wrong password succeeded")
	}
	ic.Close()

	// SMTP: one message over STARTTLS.
	sc, err := smtp.DialStartTLS(b.Addr("SMTP submission (STARTTLS)"), tlsCfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := sc.Auth(sasl.NewPlainClient("", "alice@direct.example", password)); err != nil {
		t.Fatal(err)
	}
	msg := "From: alice@direct.example\r\nTo: bob@direct.example\r\nSubject: " + subject + "\r\n\r\nhello\r\n"
	if err := sc.SendMail("alice@direct.example", []string{"bob@direct.example"}, strings.NewReader(msg)); err != nil {
		t.Fatal(err)
	}
	sc.Quit()

	// A wrong SMTP password.
	sc, err = smtp.DialStartTLS(b.Addr("SMTP submission (STARTTLS)"), tlsCfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := sc.Auth(sasl.NewPlainClient("", "bob@direct.example", "wrong-pw-xyz")); err == nil {
		t.Fatal("AUTH with a wrong password succeeded")
	}
	sc.Close()

	if code, body := httpGet(t, base+"/healthz"); code != 200 || strings.TrimSpace(body) != "ok" {
		t.Errorf("/healthz: %d %q", code, body)
	}
	var ready struct {
		Ready    bool `json:"ready"`
		Provider struct {
			Reachable bool      `json:"reachable"`
			CheckedAt time.Time `json:"checked_at"`
		} `json:"provider"`
		State *struct {
			Reachable bool `json:"reachable"`
		} `json:"state"`
	}
	if err := json.Unmarshal([]byte(waitReady(t, base, 200)), &ready); err != nil {
		t.Fatal(err)
	}
	if !ready.Ready || !ready.Provider.Reachable || time.Since(ready.Provider.CheckedAt) > time.Minute || ready.State == nil || !ready.State.Reachable {
		t.Errorf("/readyz: %+v", ready)
	}

	// Connections end on the server side a moment after the client's.
	var scrape string
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		var code int
		code, scrape = httpGet(t, base+"/metrics")
		if code != 200 {
			t.Fatalf("/metrics: HTTP %d", code)
		}
		if metricValue(scrape, `directbridge_connections_open{protocol="imap"}`) == 0 &&
			metricValue(scrape, `directbridge_connections_open{protocol="smtp"}`) == 0 || time.Now().After(deadline) {
			break
		}
	}
	for series, want := range map[string]float64{
		`directbridge_connections_accepted_total{protocol="imap"}`:                  2,
		`directbridge_connections_accepted_total{protocol="smtp"}`:                  2,
		`directbridge_connections_open{protocol="imap"}`:                            0,
		`directbridge_connections_open{protocol="smtp"}`:                            0,
		`directbridge_imap_commands_total{command="LOGIN",result="ok"}`:             1,
		`directbridge_imap_commands_total{command="LOGIN",result="no"}`:             1,
		`directbridge_imap_commands_total{command="SELECT",result="ok"}`:            1,
		`directbridge_smtp_commands_total{command="AUTH",result="ok"}`:              1,
		`directbridge_smtp_commands_total{command="AUTH",result="permanent"}`:       1,
		`directbridge_smtp_commands_total{command="MAIL",result="ok"}`:              1,
		`directbridge_smtp_commands_total{command="RCPT",result="ok"}`:              1,
		`directbridge_smtp_commands_total{command="DATA",result="ok"}`:              1,
		`directbridge_smtp_messages_total{result="sent"}`:                           1,
		`directbridge_auth_failures_total{protocol="smtp",reason="credentials"}`:    1,
		`directbridge_auth_failures_total{protocol="imap",reason="credentials"}`:    1,
		`directbridge_rest_requests_total{op="Send",result="ok"}`:                   1,
		`directbridge_rest_request_duration_seconds_count{op="Send"}`:               1,
		`directbridge_provider_reachable`:                                           1,
		`directbridge_auth_failures_total{protocol="imap",reason="unavailable"}`:    0,
		`directbridge_auth_failures_total{protocol="smtp",reason="unavailable"}`:    0,
		`directbridge_rest_requests_total{op="GetMessageCount",result="api_error"}`: 2, // the two wrong passwords
	} {
		if got := metricValue(scrape, series); got != want {
			t.Errorf("%s = %v; want %v", series, got, want)
		}
	}
	if metricValue(scrape, `directbridge_rest_requests_total{op="GetMessageCount",result="ok"}`) < 1 {
		t.Error("the credential check's GetMessageCount is not counted")
	}
	if metricValue(scrape, `directbridge_rest_requests_total{op="GetUIDs",result="ok"}`) < 1 &&
		metricValue(scrape, `directbridge_rest_requests_total{op="GetMessageMetaData",result="ok"}`) < 1 {
		t.Error("SELECT's REST calls are not counted")
	}
	for _, secret := range []string{"alice", "bob", "direct.example", password, "wrong-pw-xyz", "not-the-password",
		"Lab results", "Zq7Xw", "INBOX"} {
		if strings.Contains(scrape, secret) {
			t.Errorf("/metrics contains %q", secret)
		}
	}
	// Every label value is a short identifier.
	for _, m := range regexp.MustCompile(`="([^"]*)"`).FindAllStringSubmatch(scrape, -1) {
		if !regexp.MustCompile(`^[A-Za-z0-9_.+:/ -]{0,64}$`).MatchString(m[1]) {
			t.Errorf("unexpected label value %q", m[1])
		}
	}
	if !strings.Contains(banner.String(), addr) {
		t.Errorf("the banner does not show the metrics address %s:\n%s", addr, banner.String())
	}
}

// TestReadinessProviderDown: with the provider unreachable the bridge
// still starts; it is alive but not ready.
func TestReadinessProviderDown(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().String()
	l.Close()

	cfg := testConfig(t)
	cfg.APIURL = "http://" + closed
	cfg.MetricsAddr = "127.0.0.1:0"
	b, err := bridge.New(cfg, nil, nil)
	if err != nil {
		t.Fatalf("New with an unreachable provider: %v", err)
	}
	base := "http://" + b.Addr(bridge.MetricsListener)
	runBridge(t, b)

	body := waitReady(t, base, 503)
	// Not ready before the first check too; wait for the check's verdict.
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(body, "provider unreachable") && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		_, body = httpGet(t, base+"/readyz")
	}
	var ready struct {
		Ready    bool   `json:"ready"`
		Reason   string `json:"reason"`
		Provider struct {
			Reachable bool   `json:"reachable"`
			Error     string `json:"error"`
		} `json:"provider"`
	}
	if err := json.Unmarshal([]byte(body), &ready); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	if ready.Ready || ready.Reason != "provider unreachable" || ready.Provider.Reachable || ready.Provider.Error == "" {
		t.Errorf("/readyz body: %s", body)
	}
	if code, _ := httpGet(t, base+"/readyz"); code != 503 {
		t.Errorf("/readyz: HTTP %d; want 503", code)
	}
	if code, _ := httpGet(t, base+"/healthz"); code != 200 {
		t.Errorf("/healthz: HTTP %d; want 200", code)
	}
	_, scrape := httpGet(t, base+"/metrics")
	if metricValue(scrape, "directbridge_provider_reachable") != 0 {
		t.Error("directbridge_provider_reachable is not 0")
	}
}

func TestMetricsAddrConfig(t *testing.T) {
	for _, bad := range []string{"9090", "localhost", "http://127.0.0.1:9090"} {
		cfg := testConfig(t)
		cfg.MetricsAddr = bad
		if _, err := bridge.New(cfg, nil, nil); err == nil || !strings.Contains(err.Error(), "DIRECTBRIDGE_METRICS_ADDR") {
			t.Errorf("MetricsAddr %q: %v", bad, err)
		}
	}
	for _, off := range []string{"", "off"} {
		cfg := testConfig(t)
		cfg.MetricsAddr = off
		b, err := bridge.New(cfg, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if a := b.Addr(bridge.MetricsListener); a != "" {
			t.Errorf("MetricsAddr %q: a metrics listener on %s", off, a)
		}
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if err := b.Run(ctx); err != nil {
			t.Errorf("Run: %v", err)
		}
	}
}
