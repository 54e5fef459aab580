package smtpbackend_test

// Retries recognised exactly (journal.go): identical bytes are a retry
// when they carry the same Message-ID, or when the earlier attempt ended
// without its 250 being written; otherwise they are a second submission,
// and delivered. T-users, who cannot read the Sent folder, are looked up
// in the provider's delivery status.

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/base64"
	"fmt"
	"log/slog"
	"net"
	"net/textproto"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"

	"github.com/directbridge/directbridge/sandbox"
	"github.com/directbridge/directbridge/smtpbackend"
)

// TestIdenticalBytesWithoutMessageIDSentTwice: a client that got its 250
// and submits the same bytes again, without a Message-ID, means to send
// twice: each submission is delivered and answered with its own smtpId.
// The third comes on another connection the moment the second's 250 is
// read, while the bridge may still be recording that it wrote it.
//
// Broken on purpose: with the journal answering every identical
// submission of a sent entry from the entry (the rule before), the
// second and third get the first smtpId and bob has one copy; with the
// written 250 never recorded (settleAnswer ignoring the write), the same.
func TestIdenticalBytesWithoutMessageIDSentTwice(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		store bool // the state store's journal, else the in-memory one
	}{{"state-store", true}, {"in-memory", false}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, func(c *smtpbackend.Config) {
				if !tc.store {
					c.Store = nil
				}
			})
			subject := h.subject("form letter")
			raw := simple(subject, "Your appointment is confirmed.\n")
			c := h.login(t, aliceAddr)
			replies := []string{
				mustSubmit(t, c, aliceAddr, []string{bobAddr}, raw),
				mustSubmit(t, c, aliceAddr, []string{bobAddr}, raw),
				mustSubmit(t, h.login(t, aliceAddr), aliceAddr, []string{bobAddr}, raw),
			}
			if n := h.sb.Calls("Send"); n != 3 {
				t.Errorf("the provider saw %d sends; want 3", n)
			}
			got := h.withSubject(t, bobAddr, "INBOX", subject)
			if len(got) != 3 {
				t.Fatalf("bob has %d copies; want 3 (replies %q)", len(got), replies)
			}
			ids := map[string]bool{}
			for _, m := range got {
				ids[smtpIDOf(m)] = true
			}
			for i, r := range replies {
				found := ""
				for id := range ids {
					if strings.Contains(r, id) {
						found = id
					}
				}
				if found == "" {
					t.Errorf("reply %d %q names none of the delivered copies %v (or one named before)", i+1, r, ids)
				}
				delete(ids, found)
			}
		})
	}
}

// TestIdenticalBytesWithMessageIDSentOnce: the same bytes with a
// Message-ID, submitted again after their 250 was read, on the same
// connection and on another, are a retry: answered 250 with the first
// smtpId, delivered once.
//
// Broken on purpose: with a written 250 making every identical
// submission a second one (the Message-ID ignored), bob has three copies.
func TestIdenticalBytesWithMessageIDSentOnce(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	subject := h.subject("with Message-ID")
	raw := simple(subject, "This message must arrive exactly once.\n",
		fmt.Sprintf("Message-ID: <once-%d@client.example>", h.seq.Add(1)))
	c := h.login(t, aliceAddr)
	first := mustSubmit(t, c, aliceAddr, []string{bobAddr}, raw)
	got := h.withSubject(t, bobAddr, "INBOX", subject)
	if len(got) != 1 || !strings.Contains(first, smtpIDOf(got[0])) {
		t.Fatalf("first send: %d copies, reply %q", len(got), first)
	}
	id := smtpIDOf(got[0])
	for i, c := range []*smtp.Client{c, h.login(t, aliceAddr)} {
		if reply := mustSubmit(t, c, aliceAddr, []string{bobAddr}, raw); !strings.Contains(reply, id) {
			t.Errorf("submission %d again: reply %q; want the first smtpId %s", i+2, reply, id)
		}
	}
	if n := h.sb.Calls("SendWithHeader") + h.sb.Calls("Send"); n != 1 {
		t.Errorf("the provider saw %d sends; want 1", n)
	}
	if n := len(h.withSubject(t, bobAddr, "INBOX", subject)); n != 1 {
		t.Errorf("bob has %d copies; want 1", n)
	}
}

