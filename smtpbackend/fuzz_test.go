package smtpbackend

import (
	"encoding/base64"
	"errors"
	"net/mail"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/directbridge/directbridge/internal/mimeconv"
	"github.com/directbridge/directbridge/upstream/directapi"
)

// FuzzConvert checks that Convert never panics on any message, envelope
// and sender, and keeps its promises when it succeeds: the sender is the
// given one, every envelope recipient is listed exactly once and nobody
// else, no header that must stay behind travels, attachments are base64,
// and the sandbox's composer accepts the result unless an address is
// invalid. When it fails, the error is a *ConvertError whose Reason can be
// an SMTP reply.
//
// rcpts holds the envelope recipients separated by commas.
func FuzzConvert(f *testing.F) {
	files, _ := filepath.Glob("testdata/golden/*.eml")
	for _, file := range files {
		raw, err := os.ReadFile(file)
		if err == nil && len(raw) < 4<<10 {
			f.Add(raw, addrAlice+","+addrBob+",Carol@Direct.Example", addrAlice)
		}
	}
	f.Add([]byte("From: alice@direct.example\r\nSubject: x\n\nbody\n.\nMAIL FROM:<m@evil.example>\r\n"), addrBob, addrAlice)
	f.Add(nestedMessage(30), addrBob, addrAlice)
	f.Add(manyPartsMessage(40), addrBob+","+addrBob, addrAlice)

	f.Fuzz(func(t *testing.T, raw []byte, rcpts, sender string) {
		norm, nerr := normaliseLineEnds(raw)
		if nerr == nil && hasBareLineEnding(norm) {
			t.Fatalf("normalised data still holds a bare CR or LF")
		}
		env := Envelope{From: sender, Recipients: strings.Split(rcpts, ",")}
		s, err := Convert(raw, env, sender, Limits{MaxDepth: 8, MaxParts: 64})
		if err != nil {
			var ce *ConvertError
			if !errors.As(err, &ce) {
				t.Fatalf("error %T is not a *ConvertError: %v", err, err)
			}
			if s != nil {
				t.Fatalf("a Submission with the error")
			}
			if ce.Reason == "" || ce.Err == nil {
				t.Fatalf("incomplete ConvertError %#v", ce)
			}
			for i := 0; i < len(ce.Reason); i++ {
				if c := ce.Reason[i]; c < ' ' || c > '~' {
					t.Fatalf("Reason %q cannot be an SMTP reply", ce.Reason)
				}
			}
			if errors.Is(err, ErrBareLineEnding) != (nerr != nil) {
				t.Fatalf("ErrBareLineEnding = %v where line ends cannot be normalised = %v", errors.Is(err, ErrBareLineEnding), nerr != nil)
			}
			return
		}
		if nerr != nil {
			t.Fatalf("accepted a bare CR or a lone dot next to a bare LF")
		}
		m := s.Message
		if m.Sender != strings.ToLower(strings.TrimSpace(sender)) {
			t.Fatalf("sender %q, want %q", m.Sender, sender)
		}
		// Every envelope recipient exactly once, nobody else.
		want := map[string]bool{}
		for _, r := range env.Recipients {
			r = strings.TrimSpace(r)
			if len(r) >= 2 && r[0] == '<' && r[len(r)-1] == '>' {
				r = strings.TrimSpace(r[1 : len(r)-1])
			}
			if r != "" {
				want[strings.ToLower(r)] = true
			}
		}
		got := map[string]int{}
		for _, r := range m.Recipients {
			got[strings.ToLower(r.Email)]++
			switch r.Type {
			case directapi.TO, directapi.CC, directapi.BCC:
			default:
				t.Fatalf("recipient type %q", r.Type)
			}
		}
		for r := range want {
			if got[r] != 1 {
				t.Fatalf("envelope recipient %q listed %d times in %v", r, got[r], m.Recipients)
			}
		}
		if len(m.Recipients) != len(want) {
			t.Fatalf("recipients %v, want exactly %v", m.Recipients, want)
		}
		if s.UseHeaders() != (len(m.Headers) > 0) {
			t.Fatalf("UseHeaders disagrees with the headers")
		}
		for _, h := range m.Headers {
			n := strings.ToLower(h.Name)
			if n == "from" {
				// Only with a display name, and naming the sender.
				a, err := mail.ParseAddress(h.Value)
				if err != nil || a.Name == "" || !strings.EqualFold(a.Address, strings.TrimSpace(sender)) {
					t.Fatalf("From %q passed on", h.Value)
				}
				continue
			}
			if _, ok := passHeaders[n]; !ok && !strings.HasPrefix(n, "x-") {
				t.Fatalf("header %q must not travel", h.Name)
			}
		}
		for _, a := range m.AttachmentList {
			if _, err := base64.StdEncoding.DecodeString(a.Content); err != nil {
				t.Fatalf("attachment content is not base64: %v", err)
			}
		}
		_, err = mimeconv.Compose(m.Message, mimeconv.ComposeOptions{
			MessageID: "fuzz@sandbox.example",
			Date:      time.Unix(0, 0),
			Headers:   m.Headers,
		})
		if err != nil && !errors.Is(err, mimeconv.ErrInvalidAddress) {
			t.Fatalf("the composer refuses the submission: %v", err)
		}
	})
}
