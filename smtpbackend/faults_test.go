package smtpbackend_test

// Fault tests: the sandbox's fault injection makes the provider fail in
// each documented way, and the SMTP front must answer the documented reply,
// never 250 for a message the provider did not take, and deliver a retried
// message exactly once.

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"

	"github.com/directbridge/directbridge/restclient"
	"github.com/directbridge/directbridge/sandbox"
	"github.com/directbridge/directbridge/smtpbackend"
	"github.com/directbridge/directbridge/upstream/directapi"
)

// TestProviderFaultReplies: one connection, one fault after another; each
// gives its reply and delivers nothing, and once the fault is cleared the
// same connection delivers.
func TestProviderFaultReplies(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	c := h.login(t, aliceAddr)
	for _, tc := range []struct {
		name  string
		fault sandbox.Fault
		code  int
		enh   []int
		calls int // Send requests the provider sees
	}{
		// The request may have reached the provider: never resent blindly.
		{"reset", sandbox.Fault{Reset: true}, 451, []int{4, -1, -1}, 1},
		{"status-500", sandbox.Fault{Status: 500}, 451, []int{4, -1, -1}, 1},
		{"status-503", sandbox.Fault{Status: 503}, 451, []int{4, -1, -1}, 1},
		{"status-503-retry-after", sandbox.Fault{Status: 503, RetryAfter: "5"}, 451, []int{4, -1, -1}, 1},
		{"malformed", sandbox.Fault{Malformed: true}, 451, []int{4, -1, -1}, 1},
		// 429 surely was not processed: the client retries, then gives up.
		{"status-429-repeated", sandbox.Fault{Status: 429}, 451, []int{4, 4, 5}, 1 + restclient.DefaultMaxRetries},
		{"status-429-retry-after", sandbox.Fault{Status: 429, RetryAfter: "1"}, 451, []int{4, 4, 5}, 1 + restclient.DefaultMaxRetries},
		// Application answers.
		{"code-1-auth", sandbox.Fault{Code: directapi.CodeAuthFailed}, 535, []int{5, 7, 8}, 1},
		{"code-2-address", sandbox.Fault{Code: directapi.CodeAddressError}, 550, []int{5, 1, 1}, 1},
		{"code-3-other", sandbox.Fault{Code: directapi.CodeOtherError}, 554, []int{5, -1, -1}, 1},
		{"code-4-other", sandbox.Fault{Code: directapi.CodeOtherError4}, 451, []int{4, -1, -1}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := h.counts(t)
			calls := h.sb.Calls("Send")
			h.sb.InjectFault("Send", tc.fault)
			_, err := submit(c, aliceAddr, []string{bobAddr}, simple(h.subject("fault "+tc.name), "x\n"))
			h.sb.ClearFaults()
			wantReply(t, err, tc.code, tc.enh...)
			if n := h.sb.Calls("Send") - calls; n != tc.calls {
				t.Errorf("provider saw %d Send requests, want %d", n, tc.calls)
			}
			if got := h.counts(t); got != before {
				t.Fatalf("mailboxes changed under the fault: %+v -> %+v", before, got)
			}
			if err := c.Reset(); err != nil {
				t.Fatalf("RSET: %v", err)
			}
			subject := h.subject("valid after " + tc.name)
			reply := mustSubmit(t, c, aliceAddr, []string{bobAddr}, simple(subject, "x\n"))
			got := h.withSubject(t, bobAddr, "INBOX", subject)
			if len(got) != 1 || !strings.Contains(reply, smtpIDOf(got[0])) {
				t.Fatalf("after the fault: %d copies, reply %q", len(got), reply)
			}
		})
	}
}

// TestProviderDown: with the provider unreachable the message is deferred
// with 451 4.x.x and nothing is delivered.
func TestProviderDown(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	c := h.login(t, aliceAddr)
	before := h.counts(t)
	h.provider.Close()
	start := time.Now()
	_, err := submit(c, aliceAddr, []string{bobAddr}, simple(h.subject("provider down"), "x\n"))
	wantReply(t, err, 451, 4, -1, -1)
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("the 451 took %v", d)
	}
	if got := h.counts(t); got != before {
		t.Errorf("mailboxes changed: %+v -> %+v", before, got)
	}
	if n := h.sb.Calls("Send"); n != 0 {
		t.Errorf("Send reached the closed provider %d times", n)
	}
	if err := c.Noop(); err != nil {
		t.Errorf("connection lost: %v", err)
	}
}

