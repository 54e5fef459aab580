package observe_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/directbridge/directbridge/internal/observe"
	"github.com/directbridge/directbridge/restclient"
)

func TestRESTResult(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{nil, "ok"},
		{&restclient.APIError{Op: "Send", Code: 1, Message: "authentication failed"}, "api_error"},
		{fmt.Errorf("wrapped: %w", &restclient.APIError{Op: "Send", Code: 2}), "api_error"},
		{&restclient.TemporaryError{Op: "GetUIDs", StatusCode: 503}, "temporary"},
		{&restclient.TemporaryError{Op: "GetUIDs", Err: errors.New("connection refused")}, "temporary"},
		{&restclient.ProtocolError{Op: "GetUIDs", StatusCode: 404, Err: errors.New("no envelope")}, "protocol"},
		{&restclient.CanceledError{Op: "GetUIDs", Err: context.Canceled}, "canceled"},
		{errors.New("restclient: Send: building request: bad URL"), "protocol"},
	} {
		if got := observe.RESTResult(tc.err); got != tc.want {
			t.Errorf("RESTResult(%v) = %q; want %q", tc.err, got, tc.want)
		}
	}
}

func TestObserveREST(t *testing.T) {
	r := observe.NewRegistry()
	r.ObserveREST(restclient.Event{Op: "GetMessageCount", Duration: 20 * time.Millisecond})
	r.ObserveREST(restclient.Event{Op: "GetMessageCount", Attempt: 1, StatusCode: 200,
		Err: &restclient.APIError{Op: "GetMessageCount", Code: 1}, Duration: 3 * time.Second})
	r.ObserveREST(restclient.Event{Op: "Send", Err: &restclient.TemporaryError{Op: "Send", StatusCode: 502}})
	// Anything that is not an identifier (it could only be a bug) is "other".
	r.ObserveREST(restclient.Event{Op: "alice@direct.example/INBOX.Sent"})

	g := r.Gatherer()
	body := scrape(t, r)
	for _, want := range []string{
		`directbridge_rest_requests_total{op="GetMessageCount",result="ok"} 1`,
		`directbridge_rest_requests_total{op="GetMessageCount",result="api_error"} 1`,
		`directbridge_rest_requests_total{op="Send",result="temporary"} 1`,
		`directbridge_rest_requests_total{op="other",result="ok"} 1`,
		`directbridge_rest_retries_total{op="GetMessageCount"} 1`,
		`directbridge_rest_request_duration_seconds_count{op="GetMessageCount"} 2`,
		`directbridge_rest_request_duration_seconds_bucket{op="GetMessageCount",le="0.025"} 1`,
		`directbridge_rest_request_duration_seconds_bucket{op="GetMessageCount",le="5"} 2`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("scrape lacks %s", want)
		}
	}
	if strings.Contains(body, "alice") || strings.Contains(body, "INBOX") {
		t.Errorf("an address or folder reached a label:\n%s", body)
	}
	if n, err := testutil.GatherAndCount(g, "directbridge_rest_retries_total"); err != nil || n != 1 {
		t.Errorf("retries series: %d, %v", n, err)
	}
}

