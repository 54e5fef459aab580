package restclient

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/directbridge/directbridge/upstream/directapi"
)

// scripted is a test server that answers its n-th request with steps[n];
// the last step answers every request after it.
type scripted struct {
	srv   *httptest.Server
	count atomic.Int32
}

func newScripted(t *testing.T, steps ...http.HandlerFunc) *scripted {
	t.Helper()
	s := &scripted{}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := int(s.count.Add(1)) - 1
		step := steps[min(n, len(steps)-1)]
		step(w, r)
	}))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *scripted) requests() int { return int(s.count.Load()) }

// reply answers with status and body; headers come in name, value pairs.
func reply(status int, body string, headers ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		for i := 0; i+1 < len(headers); i += 2 {
			w.Header().Set(headers[i], headers[i+1])
		}
		w.WriteHeader(status)
		io.WriteString(w, body)
	}
}

// hijackClose reads the request and closes the connection without an answer,
// as when the provider or a proxy drops it mid-request.
func hijackClose(t *testing.T) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		conn, _, err := w.(http.Hijacker).Hijack()
		if err != nil {
			t.Errorf("hijack: %v", err)
			return
		}
		conn.Close()
	}
}

const (
	uidsOK = `{"success":true,"code":0,"message":"OK","uids":[1,2,3]}`
	sendOK = `{"success":true,"code":0,"message":"OK","smtpId":"<sent@x>"}`
	plain  = `{"success":true,"code":0,"message":"OK"}`
)

func secs(s ...float64) []time.Duration {
	out := make([]time.Duration, len(s))
	for i, v := range s {
		out[i] = time.Duration(v * float64(time.Second))
	}
	return out
}

func getUIDs(c *Client) error {
	uids, err := c.GetUIDs(context.Background(), gAuth, "INBOX")
	if err == nil && !slices.Equal(uids, []int64{1, 2, 3}) {
		return fmt.Errorf("uids %v", uids)
	}
	return err
}

func send(c *Client) error {
	id, err := c.Send(context.Background(), gAuth, gMsg)
	if err == nil && id != "<sent@x>" {
		return fmt.Errorf("smtpId %q", id)
	}
	return err
}

func TestRetry429ThenSuccess(t *testing.T) {
	for name, tc := range map[string]struct {
		call func(*Client) error
		ok   string
	}{
		"GetUIDs (repeatable)": {getUIDs, uidsOK},
		"Send (once)":          {send, sendOK},
	} {
		t.Run(name, func(t *testing.T) {
			srv := newScripted(t, reply(429, ""), reply(200, tc.ok))
			fc := newFakeClock()
			c := newTestClient(t, srv.srv.URL, fc)
			if err := tc.call(c); err != nil {
				t.Fatalf("call after one 429: %v", err)
			}
			if n := srv.requests(); n != 2 {
				t.Fatalf("%d requests; want 2", n)
			}
			if got, want := fc.Sleeps(), secs(1); !slices.Equal(got, want) {
				t.Fatalf("sleeps %v; want %v", got, want)
			}
		})
	}
}

func TestRetry429Backoff(t *testing.T) {
	for name, tc := range map[string]struct {
		call func(*Client) error
		ok   string
	}{
		"GetUIDs (repeatable)": {getUIDs, uidsOK},
		"Send (once)":          {send, sendOK},
	} {
		t.Run(name, func(t *testing.T) {
			srv := newScripted(t, reply(429, ""), reply(429, "Too Many Requests"), reply(200, tc.ok))
			fc := newFakeClock()
			c := newTestClient(t, srv.srv.URL, fc)
			if err := tc.call(c); err != nil {
				t.Fatalf("call after two 429s: %v", err)
			}
			if n := srv.requests(); n != 3 {
				t.Fatalf("%d requests; want 3", n)
			}
			if got, want := fc.Sleeps(), secs(1, 2); !slices.Equal(got, want) {
				t.Fatalf("sleeps %v; want %v", got, want)
			}
		})
	}
}

