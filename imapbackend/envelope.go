package imapbackend

import (
	"net/mail"
	"regexp"
	"strings"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-message/textproto"

	"github.com/directbridge/directbridge/directapi"
)

// ENVELOPE (RFC 3501 §7.4.2, RFC 9051 §7.5.2) is built here rather than
// with go-imap's ExtractEnvelope, which decodes the subject (go-imap then
// writes it re-encoded as UTF-8, so "=?iso-8859-1?q?caf=E9?=" would come
// back as "=?utf-8?q?caf=C3=A9?="), flattens address groups and drops
// In-Reply-To and Message-ID values it cannot parse. Here:
//
//   - the subject is the field as written, encoded words and all, as the
//     RFC has it and Dovecot and Cyrus do (go-imap's writer leaves ASCII
//     alone; raw 8-bit text is sent as a UTF-8 encoded word);
//   - groups are a start marker (NIL NIL "name" NIL), their members and an
//     end marker (NIL NIL NIL NIL);
//   - In-Reply-To and Message-ID are the fields as written when they are
//     enclosed in angle brackets (go-imap's writer adds the outer pair);
//   - an empty Sender or Reply-To is left out, which go-imap's writer
//     replaces with From, as the RFC asks.
//
// What go-imap cannot carry: the date is written from a parsed time (a
// date that cannot be parsed is NIL, a wrong day of the week is
// corrected) and source routes (the adl member) are always NIL.

// headerLookup returns the first field of a name (case-insensitive) and
// whether there was one.
type headerLookup func(name string) (string, bool)

func lookupList(hs []directapi.MessageHeader) headerLookup {
	return func(name string) (string, bool) {
		for _, h := range hs {
			if equalFold(h.Name, name) {
				return h.Value, true
			}
		}
		return "", false
	}
}

func lookupTextproto(h textproto.Header) headerLookup {
	return func(name string) (string, bool) {
		if !h.Has(name) {
			return "", false
		}
		return h.Get(name), true
	}
}

// envelopeOf builds the ENVELOPE of a message or an attached message.
func envelopeOf(get headerLookup) *imap.Envelope {
	field := func(name string) string {
		v, _ := get(name)
		return strings.TrimSpace(v)
	}
	env := &imap.Envelope{
		Subject:   field("Subject"),
		From:      addressList(field("From")),
		Sender:    addressList(field("Sender")),
		ReplyTo:   addressList(field("Reply-To")),
		To:        addressList(field("To")),
		Cc:        addressList(field("Cc")),
		Bcc:       addressList(field("Bcc")),
		InReplyTo: msgIDField(field("In-Reply-To")),
	}
	if d := field("Date"); d != "" {
		if t, err := mail.ParseDate(d); err == nil {
			env.Date = t
		}
	}
	if id := msgIDField(field("Message-ID")); len(id) > 0 {
		env.MessageID = id[0]
	}
	return env
}

var msgIDRE = regexp.MustCompile(`<[^<>]*>`)

// msgIDField returns a message-id field in the form go-imap's writer
// needs ("<" + v[0] + ">" is written): the field as written when it is
// enclosed in angle brackets, else the message-ids found in it, else
// nothing.
func msgIDField(v string) []string {
	if len(v) >= 2 && v[0] == '<' && v[len(v)-1] == '>' {
		return []string{v[1 : len(v)-1]}
	}
	ids := msgIDRE.FindAllString(v, -1)
	if len(ids) == 0 {
		return nil
	}
	joined := strings.Join(ids, " ")
	return []string{joined[1 : len(joined)-1]}
}

// missingHost is what c-client, Dovecot and Cyrus put in the host of an
// address without a domain: a NIL host would mark a group.
const missingHost = ".MISSING-HOST-NAME."

