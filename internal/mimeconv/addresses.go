package mimeconv

import (
	"strings"
)

// AddressKind tells a mailbox from the markers around a group's members.
type AddressKind uint8

// The kinds of an Address.
const (
	// Mailbox is one address (RFC 5322 §3.4 mailbox).
	Mailbox AddressKind = iota
	// GroupStart opens a group (RFC 5322 §3.4 group); Name is the
	// group's display name and the members follow.
	GroupStart
	// GroupEnd closes the group opened last.
	GroupEnd
)

// Address is one item of a parsed address-list: a mailbox, or the start or
// end of a group, in the flat form IMAP's ENVELOPE uses (RFC 3501 §7.4.2).
type Address struct {
	Kind AddressKind
	// Name is the display name (of the mailbox or the group) as written:
	// quoted-strings unquoted, comments and folding removed, words joined
	// by single spaces, RFC 2047 encoded-words kept (DecodeWords decodes
	// them). A mailbox without a display name has its comment as Name,
	// as in "user@example.org (Real Name)".
	Name string
	// Route is the obsolete source route (RFC 5322 §4.4 obs-route) without
	// its final colon, e.g. "@relay.example", or "".
	Route string
	// Mailbox is the local part, quoted-string unquoted.
	Mailbox string
	// Host is the domain, or "" when the address has none.
	Host string
}

// Spec is the addr-spec: Mailbox "@" Host, or Mailbox alone without a
// host.
func (a Address) Spec() string {
	if a.Host == "" {
		return a.Mailbox
	}
	return a.Mailbox + "@" + a.Host
}

// ParseAddressList parses an address-list field value (To, Cc, Bcc, From,
// Reply-To, Sender; RFC 5322 §3.4) into mailboxes and group markers, in
// order. It is the one address parser of the bridge: the IMAP ENVELOPE,
// SEARCH FROM/TO/CC/BCC, the provider's recipient lists and the SMTP
// front's From check all read addresses with it.
//
// It reads the obsolete forms of RFC 5322 §4.4 (source routes, CFWS
// between the words of an address, empty list items) and is liberal about
// broken input, because stored mail often has it: unquoted specials and
// raw 8-bit text in display names, a missing closing bracket or quote,
// a display name without angle brackets before a bare addr-spec, groups
// that are never closed. An item from which no address can be read is
// left out. The strings are valid UTF-8 (RFC 6532 allows UTF-8 in
// addresses): a display name that is not is read as Windows-1252, as other
// raw 8-bit header text (headerText); invalid bytes in an address part
// become U+FFFD, since guessing could make another address.
func ParseAddressList(value string) []Address {
	toks := tokenizeAddresses(value)
	var out []Address
	var item []addrToken
	inGroup, angle := false, false
	flush := func() {
		if a, ok := parseMailbox(item); ok {
			out = append(out, a)
		}
		item = item[:0]
	}
	for _, t := range toks {
		if t.kind == tokSpecial && !angle {
			switch t.text {
			case ",":
				flush()
				continue
			case ":":
				if !inGroup {
					out = append(out, Address{Kind: GroupStart, Name: phrase(item)})
					item = item[:0]
					inGroup = true
					continue
				}
			case ";":
				flush()
				if inGroup {
					out = append(out, Address{Kind: GroupEnd})
					inGroup = false
				}
				continue
			}
		}
		switch {
		case t.kind == tokSpecial && t.text == "<":
			angle = true
		case t.kind == tokSpecial && t.text == ">":
			angle = false
		}
		item = append(item, t)
	}
	flush()
	if inGroup {
		out = append(out, Address{Kind: GroupEnd})
	}
	for i := range out {
		a := &out[i]
		a.Name = headerText(a.Name) // raw 8-bit names: Windows-1252, as other header text
		a.Route = strings.ToValidUTF8(a.Route, "\uFFFD")
		a.Mailbox = strings.ToValidUTF8(a.Mailbox, "\uFFFD")
		a.Host = strings.ToValidUTF8(a.Host, "\uFFFD")
	}
	return out
}

