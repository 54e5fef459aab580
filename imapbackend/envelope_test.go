package imapbackend_test

import (
	"testing"

	"github.com/emersion/go-imap/v2"
)

// TestEnvelopeMessageIDWithoutBrackets: a Message-ID and an In-Reply-To
// written without angle brackets ("abc@host", as some devices write them)
// are carried in ENVELOPE (with the brackets go-imap's writer adds), not
// NIL, so that a client threading by ENVELOPE still finds them; bracketed
// ones are as written.
func TestEnvelopeMessageIDWithoutBrackets(t *testing.T) {
	e := newEnv(t, options{})
	e.deliver(alice, "INBOX", fsCRLF("From: a@x.example\nSubject: bare ids\nMessage-ID: lab-4711@device.example\nIn-Reply-To: order-17@ehr.example\n\nresult\n"))
	e.deliver(alice, "INBOX", fsCRLF("From: a@x.example\nSubject: bracketed\nMessage-ID: <m-2@x.example>\nIn-Reply-To: <r-1@x.example> (comment)\n\nok\n"))
	e.deliver(alice, "INBOX", fsCRLF("From: a@x.example\nSubject: junk\nMessage-ID: not an id\n\nok\n"))
	c := e.login(alice, alicePW)
	fsSelect(t, c, "INBOX")
	got := fsFetch(t, c, imap.SeqSetNum(1, 2, 3), &imap.FetchOptions{Envelope: true})
	want := []struct {
		id      string
		replyTo []string
	}{
		{"lab-4711@device.example", []string{"order-17@ehr.example"}},
		{"m-2@x.example", []string{"r-1@x.example"}},
		{"", nil},
	}
	if len(got) != len(want) {
		t.Fatalf("%d messages fetched", len(got))
	}
	for i, w := range want {
		env := got[i].Envelope
		if env == nil {
			t.Fatalf("message %d: no ENVELOPE", i+1)
		}
		if env.MessageID != w.id || len(env.InReplyTo) != len(w.replyTo) || len(w.replyTo) > 0 && env.InReplyTo[0] != w.replyTo[0] {
			t.Errorf("message %d: Message-ID %q In-Reply-To %q, want %q %q", i+1, env.MessageID, env.InReplyTo, w.id, w.replyTo)
		}
	}
}
