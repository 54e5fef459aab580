package smtpbackend_test

import (
	"strings"
	"testing"

	"github.com/directbridge/directbridge/upstream/directapi"
)

// The measured failure of the "reliability" issue: an older EHR's
// Windows-1252 (here also ISO-8859-1) bytes, and what they say.
const (
	eightBitDose = "Patient: M\xfcller, dose 5 \xb5g"
	wantDose     = "Patient: Müller, dose 5 µg"
)

// rawMessage is a message from alice to bob: the header lines as given,
// then body, with CRLF line breaks and no conversion of any byte.
func rawMessage(header []string, body string) []byte {
	return []byte(strings.Join(header, "\r\n") + "\r\nMIME-Version: 1.0\r\n\r\n" + body + "\r\n")
}

// TestMislabelledCharsetDelivered submits, through STARTTLS and AUTH, an
// 8-bit Windows-1252 body labelled utf-8, with no charset, labelled
// us-ascii, and labelled iso-8859-1 (correctly): each is answered 250, and
// what the provider received (the recorded Send request) and what bob's
// INBOX holds say "Müller, dose 5 µg", not U+FFFD.
func TestMislabelledCharsetDelivered(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	c := h.login(t, aliceAddr)
	for _, tc := range []struct{ name, contentType string }{
		{"a charset utf-8", "Content-Type: text/plain; charset=utf-8"},
		{"b no charset", "Content-Type: text/plain"},
		{"c charset us-ascii", "Content-Type: text/plain; charset=us-ascii"},
		{"d charset iso-8859-1", "Content-Type: text/plain; charset=iso-8859-1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			subject := h.subject("charset " + tc.name)
			raw := rawMessage([]string{
				"From: " + aliceAddr, "To: " + bobAddr, "Subject: " + subject,
				tc.contentType, "Content-Transfer-Encoding: 8bit",
			}, eightBitDose)
			mustSubmit(t, c, aliceAddr, []string{bobAddr}, raw)

			var req directapi.SendRequest
			lastRequest(t, h.sb, "Send", &req)
			if req.Message.Subject != subject {
				t.Fatalf("last Send request is for %q, not this message", req.Message.Subject)
			}
			if !strings.Contains(req.Message.Body, wantDose) || strings.ContainsRune(req.Message.Body, '\uFFFD') {
				t.Errorf("provider received body %q, want it to hold %q", req.Message.Body, wantDose)
			}
			got := h.withSubject(t, bobAddr, "INBOX", subject)
			if len(got) != 1 {
				t.Fatalf("bob has %d copies, want 1", len(got))
			}
			if !strings.Contains(got[0].Body, wantDose) {
				t.Errorf("bob's copy has body %q, want it to hold %q", got[0].Body, wantDose)
			}
		})
	}
}

// TestEightBitHeaderDelivered: a Subject with raw Windows-1252 bytes, one
// in an encoded-word labelled utf-8 though its bytes are Windows-1252, and
// a From display name with raw 8-bit bytes reach the provider and bob's
// INBOX as "Müller".
func TestEightBitHeaderDelivered(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	c := h.login(t, aliceAddr)
	for _, tc := range []struct{ name, subject string }{
		{"raw 8-bit", "Befund M\xfcller, 5 \xb5g"},
		{"mislabelled encoded-word", "=?utf-8?q?Befund_M=FCller=2C_5_=B5g?="},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := h.subject("") // a unique suffix: "#n"
			subject := tc.subject + n
			want := "Befund Müller, 5 µg" + n
			raw := rawMessage([]string{
				"From: Dr. M\xfcller <" + aliceAddr + ">", "To: " + bobAddr, "Subject: " + subject,
				"Content-Type: text/plain; charset=utf-8",
			}, "see subject")
			mustSubmit(t, c, aliceAddr, []string{bobAddr}, raw)

			var req directapi.SendRequestWithHeader // the From display name travels as a header
			lastRequest(t, h.sb, "SendWithHeader", &req)
			if req.Message.Subject != want {
				t.Errorf("provider received subject %q, want %q", req.Message.Subject, want)
			}
			var from string
			for _, f := range req.Message.Headers {
				if f.Name == "From" {
					from = f.Value
				}
			}
			if from != "Dr. Müller <"+aliceAddr+">" {
				t.Errorf("provider received From %q", from)
			}
			if got := h.withSubject(t, bobAddr, "INBOX", want); len(got) != 1 {
				t.Errorf("bob has %d messages with subject %q, want 1", len(got), want)
			}
		})
	}
}

