package delivery

import (
	"bytes"
	"io"
	"mime"
	"mime/multipart"
	"net/mail"
	"strings"
	"testing"
	"time"

	"github.com/directbridge/directbridge/upstream/directapi"
)

// TestDSNStructure: the DSN is an RFC 3464 multipart/report whose parts
// are text/plain, message/delivery-status (per-message fields, then one
// block per recipient) and text/rfc822-headers, threaded to the original.
func TestDSNStructure(t *testing.T) {
	at := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	o, ok := outcomeOf(directapi.DirectMessageLog{To: "Nobody@Direct.Example", Status: directapi.StatusLocallyFailed,
		StatusDetails: "no such mailbox", TS: directapi.NewDate(at)})
	if !ok || o.status != "5.1.1" || o.action != "failed" {
		t.Fatalf("outcome %+v", o)
	}
	r := report{sender: "alice@direct.example", reportingMTA: "bridge.example", envID: "env-1", arrival: at,
		origMsgID: "<orig@client.example>", headers: []byte("From: alice@direct.example\r\nSubject: s\r\n\r\n"), outcomes: []outcome{o}}
	raw, err := r.compose(at.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(bytes.ReplaceAll(raw, []byte("\r\n"), nil), []byte("\n")) {
		t.Fatal("bare LF in the DSN")
	}
	m, err := mail.ReadMessage(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	if m.Header.Get("In-Reply-To") != "<orig@client.example>" || m.Header.Get("Auto-Submitted") != "auto-replied" ||
		m.Header.Get("To") != "<alice@direct.example>" {
		t.Errorf("header %v", m.Header)
	}
	mt, params, err := mime.ParseMediaType(m.Header.Get("Content-Type"))
	if err != nil || mt != "multipart/report" || params["report-type"] != "delivery-status" {
		t.Fatalf("Content-Type %q: %v", m.Header.Get("Content-Type"), err)
	}
	mr := multipart.NewReader(m.Body, params["boundary"])
	var types []string
	var status string
	for {
		p, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		types = append(types, p.Header.Get("Content-Type"))
		b, _ := io.ReadAll(p)
		if p.Header.Get("Content-Type") == "message/delivery-status" {
			status = string(b)
		}
	}
	if strings.Join(types, ",") != "text/plain; charset=utf-8,message/delivery-status,text/rfc822-headers" {
		t.Errorf("parts %q", types)
	}
	for _, want := range []string{"Reporting-MTA: dns; bridge.example\r\nOriginal-Envelope-Id: env-1\r\nArrival-Date: ",
		"\r\n\r\nFinal-Recipient: rfc822; nobody@direct.example\r\nAction: failed\r\nStatus: 5.1.1\r\nDiagnostic-Code: x-direct; Locally Failed (no such mailbox)\r\n"} {
		if !strings.Contains(status, want) {
			t.Errorf("delivery-status lacks %q:\n%s", want, status)
		}
	}
}

// TestOutcomes maps every documented status.
func TestOutcomes(t *testing.T) {
	for _, tc := range []struct {
		status, details, action, code string
		final                         bool
	}{
		{directapi.StatusWaiting, "", "", "", false},
		{directapi.StatusDelivered, "", "delivered", "2.0.0", true},
		{directapi.StatusLocallyFailed, "recipient certificate is not valid", "failed", "5.7.0", true},
		{directapi.StatusRemotelyFailed, "", "failed", "5.0.0", true},
		{directapi.StatusNoMDNReceived, "", "failed", "4.4.7", true},
	} {
		o, final := outcomeOf(directapi.DirectMessageLog{To: "x@y", Status: tc.status, StatusDetails: tc.details})
		if final != tc.final || o.action != tc.action || o.status != tc.code {
			t.Errorf("%s: %+v final %v", tc.status, o, final)
		}
	}
	if (Notify{}).wants("delivered") || !(Notify{}).wants("failed") || (Notify{Set: true, Never: true}).wants("failed") ||
		!(Notify{Set: true, Success: true}).wants("delivered") || (Notify{Set: true, Success: true}).wants("failed") {
		t.Error("NOTIFY rules")
	}
}
