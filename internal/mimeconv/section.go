package mimeconv

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
)

// ErrUnknownEncoding reports a Content-Transfer-Encoding other than 7bit,
// 8bit, binary, base64 and quoted-printable (RFC 2045 §6.1), which
// Decoded cannot undo. IMAP answers BINARY of such a part with
// NO [UNKNOWN-CTE] (RFC 3516 §4.2).
var ErrUnknownEncoding = errors.New("mimeconv: unknown content-transfer-encoding")

// Find returns the part that the IMAP section part number path names
// (RFC 3501 §6.4.5, RFC 9051 §6.4.5), or nil when there is none. p is a
// message (the tree's root or an encapsulated message); an empty path is p
// itself.
//
// The numbering: the body parts of a multipart are numbered 1, 2, ...; a
// message that is not multipart has one part, 1, which is the message
// itself (even when it is of type message/rfc822); a message/rfc822 part's sub-parts are those of the message it
// encapsulates, numbered as for a message. Any other part has, leniently,
// one sub-part 1, itself, as for a message that is not multipart (RFC 3501
// gives such parts no sub-parts; Dovecot and go-imap answer x.1 this way,
// and clients that number every leaf from 1 rely on it).
func (p *Part) Find(path []int) *Part {
	cur := p
	for i, n := range path {
		var subs []*Part
		switch {
		case i == 0:
			subs = cur.topParts()
		case cur.Children != nil:
			subs = cur.Children
		case cur.Message != nil:
			subs = cur.Message.topParts()
		default:
			subs = []*Part{cur} // as Dovecot and go-imap read it: x.1 of a leaf is x
		}
		if n < 1 || n > len(subs) {
			return nil
		}
		cur = subs[n-1]
	}
	return cur
}

// topParts are the parts of a message numbered 1, 2, ...
func (p *Part) topParts() []*Part {
	if p.Children != nil {
		return p.Children
	}
	return []*Part{p}
}

// Encapsulated is what the HEADER, HEADER.FIELDS and TEXT section
// specifiers of a part refer to (RFC 3501 §6.4.5): the encapsulated
// message of a message/rfc822 part, otherwise the part itself (for the
// message itself, and, leniently, for other parts, whose own header and
// body are then answered).
func (p *Part) Encapsulated() *Part {
	if p.Message != nil {
		return p.Message
	}
	return p
}

// FilterHeader returns the header fields of p named in names (fields
// compared without case, RFC 3501 §6.4.5 HEADER.FIELDS), or with not set
// those not named (HEADER.FIELDS.NOT), each as written with its line break,
// in message order, followed by the empty line that ends a header section.
func (p *Part) FilterHeader(names []string, not bool) []byte {
	var b bytes.Buffer
	for _, f := range p.Header {
		named := false
		for _, n := range names {
			if strings.EqualFold(strings.TrimSpace(n), f.Name) {
				named = true
				break
			}
		}
		if named == not || f.end <= f.start {
			continue
		}
		raw := p.buf[f.start:f.end]
		b.Write(raw)
		if !bytes.HasSuffix(raw, []byte("\n")) {
			b.WriteString("\r\n")
		}
	}
	b.WriteString("\r\n")
	return b.Bytes()
}

// Decoded is the body with its Content-Transfer-Encoding undone (RFC 2045
// §6), the content BINARY returns (RFC 3516 §4.2). A multipart body is
// never encoded (RFC 2045 §6.4) and is returned as written. For an
// encoding it does not know it returns the body as written and an error
// wrapping ErrUnknownEncoding.
//
// base64 is decoded liberally (characters outside the alphabet ignored,
// as RFC 2045 §6.8 requires, and data after a pad decoded too), and so is
// quoted-printable (RFC 2045 §6.7; see decodeQuotedPrintable).
func (p *Part) Decoded() ([]byte, error) {
	body := p.Body()
	if p.Type == "multipart" {
		return body, nil
	}
	switch p.Encoding {
	case "", "7bit", "8bit", "binary":
		return body, nil
	case "base64", "quoted-printable":
		return decodeTransfer(p.Encoding, body), nil
	}
	return body, fmt.Errorf("mimeconv: part encoded as %q: %w", p.Encoding, ErrUnknownEncoding)
}

// Text is the content of a text part as valid UTF-8: transfer encoding
// undone (an unknown one leaves the bytes), then converted from the
// charset parameter (see decodeText: UTF-8, us-ascii or no charset with
// bytes that are not UTF-8 read as Windows-1252). Line breaks are kept as
// written. What cannot be read without loss is replaced by U+FFFD, or
// kept as bytes for an unknown charset; DecodeText reports that.
func (p *Part) Text() string {
	s, _ := p.DecodeText()
	return s
}

// DecodeText is Text, and an error wrapping ErrUndecodableText (a
// *CharsetError) when the text could not be read without loss: bytes not
// valid in the declared charset, or a charset the bridge cannot decode.
func (p *Part) DecodeText() (string, error) {
	data, _ := p.Decoded()
	return decodeText(p.Params["charset"], data)
}

// Lines is the number of lines of the body as written, the body-fld-lines
// of BODYSTRUCTURE (RFC 3501 §7.4.2): its line breaks.
func (p *Part) Lines() int {
	return bytes.Count(p.Body(), []byte("\n"))
}

// Disposition is the Content-Disposition (RFC 2183 §2): its type in lower
// case and its parameters decoded, or "" and nil when there is none or it
// cannot be read.
func (p *Part) Disposition() (string, map[string]string) {
	d, params := parseMediaType(p.Header.Get("Content-Disposition"))
	if !validMediaType(d) || strings.Contains(d, "/") {
		return "", nil
	}
	return d, params
}

// Languages are the Content-Language tags (RFC 3282 §2), in order.
func (p *Part) Languages() []string {
	var out []string
	for _, l := range strings.Split(p.Header.Get("Content-Language"), ",") {
		if l = strings.TrimSpace(stripComments(l)); l != "" {
			out = append(out, l)
		}
	}
	return out
}

// Walk calls fn for p and every part below it, depth first in order,
// encapsulated messages included; fn returning false skips what is below
// that part. The tree's depth is bounded, and so is the recursion.
func (p *Part) Walk(fn func(*Part) bool) {
	if !fn(p) {
		return
	}
	for _, c := range p.Children {
		c.Walk(fn)
	}
	if p.Message != nil {
		p.Message.Walk(fn)
	}
}
