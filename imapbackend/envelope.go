package imapbackend

import (
	"regexp"
	"strings"

	"github.com/emersion/go-imap/v2"

	"github.com/directbridge/directbridge/internal/mimeconv"
	"github.com/directbridge/directbridge/upstream/directapi"
)

// ENVELOPE (RFC 3501 §7.4.2, RFC 9051 §7.5.2) is read by mimeconv
// (Header.Envelope, with its one address parser) and only shaped here for
// go-imap's writer, rather than built with go-imap's ExtractEnvelope, which
// decodes the subject (go-imap then writes it re-encoded as UTF-8, so
// "=?iso-8859-1?q?caf=E9?=" would come back as "=?utf-8?q?caf=C3=A9?="),
// flattens address groups and drops In-Reply-To and Message-ID values it
// cannot parse. Here:
//
//   - the subject and the display names are the fields as written,
//     encoded words and all, as the RFC has it and Dovecot and Cyrus do
//     (go-imap's writer leaves ASCII alone; raw 8-bit text is sent as a
//     UTF-8 encoded word);
//   - groups are a start marker (NIL NIL "name" NIL), their members and an
//     end marker (NIL NIL NIL NIL);
//   - In-Reply-To and Message-ID are the fields as written when they are
//     enclosed in angle brackets (go-imap's writer adds the outer pair);
//     a field of one word without them (an id written "abc@host", as
//     some devices do) is that word, which the writer then brackets:
//     threading by ENVELOPE still finds it, where NIL lost it;
//   - an empty Sender or Reply-To is left out, which go-imap's writer
//     replaces with From, as the RFC asks.
//
// What go-imap cannot carry: the date is written from a parsed time (a
// date that cannot be parsed is NIL, a wrong day of the week is
// corrected) and source routes (the adl member) are always NIL.

// headerOf is a header list in mimeconv's form, for the header lists of
// the provider's metadata.
func headerOf(hs []directapi.MessageHeader) mimeconv.Header {
	h := make(mimeconv.Header, len(hs))
	for i, f := range hs {
		h[i] = mimeconv.Field{Name: f.Name, Value: f.Value}
	}
	return h
}

// envelopeOf is the ENVELOPE of a message or an attached message.
func envelopeOf(h mimeconv.Header) *imap.Envelope {
	e := h.Envelope()
	env := &imap.Envelope{
		Date:      e.Date,
		Subject:   e.Subject,
		From:      imapAddresses(e.From),
		Sender:    imapAddresses(e.Sender),
		ReplyTo:   imapAddresses(e.ReplyTo),
		To:        imapAddresses(e.To),
		Cc:        imapAddresses(e.Cc),
		Bcc:       imapAddresses(e.Bcc),
		InReplyTo: msgIDField(e.InReplyTo),
	}
	if id := msgIDField(e.MessageID); len(id) > 0 {
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
		if w := strings.TrimSpace(v); w != "" && !strings.ContainsAny(w, " \t<>\"()") {
			return []string{w}
		}
		return nil
	}
	joined := ids[0]
	for _, id := range ids[1:] {
		joined += " " + id
	}
	return []string{joined[1 : len(joined)-1]}
}

// missingHost is what c-client, Dovecot and Cyrus put in the host of an
// address without a domain: a NIL host would mark a group.
const missingHost = ".MISSING-HOST-NAME."

// imapAddresses is an address list as RFC 3501 §7.4.2 writes it: groups
// between a start marker (the group name as mailbox, NIL host) and an end
// marker (all NIL). A group without a name has no markers, since its start
// marker would read as an end marker; a mailbox without a local part is
// left out, since it would read as a marker.
func imapAddresses(list []mimeconv.Address) []imap.Address {
	var out []imap.Address
	unnamed := 0 // open groups written without markers
	for _, a := range list {
		switch a.Kind {
		case mimeconv.GroupStart:
			if a.Name == "" {
				unnamed++
				continue
			}
			out = append(out, imap.Address{Mailbox: a.Name})
		case mimeconv.GroupEnd:
			if unnamed > 0 {
				unnamed--
				continue
			}
			out = append(out, imap.Address{})
		default:
			if a.Mailbox == "" {
				continue
			}
			host := a.Host
			if host == "" {
				host = missingHost
			}
			out = append(out, imap.Address{Name: a.Name, Mailbox: a.Mailbox, Host: host})
		}
	}
	return out
}

// addressTexts is what SEARCH FROM, TO, CC and BCC match besides the field
// as written: each address as "Name <mailbox@host>" with the name decoded,
// and each group's name, so that a search for an address finds it whatever
// comments, quoting or encoding the field has.
func addressTexts(v string) []string {
	var out []string
	for _, a := range mimeconv.ParseAddressList(v) {
		switch a.Kind {
		case mimeconv.GroupStart:
			if a.Name != "" {
				out = append(out, mimeconv.DecodeWords(a.Name))
			}
		case mimeconv.Mailbox:
			out = append(out, mimeconv.DecodeWords(a.Name)+" <"+a.Spec()+">")
		}
	}
	return out
}
