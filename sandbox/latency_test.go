package sandbox

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"
)

// latencyProbe records the waits of a sandbox, and with each wait how
// many messages the mailbox alice@direct.example holds at that moment, so
// a test sees whether the operation ran before or after.
type latencyProbe struct {
	s      *Server
	waits  []time.Duration
	counts []int
	cut    bool // the next wait ends as if the client went away
}

func newLatencyProbe(t *testing.T, d time.Duration) *latencyProbe {
	t.Helper()
	s, err := Open(Options{Dir: t.TempDir(), Users: []Account{{Name: "alice@direct.example", Password: "alice-secret-1"}},
		Resellers: []Account{DemoReseller}, Latency: d})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	p := &latencyProbe{s: s}
	s.wait = func(ctx context.Context, d time.Duration) bool {
		var n int
		if err := s.db.QueryRow(`SELECT COUNT(*) FROM messages`).Scan(&n); err != nil {
			t.Errorf("count during wait: %v", err)
		}
		p.waits, p.counts = append(p.waits, d), append(p.counts, n)
		if p.cut {
			p.cut = false
			return false
		}
		return true
	}
	return p
}

// call sends one request in process and returns the HTTP status and body;
// status 0 means no answer was written.
func (p *latencyProbe) call(method, path, body string) (int, string) {
	p.waits, p.counts = nil, nil
	w := httptest.NewRecorder()
	w.Code = 0
	p.s.ServeHTTP(w, httptest.NewRequest(method, path, strings.NewReader(body)))
	return w.Code, w.Body.String()
}

const (
	latAuth = `{"username":"alice@direct.example","password":"alice-secret-1"}`
	latSave = "/message-rest/api/message/SaveRawMessages/INBOX"
	latBody = `{"auth":` + latAuth + `,"messages":[{"data":"U3ViamVjdDogeA0KDQp4DQo="}]}`
)

// TestLatencyEveryAnswer: with Options.Latency every answer of both
// services waits the configured time, half before the operation runs and
// half after it; failures, refused bodies, injected faults and unknown
// paths wait too.
func TestLatencyEveryAnswer(t *testing.T) {
	d := 30 * time.Millisecond
	p := newLatencyProbe(t, d)
	half := []time.Duration{d / 2, d - d/2}

	status, body := p.call("POST", latSave, latBody)
	if status != http.StatusOK || !strings.Contains(body, `"success":true`) {
		t.Fatalf("SaveRawMessages: %d %s", status, body)
	}
	if !slices.Equal(p.waits, half) || !slices.Equal(p.counts, []int{0, 1}) {
		t.Errorf("SaveRawMessages waited %v with %v messages stored, want %v with [0 1] (half before, half after)", p.waits, p.counts, half)
	}
	for _, c := range []struct{ name, method, path, body string }{
		{"messaging", "POST", "/message-rest/api/message/GetUIDs/INBOX", latAuth},
		{"registration", "POST", "/DirectRegistrationRESTful/rest/Patient/login", `{"username":"reseller","password":"sandbox-demo"}`},
		{"wrong password", "POST", "/message-rest/api/message/GetUIDs/INBOX", `{"username":"alice@direct.example","password":"nope"}`},
		{"body not JSON", "POST", "/message-rest/api/message/GetUIDs/INBOX", `{`},
	} {
		if status, body := p.call(c.method, c.path, c.body); status == 0 || !slices.Equal(p.waits, half) {
			t.Errorf("%s: HTTP %d %s; waited %v, want %v", c.name, status, body, p.waits, half)
		}
	}
	if status, _ := p.call("GET", "/message-rest/api/message/NoSuchOperation", ""); status != http.StatusNotFound || !slices.Equal(p.waits, []time.Duration{d}) {
		t.Errorf("unknown path: HTTP %d, waited %v, want 404 after %v", status, p.waits, d)
	}
	p.s.InjectFault("GetUIDs", Fault{Status: http.StatusServiceUnavailable, Times: 1})
	if status, _ := p.call("POST", "/message-rest/api/message/GetUIDs/INBOX", latAuth); status != http.StatusServiceUnavailable || !slices.Equal(p.waits, half) {
		t.Errorf("injected 503: HTTP %d, waited %v, want 503 after %v", status, p.waits, half)
	}

	// SetLatency changes it at run time; nothing negative is kept.
	p.s.SetLatency(4 * time.Millisecond)
	if p.call("POST", "/message-rest/api/message/GetUIDs/INBOX", latAuth); !slices.Equal(p.waits, []time.Duration{2 * time.Millisecond, 2 * time.Millisecond}) {
		t.Errorf("after SetLatency(4ms): waited %v", p.waits)
	}
	for _, set := range []time.Duration{0, -time.Second} {
		p.s.SetLatency(set)
		if p.s.Latency() != 0 {
			t.Errorf("SetLatency(%v): Latency() = %v, want 0", set, p.s.Latency())
		}
		if p.call("POST", "/message-rest/api/message/GetUIDs/INBOX", latAuth); !slices.Equal(p.waits, []time.Duration{0, 0}) {
			t.Errorf("after SetLatency(%v): waited %v, want nothing", set, p.waits)
		}
	}
}

