package mimeconv

import "errors"

// Sentinel errors. Every error returned by this package wraps one of them, so
// callers can map them to provider result codes with errors.Is.
var (
	// ErrInvalidAttachment reports an attachment whose content is not valid
	// base64 (messaging-rest.md, "Attachment": content is Base64 encoded data).
	ErrInvalidAttachment = errors.New("mimeconv: invalid attachment")

	// ErrInvalidHeader reports a custom header whose name is not an RFC 5322
	// field-name (RFC 5322 §2.2, §3.6.8) or whose value contains CR, LF or
	// another control character, which would allow header injection.
	ErrInvalidHeader = errors.New("mimeconv: invalid custom header")

	// ErrInvalidAddress reports a sender or recipient that is not an RFC 5322
	// address (RFC 5322 §3.4), or a recipient type other than TO, CC or BCC.
	ErrInvalidAddress = errors.New("mimeconv: invalid address")

	// ErrInvalidOptions reports missing or malformed ComposeOptions (the
	// Message-ID and Date that RFC 5322 §3.6 requires).
	ErrInvalidOptions = errors.New("mimeconv: invalid compose options")

	// ErrNoHeader reports input that has no parsable header field at all, so
	// it cannot be an RFC 5322 message.
	ErrNoHeader = errors.New("mimeconv: no header fields")

	// ErrTooComplex reports a message whose multipart nesting or number of
	// parts exceeds ParseOptions, to bound the work spent on hostile input.
	ErrTooComplex = errors.New("mimeconv: message too complex")

	// ErrUndecodableText reports text (a body, a Subject, an attachment
	// name) whose bytes cannot be read as characters without loss: bytes
	// not valid in the charset it declares, or a charset the bridge cannot
	// decode. It comes inside a *CharsetError, which says which; see
	// decodeText for the rule and ParseOptions.StrictText for who refuses.
	ErrUndecodableText = errors.New("mimeconv: text cannot be decoded without loss")

	// ErrTextTooLong reports a body whose text, decoded to UTF-8, would
	// be longer than ParseOptions.MaxText: found before that text is
	// built, so that a message whose text grows when decoded (Windows-
	// 1252 bytes become two or three of UTF-8) costs no more memory for
	// being refused.
	ErrTextTooLong = errors.New("mimeconv: text too long once decoded")
)
