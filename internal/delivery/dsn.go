package delivery

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"mime"
	"slices"
	"strings"
	"time"

	"github.com/directbridge/directbridge/upstream/directapi"
)

// A delivery status notification (RFC 3464) is what mail clients and EHR
// inbox processing understand as a bounce: a multipart/report with a
// human-readable part, a machine-readable message/delivery-status part,
// and the original's header section (text/rfc822-headers, RFC 6522 §3).
// The Direct Project's reference implementation files one to the sender
// for failures and timeouts; the bridge does the same for what the
// provider's status operations report.

// outcome is a recipient's final state as a DSN states it.
type outcome struct {
	recipient string
	action    string // RFC 3464 §2.3.3: failed or delivered
	status    string // RFC 3463 enhanced code
	provider  string // the provider's status and details, for Diagnostic-Code
	at        time.Time
}

// outcomeOf maps a provider status to what the DSN says, or ok false when
// the status is not final (Waiting) or unknown.
//
//   - Locally Failed: 5.1.1 for a mailbox the provider does not know, 5.7.0
//     for a refused certificate or policy, 5.0.0 otherwise.
//   - Remotely Failed: 5.0.0 (the remote HISP refused it; its reason is in
//     the details).
//   - NO MDN Received: 4.4.7, "delivery time expired" (RFC 3463 §3.5): the
//     recipient's HISP never confirmed; the message may or may not have
//     arrived, which the text says.
//   - Delivered: 2.0.0.
func outcomeOf(l directapi.DirectMessageLog) (outcome, bool) {
	o := outcome{recipient: strings.ToLower(strings.TrimSpace(l.To)), provider: l.Status, at: l.TS.Time}
	if l.StatusDetails != "" {
		o.provider += " (" + l.StatusDetails + ")"
	}
	details := strings.ToLower(l.StatusDetails)
	switch l.Status {
	case directapi.StatusLocallyFailed:
		o.action = "failed"
		switch {
		case strings.Contains(details, "no such") || strings.Contains(details, "unknown") || strings.Contains(details, "not found"):
			o.status = "5.1.1"
		case strings.Contains(details, "certificate") || strings.Contains(details, "trust") || strings.Contains(details, "policy"):
			o.status = "5.7.0"
		default:
			o.status = "5.0.0"
		}
	case directapi.StatusRemotelyFailed:
		o.action, o.status = "failed", "5.0.0"
	case directapi.StatusNoMDNReceived:
		o.action, o.status = "failed", "4.4.7"
	case directapi.StatusDelivered:
		o.action, o.status = "delivered", "2.0.0"
	default:
		return outcome{}, false
	}
	return o, true
}

// report is what one DSN is about: one sent message, some of its
// recipients.
type report struct {
	sender       string // the address the message came from; the DSN goes to it
	reportingMTA string
	envID        string    // ESMTP ENVID (RFC 3461 §4.4), if given
	arrival      time.Time // when the bridge took the message
	origMsgID    string    // the original's Message-ID, with brackets, for threading
	headers      []byte    // the original's header section, or nil
	outcomes     []outcome
	id           string // the DSN's Message-ID, without brackets (messageID)
}

// messageID is the Message-ID of the DSN about smtpID's recipients: the
// same for the same message and recipients, so that a DSN whose filing
// was interrupted is found in the sender's INBOX by it (Tracker.file)
// rather than filed twice. The domain is the sender's, as in From.
func (r report) messageID(smtpID string, recipients []string) string {
	rs := slices.Clone(recipients)
	slices.Sort(rs)
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s", smtpID, strings.Join(rs, "\x00"))
	return "dsn-" + hex.EncodeToString(h.Sum(nil)[:12]) + "@" + r.domain()
}

// domain is the DSN's domain: the sender's, else the Reporting-MTA.
func (r report) domain() string {
	if _, d, ok := strings.Cut(r.sender, "@"); ok && d != "" {
		return d
	}
	return r.reportingMTA
}

