package mimeconv

import (
	"bytes"
	"encoding/base64"
	"slices"
	"strings"
)

// EncodeBinaryParts rewrites the body parts of raw whose
// Content-Transfer-Encoding is binary (RFC 2045 §6.2: any octets, NUL
// and bare CR or LF included) as base64, their CTE field as "base64",
// and leaves every other byte as it is; changed is false, and raw is
// returned, when there is no such part.
//
// The IMAP front applies it to APPEND (RFC 3516 §4.4 lets a server
// convert binary content it cannot keep as such): the provider stores
// and forwards messages as mail, where binary content cannot travel, and
// an IMAP client that FETCHes BODY[n] must get a transfer encoding it can
// read, never raw NULs (imaptest's append-binary checks it). BINARY[n]
// and BINARY.SIZE[n] still give the original octets, decoded.
//
// Only leaf parts whose offsets index raw itself are rewritten: the
// parts of a message/rfc822 that had to be decoded first are not (a
// transfer-encoded message/rfc822 carries no binary part as such).
func EncodeBinaryParts(raw []byte) (out []byte, changed bool) {
	if !containsFold(raw, "binary") {
		return raw, false
	}
	root, _ := ParseTree(raw, ParseOptions{})
	var leaves []*Part
	var walk func(p *Part)
	walk = func(p *Part) {
		if p == nil || len(p.buf) == 0 || &p.buf[0] != &raw[0] {
			return
		}
		switch {
		case p.Children != nil:
			for _, c := range p.Children {
				walk(c)
			}
		case p.Message != nil:
			walk(p.Message)
		case p.Encoding == "binary":
			leaves = append(leaves, p)
		}
	}
	if len(raw) > 0 {
		walk(root)
	}
	if len(leaves) == 0 {
		return raw, false
	}
	// Leaves are in document order and do not overlap: copy what lies
	// between them, and each one's header with its CTE field replaced
	// and its body encoded.
	slices.SortFunc(leaves, func(a, b *Part) int { return a.start - b.start })
	grow := len(raw)
	for _, p := range leaves {
		n := p.end - p.bodyStart
		grow += base64.StdEncoding.EncodedLen(n) + 2*(n/57) - n + len("base64")
	}
	var b bytes.Buffer
	b.Grow(grow)
	at := 0
	for _, p := range leaves {
		// The message's own line break (some are written with bare LF).
		eol := "\r\n"
		for _, f := range p.Header {
			if !strings.EqualFold(f.Name, "Content-Transfer-Encoding") || f.end == 0 {
				continue
			}
			if f.end < 2 || raw[f.end-2] != '\r' {
				eol = "\n"
			}
			b.Write(raw[at:f.start])
			b.WriteString(f.Name + ": base64" + eol)
			at = f.end
		}
		b.Write(raw[at:p.bodyStart])
		writeBase64Lines(&b, raw[p.bodyStart:p.end], eol)
		at = p.end
	}
	b.Write(raw[at:])
	return b.Bytes(), true
}

// writeBase64Lines writes data in base64 lines of 76 characters (RFC
// 2045 §6.8), eol between them and none after the last: the line break
// before a boundary delimiter belongs to the delimiter (RFC 2046 §5.1.1).
func writeBase64Lines(b *bytes.Buffer, data []byte, eol string) {
	const perLine = 57 // input octets of one 76-character line
	for len(data) > 0 {
		n := min(perLine, len(data))
		enc := make([]byte, base64.StdEncoding.EncodedLen(n))
		base64.StdEncoding.Encode(enc, data[:n])
		b.Write(enc)
		data = data[n:]
		if len(data) > 0 {
			b.WriteString(eol)
		}
	}
}

// containsFold reports whether s contains the lower-case ASCII word,
// in any case: one pass, no copy.
func containsFold(s []byte, word string) bool {
	for i := 0; i+len(word) <= len(s); i++ {
		if s[i]|0x20 == word[0] && strings.EqualFold(string(s[i:i+len(word)]), word) {
			return true
		}
	}
	return false
}