// TestSendTimeout: a provider slower than Config.SendTimeout gives 451
// within about that time, not a hang; the retry delivers exactly once.
func TestSendTimeout(t *testing.T) {
	t.Parallel()
	const timeout = 200 * time.Millisecond
	h := newHarness(t, func(c *smtpbackend.Config) { c.SendTimeout = timeout; c.UndecidedHold = testHold })
	c := h.login(t, aliceAddr)
	before := h.counts(t)
	subject := h.subject("slow provider")
	raw := simple(subject, "x\n")

	h.sb.InjectFault("Send", sandbox.Fault{Latency: 2 * time.Second})
	start := time.Now()
	_, err := submit(c, aliceAddr, []string{bobAddr}, raw)
	elapsed := time.Since(start)
	h.sb.ClearFaults()
	wantReply(t, err, 451, 4, -1, -1)
	if elapsed > timeout+time.Second {
		t.Errorf("451 after %v with a send timeout of %v", elapsed, timeout)
	}
	if got := h.counts(t); got != before {
		t.Errorf("mailboxes changed: %+v -> %+v", before, got)
	}

	if err := c.Reset(); err != nil {
		t.Fatal(err)
	}
	// The provider may still be processing the first attempt: retries
	// are answered 451 until its copy shows or the hold has passed.
	reply := submitUntilDecided(t, c, aliceAddr, []string{bobAddr}, raw)
	got := h.withSubject(t, bobAddr, "INBOX", subject)
	if len(got) != 1 || !strings.Contains(reply, smtpIDOf(got[0])) {
		t.Fatalf("retry: %d copies, reply %q", len(got), reply)
	}
}

// testHold is Config.UndecidedHold in tests that wait it out.
const testHold = 500 * time.Millisecond

// submitUntilDecided submits raw until the answer is not the 451 of an
// undecided earlier attempt (journal.go), within a few holds.
func submitUntilDecided(t *testing.T, c *smtp.Client, from string, to []string, raw []byte) string {
	t.Helper()
	deadline := time.Now().Add(10 * testHold)
	for {
		reply, err := submit(c, from, to, raw)
		var se *smtp.SMTPError
		if errors.As(err, &se) && se.Code == 451 && se.EnhancedCode == (smtp.EnhancedCode{4, 4, 0}) && time.Now().Before(deadline) {
			if err := c.Reset(); err != nil {
				t.Fatal(err)
			}
			time.Sleep(testHold / 5)
			continue
		}
		if err != nil {
			t.Fatalf("submit: %v", err)
		}
		return reply
	}
}

// TestUnknownOutcomeRetryDeliversOnce is the case that loses or doubles
// mail in naive bridges: the provider delivers, then the connection breaks
// before its answer. The client gets 451 and retries the same message on a
// new connection; the bridge recognises the copy in INBOX.Sent, answers
// 250 with its smtpId, and does not send again.
func TestUnknownOutcomeRetryDeliversOnce(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	for _, tc := range []struct {
		op        string
		withMsgID bool
	}{
		{"Send", false},
		{"SendWithHeader", true},
	} {
		t.Run(tc.op, func(t *testing.T) {
			subject := h.subject("unknown outcome " + tc.op)
			var extra []string
			msgID := fmt.Sprintf("<retry-%d@client.example>", h.seq.Add(1))
			if tc.withMsgID {
				extra = append(extra, "Message-ID: "+msgID)
			}
			raw := simple(subject, "This message must arrive exactly once.\n", extra...)
			since := time.Now().Add(-time.Second)

			h.sb.InjectFault(tc.op, sandbox.Fault{After: true, Reset: true, Times: 1})
			c1 := h.login(t, aliceAddr)
			_, err := submit(c1, aliceAddr, []string{bobAddr}, raw)
			wantReply(t, err, 451, 4, -1, -1)
			c1.Close()
			if n := len(h.withSubject(t, bobAddr, "INBOX", subject)); n != 1 {
				t.Fatalf("the provider holds %d copies after the broken answer, want 1 (fault After)", n)
			}

			c2 := h.login(t, aliceAddr)
			reply := mustSubmit(t, c2, aliceAddr, []string{bobAddr}, raw)
			got := h.withSubject(t, bobAddr, "INBOX", subject)
			if len(got) != 1 {
				t.Fatalf("bob has %d copies after the retry, want exactly 1", len(got))
			}
			id := smtpIDOf(got[0])
			if !strings.Contains(reply, id) {
				t.Errorf("retry reply %q does not carry the delivered message's smtpId %s", reply, id)
			}
			if n := h.sb.Calls(tc.op); n != 1 {
				t.Errorf("%s called %d times, want 1", tc.op, n)
			}
			if n := len(h.withSubject(t, aliceAddr, "INBOX.Sent", subject)); n != 1 {
				t.Errorf("alice's INBOX.Sent has %d copies, want 1", n)
			}
			if tc.withMsgID {
				rec, ok, err := h.store.FindSent(ctxT(t), aliceAddr, msgID, since)
				if err != nil || !ok || rec.SmtpID != id {
					t.Errorf("FindSent: %+v ok %v err %v, want smtpId %s", rec, ok, err, id)
				}
			}
		})
	}
}

