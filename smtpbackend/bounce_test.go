package smtpbackend_test

import (
	"context"
	"io"
	"net/mail"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	gomessage "github.com/emersion/go-message"

	"github.com/emersion/go-smtp"

	"github.com/directbridge/directbridge/internal/delivery"
	"github.com/directbridge/directbridge/sandbox"
	"github.com/directbridge/directbridge/smtpbackend"
	"github.com/directbridge/directbridge/upstream/directapi"
)

// withTracker gives the harness a delivery tracker that checks often.
func withTracker(t *testing.T) func(*smtpbackend.Config) {
	return func(c *smtpbackend.Config) {
		tr := delivery.New(delivery.Config{Provider: c.Provider, Store: c.Store, Hostname: "bridge.test",
			FirstCheck: 20 * time.Millisecond, MaxInterval: 50 * time.Millisecond, Tick: 10 * time.Millisecond})
		t.Cleanup(tr.Close)
		c.Tracker = tr
	}
}

// dsns returns the delivery status notifications in user's INBOX.
func (h *harness) dsns(t *testing.T, user string) []directapi.MessageDetail {
	t.Helper()
	var out []directapi.MessageDetail
	for _, m := range h.messages(t, user, "INBOX") {
		if strings.Contains(m.Subject, "Undelivered Mail") || strings.Contains(m.Subject, "Delivery Status Notification") {
			out = append(out, m)
		}
	}
	return out
}

// rawOf returns the raw bytes of user's message uid in INBOX.
func (h *harness) rawOf(t *testing.T, user string, uid int64) string {
	t.Helper()
	raws, err := h.admin.GetRawMessagesByUIDs(ctxT(t), auth(user), "INBOX", []int64{uid})
	if err != nil || len(raws) != 1 {
		t.Fatalf("raw of %d: %d, %v", uid, len(raws), err)
	}
	b, err := raws[0].Bytes()
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// waitFor polls cond for up to 5 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// TestBounceUnknownLocalAddress: a message to an address of a hosted
// domain that does not exist is answered 250 (the provider took it), then
// exactly one RFC 3464 DSN reaches the sender's INBOX, naming the
// recipient with 5.1.1 and holding the original's headers.
func TestBounceUnknownLocalAddress(t *testing.T) {
	t.Parallel()
	h := newHarness(t, withTracker(t))
	c := h.login(t, aliceAddr)
	subject := h.subject("to nobody")
	msgID := "<bounce-me@client.example>"
	nobody := "nobody@direct.example"
	mustSubmit(t, c, aliceAddr, []string{nobody, bobAddr}, simple(subject, "hello\n", "Message-ID: "+msgID))
	waitFor(t, "a DSN", func() bool { return len(h.dsns(t, aliceAddr)) > 0 })
	time.Sleep(200 * time.Millisecond) // more checks come and go
	got := h.dsns(t, aliceAddr)
	if len(got) != 1 {
		t.Fatalf("%d DSNs; want exactly 1", len(got))
	}
	raw := h.rawOf(t, aliceAddr, got[0].UID)
	for _, want := range []string{
		"multipart/report; report-type=delivery-status",
		"Content-Type: message/delivery-status",
		"Final-Recipient: rfc822; " + nobody,
		"Action: failed",
		"Status: 5.1.1",
		"Content-Type: text/rfc822-headers",
		"Subject: " + subject,
		"In-Reply-To: " + msgID,
	} {
		if !strings.Contains(raw, want) {
			t.Errorf("DSN lacks %q:\n%s", want, raw)
		}
	}
	if strings.Contains(raw, "Final-Recipient: rfc822; "+bobAddr) {
		t.Errorf("the DSN reports bob, who got the message:\n%s", raw)
	}
	if strings.Contains(raw, "hello") {
		t.Errorf("the DSN carries the original's body")
	}
}

// TestBounceNoMDN: a recipient whose HISP never confirms is reported with
// 4.4.7 once the provider turns Waiting into NO MDN Received (an hour on
// the sandbox's clock); NOTIFY=NEVER suppresses the report.
func TestBounceNoMDN(t *testing.T) {
	t.Parallel()
	var offset atomic.Int64
	h := newHarnessWith(t, func(o *sandbox.Options) {
		o.Clock = func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }
	}, withTracker(t))
	c := h.login(t, aliceAddr)
	remote, silent := "doctor@remote-hisp.example", "other@remote-hisp.example"
	subject := h.subject("never confirmed")
	if err := c.Mail(aliceAddr, nil); err != nil {
		t.Fatal(err)
	}
	if err := c.Rcpt(remote, nil); err != nil {
		t.Fatal(err)
	}
	if err := c.Rcpt(silent, &smtp.RcptOptions{Notify: []smtp.DSNNotify{smtp.DSNNotifyNever}}); err != nil {
		t.Fatal(err)
	}
	w, err := c.Data()
	if err != nil {
		t.Fatal(err)
	}
	w.Write(simple(subject, "x\n"))
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(150 * time.Millisecond)
	if n := len(h.dsns(t, aliceAddr)); n != 0 {
		t.Fatalf("%d DSNs while the recipients are still Waiting", n)
	}
	offset.Store(int64(61 * time.Minute))
	waitFor(t, "a DSN", func() bool { return len(h.dsns(t, aliceAddr)) > 0 })
	time.Sleep(200 * time.Millisecond)
	got := h.dsns(t, aliceAddr)
	if len(got) != 1 {
		t.Fatalf("%d DSNs; want 1", len(got))
	}
	raw := h.rawOf(t, aliceAddr, got[0].UID)
	if !strings.Contains(raw, "Final-Recipient: rfc822; "+remote) || !strings.Contains(raw, "Status: 4.4.7") {
		t.Errorf("DSN:\n%s", raw)
	}
	if strings.Contains(raw, silent) {
		t.Errorf("NOTIFY=NEVER recipient reported:\n%s", raw)
	}
}

