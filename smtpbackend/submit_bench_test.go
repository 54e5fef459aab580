package smtpbackend_test

import (
	"testing"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"
)

// BenchmarkSubmit submits messages over a real socket (STARTTLS, AUTH
// PLAIN) to a bridge in front of the in-process sandbox: one transaction
// per iteration, a 10 KB text message and a 1 MB message with an
// attachment. With -cpuprofile it shows where the bridge's CPU per message
// goes (issue 22: SMTP at the provider's speed); the sandbox's share is in
// the same profile, under sandbox.
func BenchmarkSubmit(b *testing.B) {
	head := "From: " + aliceAddr + "\r\nTo: " + bobAddr + "\r\nSubject: bench\r\n"
	for _, k := range []struct {
		name string
		raw  []byte
	}{
		{"10KB-text", textMessage(head+"\r\n", 10_000, "line %07d of a clinical note, plain ASCII text")},
		{"1MB-attachment", attachmentMessage(head, 1_000_000)},
	} {
		b.Run(k.name, func(b *testing.B) {
			h := newHarness(b, nil)
			c, err := smtp.DialStartTLS(h.subAddr, clientTLS())
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			if err := c.Auth(sasl.NewPlainClient("", aliceAddr, passwords[aliceAddr])); err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(k.raw)))
			b.ResetTimer()
			for range b.N {
				if _, err := submit(c, aliceAddr, []string{bobAddr}, k.raw); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