func TestRetry429Exhausted(t *testing.T) {
	srv := newScripted(t, reply(429, ""))
	fc := newFakeClock()
	c := newTestClient(t, srv.srv.URL, fc)
	err := send(c)
	var te *TemporaryError
	if !errors.As(err, &te) || te.StatusCode != 429 {
		t.Fatalf("err = %v; want a TemporaryError with status 429", err)
	}
	if OutcomeUnknown(err) {
		t.Fatal("a 429 means the request was refused, not possibly processed")
	}
	if n := srv.requests(); n != 1+DefaultMaxRetries {
		t.Fatalf("%d requests; want %d", n, 1+DefaultMaxRetries)
	}
	if got, want := fc.Sleeps(), secs(1, 2, 4); !slices.Equal(got, want) {
		t.Fatalf("sleeps %v; want %v", got, want)
	}
}

func TestRetryAfterHonoured(t *testing.T) {
	fc := newFakeClock()
	date := fc.Now().Add(20 * time.Second).Format(http.TimeFormat)
	tests := []struct {
		name   string
		call   func(*Client) error
		ok     string
		first  http.HandlerFunc
		sleeps []time.Duration
	}{
		{"429 seconds, GetUIDs", getUIDs, uidsOK, reply(429, "", "Retry-After", "7"), secs(7)},
		{"429 seconds, Send", send, sendOK, reply(429, "", "Retry-After", "3"), secs(3)},
		{"429 HTTP date", getUIDs, uidsOK, reply(429, "", "Retry-After", date), secs(20)},
		{"429 zero", getUIDs, uidsOK, reply(429, "", "Retry-After", "0"), secs(1)},
		{"429 unparsable falls back to backoff", getUIDs, uidsOK, reply(429, "", "Retry-After", "soon"), secs(1)},
		{"429 long is capped at two minutes", getUIDs, uidsOK, reply(429, "", "Retry-After", "3600"), secs(120)},
		{"503 seconds", getUIDs, uidsOK, reply(503, "", "Retry-After", "5"), secs(5)},
		{"500 seconds", getUIDs, uidsOK, reply(500, "", "Retry-After", "2"), secs(2)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newScripted(t, tt.first, reply(200, tt.ok))
			fc := newFakeClock()
			c := newTestClient(t, srv.srv.URL, fc)
			if err := tt.call(c); err != nil {
				t.Fatal(err)
			}
			if got := fc.Sleeps(); !slices.Equal(got, tt.sleeps) {
				t.Fatalf("sleeps %v; want %v", got, tt.sleeps)
			}
		})
	}
	if got := parseRetryAfter(date, fc.Now().Add(30*time.Second)); got != 0 {
		t.Errorf("Retry-After date in the past gave %v; want 0", got)
	}
	if got := parseRetryAfter(" 12 ", fc.Now()); got != 12*time.Second {
		t.Errorf("parseRetryAfter(\" 12 \") = %v", got)
	}
	if got := parseRetryAfter("-3", fc.Now()); got != 0 {
		t.Errorf("parseRetryAfter(-3) = %v; want 0", got)
	}
}

func TestRetry5xxRepeatable(t *testing.T) {
	for _, code := range []int{500, 502, 504} {
		t.Run(fmt.Sprint(code), func(t *testing.T) {
			srv := newScripted(t, reply(code, "<html>error</html>"))
			fc := newFakeClock()
			c := newTestClient(t, srv.srv.URL, fc)
			err := getUIDs(c)
			var te *TemporaryError
			if !errors.As(err, &te) || te.StatusCode != code {
				t.Fatalf("err = %#v; want a TemporaryError with status %d", err, code)
			}
			if !IsTemporary(err) || IsAPIError(err) {
				t.Fatalf("classification of %v", err)
			}
			if n := srv.requests(); n != 4 {
				t.Fatalf("%d requests; want 1 + MaxRetries (3)", n)
			}
			if got, want := fc.Sleeps(), secs(1, 2, 4); !slices.Equal(got, want) {
				t.Fatalf("sleeps %v; want %v", got, want)
			}
		})
	}
	// Recovery on the last retry.
	srv := newScripted(t, reply(500, ""), reply(502, ""), reply(504, ""), reply(200, uidsOK))
	fc := newFakeClock()
	if err := getUIDs(newTestClient(t, srv.srv.URL, fc)); err != nil {
		t.Fatalf("500, 502, 504, 200: %v", err)
	}
	if got, want := fc.Sleeps(), secs(1, 2, 4); !slices.Equal(got, want) || srv.requests() != 4 {
		t.Fatalf("sleeps %v, %d requests", got, srv.requests())
	}
}