// TestUndecodableCharsetRefused: a body whose bytes are not valid in its
// declared multibyte charset, a body in a charset the bridge cannot
// decode, and a Subject encoded-word with invalid bytes are refused with
// a 554 that says why (5.6.5 conversion failed, 5.6.3 conversion not
// supported), and the provider receives nothing: no Send call, no message
// in bob's INBOX or alice's Sent.
func TestUndecodableCharsetRefused(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	c := h.login(t, aliceAddr)
	for _, tc := range []struct {
		name    string
		subject string // "" for a plain one
		ct      string
		body    string
		enh     int
	}{
		{"invalid Shift_JIS body", "", "Content-Type: text/plain; charset=Shift_JIS", "dose 5 \x81 g", 5},
		{"invalid GB2312 body", "", "Content-Type: text/plain; charset=GB2312", "dose 5 \xff\xff", 5},
		{"unknown charset body", "", "Content-Type: text/plain; charset=x-unknown", eightBitDose, 3},
		{"invalid Shift_JIS Subject word", "=?shift_jis?b?gSA=?=", "Content-Type: text/plain; charset=utf-8", "ok", 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			subject := h.subject("refused " + tc.name)
			if tc.subject != "" {
				subject = tc.subject + " " + subject
			}
			raw := rawMessage([]string{
				"From: " + aliceAddr, "To: " + bobAddr, "Subject: " + subject, tc.ct,
			}, tc.body)
			before := h.counts(t)
			calls := h.sb.Calls("Send") + h.sb.Calls("SendWithHeader")
			_, err := submit(c, aliceAddr, []string{bobAddr}, raw)
			se := wantReply(t, err, 554, 5, 6, tc.enh)
			if !strings.Contains(se.Message, "charset") {
				t.Errorf("reply %q does not say the charset is why", se.Message)
			}
			if n := h.sb.Calls("Send") + h.sb.Calls("SendWithHeader"); n != calls {
				t.Errorf("the provider was asked to send %d times", n-calls)
			}
			if after := h.counts(t); after != before {
				t.Errorf("mailboxes %+v -> %+v", before, after)
			}
			if err := c.Reset(); err != nil {
				t.Fatal(err)
			}
		})
	}
	if err := c.Noop(); err != nil {
		t.Fatalf("session lost after the refusals: %v", err)
	}
}

// TestTextAttachmentKeepsCharset submits a text attachment written in
// ISO-8859-1: the provider's request names its charset beside its type,
// and bob's copy of it still says so, with the bytes as they were, so
// that his mail reader shows "Müller, dose 5 µg" and not two question
// marks.
func TestTextAttachmentKeepsCharset(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	c := h.login(t, aliceAddr)
	subject := h.subject("latin-1 report")
	raw := message([]string{"From: " + aliceAddr, "To: " + bobAddr, "Subject: " + subject},
		"The lab report is attached.\n",
		attachment{"text/plain; charset=ISO-8859-1", "report.txt", []byte(eightBitDose)})
	mustSubmit(t, c, aliceAddr, []string{bobAddr}, raw)

	var req directapi.SendRequest
	lastRequest(t, h.sb, "Send", &req)
	if req.Message.Subject != subject || len(req.Message.AttachmentList) != 1 {
		t.Fatalf("last Send request: subject %q, %d attachments", req.Message.Subject, len(req.Message.AttachmentList))
	}
	const want = "text/plain; charset=ISO-8859-1"
	if ct := req.Message.AttachmentList[0].ContentType; ct != want {
		t.Errorf("provider received attachment type %q, want %q", ct, want)
	}
	got := h.withSubject(t, bobAddr, "INBOX", subject)
	if len(got) != 1 {
		t.Fatalf("bob has %d copies, want 1", len(got))
	}
	wantAttachments(t, got[0].AttachmentList, []attachment{{"text/plain", "report.txt", []byte(eightBitDose)}})
	if ct := got[0].AttachmentList[0].ContentType; !strings.Contains(strings.ToLower(ct), "charset=iso-8859-1") {
		t.Errorf("bob's copy has attachment type %q, want it to name charset ISO-8859-1", ct)
	}
}
