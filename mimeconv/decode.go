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
	// One output buffer of the largest size b can decode to; the
	// alphabet's characters are gathered a block at a time, so a 36 MB
	// attachment costs 36 MB, not the doubling copies of its base64.
	out := make([]byte, 0, len(b)/4*3+3)
	var block [4096]byte // a multiple of 4: whole groups are decoded
	n := 0
	decode := func(chars []byte) {
		w, _ := base64.RawStdEncoding.Decode(out[len(out):cap(out)], chars)
		out = out[:len(out)+w]
	}
	flush := func() { // at a pad or the end
		if n%4 == 1 { // a lone trailing character carries no byte
			n--
		}
		decode(block[:n])
		n = 0
	}
	for _, c := range b {
		switch {
		case 'A' <= c && c <= 'Z', 'a' <= c && c <= 'z', '0' <= c && c <= '9', c == '+', c == '/':
			block[n] = c
			if n++; n == len(block) {
				decode(block[:n])
				n = 0
			}
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

// DecodeWords decodes the RFC 2047 encoded-words in an unstructured header
// value. If decoding fails the value is kept as written. The result is valid
// UTF-8.
func DecodeWords(s string) string {
	if strings.Contains(s, "=?") {
		if d, err := wordDecoder.DecodeHeader(s); err == nil {
			s = d
		}
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}
