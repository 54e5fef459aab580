package mimeconv

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"mime"
	"mime/quotedprintable"
	"net/mail"
	"strings"
	"time"

	"github.com/directbridge/directbridge/upstream/directapi"
	"github.com/emersion/go-message"
	"github.com/emersion/go-message/textproto"
)

// ComposeOptions control Compose: the fields the provider, not the
// Message, decides.
type ComposeOptions struct {
	// FromName is the display name written before the sender's address
	// in From (RFC 5322 §3.4), RFC 2047 encoded when not ASCII; empty
	// writes the address alone.
	FromName string
	// MessageID is the message identifier without angle brackets, e.g.
	// "abc@direct.example" (RFC 5322 §3.6.4 msg-id); required. It is the
	// smtpId the provider returns.
	MessageID string
	// Date is the origination date written to the Date field (RFC 5322
	// §3.6.1, which requires it); required.
	Date time.Time
	// Headers are the custom headers of SendWithHeader. Names must be
	// RFC 5322 field-names and values must not contain CR, LF or other
	// control characters (ErrInvalidHeader). Fields Compose writes itself
	// (From, To, Cc, Bcc, Date, Message-ID, MIME-Version, Content-Type,
	// Content-Transfer-Encoding, Content-Disposition, Subject, Sender,
	// Return-Path) are silently skipped. Non-ASCII values are RFC 2047
	// encoded.
	Headers []directapi.MessageHeader
	// Attached are whole RFC 5322 messages attached as message/rfc822
	// parts, as Forward does with several UIDs.
	Attached [][]byte
}

// rfc5322Date is the date-time layout of RFC 5322 §3.3.
const rfc5322Date = "Mon, 02 Jan 2006 15:04:05 -0700"

// Compose builds the RFC 5322 message the provider sends for msg, with
// CRLF line endings.
//
// From is msg.Sender; To and Cc list the recipients of type TO and CC
// (types compared case-insensitively). BCC recipients are validated but
// never written to any field: RFC 5322 §3.6.3 describes removing the Bcc
// field from the copies sent, and Direct recipients must not learn of
// them. The Subject is RFC 2047 encoded when it is not plain ASCII, so
// that Parse gives it back exactly.
//
// The body is text/plain or, with msg.HTMLBody, text/html, in UTF-8 and
// quoted-printable, its line breaks sent as CRLF. With attachments or
// opts.Attached the message is multipart/mixed (RFC 2046 §5.1.3): the body
// first, then each attachment base64 encoded with its content type
// (application/octet-stream when empty or unparsable) and its file name
// (RFC 2231 encoded when not ASCII, in both Content-Disposition filename
// and Content-Type name), then each attached message. Messages, whether
// from opts.Attached or an attachment of type message/rfc822, are sent as
// message/rfc822 in 7bit, 8bit or binary, never base64 (RFC 2046 §5.2.1),
// with CRLF line endings, so a message stored with bare LF comes back with
// CRLF. The parts of a receipt or bounce (message/disposition-
// notification, message/delivery-status, text/rfc822-headers and their
// global forms) keep their type, inline, in 7bit or 8bit; when the
// attachments are one report and at most the headers or message it is
// about, the message is multipart/report (RFC 6522) instead of mixed, so
// that it arrives as the receipt or bounce it was. Attachments of other
// multipart/* or message/* types, which forbid base64 too, are sent as
// application/octet-stream.
//
// Errors wrap ErrInvalidOptions, ErrInvalidAddress, ErrInvalidHeader or
// ErrInvalidAttachment.
func Compose(msg directapi.Message, opts ComposeOptions) ([]byte, error) {
	top, err := topFields(msg, opts)
	if err != nil {
		return nil, err
	}
	files, err := attachmentParts(msg.AttachmentList)
	if err != nil {
		return nil, err
	}
	for _, raw := range opts.Attached {
		files = append(files, messagePart(raw, ""))
	}

	bodyType := "text/plain"
	if msg.HTMLBody {
		bodyType = "text/html"
	}
	// Line breaks become CRLF before quoted-printable encoding, as RFC 2045
	// §6.7 wants them in canonical form. Doing it here also avoids a quirk
	// of mime/quotedprintable.Writer, which drops the LF of a CR, encoded
	// octets, LF sequence.
	body := toCRLF([]byte(strings.ToValidUTF8(msg.Body, "\uFFFD")))
	bodyFields := []field{
		{"Content-Type", mime.FormatMediaType(bodyType, map[string]string{"charset": "utf-8"})},
		{"Content-Transfer-Encoding", "quoted-printable"},
	}

	var buf bytes.Buffer
	if len(files) == 0 {
		if err := writeEntity(&buf, append(top, bodyFields...), body); err != nil {
			return nil, err
		}
		if !bytes.HasSuffix(buf.Bytes(), []byte("\n")) {
			// A soft line break (RFC 2045 §6.7 rule 5) ends the message
			// with CRLF without adding a line to the body.
			buf.WriteString("=\r\n")
		}
		return buf.Bytes(), nil
	}

	boundary, err := newBoundary()
	if err != nil {
		return nil, err
	}
	mixed := map[string]string{"boundary": boundary}
	if rt := reportType(files); rt != "" {
		// A receipt or bounce: multipart/report (RFC 6522), the text
		// first, then the report, then the headers or message it is
		// about.
		mixed["report-type"] = rt
		top = append(top, field{"Content-Type", mime.FormatMediaType("multipart/report", mixed)})
	} else {
		top = append(top, field{"Content-Type", mime.FormatMediaType("multipart/mixed", mixed)})
	}
	h, err := buildHeader(top)
	if err != nil {
		return nil, err
	}
	// The parts are written with go-message's textproto, not its
	// message.Writer, which refuses any part whose charset is not UTF-8
	// or US-ASCII: a text attachment's bytes are sent as they are, in the
	// charset its contentType names (an ISO-8859-1 lab report).
	if err := textproto.WriteHeader(&buf, h); err != nil {
		return nil, fmt.Errorf("mimeconv: compose: %w", err)
	}
	mw := textproto.NewMultipartWriter(&buf)
	if err := mw.SetBoundary(boundary); err != nil {
		return nil, fmt.Errorf("mimeconv: compose: %w", err)
	}
	if err := writePart(mw, bodyFields, body); err != nil {
		return nil, err
	}
	for _, f := range files {
		if err := writePart(mw, f.fields, f.data); err != nil {
			return nil, err
		}
	}
	if err := mw.Close(); err != nil {
		return nil, fmt.Errorf("mimeconv: compose: %w", err)
	}
	return buf.Bytes(), nil
}