// Addresses returns the addr-specs of an address-list field value, in
// order, without display names; group members count, and items without a
// domain are left out. See ParseAddressList.
func Addresses(value string) []string {
	var out []string
	for _, a := range ParseAddressList(value) {
		if a.Kind == Mailbox && a.Host != "" {
			out = append(out, a.Spec())
		}
	}
	return out
}

// addrToken is a lexical token of an address-list (RFC 5322 §3.2).
type addrToken struct {
	kind addrTokenKind
	text string // atom and literal as written, quoted-string and comment unquoted
	sp   bool   // preceded by whitespace or a comment
}

type addrTokenKind uint8

const (
	tokAtom    addrTokenKind = iota // atext and "." (dot-atom, obs-phrase), 8-bit bytes too
	tokQuoted                       // quoted-string, unquoted
	tokComment                      // comment, unquoted, without its parentheses
	tokLiteral                      // domain-literal, brackets included
	tokSpecial                      // one of < > : ; @ ,
)

// tokenizeAddresses splits an address-list into tokens. An unterminated
// quoted-string, comment or domain-literal runs to the end.
func tokenizeAddresses(s string) []addrToken {
	var toks []addrToken
	sp := false
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\r' || c == '\n':
			sp = true
			i++
			continue
		case c == '(':
			var b strings.Builder
			depth := 0
			for ; i < len(s); i++ {
				c := s[i]
				if c == '\\' && i+1 < len(s) {
					i++
					b.WriteByte(s[i])
					continue
				}
				if c == '(' {
					depth++
					if depth == 1 {
						continue
					}
				}
				if c == ')' {
					depth--
					if depth == 0 {
						i++
						break
					}
				}
				b.WriteByte(c)
			}
			toks = append(toks, addrToken{kind: tokComment, text: b.String(), sp: sp})
			sp = true
			continue
		case c == '"':
			var b strings.Builder
			for i++; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' && i+1 < len(s) {
					i++
				}
				if s[i] != '\r' && s[i] != '\n' {
					b.WriteByte(s[i])
				}
			}
			i++ // the closing quote
			toks = append(toks, addrToken{kind: tokQuoted, text: b.String(), sp: sp})
		case c == '[':
			j := strings.IndexByte(s[i:], ']')
			end := len(s)
			if j >= 0 {
				end = i + j + 1
			}
			toks = append(toks, addrToken{kind: tokLiteral, text: s[i:end], sp: sp})
			i = end
		case strings.IndexByte("<>:;@,", c) >= 0:
			toks = append(toks, addrToken{kind: tokSpecial, text: s[i : i+1], sp: sp})
			i++
		default:
			j := i
			for j < len(s) && strings.IndexByte(" \t\r\n()<>[]:;@,\"", s[j]) < 0 {
				j++
			}
			if j == i {
				j++ // a stray ")" or "]": a word of its own
			}
			toks = append(toks, addrToken{kind: tokAtom, text: s[i:j], sp: sp})
			i = j
		}
		sp = false
	}
	return toks
}

// phrase renders the words of a display name: atoms as written, quoted
// strings unquoted, joined by single spaces; comments and specials are
// dropped.
func phrase(toks []addrToken) string {
	var words []string
	for _, t := range toks {
		if t.kind == tokAtom || t.kind == tokQuoted {
			words = append(words, t.text)
		}
	}
	return strings.TrimSpace(strings.Join(words, " "))
}

// firstComment is the text of the first comment among toks, trimmed.
func firstComment(toks []addrToken) string {
	for _, t := range toks {
		if t.kind == tokComment {
			if s := strings.Join(strings.Fields(t.text), " "); s != "" {
				return s
			}
		}
	}
	return ""
}