// TestNotProcessedRetryDeliversOnce: failures before the provider did
// anything (5xx, reset before processing, malformed answer) are 451 too;
// the retry then finds no copy in INBOX.Sent and sends, exactly once.
func TestNotProcessedRetryDeliversOnce(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *smtpbackend.Config) { c.UndecidedHold = testHold })
	for _, tc := range []struct {
		name  string
		fault sandbox.Fault
	}{
		{"status-500", sandbox.Fault{Status: 500, Times: 1}},
		{"reset", sandbox.Fault{Reset: true, Times: 1}},
		{"malformed", sandbox.Fault{Malformed: true, Times: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			subject := h.subject("not processed " + tc.name)
			raw := simple(subject, "first attempt failed before processing\n")
			calls := h.sb.Calls("Send")
			h.sb.InjectFault("Send", tc.fault)
			c1 := h.login(t, aliceAddr)
			_, err := submit(c1, aliceAddr, []string{bobAddr}, raw)
			wantReply(t, err, 451, 4, -1, -1)
			c1.Close()
			if n := len(h.withSubject(t, bobAddr, "INBOX", subject)); n != 0 {
				t.Fatalf("%d copies after a fault before processing", n)
			}
			c2 := h.login(t, aliceAddr)
			// Not processed, but the bridge cannot tell: it holds the
			// retry with 451 for UndecidedHold, then sends.
			reply := submitUntilDecided(t, c2, aliceAddr, []string{bobAddr}, raw)
			got := h.withSubject(t, bobAddr, "INBOX", subject)
			if len(got) != 1 || !strings.Contains(reply, smtpIDOf(got[0])) {
				t.Fatalf("after the retry: %d copies, reply %q", len(got), reply)
			}
			if n := h.sb.Calls("Send") - calls; n != 2 {
				t.Errorf("Send called %d times, want 2 (the failed attempt and the retry)", n)
			}
		})
	}
}