// reportType is the report-type of a message whose attachments are one
// report part (message/disposition-notification or message/delivery-
// status) followed by at most one part it may carry (the returned
// headers or message, RFC 6522 §3); "" for any other message, which is
// then multipart/mixed (report parts keep their type inside it).
func reportType(files []filePart) string {
	if len(files) == 0 || len(files) > 2 || files[0].report == "" || len(files) == 2 && !files[1].reportMate {
		return ""
	}
	return files[0].report
}

// topFields validates msg and opts and returns the message's own header
// fields, in the order they are written, before the MIME fields.
func topFields(msg directapi.Message, opts ComposeOptions) ([]field, error) {
	if !validMsgID(opts.MessageID) {
		return nil, fmt.Errorf("mimeconv: compose: MessageID %q is not id-left@id-right without brackets: %w", opts.MessageID, ErrInvalidOptions)
	}
	if opts.Date.IsZero() {
		return nil, fmt.Errorf("mimeconv: compose: Date is required: %w", ErrInvalidOptions)
	}
	from, err := mail.ParseAddress(msg.Sender)
	if err != nil {
		return nil, fmt.Errorf("mimeconv: compose: sender %q: %v: %w", msg.Sender, err, ErrInvalidAddress)
	}
	if name := strings.TrimSpace(opts.FromName); name != "" && !strings.ContainsAny(name, "\r\n") {
		from.Name = name
	}
	var to, cc []*mail.Address
	for i, r := range msg.Recipients {
		a, err := mail.ParseAddress(r.Email)
		if err != nil {
			return nil, fmt.Errorf("mimeconv: compose: recipient %d %q: %v: %w", i, r.Email, err, ErrInvalidAddress)
		}
		switch directapi.RecipientType(strings.ToUpper(strings.TrimSpace(string(r.Type)))) {
		case directapi.TO:
			to = append(to, a)
		case directapi.CC:
			cc = append(cc, a)
		case directapi.BCC:
			// Never written: see Compose.
		default:
			return nil, fmt.Errorf("mimeconv: compose: recipient %d: type %q is not TO, CC or BCC: %w", i, r.Type, ErrInvalidAddress)
		}
	}
	custom, err := customFields(opts.Headers)
	if err != nil {
		return nil, err
	}

	fs := []field{{"From", formatAddresses([]*mail.Address{from})}}
	if len(to) > 0 {
		fs = append(fs, field{"To", formatAddresses(to)})
	}
	if len(cc) > 0 {
		fs = append(fs, field{"Cc", formatAddresses(cc)})
	}
	if subject := strings.ToValidUTF8(msg.Subject, "\uFFFD"); subject != "" {
		fs = append(fs, field{"Subject", encodeText(subject)})
	}
	fs = append(fs,
		field{"Date", opts.Date.Format(rfc5322Date)},
		field{"Message-ID", "<" + opts.MessageID + ">"},
	)
	fs = append(fs, custom...)
	return append(fs, field{"MIME-Version", "1.0"}), nil
}