// TestReceiptArrivesAsReport: an MDN (RFC 8098) submitted through SMTP
// arrives as a multipart/report of report-type disposition-notification
// whose report part is the one sent, in 7bit, and whose text and returned
// headers are there too: an agent still recognises it as a receipt.
func TestReceiptArrivesAsReport(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	c := h.login(t, aliceAddr)
	subject := h.subject("receipt")
	report := "Reporting-UA: bridge.test; directbridge\r\nOriginal-Recipient: rfc822;" + aliceAddr +
		"\r\nFinal-Recipient: rfc822;" + aliceAddr + "\r\nOriginal-Message-ID: <orig-1@direct.example>\r\n" +
		"Disposition: automatic-action/MDN-sent-automatically; processed\r\n"
	raw := "From: " + aliceAddr + "\r\nTo: " + bobAddr + "\r\nSubject: " + subject + "\r\nMessage-ID: <mdn-" + subject[len(subject)-8:] + "@direct.example>\r\n" +
		"MIME-Version: 1.0\r\nContent-Type: multipart/report; report-type=disposition-notification; boundary=rb\r\n\r\n" +
		"--rb\r\nContent-Type: text/plain; charset=us-ascii\r\n\r\nThe message was processed.\r\n" +
		"--rb\r\nContent-Type: message/disposition-notification\r\n\r\n" + report +
		"--rb\r\nContent-Type: text/rfc822-headers\r\n\r\nMessage-ID: <orig-1@direct.example>\r\nSubject: lab results\r\n" +
		"--rb--\r\n"
	mustSubmit(t, c, aliceAddr, []string{bobAddr}, []byte(raw))
	got := h.withSubject(t, bobAddr, "INBOX", subject)
	if len(got) != 1 {
		t.Fatalf("%d copies", len(got))
	}
	delivered := h.rawOf(t, bobAddr, got[0].UID)
	e, err := gomessage.Read(strings.NewReader(delivered))
	if err != nil {
		t.Fatal(err)
	}
	typ, params, _ := e.Header.ContentType()
	if typ != "multipart/report" || params["report-type"] != "disposition-notification" {
		t.Fatalf("arrived as %s %v; want multipart/report; report-type=disposition-notification", typ, params)
	}
	var types []string
	var reportBytes, encoding string
	e.Walk(func(_ []int, p *gomessage.Entity, _ error) error {
		pt, _, _ := p.Header.ContentType()
		if strings.HasPrefix(pt, "multipart/") {
			return nil
		}
		types = append(types, pt)
		if pt == "message/disposition-notification" {
			b, _ := io.ReadAll(p.Body)
			reportBytes, encoding = string(b), p.Header.Get("Content-Transfer-Encoding")
		}
		return nil
	})
	if strings.Join(types, " ") != "text/plain message/disposition-notification text/rfc822-headers" {
		t.Errorf("parts %v; want text, report, headers", types)
	}
	// The CRLF before the next delimiter belongs to it (RFC 2046 §5.1.1).
	if reportBytes != strings.TrimSuffix(report, "\r\n") || encoding != "7bit" {
		t.Errorf("report part (%s):\n%q\nwant (7bit)\n%q", encoding, reportBytes, report)
	}
}

// TestFromDisplayNameTravels: "Alice Example <alice@…>" arrives with its
// display name (the sandbox accepts a From header in SendWithHeader).
func TestFromDisplayNameTravels(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	c := h.login(t, aliceAddr)
	subject := h.subject("display name")
	raw := []byte("From: =?utf-8?q?Alice_Exampl=C3=A9?= <" + aliceAddr + ">\r\nTo: " + bobAddr + "\r\nSubject: " + subject + "\r\n\r\nhi\r\n")
	mustSubmit(t, c, aliceAddr, []string{bobAddr}, raw)
	got := h.withSubject(t, bobAddr, "INBOX", subject)
	if len(got) != 1 {
		t.Fatalf("%d copies", len(got))
	}
	m, err := mail.ReadMessage(strings.NewReader(h.rawOf(t, bobAddr, got[0].UID)))
	if err != nil {
		t.Fatal(err)
	}
	a, err := mail.ParseAddress(m.Header.Get("From"))
	if err != nil || a.Name != "Alice Examplé" || a.Address != aliceAddr {
		t.Errorf("From %q (%v); want Alice Examplé <%s>", m.Header.Get("From"), err, aliceAddr)
	}
}

// TestSentMessageRecordedForTracking: once a message is answered 250, the
// state store holds what the delivery tracker follows (written with the
// journal's completion), so a restart still files its DSN.
func TestSentMessageRecordedForTracking(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *smtpbackend.Config) {
		// No check within the test: the record must be the send's, not
		// one the tracker wrote while checking.
		tr := delivery.New(delivery.Config{Provider: c.Provider, Store: c.Store, Hostname: "bridge.test",
			FirstCheck: time.Hour, MaxInterval: time.Hour, Tick: time.Hour})
		t.Cleanup(tr.Close)
		c.Tracker = tr
	})
	c := h.login(t, aliceAddr)
	msgID := "<tracked@client.example>"
	mustSubmit(t, c, aliceAddr, []string{bobAddr, "doc@remote.example"}, simple(h.subject("tracked"), "hello\n", "Message-ID: "+msgID))
	tracked, err := h.store.TrackedMessages(context.Background(), time.Now().Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if len(tracked) != 1 || tracked[0].MessageID != msgID || tracked[0].Username != aliceAddr || len(tracked[0].Recipients) != 2 {
		t.Fatalf("tracked records after the 250: %+v; want the message, with its two recipients", tracked)
	}
}
