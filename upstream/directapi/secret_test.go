package directapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log"
	"log/slog"
	"strings"
	"testing"
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
