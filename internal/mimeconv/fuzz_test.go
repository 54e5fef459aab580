package mimeconv

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/directbridge/directbridge/upstream/directapi"
)

// FuzzParse checks that Parse never panics and keeps its promises on any
// input, and that Compose followed by Parse gives back any subject, body and
// attachment bytes.
func FuzzParse(f *testing.F) {
	files, _ := filepath.Glob("testdata/messages/*")
	for _, file := range files {
		raw, err := os.ReadFile(file)
		if err == nil && len(raw) < 8<<10 {
			f.Add(raw, "Überweisung – Befund ✓", "line\r\nline\n", false)
		}
	}
	f.Add([]byte("From: a@x.example\nContent-Type: multipart/mixed; boundary=b\n\n--b\n--b--\n"), "=?utf-8?q?x?=", "", true)
	f.Add(nested(25), "  ", "\r\r\n\xff", false)

	f.Fuzz(func(t *testing.T, raw []byte, subject, body string, html bool) {
		checkParse(t, raw)
		checkComposeRoundTrip(t, raw, subject, body, html)
	})
}

func checkParse(t *testing.T, raw []byte) {
	p, err := Parse(raw, ParseOptions{MaxDepth: 8, MaxParts: 64})
	if err != nil {
		if !errors.Is(err, ErrNoHeader) && !errors.Is(err, ErrTooComplex) {
			t.Fatalf("unexpected error: %v", err)
		}
		if p != nil {
			t.Fatalf("result with error")
		}
		return
	}
	texts := []string{p.Sender, p.Subject, p.Body, p.MessageID, p.ReplyTo}
	for _, h := range p.Headers {
		texts = append(texts, h.Name, h.Value)
	}
	for _, a := range p.Attachments {
		texts = append(texts, a.Filename, a.ContentType)
		if _, err := base64.StdEncoding.DecodeString(a.Content); err != nil {
			t.Fatalf("attachment content is not base64: %v", err)
		}
		if a.Filename == "" || a.ContentType == "" {
			t.Fatalf("attachment without name or type: %q %q", a.Filename, a.ContentType)
		}
	}
	for _, r := range p.Recipients {
		texts = append(texts, r.Email)
	}
	for _, s := range texts {
		if !utf8.ValidString(s) {
			t.Fatalf("invalid UTF-8: %q", s)
		}
	}
	if len(p.Headers) == 0 {
		t.Fatalf("no headers and no error")
	}

	// StrictText changes nothing but refusing: it gives the same result,
	// or an error that says text could not be read without loss.
	strict, err := Parse(raw, ParseOptions{MaxDepth: 8, MaxParts: 64, StrictText: true})
	switch {
	case err != nil && !errors.Is(err, ErrUndecodableText):
		t.Fatalf("StrictText: unexpected error: %v", err)
	case err == nil && fmt.Sprint(*strict) != fmt.Sprint(*p):
		t.Fatalf("StrictText gives another result")
	}

	meta, err := Parse(raw, ParseOptions{SkipBodies: true})
	if err != nil {
		t.Fatalf("SkipBodies failed where a full parse did not: %v", err)
	}
	p.Body, p.HTMLBody, p.Attachments = "", false, nil
	if fmt.Sprint(*meta) != fmt.Sprint(*p) {
		t.Fatalf("SkipBodies gives other header fields")
	}
}

func checkComposeRoundTrip(t *testing.T, attachment []byte, subject, body string, html bool) {
	msg := directapi.Message{
		Sender:     "alice@direct.example",
		Subject:    subject,
		Body:       body,
		HTMLBody:   html,
		Recipients: []directapi.Recipient{{Email: "bob@direct.example", Type: directapi.TO}},
	}
	if len(attachment)%2 == 1 { // half of the inputs also carry an attachment
		msg.AttachmentList = []directapi.Attachment{{
			Content: base64.StdEncoding.EncodeToString(attachment), ContentType: "application/octet-stream", Filename: "f.bin",
		}}
	}
	raw, err := Compose(msg, ComposeOptions{MessageID: "fuzz@direct.example", Date: testDate})
	if err != nil {
		t.Fatalf("Compose: %v", err)
	}
	p, err := Parse(raw, ParseOptions{})
	if err != nil {
		t.Fatalf("Parse of Compose output: %v", err)
	}
	if want := strings.ToValidUTF8(subject, "\uFFFD"); p.Subject != want {
		t.Fatalf("Subject = %q, want %q", p.Subject, want)
	}
	want := strings.ToValidUTF8(body, "\uFFFD")
	want = strings.ReplaceAll(strings.ReplaceAll(want, "\r\n", "\n"), "\r", "\n")
	if p.Body != want || p.HTMLBody != html {
		t.Fatalf("Body = %q html=%v, want %q html=%v", p.Body, p.HTMLBody, want, html)
	}
	if len(p.Attachments) != len(msg.AttachmentList) {
		t.Fatalf("%d attachments, want %d", len(p.Attachments), len(msg.AttachmentList))
	}
	if len(p.Attachments) == 1 {
		got, _ := base64.StdEncoding.DecodeString(p.Attachments[0].Content)
		if !bytes.Equal(got, attachment) || p.Attachments[0].Filename != "f.bin" {
			t.Fatalf("attachment changed")
		}
	}
}