// TestRacingRetriesAfterHoldSendOnce: a client that opened two
// connections (or two MTA queue runners) retries the same message on both
// at once after the undecided hold has passed. Both find the journal
// entry undecided and no copy in Sent, and both would take it over; the
// take-over is a compare-and-set, so exactly one sends, and the other is
// told to try later (451 4.4.0), never 250 for a send it did not see
// accepted. Its later retry gets the first one's smtpId.
func TestRacingRetriesAfterHoldSendOnce(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		store bool // the state store's journal, else the in-memory one
	}{{"state-store", true}, {"in-memory", false}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, func(c *smtpbackend.Config) {
				c.UndecidedHold = testHold
				if !tc.store {
					c.Store = nil
				}
			})
			subject := h.subject("racing retries")
			raw := simple(subject, "the retries of this message race each other\n")
			c1, c2 := h.login(t, aliceAddr), h.login(t, aliceAddr)

			// The first attempt fails before the provider processed it;
			// the bridge cannot tell, so the entry is undecided.
			h.sb.InjectFault("Send", sandbox.Fault{Status: 500, Times: 1})
			_, err := submit(c1, aliceAddr, []string{bobAddr}, raw)
			wantReply(t, err, 451, 4, -1, -1)
			if err := c1.Reset(); err != nil {
				t.Fatal(err)
			}
			time.Sleep(testHold + testHold/2) // past the hold: a retry would send again

			// A slow provider (half of the latency before it acts, half
			// after): both retries read the entry, and look in Sent before
			// either one's send lands there, even if they arrive up to
			// the latency apart.
			h.sb.SetLatency(400 * time.Millisecond)
			type result struct {
				c     *smtp.Client
				reply string
				err   error
			}
			results := make(chan result, 2)
			start := make(chan struct{})
			for _, c := range []*smtp.Client{c1, c2} {
				go func() {
					<-start
					reply, err := submit(c, aliceAddr, []string{bobAddr}, raw)
					results <- result{c, reply, err}
				}()
			}
			close(start)
			var replies []string
			var deferred []*smtp.Client
			for range 2 {
				r := <-results
				if r.err == nil {
					replies = append(replies, r.reply)
					continue
				}
				var se *smtp.SMTPError
				if !errors.As(r.err, &se) || se.Code != 451 || se.EnhancedCode != (smtp.EnhancedCode{4, 4, 0}) {
					t.Fatalf("a racing retry got %v; want 250, or 451 4.4.0 (try later)", r.err)
				}
				deferred = append(deferred, r.c)
			}
			h.sb.SetLatency(0)
			if n := h.sb.Calls("Send"); n != 2 {
				t.Fatalf("the provider saw %d Send requests, want 2 (the failed attempt and one retry)", n)
			}
			got := h.withSubject(t, bobAddr, "INBOX", subject)
			if len(got) != 1 {
				t.Fatalf("bob has %d copies, want exactly 1", len(got))
			}
			id := smtpIDOf(got[0])
			if len(replies) != 1 || len(deferred) != 1 {
				// Both read the entry and found no copy, so one must
				// have lost the take-over.
				t.Fatalf("%d racing retries answered 250 and %d told to try later; want one each", len(replies), len(deferred))
			}
			for _, reply := range replies {
				if !strings.Contains(reply, id) {
					t.Errorf("reply %q does not name the delivered copy %s", reply, id)
				}
			}
			// The one told to wait retries, and is answered with the
			// copy's smtpId, without another send.
			for _, c := range deferred {
				if err := c.Reset(); err != nil {
					t.Fatal(err)
				}
				if reply := submitUntilDecided(t, c, aliceAddr, []string{bobAddr}, raw); !strings.Contains(reply, id) {
					t.Errorf("the later retry's reply %q does not name %s", reply, id)
				}
			}
			if n := h.sb.Calls("Send"); n != 2 {
				t.Errorf("the provider saw %d Send requests in the end, want 2", n)
			}
			if n := len(h.withSubject(t, bobAddr, "INBOX", subject)); n != 1 {
				t.Errorf("bob has %d copies in the end, want 1", n)
			}
		})
	}
}

// TestRetryDoesNotReuseEarlierMessage: alice sends a message, then a
// different one with the same subject to the same recipient; the second
// fails before the provider processed it (HTTP 500) and is retried. The
// retry must send the second message: answering 250 with the first
// message's smtpId loses the second message while telling the client it
// was accepted.
func TestRetryDoesNotReuseEarlierMessage(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *smtpbackend.Config) { c.UndecidedHold = testHold })
	c := h.login(t, aliceAddr)
	subject := h.subject("Lab results")
	first := simple(subject, "First message: potassium 4.1 mmol/L.\n")
	second := simple(subject, "Second message: CORRECTION, potassium 6.8 mmol/L.\n")

	replyFirst := mustSubmit(t, c, aliceAddr, []string{bobAddr}, first)
	got := h.withSubject(t, bobAddr, "INBOX", subject)
	if len(got) != 1 {
		t.Fatalf("first message: %d copies", len(got))
	}
	firstID := smtpIDOf(got[0])

	h.sb.InjectFault("Send", sandbox.Fault{Status: 500, Times: 1})
	_, err := submit(c, aliceAddr, []string{bobAddr}, second)
	wantReply(t, err, 451, 4, -1, -1)
	if err := c.Reset(); err != nil {
		t.Fatal(err)
	}
	reply := submitUntilDecided(t, c, aliceAddr, []string{bobAddr}, second)
	if strings.Contains(reply, firstID) {
		t.Errorf("the retry of the second message was answered with the first message's smtpId %s (reply %q; first reply %q)",
			firstID, reply, replyFirst)
	}
	var bodies []string
	found := false
	for _, m := range h.withSubject(t, bobAddr, "INBOX", subject) {
		bodies = append(bodies, strings.TrimSpace(m.Body))
		if strings.Contains(m.Body, "CORRECTION") {
			found = true
		}
	}
	if !found {
		t.Errorf("the second message was answered 250 but never delivered; bob has %q", bodies)
	}
}