// logWatch records the messages a bridge logs, for a test to wait for one.
type logWatch struct {
	mu   sync.Mutex
	msgs []string
}

func (w *logWatch) Enabled(context.Context, slog.Level) bool { return true }
func (w *logWatch) Handle(_ context.Context, r slog.Record) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.msgs = append(w.msgs, r.Message)
	return nil
}
func (w *logWatch) WithAttrs([]slog.Attr) slog.Handler { return w }
func (w *logWatch) WithGroup(string) slog.Handler      { return w }

// waitFor waits until msg was logged, up to d.
func (w *logWatch) waitFor(t *testing.T, msg string, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		w.mu.Lock()
		for _, m := range w.msgs {
			if m == msg {
				w.mu.Unlock()
				return
			}
		}
		w.mu.Unlock()
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("the bridge never logged %q", msg)
}

// submitAndVanish submits raw as alice over implicit TLS and, the moment
// the final dot is written, resets the TCP connection (SO_LINGER 0: an
// RST, no FIN, no TLS close_notify) without reading the reply: a client
// whose connection broke after the data, before the answer.
func submitAndVanish(t *testing.T, h *harness, raw []byte) {
	t.Helper()
	nc, err := net.DialTimeout("tcp", h.tlsAddr, clientTimeout)
	if err != nil {
		t.Fatal(err)
	}
	tcp := nc.(*net.TCPConn)
	defer tcp.Close()
	tc := tls.Client(tcp, clientTLS())
	tc.SetDeadline(time.Now().Add(clientTimeout))
	p := textproto.NewConn(tc)
	cmd := func(code int, line string) {
		t.Helper()
		if line != "" {
			if err := p.PrintfLine("%s", line); err != nil {
				t.Fatal(err)
			}
		}
		if _, _, err := p.ReadResponse(code); err != nil {
			t.Fatalf("%q: want %d: %v", line, code, err)
		}
	}
	cmd(220, "")
	cmd(250, "EHLO vanishing.client.example")
	cmd(235, "AUTH PLAIN "+base64.StdEncoding.EncodeToString([]byte("\x00"+aliceAddr+"\x00"+passwords[aliceAddr])))
	cmd(250, "MAIL FROM:<"+aliceAddr+">")
	cmd(250, "RCPT TO:<"+bobAddr+">")
	cmd(354, "DATA")
	w := bufio.NewWriter(tc)
	w.Write(raw) // no line of raw starts with a dot
	w.WriteString(".\r\n")
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := tcp.SetLinger(0); err != nil {
		t.Fatal(err)
	}
	tcp.Close()
}

