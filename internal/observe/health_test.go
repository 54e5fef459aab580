package observe

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/directbridge/directbridge/sandbox"
)

func TestCheck(t *testing.T) {
	var gotMethod, gotPath, gotBody string
	for _, tc := range []struct {
		name      string
		status    int
		body      string
		reachable bool
	}{
		{"refused credentials", 200, `{"success":false,"code":1,"message":"authentication failed"}`, true},
		{"success", 200, `{"success":true,"count":3}`, true},
		{"envelope with an error status", 401, `{"success":false,"code":1}`, true},
		{"server error", 503, `{"success":false,"code":4}`, false},
		{"not the provider", 404, `<html>Not Found</html>`, false},
		{"JSON without envelope", 404, `{"error":"no route"}`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				b, _ := io.ReadAll(r.Body)
				gotMethod, gotPath, gotBody = r.Method, r.URL.Path, string(b)
				w.WriteHeader(tc.status)
				io.WriteString(w, tc.body)
			}))
			defer srv.Close()
			p := NewProber(srv.URL+"/", time.Second, time.Second)
			r := p.Check(context.Background())
			if r.Reachable != tc.reachable {
				t.Fatalf("reachable = %v (%s); want %v", r.Reachable, r.Error, tc.reachable)
			}
			if r.HTTPStatus != tc.status || r.CheckedAt.IsZero() || (r.Error == "") != tc.reachable {
				t.Errorf("result %+v", r)
			}
			if ready, reason := p.Ready(); ready != tc.reachable {
				t.Errorf("Ready = %v, %q", ready, reason)
			}
		})
	}
	if gotMethod != "POST" || gotPath != "/message-rest/api/message/GetMessageCount/INBOX" {
		t.Errorf("probe was %s %s", gotMethod, gotPath)
	}
	if gotBody != `{"username":"","password":""}`+"\n" {
		t.Errorf("probe body %q", gotBody)
	}
}

func TestCheckUnreachable(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	p := NewProber("http://"+addr, time.Second, time.Second)
	r := p.Check(context.Background())
	if r.Reachable || r.Error == "" || r.HTTPStatus != 0 {
		t.Fatalf("closed port: %+v", r)
	}
	if strings.Contains(r.Error, "GetMessageCount") || strings.Contains(r.Error, "http://") {
		t.Errorf("error names the URL: %s", r.Error)
	}

	// A provider that does not answer within the timeout.
	block := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-block:
		case <-r.Context().Done():
		}
	}))
	defer slow.Close()
	defer close(block)
	p = NewProber(slow.URL, time.Second, 100*time.Millisecond)
	start := time.Now()
	if r := p.Check(context.Background()); r.Reachable {
		t.Fatalf("slow provider reachable: %+v", r)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("check took %v despite a 100ms timeout", d)
	}
}

// TestCheckSandbox: the sandbox provider answers an unauthenticated probe
// with its envelope.
func TestCheckSandbox(t *testing.T) {
	sb, err := sandbox.Open(sandbox.Options{Users: []sandbox.Account{{Name: "alice@direct.example", Password: "pw"}}})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	srv := httptest.NewServer(sb)
	defer srv.Close()
	p := NewProber(srv.URL, 0, 0)
	if r := p.Check(context.Background()); !r.Reachable {
		t.Fatalf("sandbox unreachable: %+v", r)
	}
}

func TestReadyAge(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"success":false,"code":1}`)
	}))
	defer srv.Close()
	p := NewProber(srv.URL, 15*time.Second, 5*time.Second)
	if ready, reason := p.Ready(); ready || reason != "provider not checked yet" {
		t.Fatalf("before any check: %v %q", ready, reason)
	}
	now := time.Now()
	p.now = func() time.Time { return now }
	p.Check(context.Background())
	if ready, _ := p.Ready(); !ready {
		t.Fatal("not ready after a good check")
	}
	now = now.Add(34 * time.Second)
	if ready, _ := p.Ready(); !ready {
		t.Fatal("not ready 34s after a good check (two intervals and a timeout allowed)")
	}
	now = now.Add(2 * time.Second)
	if ready, reason := p.Ready(); ready || reason != "last provider check too old" {
		t.Fatalf("36s after the check: %v %q", ready, reason)
	}
	if p.Reachable() {
		t.Fatal("Reachable disagrees with Ready")
	}
}

func TestHandlers(t *testing.T) {
	up := true
	provider := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !up {
			w.WriteHeader(502)
			return
		}
		io.WriteString(w, `{"success":false,"code":1}`)
	}))
	defer provider.Close()
	p := NewProber(provider.URL, time.Hour, time.Second)
	mux := http.NewServeMux()
	mux.Handle("/healthz", LiveHandler())
	var stateErr error // what the state store answers
	mux.Handle("/readyz", p.ReadyHandler(func(context.Context) error { return stateErr }))
	srv := httptest.NewServer(mux)
	defer srv.Close()

	get := func(path string) (int, string) {
		t.Helper()
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get("/healthz"); code != 200 || body != "ok\n" {
		t.Errorf("/healthz: %d %q", code, body)
	}
	if code, body := get("/readyz"); code != 503 || !strings.Contains(body, "not checked yet") {
		t.Errorf("/readyz before a check: %d %s", code, body)
	}

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); p.Run(ctx) }()
	deadline := time.Now().Add(5 * time.Second)
	for p.Last().CheckedAt.IsZero() && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	<-done

	code, body := get("/readyz")
	var rd struct {
		Ready    bool
		Provider struct {
			Reachable  bool
			CheckedAt  time.Time `json:"checked_at"`
			HTTPStatus int       `json:"http_status"`
		}
	}
	if err := json.Unmarshal([]byte(body), &rd); err != nil {
		t.Fatalf("/readyz body %q: %v", body, err)
	}
	if code != 200 || !rd.Ready || !rd.Provider.Reachable || rd.Provider.CheckedAt.IsZero() || rd.Provider.HTTPStatus != 200 {
		t.Errorf("/readyz: %d %s", code, body)
	}

	// The state store stops answering: not ready, whatever the provider.
	stateErr = errors.New("state: the state store does not answer: connection refused")
	if code, body := get("/readyz"); code != 503 || !strings.Contains(body, "state store unreachable") || strings.Contains(body, "connection refused") {
		t.Errorf("/readyz with the state store failing: %d %s", code, body)
	}
	stateErr = nil
	if code, body := get("/readyz"); code != 200 || !strings.Contains(body, `"state":{"reachable":true}`) {
		t.Errorf("/readyz with the state store back: %d %s", code, body)
	}

	up = false
	p.Check(context.Background())
	if code, body := get("/readyz"); code != 503 || !strings.Contains(body, `"reachable":false`) || !strings.Contains(body, "HTTP 502") {
		t.Errorf("/readyz with the provider failing: %d %s", code, body)
	}
}