// parseMailbox reads one list item: name-addr ("Name <a@b>", with an
// optional source route) or addr-spec ("a@b (Name)"), leniently.
func parseMailbox(item []addrToken) (Address, bool) {
	lt := -1
	for i, t := range item {
		if t.kind == tokSpecial && t.text == "<" {
			lt = i
			break
		}
	}
	if lt >= 0 {
		gt := len(item)
		for i := lt + 1; i < len(item); i++ {
			if item[i].kind == tokSpecial && item[i].text == ">" {
				gt = i
				break
			}
		}
		inner := item[lt+1 : gt]
		a := Address{Kind: Mailbox, Name: phrase(item[:lt])}
		if a.Name == "" {
			a.Name = firstComment(item[gt:])
		}
		for i := len(inner) - 1; i >= 0; i-- {
			if inner[i].kind == tokSpecial && inner[i].text == ":" {
				a.Route = joinTokens(inner[:i], true)
				inner = inner[i+1:]
				break
			}
		}
		at := -1
		for i, t := range inner {
			if t.kind == tokSpecial && t.text == "@" {
				at = i
			}
		}
		local := inner
		if at >= 0 {
			local = inner[:at]
			a.Host = joinTokens(inner[at+1:], false)
		}
		a.Mailbox = joinTokens(local, false)
		if a.Mailbox == "" && a.Host == "" || !dotJoined(local) {
			return Address{}, false
		}
		return a, true
	}

	at := -1
	for i, t := range item {
		if t.kind == tokSpecial && t.text == "@" {
			at = i
			break
		}
	}
	if at < 0 {
		// No domain: the words themselves, as c-client reads a bare
		// local part.
		mbox := joinTokens(item, false)
		if mbox == "" {
			return Address{}, false
		}
		return Address{Kind: Mailbox, Mailbox: mbox, Name: firstComment(item)}, true
	}
	// The local part is the run of words joined to the "@" (dots and
	// CFWS between dot-separated words, RFC 5322 §4.4 obs-local-part);
	// words before it are a display name written without brackets.
	from := at
	for from > 0 {
		t := item[from-1]
		if t.kind == tokComment {
			from--
			continue
		}
		if t.kind != tokAtom && t.kind != tokQuoted {
			break
		}
		from--
		joined := from > 0 && (strings.HasPrefix(t.text, ".") || strings.HasSuffix(item[from-1].text, "."))
		if t.sp && !joined {
			break
		}
	}
	to, prev := at+1, ""
	for to < len(item) {
		t := item[to]
		if t.kind == tokComment {
			to++
			continue
		}
		if t.kind != tokAtom && t.kind != tokLiteral {
			break
		}
		if prev != "" && t.sp && !strings.HasPrefix(t.text, ".") && !strings.HasSuffix(prev, ".") {
			break
		}
		prev = t.text
		to++
	}
	a := Address{
		Kind:    Mailbox,
		Name:    phrase(item[:from]),
		Mailbox: joinTokens(item[from:at], false),
		Host:    joinTokens(item[at+1:to], false),
	}
	if a.Name == "" {
		a.Name = firstComment(item)
	}
	return a, true
}

// dotJoined reports whether the words of a local part are one word or
// words joined by dots, with CFWS allowed around the dots (RFC 5322 §4.4
// obs-local-part): "a b" is not a local part, "a . b" is.
func dotJoined(toks []addrToken) bool {
	prev := ""
	for _, t := range toks {
		if t.kind != tokAtom && t.kind != tokQuoted {
			continue
		}
		if prev != "" && t.sp && !strings.HasPrefix(t.text, ".") && !strings.HasSuffix(prev, ".") {
			return false
		}
		prev = t.text
	}
	return true
}

// joinTokens concatenates the words of an addr-spec part without the CFWS
// between them; with specials set, "@" and "," (of a route) are kept.
func joinTokens(toks []addrToken, specials bool) string {
	var b strings.Builder
	for _, t := range toks {
		switch t.kind {
		case tokAtom, tokQuoted, tokLiteral:
			b.WriteString(t.text)
		case tokSpecial:
			if specials && (t.text == "@" || t.text == ",") {
				b.WriteString(t.text)
			}
		}
	}
	return b.String()
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
