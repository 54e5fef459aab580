package mimeconv

import (
	"net/mail"
	"strings"

	gomail "github.com/emersion/go-message/mail"
)

// Addresses returns the addr-specs of an address-list header value such as
// To, Cc, Bcc, From or Reply-To (RFC 5322 §3.4), in order, without display
// names. Group syntax contributes its members.
//
// It is liberal about malformed input because stored mail often has it
// (trailing commas, unquoted specials in display names, unknown charsets in
// encoded display names): when the value is not a valid address-list, each
// comma-separated item is read on its own, taking an angle-addr or a bare
// addr-spec where one can be found, and items without an address are
// skipped. The results are valid UTF-8 (RFC 6532 allows UTF-8 addresses);
// invalid bytes become U+FFFD.
func Addresses(value string) []string {
	value = strings.TrimSpace(value)
	if value == "" {
		return nil
	}
	if list, err := gomail.ParseAddressList(value); err == nil {
		var out []string
		for _, a := range list {
			if a.Address != "" {
				out = append(out, a.Address)
			}
		}
		return out
	}
	var out []string
	for _, item := range splitAddressList(value) {
		if a := liberalAddress(item); a != "" {
			out = append(out, strings.ToValidUTF8(a, "\uFFFD"))
		}
	}
	return out
}

// splitAddressList splits an address-list at commas and at the ":" and ";"
// of group syntax (RFC 5322 §3.4), outside quoted-strings, comments and
// angle brackets.
func splitAddressList(s string) []string {
	var items []string
	quoted, escaped, angle, comment, start := false, false, false, 0, 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case escaped:
			escaped = false
		case c == '\\' && (quoted || comment > 0):
			escaped = true
		case quoted:
			quoted = c != '"'
		case comment > 0:
			switch c {
			case '(':
				comment++
			case ')':
				comment--
			}
		case c == '"':
			quoted = true
		case c == '(':
			comment++
		case c == '<':
			angle = true
		case c == '>':
			angle = false
		case angle:
		case c == ',' || c == ';':
			items = append(items, s[start:i])
			start = i + 1
		case c == ':':
			start = i + 1 // drop a group's display-name
		}
	}
	return append(items, s[start:])
}

// liberalAddress returns the addr-spec of one malformed list item, or "".
func liberalAddress(item string) string {
	item = strings.TrimSpace(item)
	if item == "" {
		return ""
	}
	if a, err := mail.ParseAddress(item); err == nil {
		return a.Address
	}
	if open := strings.LastIndexByte(item, '<'); open >= 0 {
		inner := item[open+1:]
		if end := strings.IndexByte(inner, '>'); end >= 0 {
			inner = inner[:end]
		}
		inner = strings.TrimSpace(inner)
		if strings.Contains(inner, "@") && !strings.ContainsAny(inner, " \t\r\n") {
			return inner
		}
		return ""
	}
	for _, word := range strings.Fields(stripComments(item)) {
		word = strings.Trim(word, `"'`)
		if strings.Contains(word, "@") {
			return word
		}
	}
	return ""
}

// stripComments removes RFC 5322 §3.2.2 comments, which may nest.
func stripComments(s string) string {
	var b strings.Builder
	depth := 0
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '(':
			depth++
		case c == ')' && depth > 0:
			depth--
		case depth == 0:
			b.WriteByte(c)
		}
	}
	return b.String()
}