// TestVerifierUnavailable: the provider failing during AUTH is a temporary
// 454 4.7.0, never 535 (which would make the client ask the user for a new
// password); once the provider is back the same connection authenticates.
func TestVerifierUnavailable(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		op    string
		fault sandbox.Fault
		mech  sasl.Client
	}{
		{"status-503", "GetMessageCount", sandbox.Fault{Status: 503}, sasl.NewPlainClient("", aliceAddr, passwords[aliceAddr])},
		{"status-500", "GetMessageCount", sandbox.Fault{Status: 500}, sasl.NewPlainClient("", aliceAddr, passwords[aliceAddr])},
		{"reset", "GetMessageCount", sandbox.Fault{Reset: true}, sasl.NewLoginClient(aliceAddr, passwords[aliceAddr])},
		{"malformed", "GetMessageCount", sandbox.Fault{Malformed: true}, sasl.NewPlainClient("", aliceAddr, passwords[aliceAddr])},
		{"tuser-status-503", "GetMessageStatusWithTuser", sandbox.Fault{Status: 503}, sasl.NewPlainClient(aliceAddr, tuserName, passwords[tuserName])},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// A harness each: the verifier remembers successes.
			h := newHarness(t, nil)
			c := h.dialStartTLS(t)
			calls := h.sb.Calls(tc.op)
			h.sb.InjectFault(tc.op, tc.fault)
			err := c.Auth(tc.mech)
			h.sb.ClearFaults()
			wantReply(t, err, 454, 4, 7, 0)
			if h.sb.Calls(tc.op) == calls {
				t.Errorf("%s never called", tc.op)
			}
			if err := c.Mail(aliceAddr, nil); err == nil {
				t.Fatal("MAIL accepted after a failed AUTH")
			} else {
				wantReply(t, err, 530, 5, 7, 0)
			}
			if err := c.Reset(); err != nil {
				t.Fatal(err)
			}
			if err := c.Auth(tc.mech); err != nil {
				t.Fatalf("AUTH once the provider is back: %v", err)
			}
			subject := h.subject("after verifier fault " + tc.name)
			mustSubmit(t, c, aliceAddr, []string{bobAddr}, simple(subject, "x\n"))
			if len(h.withSubject(t, bobAddr, "INBOX", subject)) != 1 {
				t.Error("not delivered")
			}
		})
	}
	t.Run("credentials-refused-is-535", func(t *testing.T) {
		h := newHarness(t, nil)
		c := h.dialStartTLS(t)
		h.sb.InjectFault("GetMessageCount", sandbox.Fault{Code: directapi.CodeAuthFailed})
		err := c.Auth(sasl.NewPlainClient("", carolAddr, passwords[carolAddr]))
		h.sb.ClearFaults()
		var se *smtp.SMTPError
		if !errors.As(err, &se) || se.Code != 535 {
			t.Fatalf("got %v, want 535", err)
		}
	})
}

// TestAuthFailureOnSendForgetsCredentials: when the provider refuses the
// credentials on a send (code 1, e.g. the password was changed), the
// verifier's remembered success is dropped, so the next AUTH asks the
// provider again instead of trusting the cache.
func TestAuthFailureOnSendForgetsCredentials(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	h.login(t, aliceAddr)
	checks := h.sb.Calls("GetMessageCount")
	if checks == 0 {
		t.Fatal("AUTH did not ask the provider")
	}
	c := h.login(t, aliceAddr)
	if n := h.sb.Calls("GetMessageCount"); n != checks {
		t.Fatalf("a second AUTH within the verifier's TTL asked the provider again (%d -> %d)", checks, n)
	}
	h.sb.InjectFault("Send", sandbox.Fault{Code: directapi.CodeAuthFailed, Times: 1})
	_, err := submit(c, aliceAddr, []string{bobAddr}, simple(h.subject("refused credentials"), "x\n"))
	wantReply(t, err, 535, 5, 7, 8)
	h.login(t, aliceAddr)
	if n := h.sb.Calls("GetMessageCount"); n != checks+1 {
		t.Errorf("AUTH after the provider refused the credentials on a send: %d provider checks, want %d", n, checks+1)
	}
}

