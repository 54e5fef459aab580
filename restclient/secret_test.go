package restclient

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

const (
	pwText      = "hunter2-PASSWORD"
	sessionText = "SECRET-SESSION-123"
)

// secretHolders returns one value of every type that holds a Secret, each
// with pwText in it.
func secretHolders() map[string]any {
	auth := Authentication{Username: "alice@direct.example", Password: pwText}
	tauth := AuthenticationWithTuser{Username: "tuser@direct.example", Password: pwText, DirectAddr: "bob@direct.example"}
	msg := Message{Sender: "alice@direct.example", Subject: "s", Recipients: []Recipient{{Email: "b@x", Type: TO}}}
	return map[string]any{
		"Secret":                          Secret(pwText),
		"Authentication":                  auth,
		"*Authentication":                 &auth,
		"AuthenticationWithTuser":         tauth,
		"LoginRequest":                    LoginRequest{Username: "reseller", Password: pwText},
		"LoginResponseType":               LoginResponseType{ResellerAPIResponseType: ResellerAPIResponseType{Code: "000", Success: true}, SessionID: pwText},
		"UserPassword":                    UserPassword{Username: "jdoe", Password: pwText},
		"IDProofedIndividualRESTful":      IDProofedIndividualRESTful{IDProofedIndividual: IDProofedIndividual{FirstName: "John", LastName: "Doe", SSN4: "1234", DOB: "1980-01-02"}, DirectUsername: "jdoe", DirectPassword: pwText},
		"SendRequest":                     SendRequest{Authentication: auth, Message: msg},
		"SendRequestWithHeader":           SendRequestWithHeader{Authentication: auth, Message: MessageWithHeader{Message: msg}},
		"SendWithTuserRequest":            SendWithTuserRequest{Authentication: tauth, Message: msg},
		"SendWithHeaderWithTuserRequest":  SendWithHeaderWithTuserRequest{Authentication: tauth, Message: MessageWithHeader{Message: msg}},
		"UidsRequestType":                 UidsRequestType{Auth: auth, UIDs: []int64{1, 2}},
		"SmtpIdsRequestType":              SmtpIdsRequestType{Auth: auth, SmtpIDs: []string{"<a@x>"}},
		"SetFoldersSubscribedRequestType": SetFoldersSubscribedRequestType{Auth: auth, Folders: []string{"INBOX.A"}, Subscribed: true},
		"RawMessagesRequestType":          RawMessagesRequestType{Auth: auth, Messages: []RawMessage{{Data: "QUJD"}}},
		"[]UserPassword":                  []UserPassword{{Username: "a", Password: pwText}, {Username: "b", Password: pwText}},
	}
}

func TestSecretNeverPrinted(t *testing.T) {
	for name, v := range secretHolders() {
		outputs := map[string]string{
			"%v":       fmt.Sprintf("%v", v),
			"%+v":      fmt.Sprintf("%+v", v),
			"%#v":      fmt.Sprintf("%#v", v),
			"%s":       fmt.Sprintf("%s", v),
			"%q":       fmt.Sprintf("%q", v),
			"%x":       fmt.Sprintf("%x", v),
			"%10.3s":   fmt.Sprintf("%10.3s", v),
			"Sprint":   fmt.Sprint(v),
			"Sprintln": fmt.Sprintln("value", v),
			"Errorf":   fmt.Errorf("wrapping %v", v).Error(),
		}
		var lb bytes.Buffer
		log.New(&lb, "", 0).Printf("%+v", v)
		outputs["log.Printf"] = lb.String()
		for verb, out := range outputs {
			if strings.Contains(out, pwText) {
				t.Errorf("%s printed with %s reveals the secret: %s", name, verb, out)
			}
			if verb != "%x" && !strings.Contains(out, redacted) {
				t.Errorf("%s printed with %s does not show %q: %s", name, verb, redacted, out)
			}
		}
	}
	// The non-secret fields still print.
	if out := fmt.Sprintf("%+v", Authentication{Username: "alice@direct.example", Password: pwText}); !strings.Contains(out, "alice@direct.example") {
		t.Errorf("%%+v of Authentication lost the username: %s", out)
	}
	if got := Secret(pwText).String(); got != redacted {
		t.Errorf("String() = %q", got)
	}
	if got := Secret(pwText).GoString(); strings.Contains(got, pwText) {
		t.Errorf("GoString() = %q", got)
	}
	if got := Secret(pwText).Reveal(); got != pwText {
		t.Errorf("Reveal() = %q; want the text", got)
	}
}

