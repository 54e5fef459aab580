package mimeconv

import (
	"bytes"
	"strings"
)

// field is one header field as written: the name without the colon and the
// value unfolded but not decoded.
type field struct {
	name, value string
}

// header is a header section in order of appearance.
type header []field

// get returns the value of the first field named name (case-insensitively,
// RFC 5322 §1.2.2), or "".
func (h header) get(name string) string {
	for _, f := range h {
		if strings.EqualFold(f.name, name) {
			return f.value
		}
	}
	return ""
}

// values returns the values of every field named name, in order.
func (h header) values(name string) []string {
	var vs []string
	for _, f := range h {
		if strings.EqualFold(f.name, name) {
			vs = append(vs, f.value)
		}
	}
	return vs
}

// readHeader splits b into its header section and body (RFC 5322 §2.1).
//
// It accepts CRLF and bare LF line endings. A line that starts with WSP
// continues the previous field (RFC 5322 §2.2.3); the line break and the
// leading WSP become one space. The section ends at the first empty line,
// which is not part of the body. Like most mail readers it also ends at a
// line that is neither a field nor a continuation, which then starts the
// body, so a missing separator loses nothing. A continuation line before any
// field is ignored.
func readHeader(b []byte) (header, []byte) {
	var h header
	var cur []byte // value of the field being read
	flush := func() {
		if len(h) > 0 {
			h[len(h)-1].value = strings.Trim(string(cur), " \t")
		}
	}
	pos := 0
	for pos < len(b) {
		next := len(b)
		lineEnd := len(b)
		if i := bytes.IndexByte(b[pos:], '\n'); i >= 0 {
			lineEnd = pos + i
			next = lineEnd + 1
		}
		line := b[pos:lineEnd]
		line = bytes.TrimSuffix(line, []byte{'\r'})
		switch {
		case len(line) == 0:
			flush()
			return h, b[next:]
		case line[0] == ' ' || line[0] == '\t':
			if len(h) > 0 {
				cur = append(cur, ' ')
				cur = append(cur, bytes.TrimLeft(line, " \t")...)
			}
		default:
			colon := bytes.IndexByte(line, ':')
			if colon < 0 {
				flush()
				return h, b[pos:]
			}
			name := bytes.TrimRight(line[:colon], " \t")
			if !validFieldName(string(name)) {
				flush()
				return h, b[pos:]
			}
			flush()
			h = append(h, field{name: string(name)})
			cur = append(cur[:0:0], line[colon+1:]...)
		}
		pos = next
	}
	flush()
	return h, nil
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
