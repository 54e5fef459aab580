package smtpbackend

import (
	"bytes"
	"errors"
	"net/mail"
	"strings"

	"github.com/directbridge/directbridge/internal/mimeconv"
	"github.com/directbridge/directbridge/upstream/directapi"
)

// This file turns a message submitted by SMTP (RFC 5321, RFC 6409) into the
// provider's Message / MessageWithHeader (messaging-rest.md, "Message",
// "MessageWithHeader"). It does no I/O: the session hands it the DATA bytes
// and the envelope, and sends what it returns.

// Sentinel errors of Convert. Each is returned inside a *ConvertError, so a
// caller matches it with errors.Is and answers the ConvertError's Reason.
var (
	// ErrBareLineEnding reports a bare CR, or a line of a lone dot next
	// to a bare LF (see lineends.go): RFC 5321 §2.3.8 allows line breaks
	// only as CRLF, and servers that read a bare LF as a line break are
	// open to SMTP smuggling: "\n.\n" ends the data for one server and
	// not for another, so a second message hidden in the first, with a
	// forged sender, would be sent on. Other bare LFs are made CRLF.
	ErrBareLineEnding = errors.New("smtpbackend: bare CR or LF in message data")

	// ErrNoFrom reports a message without a From address. RFC 5322 §3.6
	// requires a From field, and the bridge needs it to check who the
	// message claims to come from.
	ErrNoFrom = errors.New("smtpbackend: no From address")

	// ErrFromMismatch reports a From field (or a MAIL FROM) that is not the
	// authenticated Direct address, or that names more than one author.
	// The provider sends only as its user (messaging-rest.md,
	// "Authentication": message.sender equals username), and a Direct
	// message must not claim another author than the one who signs it.
	ErrFromMismatch = errors.New("smtpbackend: From is not the authenticated address")

	// ErrNoRecipients reports an envelope without recipients: the envelope
	// decides delivery (RFC 5321 §3.3), and the provider requires at least
	// one recipient (messaging-rest.md, "Message": recipients is required).
	ErrNoRecipients = errors.New("smtpbackend: no envelope recipients")

	// ErrBadHeader reports a header field the bridge would pass to the
	// provider (see Convert) whose value the provider cannot write back
	// into a message: a control character (RFC 5322 §2.2 allows none but
	// HTAB in a field body), a word too long to fit in a 998-character
	// line (RFC 5322 §2.1.1), or non-ASCII text in an address field that
	// is no address-list (RFC 2047 §5). Passing it on would make the
	// provider refuse or mangle the message after SMTP said it was fine.
	ErrBadHeader = errors.New("smtpbackend: unusable header field")
)

// ConvertError is a message that cannot be converted. Reason says why in
// plain US-ASCII words fit for the text of an SMTP reply (RFC 5321 §4.2);
// it never quotes message content (subject, body, header values or
// addresses), which may be protected health information and must not end
// up in replies or logs. (It may name a declared charset, such as
// "shift_jis", when mimeconv found the label a plain token: a label
// names an encoding, not content.) Err is the sentinel or mimeconv error behind it.
type ConvertError struct {
	Reason string
	Err    error
}

// Error returns the Reason, prefixed with the package, and the underlying
// error, neither of which contains message content.
func (e *ConvertError) Error() string {
	if e.Err == nil {
		return "smtpbackend: " + e.Reason
	}
	return "smtpbackend: " + e.Reason + ": " + e.Err.Error()
}

// Unwrap returns Err, so errors.Is finds the sentinels of this package and
// of mimeconv (mimeconv.ErrTooComplex, mimeconv.ErrNoHeader).
func (e *ConvertError) Unwrap() error { return e.Err }

// Envelope is what SMTP said about a message, apart from its content
// (RFC 5321 §2.3.1: the envelope is the originator address and the
// recipient addresses). The envelope, not the header, decides where a
// message goes.
type Envelope struct {
	From       string   // MAIL FROM address ("" for the null sender)
	Recipients []string // RCPT TO addresses, in order
}