// addressList parses an address-list field (RFC 5322 §3.4) leniently
// into IMAP addresses, groups as RFC 3501 §7.4.2 writes them.
func addressList(v string) []imap.Address {
	var out []imap.Address
	var cur strings.Builder
	inGroup := false
	flush := func() {
		if a, ok := parseMailbox(cur.String()); ok {
			out = append(out, a)
		}
		cur.Reset()
	}
	quoted, angle, comment := false, false, 0
	for i := 0; i < len(v); i++ {
		ch := v[i]
		switch {
		case quoted:
			if ch == '\\' && i+1 < len(v) {
				cur.WriteByte(ch)
				i++
				ch = v[i]
			} else if ch == '"' {
				quoted = false
			}
		case comment > 0:
			switch ch {
			case '\\':
				if i+1 < len(v) {
					cur.WriteByte(ch)
					i++
					ch = v[i]
				}
			case '(':
				comment++
			case ')':
				comment--
			}
		case ch == '"':
			quoted = true
		case ch == '(':
			comment++
		case angle:
			if ch == '>' {
				angle = false
			}
		case ch == '<':
			angle = true
		case ch == ',':
			flush()
			continue
		case ch == ':' && !inGroup:
			name := strings.TrimSpace(unquotePhrase(stripComments(cur.String())))
			cur.Reset()
			inGroup = true
			out = append(out, imap.Address{Mailbox: name})
			continue
		case ch == ';' && inGroup:
			flush()
			inGroup = false
			out = append(out, imap.Address{})
			continue
		}
		cur.WriteByte(ch)
	}
	flush()
	if inGroup {
		out = append(out, imap.Address{})
	}
	return out
}

// parseMailbox parses one mailbox: "Name <a@b>", "a@b (Name)", "<a@b>".
// What net/mail cannot read is taken apart by hand: the address in angle
// brackets (a source route dropped) or the first word with an "@".
func parseMailbox(s string) (imap.Address, bool) {
	s = strings.TrimSpace(s)
	if s == "" {
		return imap.Address{}, false
	}
	if a, err := mail.ParseAddress(s); err == nil {
		mbox, host, ok := strings.Cut(a.Address, "@")
		if !ok {
			host = missingHost
		}
		return imap.Address{Name: a.Name, Mailbox: mbox, Host: host}, true
	}
	var name, spec string
	if i := strings.LastIndexByte(s, '<'); i >= 0 {
		name = strings.TrimSpace(unquotePhrase(stripComments(s[:i])))
		spec = s[i+1:]
		if j := strings.IndexByte(spec, '>'); j >= 0 {
			spec = spec[:j]
		}
		if j := strings.LastIndexByte(spec, ':'); j >= 0 {
			spec = spec[j+1:] // source route
		}
	} else {
		for _, w := range strings.Fields(stripComments(s)) {
			if strings.Contains(w, "@") {
				spec = w
				break
			}
		}
		if spec == "" {
			spec = strings.TrimSpace(stripComments(s))
		}
	}
	spec = strings.Join(strings.Fields(stripComments(spec)), "")
	if spec == "" {
		return imap.Address{}, false
	}
	mbox, host, ok := strings.Cut(spec, "@")
	if !ok || host == "" {
		host = missingHost
	}
	return imap.Address{Name: name, Mailbox: strings.Trim(mbox, `"`), Host: host}, true
}

// stripComments removes (comments) outside quoted strings.
func stripComments(s string) string {
	var b strings.Builder
	depth, quoted := 0, false
	for i := 0; i < len(s); i++ {
		ch := s[i]
		switch {
		case quoted:
			if ch == '\\' && i+1 < len(s) {
				b.WriteByte(ch)
				i++
				ch = s[i]
			} else if ch == '"' {
				quoted = false
			}
		case depth > 0:
			if ch == '\\' {
				i++
			} else if ch == '(' {
				depth++
			} else if ch == ')' {
				depth--
			}
			continue
		case ch == '(':
			depth++
			continue
		case ch == '"':
			quoted = true
		}
		b.WriteByte(ch)
	}
	return b.String()
}

// unquotePhrase removes the quotes of quoted strings in a phrase.
func unquotePhrase(s string) string {
	if !strings.Contains(s, `"`) {
		return s
	}
	var b strings.Builder
	quoted := false
	for i := 0; i < len(s); i++ {
		ch := s[i]
		switch {
		case ch == '"':
			quoted = !quoted
			continue
		case quoted && ch == '\\' && i+1 < len(s):
			i++
			ch = s[i]
		}
		b.WriteByte(ch)
	}
	return b.String()
}

// addressTexts is what SEARCH FROM, TO, CC and BCC match besides the field
// as written: each address as "Name <mailbox@host>", so that a search for
// an address finds it whatever comments or quoting the field has.
func addressTexts(v string) []string {
	var out []string
	for _, a := range addressList(v) {
		if a.Host == "" {
			if a.Mailbox != "" {
				out = append(out, a.Mailbox) // group name
			}
			continue
		}
		out = append(out, a.Name+" <"+a.Mailbox+"@"+a.Host+">")
	}
	return out
}