func TestSecretNeverLogged(t *testing.T) {
	handlers := map[string]func(*bytes.Buffer) slog.Handler{
		"text": func(b *bytes.Buffer) slog.Handler {
			return slog.NewTextHandler(b, &slog.HandlerOptions{Level: slog.LevelDebug})
		},
		"json": func(b *bytes.Buffer) slog.Handler {
			return slog.NewJSONHandler(b, &slog.HandlerOptions{Level: slog.LevelDebug})
		},
	}
	for hname, mk := range handlers {
		for name, v := range secretHolders() {
			if name == "[]UserPassword" {
				// A slice is marshalled as a whole by the JSON handler; no
				// method on the element type can intervene. Covered below
				// element by element.
				continue
			}
			var buf bytes.Buffer
			l := slog.New(mk(&buf))
			l.Info("as attr", slog.Any("value", v))
			l.Info("as key-value pair", "value", v)
			l.Debug("in a group", slog.Group("g", slog.Any("value", v)))
			l.With(slog.Any("value", v)).Warn("with")
			l.LogAttrs(context.Background(), slog.LevelError, "LogAttrs", slog.Any("value", v))
			out := buf.String()
			if strings.Contains(out, pwText) {
				t.Errorf("%s handler reveals the secret of %s:\n%s", hname, name, out)
			}
			if strings.Count(out, redacted) < 5 {
				t.Errorf("%s handler: %s logged without %q five times:\n%s", hname, name, redacted, out)
			}
		}
	}

	// The JSON handler keeps the structure of a credential object.
	var buf bytes.Buffer
	slog.New(slog.NewJSONHandler(&buf, nil)).Info("x", slog.Any("auth", Authentication{Username: "alice@direct.example", Password: pwText}))
	var rec struct {
		Auth map[string]any `json:"auth"`
	}
	if err := json.Unmarshal(buf.Bytes(), &rec); err != nil {
		t.Fatalf("%v: %s", err, buf.Bytes())
	}
	if rec.Auth["username"] != "alice@direct.example" || rec.Auth["password"] != redacted {
		t.Errorf("JSON log of Authentication = %v", rec.Auth)
	}
	// Elements of a slice logged one by one.
	buf.Reset()
	l := slog.New(slog.NewJSONHandler(&buf, nil))
	for _, up := range secretHolders()["[]UserPassword"].([]UserPassword) {
		l.Info("reset", "entry", up)
	}
	if strings.Contains(buf.String(), pwText) {
		t.Errorf("UserPassword entries leak: %s", buf.String())
	}
}

func TestSecretInJSONOnTheWire(t *testing.T) {
	for name, v := range secretHolders() {
		if name == "Secret" {
			continue
		}
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !strings.Contains(string(b), `"`+pwText+`"`) {
			t.Errorf("json.Marshal(%s) = %s; the provider needs the password in the body", name, b)
		}
		if strings.Contains(string(b), redacted) {
			t.Errorf("json.Marshal(%s) = %s contains the placeholder", name, b)
		}
	}
	b, err := json.Marshal(Secret(pwText))
	if err != nil || string(b) != `"`+pwText+`"` {
		t.Fatalf("json.Marshal(Secret) = %s, %v", b, err)
	}
	var s Secret
	if err := json.Unmarshal([]byte(`"abc"`), &s); err != nil || s.Reveal() != "abc" {
		t.Fatalf("json.Unmarshal(Secret) = %q, %v", s.Reveal(), err)
	}
}

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
	patient := IDProofedIndividualRESTful{IDProofedIndividual: IDProofedIndividual{ID: 7}, DirectUsername: "jdoe", DirectPassword: pwText}
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
			_, err := c.GetPatientAddressByMeta(ctx, sessionText, "d.example", IDProofedIndividual{ID: 1})
			return err
		},
		"GetPatientAddressByUsername": func() error {
			_, err := c.GetPatientAddressByUsername(ctx, sessionText, "d.example", "jdoe")
			return err
		},
		"SetPatientsPasswords": func() error {
			return c.SetPatientsPasswords(ctx, sessionText, "d.example", []UserPassword{{Username: "jdoe", Password: pwText}})
		},
		"Login": func() error {
			_, err := c.Login(ctx, LoginRequest{Username: "reseller", Password: pwText})
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
	_, err = c.ProvisionIDProofedPatient(context.Background(), sessionText, "d.example", IDProofedIndividualRESTful{IDProofedIndividual: IDProofedIndividual{ID: 1}})
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
	if _, err := r.ProvisionIDProofedPatient(ctx, "d.example", IDProofedIndividualRESTful{IDProofedIndividual: IDProofedIndividual{ID: 1}, DirectPassword: pwText}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.GetPatientAddressByUsername(ctx, "d.example", "jdoe"); err != nil {
		t.Fatal(err)
	}
	if err := r.SetPatientsPasswords(ctx, "d.example", []UserPassword{{Username: "jdoe", Password: pwText}}); err != nil {
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
