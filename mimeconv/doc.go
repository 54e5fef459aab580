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
//   - Parse reads a stored raw message into the fields of a MessageDetail.
//     The sandbox uses it for the Get* operations; the SMTP front uses it to
//     turn a submitted message into a Message.
//   - Addresses reads an address-list header value liberally.
//
// Parse is deliberately tolerant: stored mail and Direct test messages are
// often malformed (bare LF line endings, missing final boundaries, multipart
// bodies without a boundary, unknown charsets, raw 8-bit header values), and
// a mailbox must still be readable. It reads the header section, the
// multipart structure and the transfer encodings itself from the in-memory
// bytes instead of using go-message's streaming reader, which stops at the
// first such defect. go-message is used for everything it does without
// failing on such input: address parsing, charset conversion, encoded-word
// decoding and all of Compose.
package mimeconv