// validMsgID reports whether id can go between the angle brackets of an
// RFC 5322 §3.6.4 msg-id: printable ASCII without brackets, quotes or
// backslashes, with an "@" separating two non-empty halves.
// ValidMessageID reports whether id, without angle brackets, is a msg-id
// Compose accepts: id-left@id-right of visible ASCII (RFC 5322 §3.6.4,
// without the obsolete and quoted forms), at most 250 bytes.
func ValidMessageID(id string) bool { return len(id) <= 250 && validMsgID(id) }

func validMsgID(id string) bool {
	left, right, ok := strings.Cut(id, "@")
	if !ok || left == "" || right == "" || strings.Contains(right, "@") {
		return false
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; c < 33 || c > 126 || strings.IndexByte(`<>"\`, c) >= 0 {
			return false
		}
	}
	return true
}

// newBoundary returns a random multipart boundary (RFC 2046 §5.1.1) that is
// very unlikely to occur in any part.
func newBoundary() (string, error) {
	var b [24]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("mimeconv: compose: boundary: %w", err)
	}
	return "=_db_" + hex.EncodeToString(b[:]), nil
}

// writeEntity writes a single-part entity: header fields, then data in the
// transfer encoding named by its Content-Transfer-Encoding field.
func writeEntity(buf *bytes.Buffer, fs []field, data []byte) error {
	h, err := buildHeader(fs)
	if err != nil {
		return err
	}
	w, err := message.CreateWriter(buf, message.Header{Header: h})
	if err != nil {
		return fmt.Errorf("mimeconv: compose: %w", err)
	}
	if _, err := w.Write(data); err != nil {
		return fmt.Errorf("mimeconv: compose: %w", err)
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("mimeconv: compose: %w", err)
	}
	return nil
}

// writePart writes one part of a multipart entity, its data in the
// transfer encoding its Content-Transfer-Encoding field names:
// quoted-printable or base64 (lines of 76, RFC 2045 §6.8), or as it is
// (7bit and 8bit parts are built with CRLF lines of at most 998 octets,
// binary ones are what they are).
func writePart(mw *textproto.MultipartWriter, fs []field, data []byte) error {
	h, err := buildHeader(fs)
	if err != nil {
		return err
	}
	pw, err := mw.CreatePart(h)
	if err != nil {
		return fmt.Errorf("mimeconv: compose: %w", err)
	}
	switch cte := strings.ToLower(h.Get("Content-Transfer-Encoding")); cte {
	case "quoted-printable":
		qw := quotedprintable.NewWriter(pw)
		if _, err := qw.Write(data); err != nil {
			return fmt.Errorf("mimeconv: compose: %w", err)
		}
		err = qw.Close()
	case "base64":
		_, err = pw.Write(base64Lines(data))
	case "7bit", "8bit", "binary", "":
		_, err = pw.Write(data)
	default:
		err = fmt.Errorf("unhandled transfer encoding %q", cte)
	}
	if err != nil {
		return fmt.Errorf("mimeconv: compose: %w", err)
	}
	return nil
}

// base64Lines is data in base64 with a CRLF after every 76 characters
// (RFC 2045 §6.8), none after the last line: the delimiter that follows
// brings its own.
func base64Lines(data []byte) []byte {
	const line = 76
	enc := base64.StdEncoding.EncodedLen(len(data))
	out := make([]byte, 0, enc+2*(enc/line))
	tmp := make([]byte, enc)
	base64.StdEncoding.Encode(tmp, data)
	for len(tmp) > line {
		out = append(append(out, tmp[:line]...), '\r', '\n')
		tmp = tmp[line:]
	}
	return append(out, tmp...)
}
