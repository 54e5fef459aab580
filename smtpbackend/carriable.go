package smtpbackend

import (
	"errors"

	"github.com/directbridge/directbridge/mimeconv"
)

// The provider's Message model is a body (text or HTML), a list of
// attachments and a few pass-through headers. Some messages cannot be
// carried by it without being changed into something else:
//
//   - a receipt (MDN, RFC 8098) or a bounce (DSN, RFC 3464) is a
//     multipart/report whose machine-readable part (message/disposition-
//     notification, message/delivery-status) would become an opaque
//     attachment: no agent would recognise it as a receipt any more;
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
		case "multipart/report", "message/disposition-notification", "message/delivery-status",
			"message/global-disposition-notification", "message/global-delivery-status":
			why = "a receipt or bounce (multipart/report) would arrive as a plain message with an attachment; the provider's message model cannot carry its report part"
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