func TestRetryMaxRetriesOption(t *testing.T) {
	for _, tc := range []struct{ opt, requests int }{{-1, 1}, {1, 2}, {5, 6}} {
		srv := newScripted(t, reply(500, ""))
		fc := newFakeClock()
		c := newTestClient(t, srv.srv.URL, fc, func(o *Options) { o.MaxRetries = tc.opt })
		if err := getUIDs(c); !IsTemporary(err) {
			t.Fatalf("MaxRetries %d: err = %v", tc.opt, err)
		}
		if n := srv.requests(); n != tc.requests {
			t.Errorf("MaxRetries %d: %d requests; want %d", tc.opt, n, tc.requests)
		}
	}
}

// TestRetry503Pause: a 503 without Retry-After (maintenance) is retried
// after 30-60 s, but a request, its waits included, takes at most the
// request timeout: a provider that stays down fails the call within it,
// so an interactive command (SELECT) fails in time and the client tries
// again itself.
func TestRetry503Pause(t *testing.T) {
	srv := newScripted(t, reply(503, ""), reply(503, ""), reply(503, ""), reply(200, uidsOK))
	fc := newFakeClock()
	c := newTestClient(t, srv.srv.URL, fc, func(o *Options) { o.RequestTimeout = 2 * time.Minute })
	if err := getUIDs(c); err == nil && srv.requests() < 2 {
		t.Fatal("no retry after a 503")
	}
	sleeps := fc.Sleeps()
	var total time.Duration
	for _, d := range sleeps {
		total += d
		if d < 30*time.Second || d > 60*time.Second {
			t.Errorf("503 pause %v; want between 30 s and 60 s", d)
		}
	}
	if len(sleeps) == 0 || total >= 2*time.Minute {
		t.Fatalf("sleeps %v (total %v); want at least one, within the 2 min request timeout", sleeps, total)
	}

	// Always down: the call fails within the request timeout.
	down := newScripted(t, reply(503, ""), reply(503, ""), reply(503, ""), reply(503, ""))
	fc = newFakeClock()
	c = newTestClient(t, down.srv.URL, fc, func(o *Options) { o.RequestTimeout = time.Minute })
	if err := getUIDs(c); err == nil {
		t.Fatal("a provider answering 503 always: the call succeeded")
	}
	total = 0
	for _, d := range fc.Sleeps() {
		total += d
	}
	if total >= time.Minute {
		t.Fatalf("waited %v in all; want less than the 1 min request timeout", total)
	}
}

func TestRetrySendNotRepeatedAfter5xx(t *testing.T) {
	for _, code := range []int{500, 502, 503, 504} {
		srv := newScripted(t, reply(code, ""), reply(200, sendOK))
		fc := newFakeClock()
		c := newTestClient(t, srv.srv.URL, fc)
		err := send(c)
		var te *TemporaryError
		if !errors.As(err, &te) || te.StatusCode != code || !te.MayHaveReached {
			t.Fatalf("%d: err = %#v; want a TemporaryError that may have reached the provider", code, err)
		}
		if !OutcomeUnknown(err) {
			t.Fatalf("%d: OutcomeUnknown = false", code)
		}
		if n := srv.requests(); n != 1 {
			t.Fatalf("%d: Send made %d requests; want exactly 1", code, n)
		}
		if s := fc.Sleeps(); len(s) != 0 {
			t.Fatalf("%d: slept %v", code, s)
		}
	}
}

