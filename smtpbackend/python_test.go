package smtpbackend_test

// Python's smtplib as a second, independent SMTP client: it sends what a
// typical script or EHR integration sends (email.message.EmailMessage with
// an HTML alternative, a non-ASCII subject and a PDF), run from go test.

import (
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// pythonClient is run as python3 -c pythonClient HOST SUBMISSION_PORT
// TLS_PORT USER PASSWORD RCPT SUBJECT PLAIN HTML PDF_PATH. It prints one
// JSON object: the reply to the message's data, and the outcome of a login
// with a wrong password on the implicit TLS port.
const pythonClient = `
import json, smtplib, ssl, sys
from email.message import EmailMessage
from email.utils import make_msgid

host, sub_port, tls_port, user, password, rcpt, subject, plain, html, pdf_path = sys.argv[1:11]

class Recording(smtplib.SMTP):
    """SMTP that keeps the reply to DATA, which send_message drops."""
    data_reply = None

    def data(self, msg):
        self.data_reply = super().data(msg)
        return self.data_reply

out = {}
msg = EmailMessage()
msg["From"] = "Alice Example <%s>" % user
msg["To"] = "Bob Example <%s>" % rcpt
msg["Subject"] = subject
msg["Message-ID"] = make_msgid(domain="python.client.example")
msg.set_content(plain)
msg.add_alternative(html, subtype="html")
with open(pdf_path, "rb") as f:
    msg.add_attachment(f.read(), maintype="application", subtype="pdf", filename="report.pdf")

with Recording(host, int(sub_port), timeout=30) as s:
    s.ehlo()
    out["auth_before_tls"] = s.has_extn("auth")
    s.starttls(context=ssl._create_unverified_context())
    s.ehlo()
    out["auth_after_tls"] = s.esmtp_features.get("auth", "")
    s.login(user, password)
    refused = s.send_message(msg)
    code, text = s.data_reply
    out["send"] = {"code": code, "text": text.decode("utf-8", "replace"), "refused": sorted(refused),
                   "message_id": msg["Message-ID"]}

try:
    with smtplib.SMTP_SSL(host, int(tls_port), timeout=30, context=ssl._create_unverified_context()) as s:
        s.login(user, password + "-wrong")
    out["bad_login"] = {"code": 0, "text": "login succeeded"}
except smtplib.SMTPAuthenticationError as e:
    out["bad_login"] = {"code": e.smtp_code, "text": e.smtp_error.decode("utf-8", "replace")}

json.dump(out, sys.stdout)
`

type pythonResult struct {
	AuthBeforeTLS bool   `json:"auth_before_tls"`
	AuthAfterTLS  string `json:"auth_after_tls"`
	Send          struct {
		Code      int      `json:"code"`
		Text      string   `json:"text"`
		Refused   []string `json:"refused"`
		MessageID string   `json:"message_id"`
	} `json:"send"`
	BadLogin struct {
		Code int    `json:"code"`
		Text string `json:"text"`
	} `json:"bad_login"`
}

func TestPythonSmtplib(t *testing.T) {
	t.Parallel()
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not on PATH")
	}
	h := newHarness(t, nil)
	pdfPath, err := filepath.Abs(filepath.Join("testdata", "e2e", "unstructured-embedded-pdf.decoded.pdf"))
	if err != nil {
		t.Fatal(err)
	}
	pdf := readTestdata(t, "unstructured-embedded-pdf.decoded.pdf")
	subject := h.subject("Überweisung: Befund für Zoë Müller – Kardiologie ✓")
	plain := "Plain alternative: see the HTML part.\n"
	html := "<html><body><p>Befund f\u00fcr <b>Zo\u00eb M\u00fcller</b> anbei.</p><p>Gr\u00fc\u00dfe, Alice</p></body></html>\n"

	host, subPort, _ := strings.Cut(h.subAddr, ":")
	_, tlsPort, _ := strings.Cut(h.tlsAddr, ":")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	since := time.Now().Add(-time.Second)
	cmd := exec.CommandContext(ctx, py, "-c", pythonClient,
		host, subPort, tlsPort, aliceAddr, passwords[aliceAddr], bobAddr, subject, plain, html, pdfPath)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdout, err := cmd.Output()
	if err != nil {
		t.Fatalf("python3: %v\n%s", err, stderr.String())
	}
	var res pythonResult
	if err := json.Unmarshal(stdout, &res); err != nil {
		t.Fatalf("python output %q: %v", stdout, err)
	}

	if !res.AuthBeforeTLS {
		t.Error("smtplib saw no AUTH before STARTTLS on the loopback listener")
	}
	if !strings.Contains(res.AuthAfterTLS, "PLAIN") {
		t.Errorf("AUTH after STARTTLS: %q", res.AuthAfterTLS)
	}
	if res.Send.Code != 250 || len(res.Send.Refused) != 0 {
		t.Fatalf("send_message: %d %q, refused %v", res.Send.Code, res.Send.Text, res.Send.Refused)
	}
	if res.BadLogin.Code != 535 {
		t.Errorf("SMTP_SSL login with a wrong password: %d %q, want SMTPAuthenticationError 535", res.BadLogin.Code, res.BadLogin.Text)
	}

	got := h.withSubject(t, bobAddr, "INBOX", subject)
	if len(got) != 1 {
		var subjects []string
		for _, m := range h.messages(t, bobAddr, "INBOX") {
			subjects = append(subjects, m.Subject)
		}
		t.Fatalf("bob has %d messages with subject %q; subjects: %q", len(got), subject, subjects)
	}
	m := got[0]
	id := smtpIDOf(m)
	if !strings.Contains(res.Send.Text, id) {
		t.Errorf("250 text %q does not carry the smtpId %s", res.Send.Text, id)
	}
	if !m.HTMLBody {
		t.Error("HTMLBody false for a multipart/alternative with an HTML part")
	}
	if normBody(m.Body) != normBody(html) {
		t.Errorf("body %q, want the HTML part %q", m.Body, html)
	}
	if strings.Contains(m.Body, "Plain alternative") {
		t.Error("the plain-text alternative was kept next to the HTML body")
	}
	wantAttachments(t, m.AttachmentList, []attachment{{"application/pdf", "report.pdf", pdf}})

	rec, ok, err := h.store.FindSent(ctxT(t), aliceAddr, res.Send.MessageID, since)
	if err != nil || !ok || rec.SmtpID != id {
		t.Errorf("FindSent(%s): %+v ok %v err %v, want smtpId %s", res.Send.MessageID, rec, ok, err, id)
	}
}