// compose writes the DSN as an RFC 5322 message with CRLF line ends.
func (r report) compose(now time.Time) ([]byte, error) {
	var rnd [12]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return nil, err
	}
	boundary := "=_dsn_" + hex.EncodeToString(rnd[:])
	domain := r.domain()
	failed := false
	for _, o := range r.outcomes {
		failed = failed || o.action == "failed"
	}
	subject := "Delivery Status Notification (Success)"
	if failed {
		subject = "Undelivered Mail Returned to Sender"
	}

	var b bytes.Buffer
	w := func(format string, args ...any) { fmt.Fprintf(&b, format+"\r\n", args...) }
	w("From: Mail Delivery System <MAILER-DAEMON@%s>", domain)
	w("To: <%s>", r.sender)
	w("Subject: %s", subject)
	w("Date: %s", now.Format("Mon, 02 Jan 2006 15:04:05 -0700"))
	if r.id != "" {
		w("Message-ID: <%s>", r.id)
	} else {
		w("Message-ID: <dsn-%s@%s>", hex.EncodeToString(rnd[:8]), domain)
	}
	if r.origMsgID != "" {
		w("In-Reply-To: %s", r.origMsgID)
		w("References: %s", r.origMsgID)
	}
	w("Auto-Submitted: auto-replied") // RFC 3834 §5: no automatic answer to it
	w("MIME-Version: 1.0")
	w("Content-Type: multipart/report; report-type=delivery-status;\r\n\tboundary=\"%s\"", boundary)
	w("")
	w("This is a delivery status notification in MIME format (RFC 3464).")
	w("")

	// The human part.
	w("--%s", boundary)
	w("Content-Type: text/plain; charset=utf-8")
	w("Content-Transfer-Encoding: 8bit")
	w("")
	w("This is the mail bridge at %s.", r.reportingMTA)
	w("")
	for _, o := range r.outcomes {
		switch {
		case o.status == "4.4.7":
			w("Your message to <%s> was sent, but the recipient's Direct provider never", o.recipient)
			w("confirmed its delivery (no MDN within the time allowed). It may or may not")
			w("have arrived; please contact the recipient by other means.")
		case o.action == "failed":
			w("Your message could not be delivered to <%s>.", o.recipient)
			w("The provider reported: %s.", o.provider)
		default:
			w("Your message was delivered to <%s>.", o.recipient)
		}
		w("")
	}

	// The machine part (RFC 3464 §2.2, §2.3).
	w("--%s", boundary)
	w("Content-Type: message/delivery-status")
	w("")
	w("Reporting-MTA: dns; %s", r.reportingMTA)
	if r.envID != "" {
		w("Original-Envelope-Id: %s", r.envID)
	}
	if !r.arrival.IsZero() {
		w("Arrival-Date: %s", r.arrival.Format("Mon, 02 Jan 2006 15:04:05 -0700"))
	}
	for _, o := range r.outcomes {
		w("")
		w("Final-Recipient: rfc822; %s", o.recipient)
		w("Action: %s", o.action)
		w("Status: %s", o.status)
		w("Diagnostic-Code: x-direct; %s", sanitize(o.provider))
		if !o.at.IsZero() {
			w("Last-Attempt-Date: %s", o.at.Format("Mon, 02 Jan 2006 15:04:05 -0700"))
		}
	}
	w("")

	// The original's header section (RFC 6522 §3, text/rfc822-headers).
	if len(r.headers) > 0 {
		w("--%s", boundary)
		w("Content-Type: text/rfc822-headers")
		w("")
		b.Write(bytes.TrimRight(r.headers, "\r\n"))
		w("")
		w("")
	}
	w("--%s--", boundary)
	return b.Bytes(), nil
}

// sanitize keeps a provider text on one line of printable ASCII, as a
// header field value must be; other characters are Q-encoded.
func sanitize(s string) string {
	s = strings.Map(func(r rune) rune {
		if r == '\r' || r == '\n' || r == '\t' {
			return ' '
		}
		return r
	}, s)
	for _, r := range s {
		if r < ' ' || r > '~' {
			return mime.QEncoding.Encode("utf-8", s)
		}
	}
	return s
}

// headerSection returns the header section of raw (up to the blank line).
func headerSection(raw []byte) []byte {
	if i := bytes.Index(raw, []byte("\r\n\r\n")); i >= 0 {
		return raw[:i+2]
	}
	if i := bytes.Index(raw, []byte("\n\n")); i >= 0 {
		return raw[:i+1]
	}
	return raw
}