// TestRetryClassOfEveryOperation checks, for every operation, that a 500 is
// retried for the operations safe to repeat and not for the others.
func TestRetryClassOfEveryOperation(t *testing.T) {
	for _, op := range allOps() {
		t.Run(op.name, func(t *testing.T) {
			srv := newScripted(t, reply(500, ""))
			fc := newFakeClock()
			c := newTestClient(t, srv.srv.URL, fc)
			err := op.call(context.Background(), c)
			if !IsTemporary(err) || !OutcomeUnknown(err) {
				t.Fatalf("err = %v; want a temporary failure of unknown outcome", err)
			}
			want := 4
			if op.once {
				want = 1
			}
			if n := srv.requests(); n != want {
				t.Fatalf("%d requests after HTTP 500; want %d (once=%v)", n, want, op.once)
			}
		})
	}
}

func TestRetryConnectionDroppedMidRequest(t *testing.T) {
	for name, call := range map[string]func(*Client) error{
		"Send": send,
		"SaveRawMessages": func(c *Client) error {
			return c.SaveRawMessages(context.Background(), gAuth, "INBOX", []directapi.RawMessage{directapi.NewRawMessage(gRaw)})
		},
		"Forward": func(c *Client) error {
			_, err := c.Forward(context.Background(), gAuth, "INBOX", []int64{1}, []directapi.Recipient{{Email: "b@x", Type: directapi.TO}})
			return err
		},
		"ProvisionIDProofedPatient": func(c *Client) error {
			_, err := c.ProvisionIDProofedPatient(context.Background(), "S", "d.example", gPatient)
			return err
		},
	} {
		t.Run(name, func(t *testing.T) {
			srv := newScripted(t, hijackClose(t), reply(200, sendOK))
			fc := newFakeClock()
			c := newTestClient(t, srv.srv.URL, fc)
			err := call(c)
			if err == nil {
				t.Fatal("no error after the connection was dropped")
			}
			var te *TemporaryError
			if !errors.As(err, &te) || te.StatusCode != 0 || !te.MayHaveReached {
				t.Fatalf("err = %#v; want a transport TemporaryError that may have reached", err)
			}
			if !OutcomeUnknown(err) {
				t.Fatal("OutcomeUnknown = false after the request was sent and the connection dropped")
			}
			if n := srv.requests(); n != 1 {
				t.Fatalf("%d requests; want exactly 1", n)
			}
		})
	}
	// A repeatable operation is retried after the same failure.
	srv := newScripted(t, hijackClose(t), reply(200, uidsOK))
	fc := newFakeClock()
	if err := getUIDs(newTestClient(t, srv.srv.URL, fc)); err != nil {
		t.Fatalf("GetUIDs after a dropped connection: %v", err)
	}
	if n := srv.requests(); n != 2 {
		t.Fatalf("GetUIDs: %d requests; want 2", n)
	}
	if got, want := fc.Sleeps(), secs(1); !slices.Equal(got, want) {
		t.Fatalf("sleeps %v; want %v", got, want)
	}
}

func TestRetryConnectionRefused(t *testing.T) {
	base := "http://" + closedPort(t)
	for name, call := range map[string]func(*Client) error{"Send": send, "GetUIDs": getUIDs} {
		fc := newFakeClock()
		var events []Event
		c := newTestClient(t, base, fc, func(o *Options) { o.Observe = func(e Event) { events = append(events, e) } })
		err := call(c)
		var te *TemporaryError
		if !errors.As(err, &te) {
			t.Fatalf("%s: err = %v; want a TemporaryError", name, err)
		}
		if te.MayHaveReached || OutcomeUnknown(err) || te.StatusCode != 0 {
			t.Fatalf("%s: %#v; a refused connection surely did not reach the provider", name, te)
		}
		// Never sent, so even Send is retried.
		if len(events) != 4 {
			t.Fatalf("%s: %d attempts; want 4", name, len(events))
		}
		if got, want := fc.Sleeps(), secs(1, 2, 4); !slices.Equal(got, want) {
			t.Fatalf("%s: sleeps %v; want %v", name, got, want)
		}
	}
}

