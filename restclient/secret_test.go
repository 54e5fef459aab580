package restclient

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/directbridge/directbridge/upstream/directapi"
)

// The client's errors and debug lines never show the session id or a
// password; the redaction of the types themselves is tested in directapi.

const (
	pwText      = "hunter2-PASSWORD"
	sessionText = "SECRET-SESSION-123"
)

// closedPort returns the address of a TCP port that nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

func TestTransportErrorHidesSessionID(t *testing.T) {
	fc := newFakeClock()
	c, err := New(Options{BaseURL: "http://" + closedPort(t), Clock: fc, RateLimit: -1})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	patient := directapi.IDProofedIndividualRESTful{IDProofedIndividual: directapi.IDProofedIndividual{ID: 7}, DirectUsername: "jdoe", DirectPassword: pwText}
	_, err = c.ProvisionIDProofedPatient(ctx, sessionText, "patients.direct.example", patient)
	if err == nil {
		t.Fatal("ProvisionIDProofedPatient against a closed port succeeded")
	}
	if strings.Contains(err.Error(), sessionText) || strings.Contains(fmt.Sprintf("%+v", err), sessionText) {
		t.Fatalf("error reveals the sessionId: %v", err)
	}
	if !IsTemporary(err) || OutcomeUnknown(err) {
		t.Fatalf("connection refused: IsTemporary=%v OutcomeUnknown=%v; want true, false (%v)", IsTemporary(err), OutcomeUnknown(err), err)
	}
	if strings.Contains(err.Error(), pwText) {
		t.Fatalf("error reveals the password: %v", err)
	}

	for name, call := range map[string]func() error{
		"GetPatientAddressByMeta": func() error {
			_, err := c.GetPatientAddressByMeta(ctx, sessionText, "d.example", directapi.IDProofedIndividual{ID: 1})
			return err
		},
		"GetPatientAddressByUsername": func() error {
			_, err := c.GetPatientAddressByUsername(ctx, sessionText, "d.example", "jdoe")
			return err
		},
		"SetPatientsPasswords": func() error {
			return c.SetPatientsPasswords(ctx, sessionText, "d.example", []directapi.UserPassword{{Username: "jdoe", Password: pwText}})
		},
		"Login": func() error {
			_, err := c.Login(ctx, directapi.LoginRequest{Username: "reseller", Password: pwText})
			return err
		},
	} {
		err := call()
		if err == nil {
			t.Fatalf("%s against a closed port succeeded", name)
		}
		if strings.Contains(err.Error(), sessionText) || strings.Contains(err.Error(), pwText) {
			t.Errorf("%s error reveals a secret: %v", name, err)
		}
	}
}

func TestTimeoutErrorHidesSessionID(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	defer srv.Close()
	defer close(release)
	c, err := New(Options{BaseURL: srv.URL, Clock: newFakeClock(), RateLimit: -1, RequestTimeout: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.ProvisionIDProofedPatient(context.Background(), sessionText, "d.example", directapi.IDProofedIndividualRESTful{IDProofedIndividual: directapi.IDProofedIndividual{ID: 1}})
	if err == nil {
		t.Fatal("a hanging server gave no error")
	}
	if strings.Contains(err.Error(), sessionText) {
		t.Fatalf("timeout error reveals the sessionId: %v", err)
	}
	if !OutcomeUnknown(err) {
		t.Fatalf("a timed-out provisioning call should have an unknown outcome: %v", err)
	}
}

func TestClientLogsNoSecrets(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case strings.HasSuffix(r.URL.Path, "/login"):
			fmt.Fprintf(w, `{"code":"000","success":true,"sessionId":%q}`, sessionText)
		case strings.Contains(r.URL.Path, "GetPatientAddressByUsername"):
			fmt.Fprint(w, `{"code":"000","success":true,"patient":[]}`)
		case strings.Contains(r.URL.Path, "SetPatientsPasswords"):
			// success with an error status makes the client log a warning
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprint(w, `{"code":"000","success":true}`)
		default:
			fmt.Fprint(w, `{"code":"000","success":true,"users":[]}`)
		}
	}))
	defer srv.Close()
	var buf bytes.Buffer
	logger := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	c, err := New(Options{BaseURL: srv.URL, Clock: newFakeClock(), RateLimit: -1, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	r := c.NewRegistrar("reseller", pwText)
	ctx := context.Background()
	if _, err := r.ProvisionIDProofedPatient(ctx, "d.example", directapi.IDProofedIndividualRESTful{IDProofedIndividual: directapi.IDProofedIndividual{ID: 1}, DirectPassword: pwText}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.GetPatientAddressByUsername(ctx, "d.example", "jdoe"); err != nil {
		t.Fatal(err)
	}
	if err := r.SetPatientsPasswords(ctx, "d.example", []directapi.UserPassword{{Username: "jdoe", Password: pwText}}); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	if strings.Count(out, `"msg":"rest call"`) != 4 {
		t.Fatalf("want one debug line per attempt (4), got:\n%s", out)
	}
	if !strings.Contains(out, `"op":"ProvisionIDProofedPatient"`) || !strings.Contains(out, "succeeded with HTTP error status") {
		t.Fatalf("log lacks the expected lines:\n%s", out)
	}
	for _, secret := range []string{pwText, sessionText, "/DirectRegistrationRESTful", "jdoe"} {
		if strings.Contains(out, secret) {
			t.Errorf("client log contains %q:\n%s", secret, out)
		}
	}
}
