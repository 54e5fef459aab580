package smtpbackend_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-smtp"

	"github.com/directbridge/directbridge/internal/limits"
	"github.com/directbridge/directbridge/smtpbackend"
)

// TestDataInFlightBudget: while one DATA is arriving, a DATA that would
// pass the budget of message bytes in flight is answered 452 4.3.1 and
// nothing is sent; once the first is done the same message goes.
func TestDataInFlightBudget(t *testing.T) {
	budget := limits.NewBudget(3 << 20)
	h := newHarness(t, func(c *smtpbackend.Config) { c.Messages = budget })
	a := h.login(t, aliceAddr)
	b := h.login(t, aliceAddr)

	head := fmt.Sprintf("From: %s\r\nTo: %s\r\nSubject: %s\r\n\r\n", aliceAddr, bobAddr, h.subject("first"))
	first := head + strings.Repeat(strings.Repeat("x", 78)+"\r\n", 20_000) // 1.6 MB
	if err := a.Mail(aliceAddr, nil); err != nil {
		t.Fatal(err)
	}
	if err := a.Rcpt(bobAddr, nil); err != nil {
		t.Fatal(err)
	}
	w, err := a.Data()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write([]byte(first[:1_500_000])); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for budget.InUse() < 2<<20 { // more than 1 MiB of it read
		if time.Now().After(deadline) {
			t.Fatalf("the first DATA is not counted: %d in use", budget.InUse())
		}
		time.Sleep(10 * time.Millisecond)
	}
	second := fmt.Sprintf("From: %s\r\nTo: %s\r\nSubject: %s\r\n\r\n", aliceAddr, bobAddr, h.subject("second")) +
		strings.Repeat(strings.Repeat("y", 78)+"\r\n", 15_000) // 1.2 MB: with the first's 2 MiB, past 3 MiB
	err = b.SendMail(aliceAddr, []string{bobAddr}, strings.NewReader(second))
	var se *smtp.SMTPError
	if !errors.As(err, &se) || se.Code != 452 || se.EnhancedCode != (smtp.EnhancedCode{4, 3, 1}) {
		t.Fatalf("DATA past the budget: %v; want 452 4.3.1", err)
	}
	if _, err := w.Write([]byte(first[1_500_000:])); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatalf("first message: %v", err)
	}
	if err := b.SendMail(aliceAddr, []string{bobAddr}, strings.NewReader(second)); err != nil {
		t.Fatalf("again once the first is done: %v", err)
	}
	if n := h.count(t, bobAddr, "INBOX"); n != 2 {
		t.Errorf("bob has %d messages; want 2", n)
	}
	if budget.InUse() != 0 {
		t.Errorf("%d bytes still counted in flight", budget.InUse())
	}
}