// FuzzTree checks that ParseTree never panics, never loops and keeps the
// tree's invariants on any input, calling every accessor on every part
// (see checkTree).
func FuzzTree(f *testing.F) {
	// Every test message; the first 16 KiB of the large ones (their
	// structure is at the start, and mutating 200 KB inputs would leave a
	// 15 s fuzzing run few executions).
	files, _ := filepath.Glob("testdata/messages/*")
	for _, file := range files {
		if raw, err := os.ReadFile(file); err == nil {
			f.Add(raw[:min(len(raw), 16<<10)])
		}
	}
	for _, s := range []string{
		"Content-Type: text/plain\r\nContent-Transfer-Encoding: base64\r\n\r\naGVsbG8=\r\nd29ybGQ=\r\n",
		"Content-Type: multipart/mixed; boundary=b\r\n\r\n--b\r\nhello\r\n--b\r\n\r\n--b--\r\n",
		"Content-Type: multipart/digest; boundary=d\n\n--d\n\nSubject: inner\n\nbody\n--d--\n",
		"Content-Type: message/rfc822\r\nContent-Transfer-Encoding: base64\r\n\r\nU3ViamVjdDogeA0KDQpib2R5\r\n",
		"To: g: a@b, <@r:c@d>, (x) e (y) @ f;, \"q\\\"\" <g@h>\r\n\r\n",
	} {
		f.Add([]byte(s))
	}
	f.Add(nested(12))
	f.Fuzz(func(t *testing.T, raw []byte) {
		opts := ParseOptions{MaxDepth: 8, MaxParts: 64}
		root, err := ParseTree(raw, opts)
		if err != nil && !errors.Is(err, ErrTooComplex) {
			t.Fatalf("unexpected error: %v", err)
		}
		checkTree(t, raw, root, opts)
		top, err := ParseTree(raw, ParseOptions{SkipBodies: true})
		if err != nil || fmt.Sprint(top.Header) != fmt.Sprint(root.Header) || top.Children != nil || top.Message != nil {
			t.Fatalf("SkipBodies: other header or parts (%v)", err)
		}
	})
}

// FuzzEncodeBinaryParts checks that EncodeBinaryParts never panics, that
// what it writes has no binary leaf left (a second pass changes nothing)
// and keeps the number of parts, and that an input it leaves alone comes
// back as it was.
func FuzzEncodeBinaryParts(f *testing.F) {
	for _, s := range []string{
		"Content-Type: application/octet-stream\r\nContent-Transfer-Encoding: binary\r\n\r\n\x00-\xe4\n\r\n\n",
		"Content-Type: multipart/mixed; boundary=b\r\n\r\n--b\r\nContent-Transfer-Encoding: Binary\r\n\r\n\x00\x01\r\n--b\r\n\r\ntext\r\n--b--\r\n",
		"Content-Type: message/rfc822\r\n\r\nContent-Transfer-Encoding: binary\r\n\r\n\x00\r\n",
		"Subject: binary\r\n\r\nbinary\r\n",
	} {
		f.Add([]byte(s))
	}
	count := func(p *Part) int {
		n := 0
		var walk func(*Part)
		walk = func(p *Part) {
			n++
			for _, c := range p.Children {
				walk(c)
			}
			if p.Message != nil {
				walk(p.Message)
			}
		}
		walk(p)
		return n
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		in := bytes.Clone(raw)
		out, changed := EncodeBinaryParts(raw)
		if !bytes.Equal(raw, in) {
			t.Fatal("the input was modified")
		}
		if !changed {
			if !bytes.Equal(out, raw) {
				t.Fatal("unchanged, yet other bytes")
			}
			return
		}
		if again, changed := EncodeBinaryParts(out); changed {
			t.Fatalf("a second pass changed %q to %q", out, again)
		}
		before, _ := ParseTree(raw, ParseOptions{})
		after, _ := ParseTree(out, ParseOptions{})
		if count(before) != count(after) {
			t.Fatalf("%d parts became %d: %q", count(before), count(after), out)
		}
	})
}