// Submission is a converted message ready for the provider.
type Submission struct {
	// Message is the provider's MessageWithHeader; Headers is empty when
	// no header needs to travel (see UseHeaders).
	Message directapi.MessageWithHeader
	// MessageID is the Message-ID field value as submitted, angle brackets
	// included (RFC 5322 §3.6.4), or "" if the message has none. The
	// bridge records it next to the provider's smtpId so that the IMAP
	// front can recognise its own sent messages.
	MessageID string
}

// UseHeaders reports whether the message needs SendWithHeader: it carries
// header fields the provider cannot express otherwise (threading, read
// receipts, Reply-To, X-* extensions). Without them plain Send is enough
// and the provider's own header is the whole header.
func (s *Submission) UseHeaders() bool { return len(s.Message.Headers) > 0 }

// Limits bound the conversion work on hostile input: the MIME nesting depth
// and the number of body parts (RFC 2046 §5.1 puts no limit on either).
// Zero (or a negative value) means the mimeconv default
// (mimeconv.DefaultMaxDepth, mimeconv.DefaultMaxParts).
type Limits struct {
	MaxDepth, MaxParts int
	// MaxText bounds the body's text decoded to UTF-8: a longer one could
	// never fit a send request, and is refused (552 5.3.4) before it is
	// built (mimeconv.ParseOptions.MaxText). The server sets it to
	// Config.MaxRequestBytes; 0 means no bound.
	MaxText int64
	// Flatten sends messages the provider's model cannot carry (receipts,
	// signed or encrypted messages; carriable.go) flattened instead of
	// refusing them.
	Flatten bool
}

// passHeaders are the fields, by lower-case name, that travel through
// SendWithHeader because the provider's Message has no place for them:
// the message identity and threading fields (RFC 5322 §3.6.4), Reply-To
// (RFC 5322 §3.6.2) and the read-receipt request of RFC 8098 §2.1-2.2, which
// Direct uses for reliable delivery (Direct Implementation Guide for
// Delivery Notification). The value tells whether RFC 5322 §3.6 allows the
// field only once; only the first one is then passed.
var passHeaders = map[string]bool{
	"message-id":                       true,
	"in-reply-to":                      true,
	"references":                       true,
	"reply-to":                         true,
	"disposition-notification-to":      false,
	"disposition-notification-options": false,
}

// Every other field stays behind. From, To, Cc, Subject and the body fields
// (MIME-Version, Content-*) are carried by the Message itself, and Date,
// Received, Return-Path and Sender are the provider's to write (RFC 5321
// §4.4, RFC 5322 §3.6.2). Bcc in particular never travels: its whole point
// is that the other recipients do not see it (RFC 5322 §3.6.3).