// TestRandomFaultsExactlyOnce sends messages through SMTP while faults on
// the provider's send operations come and go: answers lost after the
// work, failures before it, malformed answers, answers slower than the
// bridge's timeout, and processing that happens after the bridge gave up.
// A client retries every 4xx, as MTAs and EHR integrations do. Every
// message must reach its recipient exactly once, and every 250 must carry
// the smtpId of the delivered copy.
func TestRandomFaultsExactlyOnce(t *testing.T) {
	t.Parallel()
	// The hold exceeds the latest processing below (300 ms after the
	// bridge asked, 150 ms after it gave up): the documented bound.
	const hold = 400 * time.Millisecond
	h := newHarness(t, func(c *smtpbackend.Config) { c.SendTimeout = 150 * time.Millisecond; c.UndecidedHold = hold })
	faults := []sandbox.Fault{
		{},                                       // none
		{After: true, Reset: true, Times: 1},     // done, answer lost
		{After: true, Status: 502, Times: 1},     // done, gateway error
		{Reset: true, Times: 1},                  // not done
		{Status: 500, Times: 1},                  // not done
		{Malformed: true, After: true, Times: 1}, // done, answer garbled
		{Latency: 400 * time.Millisecond, After: true, Status: 200, Times: 1}, // slower than the bridge
		{Latency: 300 * time.Millisecond, Late: true, Times: 1},               // processed after the bridge gave up
	}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	const n = 24
	c := h.login(t, aliceAddr)
	var subjects []string
	for i := range n {
		subject := h.subject(fmt.Sprintf("exactly once %d", i))
		msgID := fmt.Sprintf("<once-%d-%d@client.example>", i, h.seq.Add(1))
		extra := []string{}
		if i%2 == 0 {
			extra = append(extra, "Message-ID: "+msgID) // SendWithHeader; else Send
		}
		raw := simple(subject, fmt.Sprintf("message %d\n", i), extra...)
		f := faults[rng.IntN(len(faults))]
		if f != (sandbox.Fault{}) {
			h.sb.InjectFault("Send", f)
			h.sb.InjectFault("SendWithHeader", f)
		}
		var reply string
		for attempt := 0; ; attempt++ {
			r, err := submit(c, aliceAddr, []string{bobAddr}, raw)
			if err == nil {
				reply = r
				break
			}
			var se *smtp.SMTPError
			if !errors.As(err, &se) || se.Code/100 != 4 || attempt > 60 {
				t.Fatalf("message %d (fault %+v): %v", i, f, err)
			}
			h.sb.ClearFaults() // the fault came and went
			if err := c.Reset(); err != nil {
				c = h.login(t, aliceAddr)
			}
			time.Sleep(hold / 4)
		}
		h.sb.ClearFaults()
		// A message processed late may land after the 250 of its retry
		// was found by its Sent copy; give it the time to.
		time.Sleep(50 * time.Millisecond)
		got := h.withSubject(t, bobAddr, "INBOX", subject)
		if len(got) != 1 {
			time.Sleep(400 * time.Millisecond)
			got = h.withSubject(t, bobAddr, "INBOX", subject)
		}
		if len(got) != 1 {
			t.Fatalf("message %d (fault %+v): bob has %d copies", i, f, len(got))
		}
		if !strings.Contains(reply, smtpIDOf(got[0])) {
			t.Errorf("message %d (fault %+v): reply %q does not name the delivered copy %s", i, f, reply, smtpIDOf(got[0]))
		}
		subjects = append(subjects, subject)
	}
	// Late processing must not add copies after the fact either.
	time.Sleep(500 * time.Millisecond)
	for i, subject := range subjects {
		if got := h.withSubject(t, bobAddr, "INBOX", subject); len(got) != 1 {
			t.Errorf("message %d: bob has %d copies in the end", i, len(got))
		}
	}
}
