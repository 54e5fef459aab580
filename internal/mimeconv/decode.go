package mimeconv

import (
	"bytes"
	"encoding/base64"
	"slices"
	"strings"
	"unicode/utf8"

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

// DecodeWords decodes the RFC 2047 encoded-words in an unstructured header
// value. The result is valid UTF-8: raw 8-bit text outside encoded-words
// is read as headerText reads it, and an encoded-word in a charset the
// bridge does not know is kept as written. See decodeWords.
func DecodeWords(s string) string {
	d, _ := decodeWords(s)
	return d
}

// decodeWords decodes the RFC 2047 encoded-words in a header value and
// reports, with a *CharsetError, text it could not read without loss.
//
// Encoded-words are read as Go's mime.WordDecoder reads them (also where
// they touch other text, and with the white space between two of them
// dropped, RFC 2047 §6.2), with three differences that keep the text as
// the sender wrote it:
//   - the bytes of adjacent encoded-words in the same charset are joined
//     before they are decoded, so a character that an encoder split
//     across two words (a common violation of RFC 2047 §5) survives;
//   - the joined bytes are decoded by decodeText, so "=?utf-8?q?M=FCller?="
//     with Windows-1252 bytes under a UTF-8 label reads "Müller", not
//     "M\ufffdller" (mime.WordDecoder decodes utf-8, us-ascii and
//     iso-8859-1 itself, without such a fallback);
//   - an RFC 2231 §5 language suffix ("=?utf-8*en?q?...?=") is ignored.
//
// An encoded-word whose charset is unknown or empty is kept as written;
// the error reports it when its bytes are not all ASCII. One whose
// encoded text is not valid B or Q is kept as written, without error:
// nothing is lost, the text is shown as it came.
func decodeWords(s string) (string, error) {
	legacy := !utf8.ValidString(s) // raw 8-bit text: Windows-1252 (headerText)
	literal := func(t string) string {
		if legacy {
			return decodeWindows1252([]byte(t))
		}
		return t
	}
	if !strings.Contains(s, "=?") {
		return literal(s), nil
	}
	segs := splitWords(s)

	// Runs of words in one charset, separated by nothing or by white
	// space only, are decoded together.
	type item struct {
		text    string // decoded text of a run; as written otherwise
		run     bool   // a run of encoded-words
		decoded bool   // a run that was decoded
	}
	var items []item
	var firstErr error
	for i := 0; i < len(segs); {
		sg := segs[i]
		if !sg.word {
			items = append(items, item{text: sg.text})
			i++
			continue
		}
		data := slices.Clone(sg.data)
		raw := sg.text
		j := i + 1
		for j < len(segs) {
			if segs[j].word && segs[j].charset == sg.charset {
				data = append(data, segs[j].data...)
				raw += segs[j].text
				j++
				continue
			}
			if !segs[j].word && isWSP(segs[j].text) && j+1 < len(segs) && segs[j+1].word && segs[j+1].charset == sg.charset {
				data = append(data, segs[j+1].data...)
				raw += segs[j].text + segs[j+1].text
				j += 2
				continue
			}
			break
		}
		i = j
		if _, known := charsetFamilies[sg.charset]; sg.charset == "" || !known && !charsetKnown(sg.charset) {
			// Kept as written; lost only if it was not plain ASCII.
			if !isASCIIBytes(data) && firstErr == nil {
				firstErr = &CharsetError{Charset: safeLabel(sg.charset), Unknown: true}
			}
			items = append(items, item{text: literal(raw), run: true})
			continue
		}
		text, err := decodeText(sg.charset, data)
		if err != nil && firstErr == nil {
			firstErr = err
		}
		items = append(items, item{text: text, run: true, decoded: true})
	}

	var out strings.Builder
	for i, it := range items {
		if !it.run {
			// RFC 2047 §6.2: white space between two encoded-words is
			// not displayed.
			if i > 0 && i+1 < len(items) && items[i-1].decoded && items[i+1].decoded && isWSP(it.text) {
				continue
			}
			out.WriteString(literal(it.text))
			continue
		}
		out.WriteString(it.text)
	}
	return out.String(), firstErr
}

// wordSegment is literal text of a header value, or one encoded-word.
type wordSegment struct {
	text    string // as written
	word    bool   // an encoded-word
	charset string // a word's charset label, normalised, language suffix removed
	data    []byte // a word's decoded bytes
}

// splitWords splits a header value into literal text and encoded-words,
// in order. Text that starts like an encoded-word but is none is literal.
func splitWords(s string) []wordSegment {
	var segs []wordSegment
	lit := 0 // start of the literal text not yet added
	for off := 0; ; {
		i := strings.Index(s[off:], "=?")
		if i < 0 {
			break
		}
		i += off
		n, cs, data, ok := encodedWord(s[i:])
		if !ok {
			off = i + 2
			continue
		}
		if i > lit {
			segs = append(segs, wordSegment{text: s[lit:i]})
		}
		segs = append(segs, wordSegment{text: s[i : i+n], word: true, charset: cs, data: data})
		off = i + n
		lit = off
	}
	if lit < len(s) {
		segs = append(segs, wordSegment{text: s[lit:]})
	}
	return segs
}

// encodedWord reads the RFC 2047 §2 encoded-word
// "=?" charset ["*" language] "?" encoding "?" encoded-text "?=" at the
// start of s: its length, charset label (normalised, language suffix
// removed) and decoded bytes. As in Go's mime.WordDecoder, the
// encoded-text may hold spaces, and B must be valid base64 (padding may
// be left out) and Q valid quoted-printable in the sense of §4.2.
func encodedWord(s string) (n int, cs string, data []byte, ok bool) {
	if !strings.HasPrefix(s, "=?") {
		return 0, "", nil, false
	}
	rest := s[2:]
	q := strings.IndexByte(rest, '?')
	if q < 0 || len(rest) < q+4 || rest[q+2] != '?' {
		return 0, "", nil, false
	}
	label := rest[:q]
	enc := rest[q+1]
	text := rest[q+3:]
	end := strings.Index(text, "?=")
	if end < 0 {
		return 0, "", nil, false
	}
	text = text[:end]
	if strings.ContainsAny(label, " \t") {
		return 0, "", nil, false
	}
	if base, _, found := strings.Cut(label, "*"); found {
		label = base
	}
	switch enc {
	case 'B', 'b':
		data, ok = decodeWordB(text)
	case 'Q', 'q':
		data, ok = decodeWordQ(text)
	}
	if !ok {
		return 0, "", nil, false
	}
	return 2 + q + 3 + end + 2, normLabel(label), data, true
}

// decodeWordB decodes the B encoding (RFC 2047 §4.1, base64), accepting
// missing padding.
func decodeWordB(text string) ([]byte, bool) {
	if b, err := base64.StdEncoding.DecodeString(text); err == nil {
		return b, true
	}
	b, err := base64.RawStdEncoding.DecodeString(strings.TrimRight(text, "="))
	return b, err == nil
}

// decodeWordQ decodes the Q encoding (RFC 2047 §4.2): "_" is a space and
// "=" with two hex digits a byte; other printable ASCII stands for itself.
func decodeWordQ(text string) ([]byte, bool) {
	out := make([]byte, 0, len(text))
	for i := 0; i < len(text); i++ {
		switch c := text[i]; {
		case c == '_':
			out = append(out, ' ')
		case c == '=':
			if i+2 >= len(text) || !isHex(text[i+1]) || !isHex(text[i+2]) {
				return nil, false
			}
			out = append(out, unhex(text[i+1])<<4|unhex(text[i+2]))
			i += 2
		case c >= ' ' && c <= '~' || c == '\t':
			out = append(out, c)
		default:
			return nil, false
		}
	}
	return out, true
}

// charsetKnown reports whether go-message has a decoder for label.
func charsetKnown(label string) bool {
	_, err := charset.Reader(label, strings.NewReader(""))
	return err == nil
}

// isWSP reports whether s is white space only (RFC 5322 WSP, and the CR
// and LF of a folded line).
func isWSP(s string) bool {
	return strings.Trim(s, " \t\r\n") == ""
}