// Convert turns a submitted RFC 5322 message into the provider's Message.
// sender is the address the message must come from: the authenticated
// Direct address, or the T-user's directAddr.
//
// The rules, in order:
//   - bare LFs become CRLF (RFC 5321 §2.3.8; lineends.go); a bare CR or a
//     lone-dot line next to a bare LF fails with ErrBareLineEnding. The
//     pass over the bytes runs before parsing. The session must therefore
//     hand over the DATA bytes unchanged (dot unstuffing apart) and must
//     not offer BINARYMIME (RFC 3030), whose data may hold bare CR and LF.
//   - raw is parsed with mimeconv.Parse within lim; a message too deeply
//     nested or with too many parts fails with an error that matches
//     mimeconv.ErrTooComplex, input without a header mimeconv.ErrNoHeader.
//   - the From field must hold exactly one address, equal to sender
//     ignoring case (ErrNoFrom, ErrFromMismatch); so must env.From unless
//     it is the null sender.
//   - Message.Sender is sender in lower case (the provider's username).
//   - Recipients come from the envelope only (RFC 5321 §3.3; see
//     recipients), typed TO, CC or BCC by the To and Cc fields.
//   - Subject, Body, HTMLBody and AttachmentList are those of mimeconv:
//     decoded to UTF-8, the HTML alternative of multipart/alternative,
//     every other leaf (inline images, XDM zips, C-CDA documents, attached
//     messages) an attachment with its bytes unchanged.
//   - text is never changed in silence (mimeconv.ParseOptions.StrictText):
//     text labelled UTF-8 or us-ascii, or not labelled, whose bytes are
//     not UTF-8 is read as Windows-1252, as mail software does, so a
//     mislabelled "5 \xb5g" arrives as "5 µg"; a Subject, body or
//     attachment name that cannot be read without loss (bytes not valid
//     in the charset it declares, or a charset the bridge cannot decode)
//     fails with an error that matches mimeconv.ErrUndecodableText,
//     rather than going out with U+FFFD in place of what the sender wrote.
//   - Headers are the pass-through fields (see passHeaders and X-* fields),
//     values as written but unfolded.
func Convert(raw []byte, env Envelope, sender string, lim Limits) (*Submission, error) {
	raw, err := normaliseLineEnds(raw)
	switch {
	case errors.Is(err, errSmuggling):
		return nil, &ConvertError{
			Reason: "message data holds a line of a lone dot next to a bare LF, which other servers would take for the end of the data (SMTP smuggling); lines must end with CRLF (RFC 5321 section 2.3.8)",
			Err:    ErrBareLineEnding,
		}
	case err != nil:
		return nil, &ConvertError{
			Reason: "message data contains a bare CR; lines must end with CRLF (RFC 5321 section 2.3.8)",
			Err:    ErrBareLineEnding,
		}
	}
	if !lim.Flatten {
		if why := notCarriable(raw, lim); why != "" {
			return nil, &ConvertError{Reason: "Message cannot be sent unchanged: " + why, Err: ErrNotCarriable}
		}
	}
	p, err := mimeconv.Parse(raw, mimeconv.ParseOptions{MaxDepth: lim.MaxDepth, MaxParts: lim.MaxParts, StrictText: true, MaxText: lim.MaxText})
	switch {
	case errors.Is(err, mimeconv.ErrTextTooLong):
		return nil, err // dataReply: 552 5.3.4, too big once encoded
	case errors.Is(err, mimeconv.ErrUndecodableText):
		return nil, &ConvertError{Reason: undecodableReason(err), Err: err}
	case errors.Is(err, mimeconv.ErrTooComplex):
		return nil, &ConvertError{Reason: "message structure is too complex (MIME nesting or number of parts over the limit)", Err: err}
	case errors.Is(err, mimeconv.ErrNoHeader):
		return nil, &ConvertError{Reason: "message has no header section (RFC 5322 section 2.1)", Err: err}
	case err != nil:
		return nil, &ConvertError{Reason: "message cannot be parsed", Err: err}
	}

	if err := checkFromField(p, env, sender); err != nil {
		return nil, err
	}
	rcpts, err := envelopeRecipients(p, env)
	if err != nil {
		return nil, err
	}
	headers, err := passThroughHeaders(p.Headers)
	if err != nil {
		return nil, err
	}
	headers = append(headers, fromWithName(p.Headers)...)
	return &Submission{
		Message: directapi.MessageWithHeader{
			Message: directapi.Message{
				Sender:         strings.ToLower(strings.TrimSpace(sender)),
				Subject:        p.Subject,
				Body:           p.Body,
				HTMLBody:       p.HTMLBody,
				Recipients:     rcpts,
				AttachmentList: p.Attachments,
			},
			Headers: headers,
		},
		MessageID: p.MessageID,
	}, nil
}

// undecodableReason is the Reason for text Convert refuses because it
// cannot be decoded without loss: where it is and why, and the declared
// charset label when mimeconv found it a plain token (a label names an
// encoding, it is no message content), but nothing of the text itself.
func undecodableReason(err error) string {
	where, label, unknown := "the text", "", false
	var ce *mimeconv.CharsetError
	if errors.As(err, &ce) {
		switch ce.Where {
		case "body":
			where = "the body text"
		case "Subject":
			where = "the Subject"
		case "attachment name":
			where = "an attachment name"
		}
		if ce.Charset != "" {
			label = " (" + ce.Charset + ")"
		}
		unknown = ce.Unknown
	}
	if unknown {
		return where + " is in a charset" + label + " the bridge cannot decode, so it cannot be sent without changing it; send it as UTF-8"
	}
	return where + " has bytes that are not valid in its declared charset" + label + ", so it cannot be sent without changing it; declare the charset it is written in, or send it as UTF-8"
}

