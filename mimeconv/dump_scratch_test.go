package mimeconv

import (
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

func TestScratchDump(t *testing.T) {
	files, _ := filepath.Glob("testdata/messages/*")
	for _, f := range files {
		raw, _ := os.ReadFile(f)
		p, err := Parse(raw, ParseOptions{})
		fmt.Printf("=== %s err=%v\n", f, err)
		if p == nil {
			continue
		}
		body := p.Body
		if len(body) > 120 {
			body = body[:120]
		}
		fmt.Printf("sender=%q subject=%q html=%v msgid=%q replyto=%q date=%v\nrcpt=%v\nbody=%q\n", p.Sender, p.Subject, p.HTMLBody, p.MessageID, p.ReplyTo, p.SentDate, p.Recipients, body)
		for _, a := range p.Attachments {
			d, _ := base64.StdEncoding.DecodeString(a.Content)
			fmt.Printf("  att %q %q %d\n", a.Filename, a.ContentType, len(d))
		}
		fmt.Printf("  headers=%d first=%v\n", len(p.Headers), p.Headers[0])
	}
}
