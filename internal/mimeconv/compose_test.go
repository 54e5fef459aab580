package mimeconv

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-message"
	gomail "github.com/emersion/go-message/mail"

	"github.com/directbridge/directbridge/upstream/directapi"
)

var testDate = time.Date(2025, 7, 1, 10, 30, 0, 0, time.FixedZone("", 2*3600))

// roundTripMessage is a message with everything Compose supports.
func roundTripMessage(t *testing.T) (directapi.Message, ComposeOptions) {
	pdf := readTestdata(t, "ccda/unstructured-embedded-pdf.decoded.pdf")
	xdm := readTestdata(t, "xdm/ccda-inpatient-xdm.zip")
	msg := directapi.Message{
		Sender:  "alice@direct.example",
		Subject: "Überweisung – Befund ✓",
		Body: "<p>Befund für Herrn Müller ✓</p>\n<p>" + strings.Repeat("Eine lange Zeile, die weich umbrochen werden muss. ", 4) +
			"</p>\nTrailing space \nTab\there\n",
		HTMLBody: true,
		Recipients: []directapi.Recipient{
			{Email: "bob@direct.example", Type: directapi.TO},
			{Email: "carol@direct.example", Type: "cc"},
			{Email: "dave.secret@direct.example", Type: "Bcc"},
		},
		AttachmentList: []directapi.Attachment{
			{Content: base64.StdEncoding.EncodeToString(pdf), ContentType: "application/pdf", Filename: "Befund Müller – Röntgen.pdf"},
			{Content: base64.StdEncoding.EncodeToString(xdm), ContentType: "application/zip", Filename: "ccda-inpatient-xdm.zip"},
			{Content: base64.StdEncoding.EncodeToString([]byte("no type")), ContentType: "", Filename: "notes.bin"},
		},
	}
	opts := ComposeOptions{
		MessageID: "20250701.abc123@direct.example",
		Date:      testDate,
		Headers: []directapi.MessageHeader{
			{Name: "X-Direct-Test", Value: "Grüße aus Köln"},
			{Name: "In-Reply-To", Value: "<orig@direct.example>"},
			{Name: "Disposition-Notification-Options", Value: "X-DIRECT-FINAL-DESTINATION-DELIVERY=optional,true"},
			{Name: "Reply-To", Value: "Jörg Meier <joerg@direct.example>"},
			{Name: "Bcc", Value: "leak@direct.example"},
			{Name: "from", Value: "mallory@evil.example"},
			{Name: "Content-Type", Value: "text/plain"},
		},
	}
	return msg, opts
}