// hasBareLineEnding reports whether b holds a LF not preceded by CR or a CR
// not followed by LF. Every LF is checked for its CR; when all LFs pass,
// the CRs are all paired exactly when there are as many CRs as LFs. Both
// loops run on the vectorised bytes.IndexByte and bytes.Count.
func hasBareLineEnding(b []byte) bool {
	lf := 0
	for off := 0; ; {
		i := bytes.IndexByte(b[off:], '\n')
		if i < 0 {
			break
		}
		i += off
		if i == 0 || b[i-1] != '\r' {
			return true
		}
		lf++
		off = i + 1
	}
	return bytes.Count(b, []byte{'\r'}) != lf
}

// checkFromField enforces that the message comes from sender: the From field
// (RFC 5322 §3.6.2) must name sender alone, and a non-null MAIL FROM must
// be sender too (the session checks it first, with 553 5.7.1; this is the
// same rule again so that Convert is safe on its own). Addresses compare
// ignoring case: Direct addresses are provisioned in lower case and the
// provider treats them so.
//
// Only the addr-spec counts: a display name that looks like an address,
// as in `"alice@direct.example" <mallory@evil.example>`, is just a name.
// Several From fields or several addresses in one (a list with a separate
// Sender, RFC 5322 §3.6.2) are refused, since the provider writes a single
// author and a second one would be silently dropped.
func checkFromField(p *mimeconv.Parsed, env Envelope, sender string) error {
	var fields, addrs int
	for _, h := range p.Headers {
		if strings.EqualFold(h.Name, "From") {
			fields++
			addrs += len(mimeconv.Addresses(h.Value))
		}
	}
	if fields == 0 {
		return &ConvertError{Reason: "message has no From header field (RFC 5322 section 3.6.2)", Err: ErrNoFrom}
	}
	if addrs == 0 || p.Sender == "" {
		return &ConvertError{Reason: "the From header field holds no address (RFC 5322 section 3.6.2)", Err: ErrNoFrom}
	}
	if fields > 1 || addrs > 1 {
		return &ConvertError{Reason: "the From header field must name only the authenticated address", Err: ErrFromMismatch}
	}
	want := strings.TrimSpace(sender)
	if want == "" || !strings.EqualFold(p.Sender, want) {
		return &ConvertError{Reason: "the From header field address is not the authenticated address", Err: ErrFromMismatch}
	}
	if from := strings.TrimSpace(env.From); from != "" && !strings.EqualFold(from, want) {
		return &ConvertError{Reason: "the MAIL FROM address is not the authenticated address", Err: ErrFromMismatch}
	}
	return nil
}

// envelopeRecipients returns the provider's recipient list for env.
//
// The envelope is the truth for delivery (RFC 5321 §3.3): each envelope
// recipient is listed once (case-insensitive duplicates dropped, first
// spelling and order kept; RFC 5321 §2.4 asks to preserve the case of
// local-parts), typed TO if the To field names it, else CC if the Cc field
// does, else BCC. A BCC recipient is one the header does not show, which is
// exactly what Bcc means (RFC 5322 §3.6.3), whether or not the submitted
// message had a Bcc field.
//
// Addresses that the To or Cc field names but the envelope does not are
// left out on purpose: the provider delivers to every listed recipient,
// so listing them would deliver copies SMTP never asked for (a client that
// sends one copy per recipient, or that leaves a recipient out on purpose,
// would otherwise cause duplicates or unwanted deliveries). The visible To
// and Cc of the delivered message are then only the envelope recipients,
// which is the price of the provider's model.
func envelopeRecipients(p *mimeconv.Parsed, env Envelope) ([]directapi.Recipient, error) {
	to := map[string]bool{}
	cc := map[string]bool{}
	for _, r := range p.Recipients {
		switch r.Type {
		case directapi.TO:
			to[strings.ToLower(r.Email)] = true
		case directapi.CC:
			cc[strings.ToLower(r.Email)] = true
		}
	}
	var out []directapi.Recipient
	seen := map[string]bool{}
	for _, a := range env.Recipients {
		a = strings.TrimSpace(a)
		if len(a) >= 2 && a[0] == '<' && a[len(a)-1] == '>' {
			a = strings.TrimSpace(a[1 : len(a)-1])
		}
		key := strings.ToLower(a)
		if a == "" || seen[key] {
			continue // "" cannot be a recipient (RFC 5321 §4.1.1.3)
		}
		seen[key] = true
		typ := directapi.BCC
		switch {
		case to[key]:
			typ = directapi.TO
		case cc[key]:
			typ = directapi.CC
		}
		out = append(out, directapi.Recipient{Email: a, Type: typ})
	}
	if len(out) == 0 {
		return nil, &ConvertError{Reason: "message has no envelope recipients (RCPT TO)", Err: ErrNoRecipients}
	}
	return out, nil
}