// pythonLFClient sends LF-terminated bytes with smtplib.sendmail, as
// scripts do with msg.as_bytes() (smtplib dot-stuffs but does not fix line
// ends of bytes). Arguments: HOST PORT USER PASSWORD RCPT SUBJECT. It
// prints the reply to the data.
const pythonLFClient = `
import json, smtplib, sys
host, port, user, password, rcpt, subject = sys.argv[1:7]
raw = ("From: %s\nTo: %s\nSubject: %s\n\nfirst line\n.\n..two dots\nlast line\n" % (user, rcpt, subject)).encode()

class Recording(smtplib.SMTP):
    data_reply = None
    def data(self, msg):
        self.data_reply = super().data(msg)
        return self.data_reply

with Recording(host, int(port), timeout=30) as s:
    s.login(user, password)
    s.sendmail(user, [rcpt], raw)
    code, text = s.data_reply
    json.dump({"code": code, "text": text.decode()}, sys.stdout)
`

// TestPythonSendmailBareLF: smtplib.sendmail of LF-terminated bytes is
// accepted (250) and delivered with CRLF line ends, its dot lines intact.
func TestPythonSendmailBareLF(t *testing.T) {
	t.Parallel()
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not on PATH")
	}
	h := newHarness(t, nil)
	subject := h.subject("bare LF from smtplib")
	host, port, _ := strings.Cut(h.subAddr, ":")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, py, "-c", pythonLFClient, host, port, aliceAddr, passwords[aliceAddr], bobAddr, subject)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdout, err := cmd.Output()
	if err != nil {
		t.Fatalf("python3: %v\n%s", err, stderr.String())
	}
	var res struct {
		Code int    `json:"code"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(stdout, &res); err != nil || res.Code != 250 {
		t.Fatalf("sendmail: %s (%v)", stdout, err)
	}
	got := h.withSubject(t, bobAddr, "INBOX", subject)
	if len(got) != 1 {
		t.Fatalf("bob has %d copies", len(got))
	}
	if want := "first line\n.\n..two dots\nlast line"; strings.TrimRight(strings.ReplaceAll(got[0].Body, "\r\n", "\n"), "\n") != want {
		t.Errorf("body %q, want %q", got[0].Body, want)
	}
}
