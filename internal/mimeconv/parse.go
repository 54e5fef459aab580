package mimeconv

import (
	"bytes"
	"fmt"
	"strings"
	"time"

	"github.com/directbridge/directbridge/upstream/directapi"
)

// Parsed is what the provider reports about a stored message: the fields of
// directapi.MessageDetail that come from the message itself
// (messaging-rest.md, "MessageDetail").
type Parsed struct {
	// Sender is the addr-spec of the first From address, e.g.
	// "alice@direct.example"; "" if absent or unparsable.
	Sender string
	// Subject is decoded from RFC 2047 encoded-words to UTF-8 (see
	// decodeWords).
	Subject string
	// Body is the chosen text body decoded to UTF-8, with line breaks as
	// "\n" (CRLF is the wire form of a line break, RFC 2046 §4.1.1).
	Body string
	// HTMLBody reports a text/html body.
	HTMLBody bool
	// Recipients are the To addresses as TO, Cc as CC and, if the stored
	// message has a Bcc field, those as BCC.
	Recipients []directapi.Recipient
	// Attachments are the other leaf parts; Content is the base64 of the
	// bytes after the Content-Transfer-Encoding is undone.
	Attachments []directapi.Attachment
	// MessageID is the Message-ID field value as written, including the
	// angle brackets; "" if absent.
	MessageID string
	// ReplyTo is the addr-spec of the first Reply-To address; "" if absent.
	ReplyTo string
	// SentDate is the Date field (RFC 5322 §3.3); zero if absent or
	// unparsable.
	SentDate time.Time
	// Headers are all top-level header fields in order, names as written,
	// values unfolded (a line break and the WSP after it become one space)
	// but not decoded: encoded-words are kept as written. Raw 8-bit bytes
	// that are not UTF-8 are read as Windows-1252 (headerText), the one
	// reading that keeps every byte.
	Headers []directapi.MessageHeader
}

// ParseOptions bounds the work of Parse.
type ParseOptions struct {
	// MaxDepth is the maximum multipart nesting; 0 or less means 20.
	MaxDepth int
	// MaxParts is the maximum number of body parts; 0 or less means 1000.
	MaxParts int
	// SkipBodies fills only the fields that come from the header section
	// (Sender, Subject, Recipients, MessageID, ReplyTo, SentDate, Headers)
	// and does not read the body, for the metadata operations.
	SkipBodies bool
	// StrictText makes Parse fail, with a *CharsetError that wraps
	// ErrUndecodableText, when the Subject, the body or an attachment name
	// cannot be decoded to UTF-8 without loss (decodeText: bytes not
	// valid in the declared charset, or a charset the bridge cannot
	// decode), instead of returning them with U+FFFD or undecoded bytes.
	// The SMTP front sets it: what it hands the provider must say what
	// the sender wrote, and a changed dose or name must not go out under
	// a 250. Readers of stored mail leave it unset: a mailbox must stay
	// readable whatever it holds.
	//
	// Text that decodeText can read is never an error, strict or not:
	// UTF-8, us-ascii or no charset with bytes that are not UTF-8, and raw
	// 8-bit header bytes, read as Windows-1252.
	StrictText bool
	// MaxText, when above 0, bounds the body's text decoded to UTF-8 (with
	// LF line breaks): a longer one fails Parse with ErrTextTooLong before
	// it is built. The SMTP front sets the provider's request limit, which
	// such a body can never fit.
	MaxText int64
}

// Default limits of ParseOptions.
const (
	DefaultMaxDepth = 20
	DefaultMaxParts = 1000
)

// utf8BOM is the byte order mark some Windows tools write before the first
// header field.
var utf8BOM = []byte("\xef\xbb\xbf")

// Parse reads an RFC 5322 message (with MIME, RFC 2045-2049).
//
// It accepts CRLF and bare LF line endings, a leading UTF-8 byte order mark,
// leading empty lines and an mbox "From " line (RFC 4155), and tolerates
// broken MIME as far as possible (see the package documentation). It fails
// only when raw has no header field at all (ErrNoHeader) or when the body
// exceeds opts (ErrTooComplex).
//
// The body is the first text/plain or text/html leaf that is not an
// attachment (Content-Disposition attachment or a filename); inside
// multipart/alternative the text/html alternative is preferred and the
// other text alternatives are dropped as duplicates (RFC 2046 §5.1.4). Every
// other leaf becomes an attachment, including the signature of a
// multipart/signed message (RFC 1847 §2.1) and an application/pkcs7-mime
// message as a whole. message/rfc822 parts are attachments too: Parse does
// not look inside them.
//
// Text is decoded to UTF-8 by the rule of decodeText, header values with
// raw 8-bit bytes as headerText reads them; with opts.StrictText, text that
// cannot be read without loss is an error (see ParseOptions).
func Parse(raw []byte, opts ParseOptions) (*Parsed, error) {
	b := bytes.TrimPrefix(raw, utf8BOM)
	b = bytes.TrimLeft(b, "\r\n")
	tree, err := ParseTree(b, opts)
	h := tree.Header
	if len(h) == 0 {
		return nil, fmt.Errorf("mimeconv: parse: %w", ErrNoHeader)
	}
	if err != nil {
		return nil, err
	}

	subject, lossErr := decodeWords(h.Get("Subject"))
	if lossErr != nil && opts.StrictText {
		return nil, in("Subject", lossErr)
	}
	p := &Parsed{
		Subject:   subject,
		MessageID: strings.ToValidUTF8(h.Get("Message-ID"), "\uFFFD"),
		SentDate:  parseDate(h.Get("Date")),
	}
	if a := Addresses(h.Get("From")); len(a) > 0 {
		p.Sender = a[0]
	}
	if a := Addresses(h.Get("Reply-To")); len(a) > 0 {
		p.ReplyTo = a[0]
	}
	for _, rf := range []struct {
		name string
		typ  directapi.RecipientType
	}{{"To", directapi.TO}, {"Cc", directapi.CC}, {"Bcc", directapi.BCC}} {
		for _, v := range h.Values(rf.name) {
			for _, a := range Addresses(v) {
				p.Recipients = append(p.Recipients, directapi.Recipient{Email: a, Type: rf.typ})
			}
		}
	}
	for _, f := range h {
		p.Headers = append(p.Headers, directapi.MessageHeader{
			Name:  f.Name,
			Value: headerText(f.Value),
		})
	}
	if opts.SkipBodies {
		return p, nil
	}
	w := &walker{p: p, maxText: opts.MaxText}
	w.entity(tree)
	if w.tooLong != nil {
		return nil, w.tooLong
	}
	if w.err != nil && opts.StrictText {
		return nil, w.err
	}
	return p, nil
}

// isFromField reports whether b starts with a From header field ("From:",
// possibly with WSP before the colon) rather than an mbox "From " line.
func isFromField(b []byte) bool {
	rest := bytes.TrimLeft(b[len("From"):], " \t")
	return len(rest) > 0 && rest[0] == ':'
}
