package mimeconv

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"mime"
	"net/mail"
	"strings"
	"unicode/utf8"

	"github.com/directbridge/directbridge/upstream/directapi"
	"github.com/emersion/go-message/textproto"
)

// controlledHeaders are the fields Compose writes itself from the Message
// and ComposeOptions. A custom header with one of these names is skipped:
// letting it through would duplicate fields that RFC 5322 §3.6 allows only
// once, expose Bcc recipients, or break the MIME structure.
var controlledHeaders = map[string]bool{
	"from": true, "to": true, "cc": true, "bcc": true, "date": true,
	"message-id": true, "mime-version": true, "content-type": true,
	"content-transfer-encoding": true, "content-disposition": true,
	"subject": true, "sender": true, "return-path": true,
}

// addressHeaders are custom fields whose value is an address-list: a
// non-ASCII value is re-formatted address by address, because RFC 2047 §5
// allows encoded-words only in display names there.
var addressHeaders = map[string]bool{
	"reply-to": true, "disposition-notification-to": true,
}

// customFields validates the custom headers of SendWithHeader and returns
// the ones Compose applies, values encoded for the wire.
func customFields(hs []directapi.MessageHeader) ([]field, error) {
	var fs []field
	for i, h := range hs {
		name := strings.TrimSpace(h.Name)
		if !validFieldName(name) {
			return nil, fmt.Errorf("mimeconv: header %d: name %q is not an RFC 5322 field-name: %w", i, h.Name, ErrInvalidHeader)
		}
		value := strings.Trim(h.Value, " \t")
		if !validFieldValue(value) {
			return nil, fmt.Errorf("mimeconv: header %q: value contains CR, LF or another control character: %w", name, ErrInvalidHeader)
		}
		lower := strings.ToLower(name)
		if controlledHeaders[lower] {
			continue
		}
		if isASCII(value) {
			fs = append(fs, field{name, value})
			continue
		}
		if addressHeaders[lower] {
			list, err := mail.ParseAddressList(value)
			if err != nil {
				return nil, fmt.Errorf("mimeconv: header %q: not an address list: %v: %w", name, err, ErrInvalidHeader)
			}
			fs = append(fs, field{name, formatAddresses(list)})
			continue
		}
		fs = append(fs, field{name, mime.QEncoding.Encode("utf-8", value)})
	}
	return fs, nil
}

// AddressFieldWritable reports whether Compose can write value as a custom
// address-list field (Reply-To, Disposition-Notification-To): ASCII is
// written as it is, and non-ASCII text must be an address-list Compose can
// take apart, because RFC 2047 §5 allows encoded-words only in display
// names there. The SMTP front asks it before passing such a field on, so
// that it never accepts a message the provider would refuse.
func AddressFieldWritable(value string) bool {
	if isASCII(value) {
		return true
	}
	_, err := mail.ParseAddressList(value)
	return err == nil
}

// validFieldValue reports whether v can be a field body: valid UTF-8
// (RFC 6532 §3.2) without control characters other than HTAB (RFC 5322
// §2.2). CR and LF in particular would let a value inject header fields.
func validFieldValue(v string) bool {
	if !utf8.ValidString(v) {
		return false
	}
	for i := 0; i < len(v); i++ {
		if c := v[i]; c < ' ' && c != '\t' || c == 0x7f {
			return false
		}
	}
	return true
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// formatAddresses formats an address-list; display names that need it are
// RFC 2047 encoded by net/mail. An address without a display name is
// written as a bare addr-spec.
func formatAddresses(list []*mail.Address) string {
	s := make([]string, len(list))
	for i, a := range list {
		s[i] = a.String()
		if a.Name == "" {
			s[i] = strings.TrimSuffix(strings.TrimPrefix(s[i], "<"), ">")
		}
	}
	return strings.Join(s, ", ")
}

// encodeText encodes an unstructured field value such as Subject so that
// Parse reads back exactly s. Printable ASCII with single spaces is written
// as it is. Anything else (non-ASCII, control characters, runs of or
// leading and trailing whitespace, text that looks like an encoded-word, or
// very long words) becomes RFC 2047 "B" encoded-words of at most 75
// characters (RFC 2047 §2) separated by spaces, which a decoder drops
// between encoded-words (RFC 2047 §6.2), so folding cannot change the text.
func encodeText(s string) string {
	if plainText(s) {
		return s
	}
	const maxChunk = 45 // 60 base64 characters + 12 of "=?utf-8?b?" and "?="
	var words []string
	for len(s) > 0 {
		n := 0
		for n < len(s) {
			_, size := utf8.DecodeRuneInString(s[n:])
			if n+size > maxChunk {
				break
			}
			n += size
		}
		words = append(words, "=?utf-8?b?"+base64.StdEncoding.EncodeToString([]byte(s[:n]))+"?=")
		s = s[n:]
	}
	return strings.Join(words, " ")
}

// plainText reports whether s survives folding and unfolding unchanged
// without encoding.
func plainText(s string) bool {
	if strings.Contains(s, "=?") || strings.HasPrefix(s, " ") || strings.HasSuffix(s, " ") || strings.Contains(s, "  ") {
		return false
	}
	word := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < ' ' || c > '~' {
			return false
		}
		if word++; c == ' ' {
			word = 0
		}
		if word > 900 {
			return false
		}
	}
	return true
}

// buildHeader makes a go-message header with the fields in the given order,
// names written as given (field names are case-insensitive, RFC 5322
// §1.2.2, but custom names are kept as the caller wrote them).
func buildHeader(fs []field) (textproto.Header, error) {
	var h textproto.Header
	// AddRaw inserts at the top, so add in reverse order.
	for i := len(fs) - 1; i >= 0; i-- {
		raw, err := foldField(fs[i].name, fs[i].value)
		if err != nil {
			return h, err
		}
		h.AddRaw(raw)
	}
	return h, nil
}

// Line length limits of RFC 5322 §2.1.1.
const (
	foldAt     = 78  // SHOULD
	maxLineLen = 998 // MUST
)

// foldField formats one field, folding it (RFC 5322 §2.2.3) before a space
// wherever a line would exceed 78 characters. A word that does not fit
// stays on its own line; a line over 998 characters is an error, because
// breaking inside a word would change the value.
func foldField(name, value string) ([]byte, error) {
	if !validFieldName(name) || strings.ContainsAny(value, "\r\n") {
		return nil, fmt.Errorf("mimeconv: header %q: %w", name, ErrInvalidHeader)
	}
	var b bytes.Buffer
	b.WriteString(name)
	b.WriteString(":")
	lineLen := b.Len()
	for i, word := range strings.Split(value, " ") {
		if i > 0 && lineLen+1+len(word) > foldAt && lineLen > len(name)+1 {
			b.WriteString("\r\n")
			lineLen = 0
		}
		b.WriteString(" ")
		b.WriteString(word)
		lineLen += 1 + len(word)
		if lineLen > maxLineLen {
			return nil, fmt.Errorf("mimeconv: header %q: a word of the value is too long to fold into a %d-character line: %w", name, maxLineLen, ErrInvalidHeader)
		}
	}
	b.WriteString("\r\n")
	return b.Bytes(), nil
}

// field is one header field that Compose writes: the name without the
// colon and the value, unfolded and encoded for the wire.
type field struct {
	name, value string
}
