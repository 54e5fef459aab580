package mimeconv

import (
	"bytes"
	"encoding/base64"
	"io"
	"mime"
	"strings"

	"github.com/emersion/go-message/charset"
)

// decodeTransfer undoes the Content-Transfer-Encoding cte (RFC 2045 §6).
// 7bit, 8bit, binary and unknown encodings leave the bytes as they are, so
// nothing is lost.
func decodeTransfer(cte string, b []byte) []byte {
	switch strings.ToLower(strings.TrimSpace(cte)) {
	case "base64":
		return decodeBase64(b)
	case "quoted-printable":
		return decodeQuotedPrintable(b)
	default:
		return b
	}
}

// decodeBase64 decodes base64 content liberally (RFC 2045 §6.8): characters
// outside the alphabet are ignored, as the RFC requires, padding is optional,
// and data after a pad (base64 chunks concatenated by broken encoders) is
// decoded too.
func decodeBase64(b []byte) []byte {
	var out, chunk []byte
	flush := func() {
		if len(chunk)%4 == 1 { // a lone trailing character carries no byte
			chunk = chunk[:len(chunk)-1]
		}
		if len(chunk) > 0 {
			dec := make([]byte, base64.RawStdEncoding.DecodedLen(len(chunk)))
			n, _ := base64.RawStdEncoding.Decode(dec, chunk)
			out = append(out, dec[:n]...)
		}
		chunk = chunk[:0]
	}
	for _, c := range b {
		switch {
		case 'A' <= c && c <= 'Z', 'a' <= c && c <= 'z', '0' <= c && c <= '9', c == '+', c == '/':
			chunk = append(chunk, c)
		case c == '=':
			flush()
		}
	}
	flush()
	return out
}

// decodeQuotedPrintable decodes quoted-printable content liberally
// (RFC 2045 §6.7): trailing whitespace on a line is dropped (rule 3), a
// final "=" is a soft line break (rule 5), and an "=" not followed by two hex
// digits is kept literally, as the RFC recommends for robustness. Line
// endings are kept as written.
func decodeQuotedPrintable(b []byte) []byte {
	out := make([]byte, 0, len(b))
	for len(b) > 0 {
		line, ending := b, []byte(nil)
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			line, ending, b = b[:i], b[i:i+1], b[i+1:]
			if len(line) > 0 && line[len(line)-1] == '\r' {
				line, ending = line[:len(line)-1], []byte("\r\n")
			}
		} else {
			b = nil
		}
		line = bytes.TrimRight(line, " \t")
		if len(line) > 0 && line[len(line)-1] == '=' {
			line, ending = line[:len(line)-1], nil
		}
		for i := 0; i < len(line); i++ {
			c := line[i]
			if c == '=' && i+2 < len(line) && isHex(line[i+1]) && isHex(line[i+2]) {
				out = append(out, unhex(line[i+1])<<4|unhex(line[i+2]))
				i += 2
				continue
			}
			out = append(out, c)
		}
		out = append(out, ending...)
	}
	return out
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case '0' <= c && c <= '9':
		return c - '0'
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10
	default:
		return c - 'A' + 10
	}
}

// toUTF8 converts text in charset cs to valid UTF-8. UTF-8 and US-ASCII are
// taken as they are, so 8-bit UTF-8 mislabelled as us-ascii survives; an
// unknown charset keeps the bytes. Invalid UTF-8 is replaced by U+FFFD.
func toUTF8(cs string, b []byte) string {
	switch strings.ToLower(strings.TrimSpace(cs)) {
	case "", "utf-8", "utf8", "us-ascii", "ascii":
	default:
		if r, err := charset.Reader(cs, bytes.NewReader(b)); err == nil {
			if conv, err := io.ReadAll(r); err == nil {
				b = conv
			}
		}
	}
	return strings.ToValidUTF8(string(b), "\uFFFD")
}

// wordDecoder decodes RFC 2047 encoded-words in every charset go-message
// knows.
var wordDecoder = &mime.WordDecoder{CharsetReader: charset.Reader}

