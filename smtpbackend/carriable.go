package smtpbackend

import (
	"errors"

	"github.com/directbridge/directbridge/internal/mimeconv"
)

// The provider's Message model is a body (text or HTML), a list of
// attachments and a few pass-through headers. Some messages cannot be
// carried by it without being changed into something else:
//
//   - a receipt (MDN, RFC 8098) or a bounce (DSN, RFC 3464) is a
//     multipart/report whose machine-readable part (message/disposition-
//     notification, message/delivery-status) must keep its type. One of
//     the usual shape (text, report, returned headers or message) is
//     carried: the text as the body, the other two as attachments of
//     their own content type, from which the provider composes the
//     multipart/report again (the sandbox does; what a real provider
//     does with such attachments is not shown, and one that composes
//     multipart/mixed delivers the report as a typed attachment). Any
//     other report shape, or a report part outside one, is refused;
//   - a signed (multipart/signed, RFC 8551 §3.5) or encrypted
//     (application/pkcs7-mime, multipart/encrypted) message would lose
//     what its signature covers or arrive as an unreadable attachment.
//
// Such a message is refused with 554 5.6.3 ("conversion required but not
// supported", RFC 3463 §3.7) and a text that says why and what to do,
// rather than being sent changed. Direct signs and encrypts at the HISP:
// clients submit plain messages. DIRECTBRIDGE_SMTP_FLATTEN=true makes the
// bridge send them flattened instead (each part an attachment), for
// operators who prefer that.

// ErrNotCarriable reports a message the provider's model cannot carry.
var ErrNotCarriable = errors.New("smtpbackend: message structure cannot be carried by the provider")

// carriableReport reports a multipart/report that the provider's model
// carries and the sandbox (mimeconv.Compose) rebuilds: a human-readable
// text (text/plain, text/html, or a multipart/alternative of them), one
// message/disposition-notification or message/delivery-status part, and
// at most the returned headers (text/rfc822-headers) or message
// (message/rfc822) after it, as RFC 6522 §3 orders them.
func carriableReport(p *mimeconv.Part) bool {
	c := p.Children
	if len(c) < 2 || len(c) > 3 {
		return false
	}
	switch c[0].Type + "/" + c[0].Subtype {
	case "text/plain", "text/html":
	case "multipart/alternative":
		for _, a := range c[0].Children {
			if a.Type != "text" || a.Children != nil {
				return false
			}
		}
	default:
		return false
	}
	if r := c[1].Type + "/" + c[1].Subtype; r != "message/disposition-notification" && r != "message/delivery-status" {
		return false
	}
	if len(c) == 3 {
		if r := c[2].Type + "/" + c[2].Subtype; r != "text/rfc822-headers" && r != "message/rfc822" {
			return false
		}
	}
	return true
}

// notCarriable returns why raw cannot be carried, or "".
func notCarriable(raw []byte, lim Limits) string {
	root, _ := mimeconv.ParseTree(raw, mimeconv.ParseOptions{MaxDepth: lim.MaxDepth, MaxParts: lim.MaxParts})
	if root == nil {
		return ""
	}
	var why string
	var walk func(p *mimeconv.Part)
	walk = func(p *mimeconv.Part) {
		if why != "" || p == nil {
			return
		}
		switch p.Type + "/" + p.Subtype {
		case "multipart/report":
			if !carriableReport(p) {
				why = "this receipt or bounce (multipart/report) has a structure the provider's message model cannot carry (it carries a text, one message/disposition-notification or message/delivery-status part, and the headers or message it reports on)"
				return
			}
			return // its parts travel as the body and two typed attachments
		case "message/disposition-notification", "message/delivery-status",
			"message/global-disposition-notification", "message/global-delivery-status":
			why = "a report part outside a multipart/report (or of the global kind, RFC 6533) would arrive as a plain attachment; the provider's message model cannot carry it as a receipt or bounce"
		case "multipart/signed", "application/pkcs7-signature", "application/x-pkcs7-signature":
			why = "a signed message (S/MIME) would arrive with a signature that no longer covers its content; submit it unsigned: the Direct provider (HISP) signs and encrypts"
		case "multipart/encrypted", "application/pkcs7-mime", "application/x-pkcs7-mime":
			why = "an encrypted message (S/MIME) would arrive as an unreadable attachment; submit it unencrypted: the Direct provider (HISP) signs and encrypts"
		}
		for _, c := range p.Children {
			walk(c)
		}
	}
	walk(root)
	return why
}