func TestRetryNotBeyondContextDeadline(t *testing.T) {
	srv := newScripted(t, reply(500, ""), reply(200, uidsOK))
	fc := newFakeClock()
	fc.now = time.Now() // the context deadline is real time
	c := newTestClient(t, srv.srv.URL, fc)
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	_, err := c.GetUIDs(ctx, gAuth, "INBOX")
	var te *TemporaryError
	if !errors.As(err, &te) || te.StatusCode != 500 {
		t.Fatalf("err = %v; want the TemporaryError of the first attempt", err)
	}
	if s := fc.Sleeps(); len(s) != 0 {
		t.Fatalf("slept %v although the deadline is shorter than the backoff", s)
	}
	if n := srv.requests(); n != 1 {
		t.Fatalf("%d requests; want 1", n)
	}
}

func TestRetryContextCancelledDuringBackoff(t *testing.T) {
	srv := newScripted(t, reply(502, ""), reply(200, uidsOK))
	fc := newFakeClock()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	fc.onSleep = func(time.Duration) { cancel() }
	c := newTestClient(t, srv.srv.URL, fc)
	_, err := c.GetUIDs(ctx, gAuth, "INBOX")
	var te *TemporaryError
	if !errors.As(err, &te) || te.StatusCode != 502 {
		t.Fatalf("err = %v; want the last TemporaryError", err)
	}
	if n := srv.requests(); n != 1 {
		t.Fatalf("%d requests; want 1", n)
	}
	// A context cancelled before the call: no request at all.
	n := srv.requests()
	if _, err := c.GetUIDs(ctx, gAuth, "INBOX"); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled context: err = %v", err)
	}
	if srv.requests() != n {
		t.Fatal("a request was sent with a cancelled context")
	}
}

// TestRetryCallerCancel: a caller that gives up mid-request gets its own
// context error back, and the request is not repeated.
func TestRetryCallerCancel(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	entered := make(chan struct{}, 1)
	srv := newScripted(t, func(w http.ResponseWriter, r *http.Request) {
		entered <- struct{}{}
		select {
		case <-r.Context().Done():
		case <-release:
		}
	})
	c := newTestClient(t, srv.srv.URL, newFakeClock())
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-entered; cancel() }()
	_, err := c.GetUIDs(ctx, gAuth, "INBOX")
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v; want context.Canceled", err)
	}
	if n := srv.requests(); n != 1 {
		t.Fatalf("%d requests; want 1", n)
	}
}

func TestRetryRequestTimeout(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	srv := newScripted(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}, reply(200, uidsOK))
	fc := newFakeClock()
	c := newTestClient(t, srv.srv.URL, fc, func(o *Options) { o.RequestTimeout = 10 * time.Millisecond })
	if err := getUIDs(c); err != nil {
		t.Fatalf("GetUIDs after one timed-out attempt: %v", err)
	}
	if n := srv.requests(); n != 2 {
		t.Fatalf("%d requests; want 2", n)
	}
	srv2 := newScripted(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	})
	c = newTestClient(t, srv2.srv.URL, newFakeClock(), func(o *Options) { o.RequestTimeout = 10 * time.Millisecond })
	err := send(c)
	if !OutcomeUnknown(err) || srv2.requests() != 1 {
		t.Fatalf("Send timing out: err = %v after %d requests; want unknown outcome after 1", err, srv2.requests())
	}
}

