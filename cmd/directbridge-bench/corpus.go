package main

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// corpus makes the messages every scenario stores: a few KB of synthetic
// clinical correspondence, some with a real document attached. The same
// index always gives the same bytes, so the bridge and Dovecot hold the same
// messages. Nothing is written to disk but the mbox imaptest reads
// (writeMbox), in the benchmark's work directory.
type corpus struct {
	attachments []attachment
	source      string // where the attachments came from, for the report
}

type attachment struct {
	name, ctype string
	data        []byte
	every       int // attached to every n-th message
}

// loadCorpus takes attachments from the shared test data (public documents,
// see its README.md and licenses/; read at run time, never copied into this
// repository), or makes synthetic ones when the directory is absent.
func loadCorpus(dir string) *corpus {
	c := &corpus{}
	files := []attachment{
		{name: "consult-note.xml", ctype: "text/xml", every: 8},
		{name: "transition-of-care-xdm.zip", ctype: "application/zip", every: 40},
		{name: "ccd.xml", ctype: "text/xml", every: 200},
	}
	paths := []string{"ccda/unstructured-embedded-text-plain.xml", "xdm/toc-full-metadata-xdm.zip", "ccda/ccd.xml"}
	sizes := []int{5600, 23000, 48000}
	real := 0
	for i := range files {
		data, err := os.ReadFile(filepath.Join(dir, paths[i]))
		if err != nil {
			r := rand.New(rand.NewPCG(uint64(i), 7))
			data = make([]byte, sizes[i])
			for j := range data {
				data[j] = byte('a' + r.IntN(26))
			}
			files[i].ctype = "application/octet-stream"
		} else {
			real++
		}
		files[i].data = data
	}
	c.attachments = files
	if real == len(files) {
		c.source = "attachments are real public documents from " + dir + " (" + fmt.Sprint(paths) + ")"
	} else {
		c.source = "attachments are synthetic (" + dir + " not found)"
	}
	return c
}

var words = []string{
	"patient", "referral", "follow-up", "clinic", "medication", "dose", "history", "allergy", "review",
	"laboratory", "results", "normal", "elevated", "blood", "pressure", "discharge", "summary", "plan",
	"appointment", "cardiology", "imaging", "report", "consult", "primary", "care", "provider", "stable",
	"symptoms", "improved", "weeks", "daily", "monitor", "please", "advise", "attached", "document",
	"the", "and", "of", "to", "with", "for", "on", "in", "was", "is", "no", "a",
}

// message returns message i, from and to the given addresses: 1.5-4 KB of
// text, and every 8th, 40th, 200th message an attachment of 5.6, 23 or 48 KB.
func (c *corpus) message(i int, from, to string) []byte {
	r := rand.New(rand.NewPCG(uint64(i), 42))
	var text bytes.Buffer
	size := 1500 + r.IntN(2500)
	col := 0
	for text.Len() < size {
		w := words[r.IntN(len(words))]
		if col+len(w) > 72 {
			text.WriteString("\r\n")
			col = 0
		} else if col > 0 {
			text.WriteByte(' ')
			col++
		}
		text.WriteString(w)
		col += len(w)
	}
	text.WriteString("\r\n")
	date := time.Date(2026, 1, 1, 8, 0, 0, 0, time.UTC).Add(time.Duration(i) * 7 * time.Minute)
	var b bytes.Buffer
	fmt.Fprintf(&b, "Date: %s\r\nFrom: Clinic Sender <%s>\r\nTo: <%s>\r\nSubject: Referral update %d\r\n", date.Format(time.RFC1123Z), from, to, i)
	fmt.Fprintf(&b, "Message-ID: <bench-%d-%08x@direct.example>\r\nMIME-Version: 1.0\r\n", i, r.Uint32())
	var att *attachment
	for k := len(c.attachments) - 1; k >= 0; k-- {
		if i%c.attachments[k].every == c.attachments[k].every-1 {
			att = &c.attachments[k]
			break
		}
	}
	if att == nil {
		b.WriteString("Content-Type: text/plain; charset=us-ascii\r\nContent-Transfer-Encoding: 7bit\r\n\r\n")
		b.Write(text.Bytes())
		return b.Bytes()
	}
	boundary := fmt.Sprintf("bench-boundary-%d", i)
	fmt.Fprintf(&b, "Content-Type: multipart/mixed; boundary=\"%s\"\r\n\r\nThis is a multi-part message in MIME format.\r\n", boundary)
	fmt.Fprintf(&b, "--%s\r\nContent-Type: text/plain; charset=us-ascii\r\nContent-Transfer-Encoding: 7bit\r\n\r\n", boundary)
	b.Write(text.Bytes())
	fmt.Fprintf(&b, "--%s\r\nContent-Type: %s; name=\"%s\"\r\nContent-Disposition: attachment; filename=\"%s\"\r\nContent-Transfer-Encoding: base64\r\n\r\n",
		boundary, att.ctype, att.name, att.name)
	enc := base64.StdEncoding.EncodeToString(att.data)
	for len(enc) > 76 {
		b.WriteString(enc[:76])
		b.WriteString("\r\n")
		enc = enc[76:]
	}
	b.WriteString(enc)
	fmt.Fprintf(&b, "\r\n--%s--\r\n", boundary)
	return b.Bytes()
}

// writeMbox writes n distinct corpus messages (message(0..n-1)) as an mbox
// for imaptest's stress runs to APPEND from (issue 22): its own mbox of
// six messages, appended over and over, let the bridge answer most
// APPENDs as retries of an earlier one (the same bytes within seconds)
// and save nothing, where Dovecot stored every one. Lines end in LF, as
// mbox files do; a body line beginning "From " is quoted as ">From ".
//
// Only messages of at most mboxMax bytes are taken (the corpus's text
// messages; those with an attachment are larger): imaptest's build here
// treats LITERAL- as LITERAL+ (its README) and sends every APPEND as a
// non-synchronising literal, which RFC 7888 §4 limits to 4,096 bytes under
// the LITERAL- that go-imap offers; a larger one is answered BAD.
func (c *corpus) writeMbox(path string, n int) error {
	const mboxMax = 4000
	var b bytes.Buffer
	for i, kept := 0, 0; kept < n; i++ {
		msg := c.message(i, "sender@direct.example", "it@direct.example")
		if len(msg) > mboxMax {
			continue
		}
		kept++
		fmt.Fprintf(&b, "From sender@direct.example Thu Jan  1 08:00:00 2026\n")
		for _, line := range strings.Split(strings.TrimSuffix(string(msg), "\r\n"), "\r\n") {
			if strings.HasPrefix(line, "From ") {
				b.WriteByte('>')
			}
			b.WriteString(line)
			b.WriteByte('\n')
		}
		b.WriteByte('\n')
	}
	return os.WriteFile(path, b.Bytes(), 0o600)
}