func TestFrontRecorders(t *testing.T) {
	r := observe.NewRegistry()
	imap, smtp := r.IMAP(), r.SMTP()

	imap.ConnOpened()
	imap.ConnOpened()
	imap.ConnClosed()
	imap.Command("LOGIN", "ok")
	imap.Command("SELECT", "no")
	imap.Command("INBOX.Patients", "ok") // not a command: never a label
	imap.Command("FETCH", "maybe")
	imap.AuthFailed("credentials")
	imap.AuthFailed("bob@direct.example")
	imap.CacheLookup(true)
	imap.CacheLookup(false)
	imap.CacheLookup(false)
	imap.TurnedAway("refused")
	imap.TurnedAway("displaced")
	imap.TurnedAway("203.0.113.9")

	smtp.ConnOpened()
	smtp.Command("DATA", "ok")
	smtp.Command("RCPT", "permanent")
	smtp.Command("VRFY", "ok")
	smtp.AuthFailed("unavailable")
	smtp.Message("sent")
	smtp.Message("refused")
	smtp.Message("Subject: lab results")

	body := scrape(t, r)
	for _, want := range []string{
		`directbridge_connections_open{protocol="imap"} 1`,
		`directbridge_connections_open{protocol="smtp"} 1`,
		`directbridge_connections_accepted_total{protocol="imap"} 2`,
		`directbridge_connections_accepted_total{protocol="smtp"} 1`,
		`directbridge_imap_commands_total{command="LOGIN",result="ok"} 1`,
		`directbridge_imap_commands_total{command="SELECT",result="no"} 1`,
		`directbridge_imap_commands_total{command="other",result="ok"} 1`,
		`directbridge_imap_commands_total{command="FETCH",result="other"} 1`,
		`directbridge_auth_failures_total{protocol="imap",reason="credentials"} 1`,
		`directbridge_auth_failures_total{protocol="imap",reason="other"} 1`,
		`directbridge_auth_failures_total{protocol="smtp",reason="unavailable"} 1`,
		`directbridge_auth_failures_total{protocol="smtp",reason="credentials"} 0`, // present from the start
		`directbridge_connections_turned_away_total{protocol="imap",reason="refused"} 1`,
		`directbridge_connections_turned_away_total{protocol="imap",reason="displaced"} 1`,
		`directbridge_connections_turned_away_total{protocol="imap",reason="other"} 1`,
		`directbridge_connections_turned_away_total{protocol="smtp",reason="refused"} 0`, // present from the start
		`directbridge_imap_cache_lookups_total{result="hit"} 1`,
		`directbridge_imap_cache_lookups_total{result="miss"} 2`,
		`directbridge_smtp_commands_total{command="DATA",result="ok"} 1`,
		`directbridge_smtp_commands_total{command="RCPT",result="permanent"} 1`,
		`directbridge_smtp_commands_total{command="other",result="ok"} 1`,
		`directbridge_smtp_messages_total{result="sent"} 1`,
		`directbridge_smtp_messages_total{result="refused"} 1`,
		`directbridge_smtp_messages_total{result="temporary"} 0`,
		`directbridge_smtp_messages_total{result="other"} 1`,
		`go_goroutines `,
		`process_`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("scrape lacks %s", want)
		}
	}
	for _, leak := range []string{"Patients", "bob@", "Subject", "lab results", "VRFY", "203.0.113"} {
		if strings.Contains(body, leak) {
			t.Errorf("scrape contains %q", leak)
		}
	}
}

func TestProviderReachable(t *testing.T) {
	r := observe.NewRegistry()
	up := false
	r.ProviderReachable(func() bool { return up })
	if !strings.Contains(scrape(t, r), "directbridge_provider_reachable 0") {
		t.Error("want provider_reachable 0")
	}
	up = true
	if !strings.Contains(scrape(t, r), "directbridge_provider_reachable 1") {
		t.Error("want provider_reachable 1")
	}
}

// TestOwnRegistry: the bridge's metrics stay out of Prometheus' global
// registry, so an embedding program's own metrics and ours never clash,
// and two bridges in one process each have theirs.
func TestOwnRegistry(t *testing.T) {
	a, b := observe.NewRegistry(), observe.NewRegistry()
	a.SMTP().Message("sent")
	if !strings.Contains(scrape(t, b), `directbridge_smtp_messages_total{result="sent"} 0`) {
		t.Error("the second registry sees the first one's message")
	}
	mfs, err := prometheus.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if strings.HasPrefix(mf.GetName(), "directbridge_") {
			t.Errorf("%s is in the global registry", mf.GetName())
		}
	}
}

// scrape fetches the text exposition over real HTTP.
func scrape(t *testing.T, r *observe.Registry) string {
	t.Helper()
	srv := httptest.NewServer(r.Handler())
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("scrape: HTTP %d", resp.StatusCode)
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