// decodeWords decodes the RFC 2047 encoded-words in an unstructured header
// value. If decoding fails the value is kept as written. The result is valid
// UTF-8.
func decodeWords(s string) string {
	if strings.Contains(s, "=?") {
		if d, err := wordDecoder.DecodeHeader(s); err == nil {
			s = d
		}
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}

// parseMediaType parses a Content-Type or Content-Disposition value
// (RFC 2045 §5.1, RFC 2183 §2) into a lower-case type and parameters.
// Parameters in RFC 2231 form and RFC 2047 encoded-words in parameter values
// are decoded. When the strict parser of the standard library rejects the
// value (raw 8-bit parameters, stray semicolons, duplicates), a liberal
// parser keeps what it can. The type is "" when none can be read.
func parseMediaType(v string) (string, map[string]string) {
	if strings.TrimSpace(v) == "" {
		return "", nil
	}
	mt, params, err := mime.ParseMediaType(v)
	if err != nil {
		mt, params = parseMediaTypeLiberally(v)
	}
	for k, pv := range params {
		params[k] = decodeWords(pv)
	}
	return mt, params
}

// parseMediaTypeLiberally is the fallback of parseMediaType.
func parseMediaTypeLiberally(v string) (string, map[string]string) {
	items := splitOutsideQuotes(v, ';')
	mt := strings.ToLower(strings.TrimSpace(items[0]))
	if !validMediaType(mt) {
		mt = ""
	}
	params := make(map[string]string)
	for _, item := range items[1:] {
		k, pv, ok := strings.Cut(item, "=")
		if !ok {
			continue
		}
		k = strings.ToLower(strings.TrimSpace(k))
		pv = unquote(strings.TrimSpace(pv))
		extended := strings.HasSuffix(k, "*")
		k = strings.TrimSuffix(k, "*")
		continued := false
		if base, n, ok := strings.Cut(k, "*"); ok { // RFC 2231 §3 continuation
			k, continued = base, n != "0"
		}
		if extended && !continued {
			pv = decodeExtValue(pv)
		}
		if k == "" {
			continue
		}
		if old, seen := params[k]; seen {
			if continued {
				params[k] = old + pv
			}
			continue
		}
		params[k] = pv
	}
	return mt, params
}

// validMediaType reports whether s looks like type "/" subtype made of
// RFC 2045 tokens, or like a single disposition token.
func validMediaType(s string) bool {
	if s == "" {
		return false
	}
	for _, part := range strings.SplitN(s, "/", 2) {
		if part == "" {
			return false
		}
		for i := 0; i < len(part); i++ {
			c := part[i]
			if c <= ' ' || c >= 0x7f || strings.IndexByte(`()<>@,;:\"/[]?=`, c) >= 0 {
				return false
			}
		}
	}
	return true
}

// splitOutsideQuotes splits s at sep where sep is not inside a quoted-string.
func splitOutsideQuotes(s string, sep byte) []string {
	var items []string
	quoted, escaped, start := false, false, 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case escaped:
			escaped = false
		case c == '\\' && quoted:
			escaped = true
		case c == '"':
			quoted = !quoted
		case c == sep && !quoted:
			items = append(items, s[start:i])
			start = i + 1
		}
	}
	return append(items, s[start:])
}

// unquote removes the quotes and backslash escapes of an RFC 5322
// quoted-string; other values are returned as they are.
func unquote(s string) string {
	if len(s) < 2 || s[0] != '"' || s[len(s)-1] != '"' {
		return s
	}
	s = s[1 : len(s)-1]
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) {
			i++
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// decodeExtValue decodes an RFC 2231 §4 extended value charset'lang'%XX.
func decodeExtValue(s string) string {
	parts := strings.SplitN(s, "'", 3)
	if len(parts) != 3 {
		return s
	}
	var raw []byte
	p := parts[2]
	for i := 0; i < len(p); i++ {
		if p[i] == '%' && i+2 < len(p) && isHex(p[i+1]) && isHex(p[i+2]) {
			raw = append(raw, unhex(p[i+1])<<4|unhex(p[i+2]))
			i += 2
			continue
		}
		raw = append(raw, p[i])
	}
	return toUTF8(parts[0], raw)
}
