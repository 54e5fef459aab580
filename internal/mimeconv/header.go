package mimeconv

import (
	"bytes"
	"strings"
)

// Field is one header field of a message or body part.
type Field struct {
	// Name is the field name as written, without the colon and the WSP
	// that may precede it (RFC 5322 §2.2; obsolete syntax of §4.5).
	Name string
	// Value is the field body unfolded (each line break and the WSP after
	// it become one space, RFC 5322 §2.2.3), WSP trimmed at both ends, and
	// not decoded: RFC 2047 encoded-words and raw 8-bit bytes are kept.
	Value string
	// start and end delimit the field's lines in the bytes of its Part,
	// the final line break included; both are zero for a Field made
	// outside this package.
	start, end int
}

// Header is a header section: its fields in the order written.
type Header []Field

// Get returns the value of the first field named name, compared without
// case (RFC 5322 §1.2.2), or "".
func (h Header) Get(name string) string {
	v, _ := h.Lookup(name)
	return v
}

// Lookup returns the value of the first field named name and whether
// there is one.
func (h Header) Lookup(name string) (string, bool) {
	for _, f := range h {
		if strings.EqualFold(f.Name, name) {
			return f.Value, true
		}
	}
	return "", false
}

// Values returns the values of every field named name, in order.
func (h Header) Values(name string) []string {
	var vs []string
	for _, f := range h {
		if strings.EqualFold(f.Name, name) {
			vs = append(vs, f.Value)
		}
	}
	return vs
}

// readFields reads the header section at the start of b (RFC 5322 §2.1)
// and returns its fields, with offsets into b, and where the body starts.
//
// It accepts CRLF and bare LF line endings. A line that starts with WSP
// continues the previous field (RFC 5322 §2.2.3). The section ends at the
// first empty line, which belongs to the header section, not the body.
// Like most mail readers it also ends at a line that is neither a field
// nor a continuation, which then starts the body, so a missing separator
// loses nothing. A continuation line before any field is skipped.
//
// When top is set (the message itself, not a body part), a UTF-8 byte
// order mark before the first field and an mbox "From " line (RFC 4155)
// are skipped as well: both are written by tools that store mail, and
// neither is part of the message.
func readFields(b []byte, top bool) (Header, int) {
	var h Header
	var cur []byte // value of the field being read
	flush := func(end int) {
		if len(h) > 0 && h[len(h)-1].end == 0 {
			h[len(h)-1].Value = strings.Trim(string(cur), " \t")
			h[len(h)-1].end = end
		}
	}
	pos := 0
	if top {
		if bytes.HasPrefix(b, utf8BOM) {
			pos = len(utf8BOM)
		}
		if bytes.HasPrefix(b[pos:], []byte("From ")) && !isFromField(b[pos:]) {
			if i := bytes.IndexByte(b[pos:], '\n'); i >= 0 {
				pos += i + 1
			} else {
				pos = len(b)
			}
		}
	}
	for pos < len(b) {
		next := len(b)
		lineEnd := len(b)
		if i := bytes.IndexByte(b[pos:], '\n'); i >= 0 {
			lineEnd = pos + i
			next = lineEnd + 1
		}
		line := bytes.TrimSuffix(b[pos:lineEnd], []byte{'\r'})
		switch {
		case len(line) == 0:
			flush(pos)
			return h, next
		case line[0] == ' ' || line[0] == '\t':
			if len(h) > 0 {
				cur = append(cur, ' ')
				cur = append(cur, bytes.TrimLeft(line, " \t")...)
			}
		default:
			colon := bytes.IndexByte(line, ':')
			if colon < 0 {
				flush(pos)
				return h, pos
			}
			name := bytes.TrimRight(line[:colon], " \t")
			if !validFieldName(string(name)) {
				flush(pos)
				return h, pos
			}
			flush(pos)
			h = append(h, Field{Name: string(name), start: pos})
			cur = append(cur[:0:0], line[colon+1:]...)
		}
		pos = next
	}
	flush(len(b))
	return h, len(b)
}

// validFieldName reports whether s is an RFC 5322 field-name: one or more
// printable US-ASCII characters other than the colon (RFC 5322 §2.2 and
// ftext in §3.6.8).
func validFieldName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 33 || c > 126 || c == ':' {
			return false
		}
	}
	return true
}