// TestReplyNotWrittenRetryIsRetry: a message without a Message-ID whose
// 250 could not be written (the client's connection was reset while the
// provider took the message) is delivered once: the client never saw the
// 250, so its retry of the same bytes is a retry, answered 250 with the
// first smtpId and not sent again.
//
// Broken on purpose: with replyConn.writtenSince always true (the write's
// failure not looked at), the bridge never logs the unwritten reply and
// the test fails waiting for it; with the journal ignoring Answered
// (every identical submission after a 250 sent again), bob has two
// copies.
func TestReplyNotWrittenRetryIsRetry(t *testing.T) {
	t.Parallel()
	logs := &logWatch{}
	h := newHarness(t, func(c *smtpbackend.Config) { c.Logger = slog.New(logs) })
	subject := h.subject("reply lost")
	raw := simple(subject, "Potassium 6.8 mmol/L, please call the patient.\n")

	// The provider takes its time, so the reset reaches the bridge
	// before it writes the reply.
	h.sb.InjectFault("Send", sandbox.Fault{Latency: 300 * time.Millisecond, Times: 1})
	submitAndVanish(t, h, raw)
	logs.waitFor(t, "smtp reply not written; identical bytes are a retry", 10*time.Second)
	got := h.withSubject(t, bobAddr, "INBOX", subject)
	if len(got) != 1 {
		t.Fatalf("bob has %d copies after the first attempt; want 1", len(got))
	}
	id := smtpIDOf(got[0])

	c := h.login(t, aliceAddr)
	if reply := mustSubmit(t, c, aliceAddr, []string{bobAddr}, raw); !strings.Contains(reply, id) {
		t.Errorf("the retry got %q; want the first smtpId %s", reply, id)
	}
	if n := h.sb.Calls("Send"); n != 1 {
		t.Errorf("the provider saw %d sends; want 1", n)
	}
	if n := len(h.withSubject(t, bobAddr, "INBOX", subject)); n != 1 {
		t.Errorf("bob has %d copies after the retry; want 1", n)
	}
	// The retry's 250 was written: the same bytes again are a second
	// submission now.
	if reply := mustSubmit(t, c, aliceAddr, []string{bobAddr}, raw); strings.Contains(reply, id) {
		t.Errorf("a submission after the retry's 250 was read got the first smtpId again: %q", reply)
	}
	if n := len(h.withSubject(t, bobAddr, "INBOX", subject)); n != 2 {
		t.Errorf("bob has %d copies after a second submission; want 2", n)
	}
}

// loginTuser dials with STARTTLS and authenticates the T-user acting for
// alice.
func (h *harness) loginTuser(t *testing.T) *smtp.Client {
	t.Helper()
	c := h.dialStartTLS(t)
	if err := c.Auth(sasl.NewPlainClient(aliceAddr, tuserName, passwords[tuserName])); err != nil {
		t.Fatalf("AUTH PLAIN as the T-user for alice: %v", err)
	}
	return c
}

// TestTuserLostAnswerRetryDeliversOnce: a T-user's send whose answer is
// lost after the provider delivered it (fault After) is retried; the
// bridge finds the attempt in the provider's delivery status, under the
// Message-ID it went out with (the client's, or the one the bridge gave
// it), and answers the retry 250 with its smtpId at once, without
// sending again. An attempt the provider never processed is not found,
// and is sent again once the hold has passed: delivered once either way.
//
// Broken on purpose: without the status look-up (findTuserDelivery
// finding nothing), the retry of a lost answer is 451 (the immediate
// mustSubmit fails), and after the hold it would be sent again; with the
// bridge not giving a Message-ID to a message without one (it then goes
// through SendWithTuser under the provider's own smtpId), the lost
// answers' retries without one are not found either.
func TestTuserLostAnswerRetryDeliversOnce(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *smtpbackend.Config) { c.UndecidedHold = testHold })
	sends := func() int { return h.sb.Calls("SendWithTuser") + h.sb.Calls("SendWithHeaderWithTuser") }
	for _, tc := range []struct {
		name      string
		msgID     bool
		fault     sandbox.Fault
		sends     int  // send requests in all
		immediate bool // the first retry is answered 250
	}{
		{"answer-lost", false, sandbox.Fault{After: true, Reset: true, Times: 1}, 1, true},
		{"answer-lost-client-message-id", true, sandbox.Fault{After: true, Reset: true, Times: 1}, 1, true},
		{"answer-garbled", false, sandbox.Fault{After: true, Status: 502, Times: 1}, 1, true},
		{"not-processed", false, sandbox.Fault{Status: 500, Times: 1}, 2, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			subject := h.subject("T-user " + tc.name)
			var extra []string
			if tc.msgID {
				extra = append(extra, fmt.Sprintf("Message-ID: <tuser-once-%d@client.example>", h.seq.Add(1)))
			}
			raw := simple(subject, "Sent by a T-user; must arrive exactly once.\n", extra...)
			before, lookups := sends(), h.sb.Calls("GetMessageStatusWithTuser")

			h.sb.InjectFault("SendWithTuser", tc.fault)
			h.sb.InjectFault("SendWithHeaderWithTuser", tc.fault)
			c1 := h.loginTuser(t)
			_, err := submit(c1, aliceAddr, []string{bobAddr}, raw)
			h.sb.ClearFaults()
			wantReply(t, err, 451, 4, -1, -1)
			c1.Close()

			c2 := h.loginTuser(t)
			var reply string
			if tc.immediate {
				reply = mustSubmit(t, c2, aliceAddr, []string{bobAddr}, raw)
			} else {
				reply = submitUntilDecided(t, c2, aliceAddr, []string{bobAddr}, raw)
			}
			got := h.withSubject(t, bobAddr, "INBOX", subject)
			if len(got) != 1 {
				t.Fatalf("bob has %d copies after the retry; want exactly 1", len(got))
			}
			id := smtpIDOf(got[0])
			if !strings.Contains(reply, id) {
				t.Errorf("the retry's reply %q does not name the delivered copy %s", reply, id)
			}
			if !tc.msgID && !strings.HasPrefix(id, "db.") {
				t.Errorf("the copy's Message-ID %s is not the one the bridge gave it", id)
			}
			if n := sends() - before; n != tc.sends {
				t.Errorf("the provider saw %d T-user sends; want %d", n, tc.sends)
			}
			if h.sb.Calls("GetMessageStatusWithTuser") == lookups {
				t.Error("the retry never looked at the delivery status")
			}
			// Nothing more arrives once the hold has passed.
			time.Sleep(testHold + testHold/2)
			if n := len(h.withSubject(t, bobAddr, "INBOX", subject)); n != 1 {
				t.Errorf("bob has %d copies in the end; want 1", n)
			}
		})
	}
}