func TestComposeRoundTrip(t *testing.T) {
	msg, opts := roundTripMessage(t)
	raw, err := Compose(msg, opts)
	if err != nil {
		t.Fatal(err)
	}
	checkWireFormat(t, raw, true)
	for _, leak := range []string{"dave.secret", "leak@", "mallory"} {
		if bytes.Contains(raw, []byte(leak)) {
			t.Errorf("raw message contains %q", leak)
		}
	}

	p, err := Parse(raw, ParseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	checkParsed(t, p, "alice@direct.example", msg.Subject, "<"+opts.MessageID+">", testDate.Format(time.RFC3339), []directapi.Recipient{
		{Email: "bob@direct.example", Type: directapi.TO},
		{Email: "carol@direct.example", Type: directapi.CC},
	})
	if p.Body != msg.Body || !p.HTMLBody {
		t.Errorf("Body = %q html=%v, want %q", p.Body, p.HTMLBody, msg.Body)
	}
	if p.ReplyTo != "joerg@direct.example" {
		t.Errorf("ReplyTo = %q", p.ReplyTo)
	}
	want := []directapi.Attachment{
		{Filename: "Befund Müller – Röntgen.pdf", ContentType: "application/pdf", Content: msg.AttachmentList[0].Content},
		{Filename: "ccda-inpatient-xdm.zip", ContentType: "application/zip", Content: msg.AttachmentList[1].Content},
		{Filename: "notes.bin", ContentType: "application/octet-stream", Content: msg.AttachmentList[2].Content},
	}
	if len(p.Attachments) != len(want) {
		t.Fatalf("%d attachments, want %d", len(p.Attachments), len(want))
	}
	for i, w := range want {
		got := p.Attachments[i]
		if got.Filename != w.Filename || got.ContentType != w.ContentType {
			t.Errorf("attachment %d = %q %q, want %q %q", i, got.Filename, got.ContentType, w.Filename, w.ContentType)
		}
		if g, w := sha256Hex(decodedContent(t, got.Content)), sha256Hex(decodedContent(t, w.Content)); g != w {
			t.Errorf("attachment %d: sha256 %s, want %s", i, g, w)
		}
	}
	if h := sha256Hex(decodedContent(t, p.Attachments[0].Content)); h != "124f30a7be57c3d00c07d6d88f628e0143852650c7dbdc7fecd06a81562f7382" {
		t.Errorf("PDF sha256 = %s", h)
	}
	if h := sha256Hex(decodedContent(t, p.Attachments[1].Content)); h != "addf36e2c87248aff58258d976851e5859aae3cb10f0cad34c246bffde5a51b8" {
		t.Errorf("XDM sha256 = %s", h)
	}

	headers := map[string][]string{}
	for _, h := range p.Headers {
		headers[strings.ToLower(h.Name)] = append(headers[strings.ToLower(h.Name)], h.Value)
	}
	for name, values := range map[string][]string{
		"from":                             {"alice@direct.example"},
		"message-id":                       {"<20250701.abc123@direct.example>"},
		"mime-version":                     {"1.0"},
		"in-reply-to":                      {"<orig@direct.example>"},
		"disposition-notification-options": {"X-DIRECT-FINAL-DESTINATION-DELIVERY=optional,true"},
		"date":                             {"Tue, 01 Jul 2025 10:30:00 +0200"},
	} {
		if fmt.Sprint(headers[name]) != fmt.Sprint(values) {
			t.Errorf("header %s = %q, want %q", name, headers[name], values)
		}
	}
	if _, ok := headers["bcc"]; ok {
		t.Errorf("Bcc header present")
	}
	if len(headers["content-type"]) != 1 || !strings.HasPrefix(headers["content-type"][0], "multipart/mixed;") {
		t.Errorf("Content-Type = %q", headers["content-type"])
	}
	if got := DecodeWords(strings.Join(headers["x-direct-test"], "")); got != "Grüße aus Köln" {
		t.Errorf("X-Direct-Test decodes to %q", got)
	}
	// Custom names keep their case.
	for _, h := range p.Headers {
		if strings.EqualFold(h.Name, "x-direct-test") && h.Name != "X-Direct-Test" {
			t.Errorf("name written as %q", h.Name)
		}
	}

	checkWithGoMessage(t, raw, want)
}

// checkWireFormat checks what RFC 5322 §2.1 and §2.1.1 require of the
// bytes: CRLF line endings only, lines of at most 998 octets and of at most
// 78 where they can be folded (unless foldable is false because the
// message holds attached messages, which are not Compose's lines), and a
// final CRLF.
func checkWireFormat(t *testing.T, raw []byte, foldable bool) {
	t.Helper()
	if !bytes.HasSuffix(raw, []byte("\r\n")) {
		t.Errorf("message does not end with CRLF")
	}
	lines := bytes.Split(raw, []byte("\r\n"))
	for i, line := range lines {
		if bytes.ContainsAny(line, "\r\n") {
			t.Fatalf("line %d has a bare CR or LF: %q", i+1, line)
		}
		if len(line) > 998 {
			t.Errorf("line %d is %d octets: %q", i+1, len(line), line)
		}
		// Longer than 78 only if there was no space to fold at.
		rest := string(line)
		if _, value, ok := strings.Cut(rest, ": "); ok && !strings.HasPrefix(rest, " ") {
			rest = value
		}
		if foldable && len(line) > 78 && strings.Contains(strings.TrimLeft(rest, " "), " ") {
			t.Errorf("line %d is %d octets and could be folded: %q", i+1, len(line), line)
		}
	}
}

// checkWithGoMessage reads raw with go-message's own reader, as another
// consumer would.
func checkWithGoMessage(t *testing.T, raw []byte, want []directapi.Attachment) {
	t.Helper()
	mr, err := gomail.CreateReader(bytes.NewReader(raw))
	if err != nil {
		t.Fatalf("go-message: %v", err)
	}
	subject, err := mr.Header.Subject()
	if err != nil || subject != "Überweisung – Befund ✓" {
		t.Errorf("go-message subject = %q, %v", subject, err)
	}
	var got []directapi.Attachment
	for {
		part, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("go-message: %v", err)
		}
		if ah, ok := part.Header.(*gomail.AttachmentHeader); ok {
			name, _ := ah.Filename()
			ct, _, _ := ah.ContentType()
			data, _ := io.ReadAll(part.Body)
			got = append(got, directapi.Attachment{Filename: name, ContentType: ct, Content: base64.StdEncoding.EncodeToString(data)})
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("go-message attachments differ")
		for _, a := range got {
			t.Logf("go-message: %q %q %d", a.Filename, a.ContentType, len(a.Content))
		}
	}
}

// pythonCheck prints what Python's email package makes of a message.
const pythonCheck = `
import email, hashlib, json, sys
from email import policy
m = email.message_from_bytes(open(sys.argv[1], 'rb').read(), policy=policy.default)
defects = [repr(d) for p in m.walk() for d in p.defects]
for name, value in m.items():
    defects += [repr(d) for d in getattr(value, 'defects', ())]
atts = []
for p in m.iter_attachments():
    data = p.get_payload(decode=True) if not p.is_multipart() and p.get_content_type() != 'message/rfc822' else p.get_payload(0).as_bytes()
    atts.append({'filename': p.get_filename() or '', 'type': p.get_content_type(), 'sha256': hashlib.sha256(data or b'').hexdigest()})
body = m.get_body(preferencelist=('html', 'plain'))
print(json.dumps({'defects': defects, 'subject': str(m['subject']), 'from': str(m['from']), 'to': str(m['to']),
    'cc': str(m['cc']), 'bcc': m['bcc'], 'reply_to': str(m['reply-to']), 'body': body.get_content() if body else None,
    'body_type': body.get_content_type() if body else None, 'attachments': atts}))
`

// Python's email package is an independent reader of what Compose writes.
func TestComposePythonInterop(t *testing.T) {
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not installed")
	}
	msg, opts := roundTripMessage(t)
	raw, err := Compose(msg, opts)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "msg.eml")
	if err := os.WriteFile(file, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(python, "-c", pythonCheck, file).Output()
	if err != nil {
		t.Fatalf("python: %v", err)
	}
	var got struct {
		Defects     []string `json:"defects"`
		Subject     string   `json:"subject"`
		From        string   `json:"from"`
		To          string   `json:"to"`
		Cc          string   `json:"cc"`
		Bcc         *string  `json:"bcc"`
		ReplyTo     string   `json:"reply_to"`
		Body        string   `json:"body"`
		BodyType    string   `json:"body_type"`
		Attachments []struct {
			Filename, Type, SHA256 string
		} `json:"attachments"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("python output %s: %v", out, err)
	}
	if len(got.Defects) > 0 {
		t.Errorf("python found defects: %v", got.Defects)
	}
	if got.Subject != msg.Subject || got.From != "alice@direct.example" || got.To != "bob@direct.example" ||
		got.Cc != "carol@direct.example" || got.Bcc != nil || got.ReplyTo != "Jörg Meier <joerg@direct.example>" {
		t.Errorf("python headers: %+v", got)
	}
	if got.Body = strings.ReplaceAll(got.Body, "\r\n", "\n"); got.BodyType != "text/html" || got.Body != msg.Body {
		t.Errorf("python body %s %q, want %q", got.BodyType, got.Body, msg.Body)
	}
	if len(got.Attachments) != len(msg.AttachmentList) {
		t.Fatalf("python attachments: %+v", got.Attachments)
	}
	for i, a := range msg.AttachmentList {
		if g := got.Attachments[i]; g.Filename != a.Filename || g.SHA256 != sha256Hex(decodedContent(t, a.Content)) {
			t.Errorf("python attachment %d: %+v, want %q", i, g, a.Filename)
		}
	}

	// Forwarded messages too.
	fwd, err := Compose(directapi.Message{Sender: "alice@direct.example", Recipients: []directapi.Recipient{{Email: "bob@direct.example", Type: "TO"}}},
		ComposeOptions{MessageID: "f@direct.example", Date: testDate, Attached: [][]byte{readTestdata(t, "messages/direct-attachment-png.txt")}})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, fwd, 0o600); err != nil {
		t.Fatal(err)
	}
	out, err = exec.Command(python, "-c", pythonCheck, file).Output()
	if err != nil {
		t.Fatalf("python: %v", err)
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Defects) > 0 || len(got.Attachments) != 1 || got.Attachments[0].Type != "message/rfc822" {
		t.Errorf("python on a forward: %s", out)
	}
}

func TestComposeForward(t *testing.T) {
	originals := [][]byte{
		readTestdata(t, "messages/direct-attachment-png.txt"),            // CRLF, 7bit
		readTestdata(t, "messages/hard-8bit-utf8-labelled-us-ascii.eml"), // LF, 8-bit
	}
	raw, err := Compose(directapi.Message{
		Sender:     "alice@direct.example",
		Subject:    "Fwd: 2 messages",
		Recipients: []directapi.Recipient{{Email: "bob@direct.example", Type: directapi.TO}},
	}, ComposeOptions{MessageID: "fwd@direct.example", Date: testDate, Attached: originals})
	if err != nil {
		t.Fatal(err)
	}
	checkWireFormat(t, raw, false)
	// RFC 2046 §5.2.1: no base64 for message/rfc822.
	for _, cte := range []string{"7bit", "8bit"} {
		part := "\r\nContent-Type: message/rfc822\r\nContent-Disposition: attachment\r\nContent-Transfer-Encoding: " + cte + "\r\n\r\n"
		if !bytes.Contains(raw, []byte(part)) {
			t.Errorf("no message/rfc822 part in %s", cte)
		}
	}
	p, err := Parse(raw, ParseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Body != "" || len(p.Attachments) != 2 {
		t.Fatalf("body %q, %d attachments", p.Body, len(p.Attachments))
	}
	for i, a := range p.Attachments {
		if a.ContentType != "message/rfc822" || a.Filename != fmt.Sprintf("message-%d.eml", i+1) {
			t.Errorf("attachment %d = %q %q", i, a.Filename, a.ContentType)
		}
		// Line endings of attached messages are CRLF on the wire.
		want := toCRLF(originals[i])
		if got := decodedContent(t, a.Content); !bytes.Equal(got, want) {
			t.Errorf("attachment %d differs from the original (%d vs %d bytes)", i, len(got), len(want))
		}
	}
	if !bytes.Equal(toCRLF(originals[0]), originals[0]) {
		t.Errorf("test data: first original should already be CRLF")
	}
}

func TestComposeSinglePart(t *testing.T) {
	for _, tc := range []struct {
		body string
		html bool
		ct   string
	}{
		{"Hello", false, "text/plain; charset=utf-8"},
		{"Hello\n", false, "text/plain; charset=utf-8"},
		{"", true, "text/html; charset=utf-8"},
		{strings.Repeat("x", 200) + " ", false, "text/plain; charset=utf-8"},
		{"Grüße\r\nline two\n\n", true, "text/html; charset=utf-8"},
	} {
		raw, err := Compose(directapi.Message{Sender: "Alice A <alice@direct.example>", Body: tc.body, HTMLBody: tc.html},
			ComposeOptions{MessageID: "one@direct.example", Date: testDate})
		if err != nil {
			t.Fatal(err)
		}
		checkWireFormat(t, raw, true)
		h, _ := readFields(raw, true)
		if got := h.Get("Content-Type"); got != tc.ct {
			t.Errorf("Content-Type = %q, want %q", got, tc.ct)
		}
		if got := h.Get("Content-Transfer-Encoding"); got != "quoted-printable" {
			t.Errorf("Content-Transfer-Encoding = %q", got)
		}
		if got := h.Get("From"); got != `"Alice A" <alice@direct.example>` {
			t.Errorf("From = %q", got)
		}
		if h.Get("To") != "" || h.Get("Cc") != "" || h.Get("Subject") != "" {
			t.Errorf("unexpected To, Cc or Subject: %v", h)
		}
		p, err := Parse(raw, ParseOptions{})
		if err != nil {
			t.Fatal(err)
		}
		want := strings.ReplaceAll(tc.body, "\r\n", "\n")
		if p.Body != want || p.HTMLBody != tc.html || len(p.Attachments) != 0 {
			t.Errorf("Body = %q html=%v, %d attachments; want %q", p.Body, p.HTMLBody, len(p.Attachments), want)
		}
	}
}

func TestComposeSubjects(t *testing.T) {
	for _, subject := range []string{
		"plain ASCII subject",
		"  leading and trailing  ",
		"double  space",
		"=?utf-8?q?looks_encoded?=",
		"tab\tand\x01control",
		"line\r\nBcc: injected@evil.example",
		strings.Repeat("long-word", 120),
		strings.Repeat("Grüße ", 60),
		"日本語の件名",
		"emoji 🩺 and combining é",
	} {
		raw, err := Compose(directapi.Message{Sender: "alice@direct.example", Subject: subject},
			ComposeOptions{MessageID: "s@direct.example", Date: testDate})
		if err != nil {
			t.Fatal(err)
		}
		checkWireFormat(t, raw, true)
		p, err := Parse(raw, ParseOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if p.Subject != subject {
			t.Errorf("Subject = %q, want %q", p.Subject, subject)
		}
		if len(p.Recipients) != 0 {
			t.Errorf("recipients from the subject: %v", p.Recipients)
		}
	}
}

func TestComposeRejects(t *testing.T) {
	valid := directapi.Message{
		Sender:     "alice@direct.example",
		Recipients: []directapi.Recipient{{Email: "bob@direct.example", Type: directapi.TO}},
	}
	validOpts := ComposeOptions{MessageID: "id@direct.example", Date: testDate}
	header := func(name, value string) ComposeOptions {
		o := validOpts
		o.Headers = []directapi.MessageHeader{{Name: "X-Ok", Value: "fine"}, {Name: name, Value: value}}
		return o
	}
	withAttachment := func(content string) directapi.Message {
		m := valid
		m.AttachmentList = []directapi.Attachment{{Content: content, ContentType: "application/pdf", Filename: "a.pdf"}}
		return m
	}
	withRecipient := func(email string, typ directapi.RecipientType) directapi.Message {
		m := valid
		m.Recipients = []directapi.Recipient{{Email: email, Type: typ}}
		return m
	}
	cases := []struct {
		name string
		msg  directapi.Message
		opts ComposeOptions
		want error
	}{
		{"CRLF injection in value", valid, header("X-Note", "a\r\nBcc: evil@x.example"), ErrInvalidHeader},
		{"LF in value", valid, header("X-Note", "a\nb"), ErrInvalidHeader},
		{"CR in value", valid, header("X-Note", "a\rb"), ErrInvalidHeader},
		{"NUL in value", valid, header("X-Note", "a\x00b"), ErrInvalidHeader},
		{"invalid UTF-8 in value", valid, header("X-Note", "a\xffb"), ErrInvalidHeader},
		{"injection in a skipped header", valid, header("Bcc", "x@x.example\r\nX-Evil: 1"), ErrInvalidHeader},
		{"space in name", valid, header("X Note", "v"), ErrInvalidHeader},
		{"colon in name", valid, header("X-Note:", "v"), ErrInvalidHeader},
		{"empty name", valid, header("", "v"), ErrInvalidHeader},
		{"non-ASCII name", valid, header("X-Grüße", "v"), ErrInvalidHeader},
		{"CRLF in name", valid, header("X-A\r\nBcc", "v"), ErrInvalidHeader},
		{"non-ASCII Reply-To that is no address", valid, header("Reply-To", "Jörg"), ErrInvalidHeader},
		{"word too long to fold", valid, header("X-Long", strings.Repeat("a", 991)), ErrInvalidHeader},
		{"invalid base64", withAttachment("not base64!!"), validOpts, ErrInvalidAttachment},
		{"truncated base64", withAttachment("QUJDR"), validOpts, ErrInvalidAttachment},
		{"bad sender", directapi.Message{Sender: "not an address"}, validOpts, ErrInvalidAddress},
		{"empty sender", directapi.Message{}, validOpts, ErrInvalidAddress},
		{"recipient injection", withRecipient("bob@x.example\r\nBcc: evil@x.example", directapi.TO), validOpts, ErrInvalidAddress},
		{"recipient type", withRecipient("bob@direct.example", "FROM"), validOpts, ErrInvalidAddress},
		{"empty recipient type", withRecipient("bob@direct.example", ""), validOpts, ErrInvalidAddress},
		{"no message id", valid, ComposeOptions{Date: testDate}, ErrInvalidOptions},
		{"message id with brackets", valid, ComposeOptions{MessageID: "<id@x.example>", Date: testDate}, ErrInvalidOptions},
		{"message id without @", valid, ComposeOptions{MessageID: "id", Date: testDate}, ErrInvalidOptions},
		{"message id with space", valid, ComposeOptions{MessageID: "a b@x.example", Date: testDate}, ErrInvalidOptions},
		{"no date", valid, ComposeOptions{MessageID: "id@x.example"}, ErrInvalidOptions},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			raw, err := Compose(tc.msg, tc.opts)
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			if raw != nil {
				t.Errorf("output with an error")
			}
		})
	}
}

func TestComposeAttachmentDetails(t *testing.T) {
	data := []byte("%PDF-1.4 fake")
	b64 := base64.StdEncoding.EncodeToString(data)
	msg := directapi.Message{
		Sender: "alice@direct.example",
		AttachmentList: []directapi.Attachment{
			// MIME-style base64 with line breaks and no padding is accepted.
			{Content: b64[:8] + "\r\n" + strings.TrimRight(b64[8:], "="), ContentType: "Application/PDF; name=ignored.pdf", Filename: "ok.pdf"},
			{Content: b64, ContentType: "not a type", Filename: ""},
			{Content: b64, ContentType: "multipart/mixed; boundary=zzz", Filename: "odd.bin"},
			{Content: base64.StdEncoding.EncodeToString([]byte("From: x@x.example\n\nhi\n")), ContentType: "message/rfc822", Filename: "old.eml"},
			// A text attachment in a charset other than UTF-8: its bytes
			// and its label, as they are.
			{Content: base64.StdEncoding.EncodeToString([]byte("M\xfcller, 5 \xb5g")), ContentType: "text/plain; charset=ISO-8859-1", Filename: "lab.txt"},
		},
	}
	raw, err := Compose(msg, ComposeOptions{MessageID: "a@direct.example", Date: testDate})
	if err != nil {
		t.Fatal(err)
	}
	checkWireFormat(t, raw, true)
	p, err := Parse(raw, ParseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := []struct{ name, ctype, content string }{
		{"ok.pdf", "application/pdf", string(data)},
		{"attachment-2", "application/octet-stream", string(data)},
		{"odd.bin", "application/octet-stream", string(data)},
		{"old.eml", "message/rfc822", "From: x@x.example\r\n\r\nhi\r\n"},
		{"lab.txt", "text/plain; charset=ISO-8859-1", "M\xfcller, 5 \xb5g"},
	}
	if len(p.Attachments) != len(want) {
		t.Fatalf("%d attachments", len(p.Attachments))
	}
	for i, w := range want {
		got := p.Attachments[i]
		if got.Filename != w.name || got.ContentType != w.ctype || string(decodedContent(t, got.Content)) != w.content {
			t.Errorf("attachment %d = %q %q %q, want %q %q %q", i, got.Filename, got.ContentType, decodedContent(t, got.Content), w.name, w.ctype, w.content)
		}
	}
	if bytes.Contains(raw, []byte("ignored.pdf")) {
		t.Errorf("the name parameter of contentType was kept")
	}
}

// The message Compose writes is readable as a whole by go-message's entity
// reader (the path the SMTP and IMAP libraries take).
func TestComposeReadableByGoMessage(t *testing.T) {
	msg, opts := roundTripMessage(t)
	opts.Attached = [][]byte{readTestdata(t, "messages/hard-rfc2047-encoded-words.eml")}
	raw, err := Compose(msg, opts)
	if err != nil {
		t.Fatal(err)
	}
	e, err := message.Read(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	var leaves []string
	err = e.Walk(func(path []int, part *message.Entity, err error) error {
		if err != nil {
			return err
		}
		if mt, _, _ := part.Header.ContentType(); !strings.HasPrefix(mt, "multipart/") {
			leaves = append(leaves, mt)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := "[text/html application/pdf application/zip application/octet-stream message/rfc822]"; fmt.Sprint(leaves) != want {
		t.Errorf("leaves = %v, want %s", leaves, want)
	}
}

// TestComposeReport: one report part, with the headers it reports on,
// makes a multipart/report whose report part keeps its type in 7bit;
// with another attachment beside it the message is multipart/mixed and
// the report part still keeps its type; a report part that cannot be
// 7bit or 8bit (NUL) is opaque data.
func TestComposeReport(t *testing.T) {
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	dsn := "Reporting-MTA: dns; direct.example\r\n\r\nFinal-Recipient: rfc822; x@y.example\r\nAction: failed\r\nStatus: 5.1.1\r\n"
	msg := directapi.Message{Sender: "a@direct.example", Subject: "Undelivered", Body: "It failed.",
		Recipients: []directapi.Recipient{{Email: "b@direct.example", Type: directapi.TO}},
		AttachmentList: []directapi.Attachment{
			{Content: b64(dsn), ContentType: "message/delivery-status", Filename: "attachment-1"},
			{Content: b64("Message-ID: <m@x>\r\nSubject: s\r\n"), ContentType: "text/rfc822-headers", Filename: "attachment-2"},
		}}
	parts := func(raw []byte) (top string, params map[string]string, types, encs []string) {
		e, err := message.Read(bytes.NewReader(raw))
		if err != nil {
			t.Fatal(err)
		}
		top, params, _ = e.Header.ContentType()
		e.Walk(func(_ []int, p *message.Entity, _ error) error {
			if pt, _, _ := p.Header.ContentType(); !strings.HasPrefix(pt, "multipart/") {
				types = append(types, pt)
				encs = append(encs, p.Header.Get("Content-Transfer-Encoding"))
			}
			return nil
		})
		return
	}
	raw, err := Compose(msg, ComposeOptions{MessageID: "r1@direct.example", Date: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	top, params, types, encs := parts(raw)
	if top != "multipart/report" || params["report-type"] != "delivery-status" ||
		strings.Join(types, " ") != "text/plain message/delivery-status text/rfc822-headers" || encs[1] != "7bit" {
		t.Fatalf("report: %s %v %v %v", top, params, types, encs)
	}
	msg.AttachmentList = append(msg.AttachmentList, directapi.Attachment{Content: b64("%PDF-1.4"), ContentType: "application/pdf", Filename: "a.pdf"})
	raw, err = Compose(msg, ComposeOptions{MessageID: "r2@direct.example", Date: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	if top, _, types, _ = parts(raw); top != "multipart/mixed" || types[1] != "message/delivery-status" {
		t.Fatalf("report beside a file: %s %v", top, types)
	}
	msg.AttachmentList = []directapi.Attachment{{Content: b64("Action: failed\x00\r\n"), ContentType: "message/delivery-status", Filename: "x"}}
	raw, err = Compose(msg, ComposeOptions{MessageID: "r3@direct.example", Date: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	if top, _, types, _ = parts(raw); top != "multipart/mixed" || types[1] != "application/octet-stream" {
		t.Fatalf("binary report part: %s %v", top, types)
	}
}