// rfc5322MaxLine is the longest line RFC 5322 §2.1.1 allows, without CRLF.
const rfc5322MaxLine = 998

// passThroughHeaders returns the header fields that travel through SendWithHeader,
// in message order, names and unfolded values as written: the fields of
// passHeaders and every field whose name starts with "X-" (extension
// fields, RFC 822 §4.7.5, e.g. X-DIRECT-FINAL-DESTINATION-DELIVERY of the
// Direct delivery notification guide). A value with control characters or
// with a word that cannot be folded into a 998-character line fails with
// ErrBadHeader, because the provider could not write it into a valid
// message and would reject or damage it.
func passThroughHeaders(hs []directapi.MessageHeader) ([]directapi.MessageHeader, error) {
	var out []directapi.MessageHeader
	seen := map[string]bool{}
	for _, h := range hs {
		name := strings.ToLower(h.Name)
		once, listed := passHeaders[name]
		if !listed && !strings.HasPrefix(name, "x-") {
			continue
		}
		if once && seen[name] {
			continue
		}
		seen[name] = true
		if !foldableField(h.Name, h.Value) || !addressWritable(name, h.Value) {
			return nil, &ConvertError{
				Reason: "a header field to pass on has control characters or an over-long word (RFC 5322 sections 2.1.1 and 2.2)",
				Err:    ErrBadHeader,
			}
		}
		out = append(out, directapi.MessageHeader{Name: h.Name, Value: h.Value})
	}
	return out, nil
}

// fromWithName returns the From field, to pass on through SendWithHeader,
// when it carries a display name ("Alice Example <alice@…>"): the
// provider's Message has only the sender's address, and a provider that
// accepts a From header writes the name (the sandbox does; what a real
// provider does is not shown). checkFromField made sure its address is
// the sender's. A From without a name is not passed: the message then
// needs no headers and may go out with plain Send.
func fromWithName(hs []directapi.MessageHeader) []directapi.MessageHeader {
	for _, h := range hs {
		if !strings.EqualFold(h.Name, "From") {
			continue
		}
		a, err := mail.ParseAddress(h.Value)
		if err != nil || strings.TrimSpace(a.Name) == "" || !foldableField(h.Name, h.Value) {
			return nil
		}
		return []directapi.MessageHeader{{Name: "From", Value: strings.TrimSpace(h.Value)}}
	}
	return nil
}

// addressWritable reports whether a Reply-To or Disposition-Notification-To
// value (an address-list, RFC 5322 §3.6.2, RFC 8098 §2.1) can be written
// back by the provider (mimeconv.AddressFieldWritable: non-ASCII text may
// appear there only in display names, RFC 2047 §5). Other fields are
// unstructured as far as the bridge knows and can always be encoded whole.
func addressWritable(lowerName, value string) bool {
	if lowerName != "reply-to" && lowerName != "disposition-notification-to" {
		return true
	}
	return mimeconv.AddressFieldWritable(value)
}

// foldableField reports whether the field name: value can be written as a valid
// RFC 5322 field: no control character but HTAB (§2.2), and every word,
// after which the field can be folded (§2.2.3), short enough for a line of
// rfc5322MaxLine characters (§2.1.1) even on the first line after the name.
func foldableField(name, value string) bool {
	for i := 0; i < len(value); i++ {
		if c := value[i]; c < ' ' && c != '\t' || c == 0x7f {
			return false
		}
	}
	limit := rfc5322MaxLine - len(name) - 2 // "Name: "
	for _, w := range strings.FieldsFunc(value, func(r rune) bool { return r == ' ' || r == '\t' }) {
		if len(w) > limit {
			return false
		}
	}
	return true
}