// TestLatencyClientGone: a client that goes away during the first half
// gets no answer and the operation does not run; during the second half,
// the operation has run (as at a provider) but no answer is written.
func TestLatencyClientGone(t *testing.T) {
	p := newLatencyProbe(t, 10*time.Millisecond)
	p.cut = true
	if status, _ := p.call("POST", latSave, latBody); status != 0 || len(p.waits) != 1 {
		t.Fatalf("cut in the first half: HTTP %d after waits %v, want no answer after one wait", status, p.waits)
	}
	var n int
	if err := p.s.db.QueryRow(`SELECT COUNT(*) FROM messages`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("cut before the operation: %d messages stored (%v), want 0", n, err)
	}
	// Let the first wait pass and cut the second.
	p.s.wait = func(ctx context.Context, d time.Duration) bool {
		p.waits = append(p.waits, d)
		return len(p.waits) == 1
	}
	if status, _ := p.call("POST", latSave, latBody); status != 0 || len(p.waits) != 2 {
		t.Fatalf("cut in the second half: HTTP %d after waits %v, want no answer after two waits", status, p.waits)
	}
	if err := p.s.db.QueryRow(`SELECT COUNT(*) FROM messages`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("cut after the operation: %d messages stored (%v), want 1", n, err)
	}
}

// TestLatencyConfig: DIRECTBRIDGE_SANDBOX_LATENCY reaches Options, and a
// negative value is refused with the variable's name.
func TestLatencyConfig(t *testing.T) {
	opts, _, err := Config{Domain: "direct.example", Latency: 20 * time.Millisecond}.Options()
	if err != nil || opts.Latency != 20*time.Millisecond {
		t.Errorf("Options: latency %v, err %v; want 20ms", opts.Latency, err)
	}
	if _, _, err := (Config{Domain: "direct.example", Latency: -time.Millisecond}).Options(); err == nil || !strings.Contains(err.Error(), "DIRECTBRIDGE_SANDBOX_LATENCY") {
		t.Errorf("negative latency: err %v, want one naming DIRECTBRIDGE_SANDBOX_LATENCY", err)
	}
}

// TestLatencyReal: with the real timer, an answer over a socket comes no
// sooner than the configured latency (a lower bound, which a delay
// guarantees; how much later is not asserted).
func TestLatencyReal(t *testing.T) {
	t.Parallel()
	p := newLatencyProbe(t, 40*time.Millisecond)
	p.s.wait = pause
	ts := httptest.NewServer(p.s)
	defer ts.Close()
	start := time.Now()
	resp, err := ts.Client().Post(ts.URL+"/message-rest/api/message/GetUIDs/INBOX", "application/json", strings.NewReader(latAuth))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if el := time.Since(start); resp.StatusCode != http.StatusOK || el < 40*time.Millisecond {
		t.Errorf("HTTP %d after %v, want 200 no sooner than 40ms", resp.StatusCode, el)
	}
}
