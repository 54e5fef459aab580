// Package mimeconv is the one place where directbridge converts between
// RFC 5322 / MIME messages and the provider's JSON Message
// (messaging-rest.md, "Message" and "MessageDetail").
//
// Both directions live here so that what the bridge sends and what it reads
// back agree byte for byte:
//
//   - Compose turns a directapi.Message (plus custom headers and forwarded
//     messages) into the RFC 5322 message the provider sends. The local
//     sandbox provider uses it for Send, SendWithHeader and Forward.
//   - ParseTree parses a message once into a tree of Parts that records
//     byte offsets into the raw message: the IMAP front answers
//     BODYSTRUCTURE, ENVELOPE, BODY[section], BINARY and SEARCH from it,
//     so sections are slices of the stored bytes, never re-serialised,
//     and every reader agrees on the structure and the decoded content.
//   - Parse reads a stored raw message into the fields of a MessageDetail,
//     from the tree. The sandbox uses it for the Get* operations; the SMTP
//     front uses it to turn a submitted message into a Message.
//   - ParseAddressList is the one address parser (groups, source routes,
//     quoting, comments, obsolete syntax); Addresses gives the addr-specs.
//
// The tree is deliberately tolerant: stored mail and Direct test messages are
// often malformed (bare LF line endings, missing final boundaries, multipart
// bodies without a boundary, unknown charsets, raw 8-bit header values), and
// a mailbox must still be readable. It reads the header section, the
// multipart structure and the transfer encodings itself from the in-memory
// bytes instead of using go-message's streaming reader, which stops at the
// first such defect, and it never panics, never loops and bounds its depth
// and number of parts (FuzzTree checks this). go-message is used for what
// it does without failing on such input: the charset tables and all of
// Compose. Which charset text is read in, and what happens to text that
// cannot be read without loss, is decided in one place (charset.go): text
// is never changed in silence, and Parse with StrictText refuses it.
package mimeconv