// TestTuserRetryDoesNotReuseEarlierMessage: a T-user sends a message with
// a Message-ID, then a different one (a correction) under the same
// Message-ID, whose send fails before the provider processed it. The
// status under that Message-ID shows the first message, from the same
// sender to the same recipient, minutes apart at most: the retry must not
// take it for the correction's (250 with the first message's smtpId
// would lose the correction while telling the client it went).
//
// Broken on purpose: without the check that no 250 of the bridge named
// the smtpId found (KnownSmtpID), the retry is answered with the first
// message's smtpId and the correction never arrives.
func TestTuserRetryDoesNotReuseEarlierMessage(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *smtpbackend.Config) { c.UndecidedHold = testHold })
	subject := h.subject("Lab results")
	msgID := fmt.Sprintf("Message-ID: <reused-%d@client.example>", h.seq.Add(1))
	first := simple(subject, "First message: potassium 4.1 mmol/L.\n", msgID)
	second := simple(subject, "Second message: CORRECTION, potassium 6.8 mmol/L.\n", msgID)

	c := h.loginTuser(t)
	mustSubmit(t, c, aliceAddr, []string{bobAddr}, first)
	got := h.withSubject(t, bobAddr, "INBOX", subject)
	if len(got) != 1 {
		t.Fatalf("first message: %d copies", len(got))
	}
	firstID := smtpIDOf(got[0])

	h.sb.InjectFault("SendWithHeaderWithTuser", sandbox.Fault{Status: 500, Times: 1})
	_, err := submit(c, aliceAddr, []string{bobAddr}, second)
	wantReply(t, err, 451, 4, -1, -1)
	if err := c.Reset(); err != nil {
		t.Fatal(err)
	}
	reply := submitUntilDecided(t, c, aliceAddr, []string{bobAddr}, second)
	if strings.Contains(reply, firstID) {
		t.Errorf("the correction's retry was answered with the first message's smtpId %s (%q)", firstID, reply)
	}
	found := 0
	for _, m := range h.withSubject(t, bobAddr, "INBOX", subject) {
		if strings.Contains(m.Body, "CORRECTION") {
			found++
		}
	}
	if found != 1 {
		t.Errorf("bob has %d copies of the correction; want 1", found)
	}
}
