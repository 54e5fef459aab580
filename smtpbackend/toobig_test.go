package smtpbackend_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-smtp"

	"github.com/directbridge/directbridge/internal/limits"
	"github.com/directbridge/directbridge/restclient"
	"github.com/directbridge/directbridge/sandbox"
	"github.com/directbridge/directbridge/smtpbackend"
	"github.com/directbridge/directbridge/upstream/directapi"
)

// sendCalls counts the send requests that reached the sandbox.
func sendCalls(sb *sandbox.Server) int {
	n := 0
	for _, op := range []string{"Send", "SendWithHeader", "SendWithTuser", "SendWithHeaderWithTuser"} {
		n += sb.Calls(op)
	}
	return n
}

// encodedSize is the size of the send request the bridge makes for raw
// from alice to bob: Convert, then restclient.SendSize, as DATA does.
func encodedSize(t *testing.T, raw string) int64 {
	t.Helper()
	sub, err := smtpbackend.Convert([]byte(raw), smtpbackend.Envelope{From: aliceAddr, Recipients: []string{bobAddr}}, aliceAddr, smtpbackend.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	auth := directapi.Authentication{Username: aliceAddr, Password: directapi.Secret(passwords[aliceAddr])}
	n, err := restclient.SendSize(auth, "", sub.Message, sub.UseHeaders())
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestDataTooBigOnceEncoded: with a provider that takes requests of at
// most 1 MiB, a message well under SIZE whose text JSON writes six bytes
// a character is refused at the end of DATA with 552 5.3.4, and no send
// request reaches the provider; a message whose request is exactly the
// limit goes through (the provider takes it), one byte more is refused.
// The budget of message bytes in flight is all given back.
func TestDataTooBigOnceEncoded(t *testing.T) {
	const limit = 1 << 20
	budget := limits.NewBudget(8 << 20)
	h := newHarnessWith(t, func(o *sandbox.Options) { o.MaxBodyBytes = limit }, func(c *smtpbackend.Config) {
		c.MaxRequestBytes = limit
		c.Messages = budget
	})
	c := h.login(t, aliceAddr)
	head := "From: " + aliceAddr + "\r\nTo: " + bobAddr + "\r\nSubject: " + h.subject("control") + "\r\n\r\n"
	line := strings.Repeat("\x01\x02\x1b\x7f", 19) + "\r\n" // 78 bytes; in JSON 57 of six bytes, 19 of one, the line end two
	control := head + strings.Repeat(line, 4000)            // 312 KB, far under SIZE
	if n := encodedSize(t, control); n <= limit {
		t.Fatalf("the control-character message encodes to %d bytes; the test needs more than %d", n, limit)
	}
	h.sb.ResetCalls()
	_, err := submit(c, aliceAddr, []string{bobAddr}, []byte(control))
	var se *smtp.SMTPError
	if !errors.As(err, &se) || se.Code != 552 || se.EnhancedCode != (smtp.EnhancedCode{5, 3, 4}) {
		t.Fatalf("a message too big once encoded: %v; want 552 5.3.4", err)
	}
	if n := sendCalls(h.sb); n != 0 {
		t.Fatalf("the provider received %d send requests; want none", n)
	}

	// At the limit exactly: the request is padded with a line of plain
	// text, one byte of request per byte of text and two for its line
	// end (\n in JSON), until it is the limit.
	small := head + strings.Repeat(line, 2000)
	pad := limit - encodedSize(t, small) - 2
	if pad <= 0 {
		t.Fatalf("the base message encodes to %d bytes; want less than %d", encodedSize(t, small), limit)
	}
	atLimit := small + strings.Repeat("x", int(pad)) + "\r\n"
	if n := encodedSize(t, atLimit); n != limit {
		t.Fatalf("padded message encodes to %d bytes; want %d", n, limit)
	}
	if _, err := submit(c, aliceAddr, []string{bobAddr}, []byte(atLimit)); err != nil {
		t.Fatalf("a message whose request is exactly the provider's limit: %v", err)
	}
	if n := sendCalls(h.sb); n != 1 {
		t.Fatalf("the provider received %d send requests; want 1", n)
	}
	over := small + strings.Repeat("x", int(pad)+1) + "\r\n"
	_, err = submit(c, aliceAddr, []string{bobAddr}, []byte(over))
	if !errors.As(err, &se) || se.Code != 552 || se.EnhancedCode != (smtp.EnhancedCode{5, 3, 4}) {
		t.Fatalf("a message whose request is one byte over the limit: %v; want 552 5.3.4", err)
	}
	if n := sendCalls(h.sb); n != 1 {
		t.Fatalf("the provider received %d send requests; want still 1", n)
	}
	if n := h.count(t, bobAddr, "INBOX"); n != 1 {
		t.Errorf("bob has %d messages; want 1", n)
	}

	// Windows-1252 text whose UTF-8 is longer than the limit (each 0x80
	// becomes the three bytes of €): refused before it is decoded.
	euro := "From: " + aliceAddr + "\r\nTo: " + bobAddr + "\r\nSubject: euro\r\nContent-Type: text/plain; charset=windows-1252\r\n\r\n" +
		strings.Repeat(strings.Repeat("\x80", 76)+"\r\n", limit/3/76+10)
	_, err = submit(c, aliceAddr, []string{bobAddr}, []byte(euro))
	if !errors.As(err, &se) || se.Code != 552 || se.EnhancedCode != (smtp.EnhancedCode{5, 3, 4}) || !strings.Contains(se.Message, "decoded to UTF-8") {
		t.Fatalf("Windows-1252 text longer than the request limit once decoded: %v; want 552 5.3.4 saying so", err)
	}
	if n := sendCalls(h.sb); n != 1 {
		t.Fatalf("the provider received %d send requests; want still 1", n)
	}
	if budget.InUse() != 0 {
		t.Errorf("%d bytes still counted in flight", budget.InUse())
	}
}

// TestDataBudgetCountsEncodedBytes: while a message is with the
// provider, the budget of message bytes in flight counts the size of
// its send request (here six times its text), not the bytes received.
func TestDataBudgetCountsEncodedBytes(t *testing.T) {
	budget := limits.NewBudget(32 << 20)
	h := newHarness(t, func(c *smtpbackend.Config) { c.Messages = budget })
	c := h.login(t, aliceAddr)
	raw := "From: " + aliceAddr + "\r\nTo: " + bobAddr + "\r\nSubject: " + h.subject("budget") + "\r\n\r\n" +
		strings.Repeat(strings.Repeat("\x01", 76)+"\r\n", 5000) // 390 KB; its request about 2.3 MB
	want := encodedSize(t, raw)
	h.sb.InjectFault("Send", sandbox.Fault{Latency: 700 * time.Millisecond, Times: 1})
	done := make(chan error, 1)
	go func() {
		_, err := submit(c, aliceAddr, []string{bobAddr}, []byte(raw))
		done <- err
	}()
	var seen int64
	deadline := time.Now().Add(5 * time.Second)
	for seen != want && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
		seen = budget.InUse()
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if seen != want {
		t.Errorf("in flight while the provider had the message: %d bytes; want its request's %d (the message is %d bytes)", seen, want, len(raw))
	}
	if budget.InUse() != 0 {
		t.Errorf("%d bytes still counted in flight", budget.InUse())
	}
}