func TestNoRetryOnAPIError(t *testing.T) {
	tests := []struct {
		name   string
		status int
		body   string
		check  func(error) bool
	}{
		{"code 1 is an auth failure", 200, `{"success":false,"code":1,"message":"authentication failed"}`,
			func(err error) bool { return IsAuthFailure(err) && !IsAddressError(err) }},
		{"code 2 is an address error", 200, `{"success":false,"code":2,"message":"bad address"}`,
			func(err error) bool { return IsAddressError(err) && !IsAuthFailure(err) }},
		{"HTTP 400 with envelope code 3", 400, `{"success":false,"code":3,"message":"bad request"}`,
			func(err error) bool {
				var ae *APIError
				return errors.As(err, &ae) && ae.Code == 3 && ae.Message == "bad request" && ae.Op == "GetUIDs"
			}},
		{"HTTP 401 with envelope code 1", 401, `{"success":false,"code":1,"message":"no"}`, IsAuthFailure},
		{"HTTP 404 with envelope code 4", 404, `{"success":false,"code":4,"message":"no such folder"}`,
			func(err error) bool {
				var ae *APIError
				return errors.As(err, &ae) && ae.Code == 4
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newScripted(t, reply(tt.status, tt.body), reply(200, uidsOK))
			fc := newFakeClock()
			err := getUIDs(newTestClient(t, srv.srv.URL, fc))
			if !IsAPIError(err) || IsTemporary(err) || !tt.check(err) {
				t.Fatalf("err = %#v", err)
			}
			if n := srv.requests(); n != 1 {
				t.Fatalf("%d requests; an application failure must not be retried", n)
			}
			if s := fc.Sleeps(); len(s) != 0 {
				t.Fatalf("slept %v", s)
			}
		})
	}
	// The registration envelope: code "011" with HTTP 200 and 400.
	for _, status := range []int{200, 400} {
		srv := newScripted(t, reply(status, `{"code":"011","success":false,"errorMessage":"authentication failed"}`))
		c := newTestClient(t, srv.srv.URL, newFakeClock())
		_, err := c.Login(context.Background(), directapi.LoginRequest{Username: "r", Password: "p"})
		var ae *APIError
		if !IsAuthFailure(err) || !errors.As(err, &ae) || ae.RegCode != "011" || ae.Message != "authentication failed" || srv.requests() != 1 {
			t.Fatalf("HTTP %d 011: err = %#v after %d requests", status, err, srv.requests())
		}
	}
}

