package smtpbackend_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/emersion/go-smtp"

	"github.com/directbridge/directbridge/smtpbackend"
)

// sized is a message from alice to bob of exactly n bytes.
func sized(subject string, n int) []byte {
	b := []byte(string(simple(subject, "")))
	line := "0123456789012345678901234567890123456789012345678901234567890123456789\r\n"
	for len(b)+len(line) <= n-2 {
		b = append(b, line...)
	}
	b = append(b, strings.Repeat("x", n-2-len(b))...)
	return append(b, "\r\n"...)
}

// TestExactSizeAccepted: a message of exactly the size limit is taken,
// through DATA and BDAT, and one byte more is refused with 552 5.3.4 and
// not sent; a MAIL FROM announcing the limit is taken, one announcing
// more refused at once (RFC 1870 §6.1). go-smtp's own limit refused the
// message of exactly the number it advertised (size.go).
func TestExactSizeAccepted(t *testing.T) {
	t.Parallel()
	const limit = 32 << 10
	h := newHarness(t, func(c *smtpbackend.Config) { c.MaxMessageBytes = limit })
	c := h.login(t, aliceAddr)

	if err := c.Mail(aliceAddr, &smtp.MailOptions{Size: limit + 1}); err == nil {
		t.Fatal("MAIL FROM SIZE=limit+1 accepted")
	} else {
		wantReply(t, err, 552, 5, 3, 4)
	}
	c.Reset()

	subject := h.subject("exactly the limit")
	msg := sized(subject, limit)
	if len(msg) != limit {
		t.Fatalf("test message is %d bytes", len(msg))
	}
	if err := c.Mail(aliceAddr, &smtp.MailOptions{Size: limit}); err != nil {
		t.Fatalf("MAIL FROM SIZE=limit: %v", err)
	}
	c.Reset()
	mustSubmit(t, c, aliceAddr, []string{bobAddr}, msg)
	if got := h.withSubject(t, bobAddr, "INBOX", subject); len(got) != 1 {
		t.Fatalf("bob has %d copies of the message of exactly the limit, want 1", len(got))
	}

	before := h.counts(t)
	_, err := submit(c, aliceAddr, []string{bobAddr}, sized(h.subject("one over"), limit+1))
	wantReply(t, err, 552, 5, 3, 4)
	if got := h.counts(t); got != before {
		t.Fatalf("a message over the limit changed the mailboxes: %+v -> %+v", before, got)
	}

	// BDAT (RFC 3030), in two chunks: the same limit, counted the same.
	r := h.dialRaw(t)
	for _, tc := range []struct {
		n    int
		code int
	}{{limit, 250}, {limit + 1, 552}} {
		subject := h.subject(fmt.Sprintf("BDAT %d", tc.n))
		body := sized(subject, tc.n)
		r.cmd(250, "MAIL FROM:<"+aliceAddr+">")
		r.cmd(250, "RCPT TO:<"+bobAddr+">")
		half := len(body) / 2
		fmt.Fprintf(r.tc.W, "BDAT %d\r\n", half)
		r.tc.W.Write(body[:half])
		r.tc.W.Flush()
		r.expect(250)
		fmt.Fprintf(r.tc.W, "BDAT %d LAST\r\n", len(body)-half)
		r.tc.W.Write(body[half:])
		r.tc.W.Flush()
		msg := r.expect(tc.code)
		want := 0
		if tc.code == 250 {
			want = 1
		} else if !strings.HasPrefix(msg, "5.3.4") {
			t.Errorf("BDAT of %d bytes: %d %q, want 552 5.3.4", tc.n, tc.code, msg)
		}
		if got := h.withSubject(t, bobAddr, "INBOX", subject); len(got) != want {
			t.Errorf("BDAT of %d bytes: bob has %d copies, want %d", tc.n, len(got), want)
		}
		r.cmd(250, "RSET")
	}
}