func TestProtocolErrors(t *testing.T) {
	tests := []struct {
		name   string
		status int
		body   string
	}{
		{"404 HTML", 404, "<html><body><h1>404 Not Found</h1></body></html>"},
		{"405 empty", 405, ""},
		{"404 JSON of a servlet container, no envelope", 404, `{"timestamp":"2024-03-01T12:00:00.000+00:00","status":404,"error":"Not Found","path":"/message-rest/api/message/GetUIDs/INBOX"}`},
		{"200 malformed JSON", 200, `{"success":true,"uids":[1,2,`},
		{"200 HTML", 200, "<html>maintenance</html>"},
		{"200 empty body", 200, ""},
		{"200 null", 200, "null"},
		{"200 empty object", 200, "{}"},
		{"200 wrong type", 200, `{"success":true,"uids":"1,2,3"}`},
		{"200 array", 200, `[1,2,3]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newScripted(t, reply(tt.status, tt.body), reply(200, uidsOK))
			fc := newFakeClock()
			err := getUIDs(newTestClient(t, srv.srv.URL, fc))
			var pe *ProtocolError
			if !errors.As(err, &pe) || pe.StatusCode != tt.status || pe.Op != "GetUIDs" {
				t.Fatalf("err = %#v; want a ProtocolError with status %d", err, tt.status)
			}
			if IsAPIError(err) || IsTemporary(err) {
				t.Fatalf("err %v is also classified as API or temporary", err)
			}
			if n := srv.requests(); n != 1 {
				t.Fatalf("%d requests; a protocol error must not be retried", n)
			}
			if strings.Contains(err.Error(), "/message-rest") {
				t.Fatalf("error mentions the path: %v", err)
			}
		})
	}
}

func TestSuccessEnvelopeWithErrorStatusIsBelieved(t *testing.T) {
	srv := newScripted(t, reply(400, uidsOK))
	if err := getUIDs(newTestClient(t, srv.srv.URL, newFakeClock())); err != nil {
		t.Fatalf("success=true with HTTP 400: %v", err)
	}
}

func TestMaxResponseSize(t *testing.T) {
	big := `{"success":true,"code":0,"message":"` + strings.Repeat("x", 200) + `","uids":[1,2,3]}`
	srv := newScripted(t, reply(200, big))
	c := newTestClient(t, srv.srv.URL, newFakeClock(), func(o *Options) { o.MaxResponseSize = 100 })
	err := getUIDs(c)
	var pe *ProtocolError
	if !errors.As(err, &pe) || pe.StatusCode != 200 || !strings.Contains(err.Error(), "larger than 100 bytes") {
		t.Fatalf("err = %v; want a ProtocolError for the size", err)
	}
	if n := srv.requests(); n != 1 {
		t.Fatalf("%d requests; want 1", n)
	}
	// A body of exactly the limit is fine.
	srv = newScripted(t, reply(200, big))
	c = newTestClient(t, srv.srv.URL, newFakeClock(), func(o *Options) { o.MaxResponseSize = int64(len(big)) })
	if err := getUIDs(c); err != nil {
		t.Fatalf("body of exactly MaxResponseSize: %v", err)
	}
}

func TestObserveSeesEveryAttempt(t *testing.T) {
	srv := newScripted(t, reply(429, ""), reply(500, ""), hijackClose(t), reply(200, uidsOK))
	fc := newFakeClock()
	var mu sync.Mutex
	var events []Event
	c := newTestClient(t, srv.srv.URL, fc, func(o *Options) {
		o.Observe = func(e Event) {
			mu.Lock()
			events = append(events, e)
			mu.Unlock()
		}
	})
	if err := getUIDs(c); err != nil {
		t.Fatal(err)
	}
	wantStatus := []int{429, 500, 0, 200}
	if len(events) != len(wantStatus) {
		t.Fatalf("%d events; want %d: %+v", len(events), len(wantStatus), events)
	}
	for i, e := range events {
		if e.Op != "GetUIDs" || e.Attempt != i || e.StatusCode != wantStatus[i] {
			t.Errorf("event %d = %+v; want op GetUIDs, attempt %d, status %d", i, e, i, wantStatus[i])
		}
		if (e.Err == nil) != (i == 3) {
			t.Errorf("event %d error %v", i, e.Err)
		}
		if e.Duration < 0 {
			t.Errorf("event %d duration %v", i, e.Duration)
		}
	}
	// Failures that are not retried are observed too.
	events = nil
	srv = newScripted(t, reply(200, `{"success":false,"code":1,"message":"x"}`))
	c = newTestClient(t, srv.srv.URL, fc, func(o *Options) { o.Observe = func(e Event) { events = append(events, e) } })
	if err := getUIDs(c); !IsAuthFailure(err) {
		t.Fatal(err)
	}
	if len(events) != 1 || events[0].StatusCode != 200 || !IsAuthFailure(events[0].Err) {
		t.Fatalf("events %+v", events)
	}
}

func TestRetryAcrossBatchesKeepsOrder(t *testing.T) {
	// The second batch meets a 503 once; it is retried and the merge keeps
	// the order of the batches.
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		if n.Add(1) == 2 {
			w.WriteHeader(503)
			return
		}
		io.WriteString(w, `{"success":true,"code":0,"message":"OK"}`)
	}))
	defer srv.Close()
	fc := newFakeClock()
	c := newTestClient(t, srv.URL, fc, func(o *Options) { o.BatchSize = 2 })
	if err := c.MarkMessagesAsReadByUIDs(context.Background(), gAuth, "INBOX", []int64{1, 2, 3, 4}); err != nil {
		t.Fatal(err)
	}
	if got := n.Load(); got != 3 {
		t.Fatalf("%d requests; want 3 (2 batches, one retried)", got)
	}
	if s := fc.Sleeps(); len(s) != 1 || s[0] < 30*time.Second {
		t.Fatalf("sleeps %v", s)
	}
}
