package mimeconv

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/emersion/go-message/charset"
)

// This file turns the bytes of text (a text part's body, an RFC 2047
// encoded-word, a raw 8-bit header value) into UTF-8 without changing
// what they say.
//
// The rule, the one mail software and the WHATWG Encoding Standard
// (https://encoding.spec.whatwg.org/, "Names and labels") follow:
//
//   - Declared UTF-8, us-ascii, or no charset at all: bytes that are valid
//     UTF-8 are UTF-8 (8-bit UTF-8 mislabelled us-ascii is common); bytes
//     that are not are Windows-1252. Older EHRs and Windows mailers write
//     Windows-1252 and label it UTF-8, us-ascii or nothing; reading those
//     bytes as UTF-8 would turn "M\xfcller, 5 \xb5g" into "M\ufffdller,
//     5 \ufffdg" and lose a dose unit without a word. Windows-1252 gives
//     every byte a character, so this reading never loses one.
//   - Declared ISO-8859-1 (latin1 and its other aliases) or Windows-1252:
//     Windows-1252. The WHATWG standard maps these labels, and us-ascii,
//     to windows-1252, because text labelled ISO-8859-1 routinely holds
//     Windows-1252's characters in 0x80-0x9F (€, „, “, –); ISO-8859-1
//     proper would make them invisible C1 controls.
//   - Any other declared charset that go-message knows (golang.org/x/text
//     tables: ISO-8859-x, Windows-125x, KOI8, Shift_JIS, EUC-JP,
//     ISO-2022-JP, GBK/GB2312, Big5, EUC-KR, UTF-16, ...) is decoded by
//     its table. Bytes that are not valid in it make the decoder write
//     U+FFFD, and that is loss: there is no other sensible reading of
//     bytes the sender said were, say, Shift_JIS.
//   - A charset the bridge does not know: text that is all ASCII reads
//     the same in every charset a mail may use and is kept; anything else
//     cannot be read.
//
// When text cannot be read without loss, decodeText still returns the
// tolerant reading (U+FFFD for what it could not read, or the bytes kept
// for an unknown charset), which a mailbox needs to stay readable, and a
// *CharsetError. The SMTP front refuses such a message (ParseOptions
// StrictText) instead of sending a changed text: for clinical text a
// refusal that says why is safe, a silent U+FFFD is not.
//
// A limitation of taking U+FFFD as the sign of loss: in the few charsets
// other than UTF-8 that can spell U+FFFD itself (UTF-16, UTF-32, GB18030),
// a U+FFFD the sender wrote counts as loss too. Such a character already
// marks text lost by an earlier conversion, and the refusal says why.

// CharsetError reports text whose bytes cannot be read as characters
// without loss (see decodeText). It wraps ErrUndecodableText. It carries
// no message content: only where the text is, the declared charset label
// when that is a plain token, and which of the two reasons applies.
type CharsetError struct {
	// Where names the text: "body", "Subject" or "attachment name"; ""
	// when the caller did not say.
	Where string
	// Charset is the declared charset label in lower case, or "" when it
	// is not a plain token of at most 40 letters, digits and "-_.:".
	Charset string
	// Unknown reports a charset the bridge has no decoder for; otherwise
	// the bytes are not valid in the declared charset.
	Unknown bool
}

// Error says where and why, without message content.
func (e *CharsetError) Error() string {
	where := e.Where
	if where == "" {
		where = "text"
	}
	cs := "the declared charset"
	if e.Charset != "" {
		cs = fmt.Sprintf("charset %q", e.Charset)
	}
	if e.Unknown {
		return fmt.Sprintf("mimeconv: %s: %s is not one the bridge can decode, so the text cannot be read without loss", where, cs)
	}
	return fmt.Sprintf("mimeconv: %s: bytes not valid in %s, so the text cannot be read without loss", where, cs)
}

// Unwrap returns ErrUndecodableText, for errors.Is.
func (e *CharsetError) Unwrap() error { return ErrUndecodableText }

// in returns e with Where set to where, for a caller that knows which
// text it decoded; other errors are returned as they are.
func in(where string, err error) error {
	var ce *CharsetError
	if errors.As(err, &ce) {
		c := *ce
		c.Where = where
		return &c
	}
	return err
}

// charsetFamily classifies a charset label (lower case, trimmed).
type charsetFamily int

const (
	familyOther   charsetFamily = iota // decoded by go-message's tables, if it knows the label
	familyUTF8                         // UTF-8, or none declared: UTF-8 if valid, else Windows-1252
	familyASCII                        // US-ASCII: the same as UTF-8 (8-bit bytes prove the label wrong)
	familyWin1252                      // ISO-8859-1 and Windows-1252: Windows-1252 (WHATWG)
)

// charsetFamilies are the labels read by the rules of decodeText rather
// than by go-message's tables: the WHATWG labels of UTF-8 and of
// windows-1252 (which include US-ASCII's), the other IANA aliases of
// US-ASCII and ISO-8859-1, and RFC 1428's unknown-8bit.
var charsetFamilies = map[string]charsetFamily{
	"": familyUTF8, "utf-8": familyUTF8, "utf8": familyUTF8, "unicode-1-1-utf-8": familyUTF8,
	"unicode11utf8": familyUTF8, "unicode20utf8": familyUTF8, "x-unicode20utf8": familyUTF8,
	"unknown-8bit": familyUTF8, // RFC 1428: 8-bit text of no known charset, the same as none

	"us-ascii": familyASCII, "ascii": familyASCII, "ansi_x3.4-1968": familyASCII, "ansi_x3.4-1986": familyASCII,
	"iso646-us": familyASCII, "iso_646.irv:1991": familyASCII, "iso-ir-6": familyASCII, "us": familyASCII,
	"ibm367": familyASCII, "cp367": familyASCII, "csascii": familyASCII,

	"iso-8859-1": familyWin1252, "iso8859-1": familyWin1252, "iso88591": familyWin1252, "iso_8859-1": familyWin1252,
	"iso_8859-1:1987": familyWin1252, "iso-ir-100": familyWin1252, "latin1": familyWin1252, "l1": familyWin1252,
	"cp819": familyWin1252, "ibm819": familyWin1252, "csisolatin1": familyWin1252,
	"windows-1252": familyWin1252, "cp1252": familyWin1252, "x-cp1252": familyWin1252,
}

// normLabel is a charset label as compared: trimmed, unquoted, lower case.
func normLabel(cs string) string {
	return strings.ToLower(strings.Trim(strings.TrimSpace(cs), `"'`))
}

// decodeText converts text in charset cs to UTF-8 by the rule at the top
// of this file. It always returns a valid UTF-8 reading; the error, a
// *CharsetError, says that reading lost something.
func decodeText(cs string, b []byte) (string, error) {
	return decodeTextLines(cs, b, false, 0)
}

// decodeTextLines is decodeText, with CRLF line breaks made LF in the
// same pass when lf is set: a body of tens of megabytes is then copied
// once, not decoded and copied again. With max above 0, text longer than
// max once decoded is ErrTextTooLong, found before it is built (a count
// for UTF-8 and Windows-1252, a bounded read for the other tables).
func decodeTextLines(cs string, b []byte, lf bool, max int64) (string, error) {
	label := normLabel(cs)
	switch charsetFamilies[label] {
	case familyUTF8, familyASCII:
		if utf8.Valid(b) {
			if max > 0 && int64(len(b)) > max && int64(len(b)-bytes.Count(b, crlfBytes)) > max {
				return "", ErrTextTooLong
			}
			if lf {
				return crlfToLF(b), nil
			}
			return string(b), nil
		}
		return decodeWindows1252Max(b, lf, max)
	case familyWin1252:
		return decodeWindows1252Max(b, lf, max)
	}
	if lf {
		s, err := decodeTextLines(cs, b, false, max)
		return strings.ReplaceAll(s, "\r\n", "\n"), err
	}
	r, err := charset.Reader(label, bytes.NewReader(b))
	if err != nil {
		if isASCIIBytes(b) {
			return string(b), nil
		}
		return strings.ToValidUTF8(string(b), "\uFFFD"), &CharsetError{Charset: safeLabel(label), Unknown: true}
	}
	if max > 0 {
		// CRLF is made LF after this read, so up to one byte in two
		// may still go: the bound is twice max, then exact below.
		r = io.LimitReader(r, 2*max+1)
	}
	out, err := io.ReadAll(r)
	if max > 0 && int64(len(out)-bytes.Count(out, crlfBytes)) > max {
		return "", ErrTextTooLong
	}
	s := strings.ToValidUTF8(string(out), "\uFFFD")
	if err != nil || strings.ContainsRune(s, utf8.RuneError) {
		return s, &CharsetError{Charset: safeLabel(label)}
	}
	return s, nil
}

// headerText is a raw header value (or a part of one outside encoded-words)
// as UTF-8: as written when it is valid UTF-8 (RFC 6532 §3.2 allows UTF-8
// in header fields), otherwise Windows-1252, the charset of the legacy
// mailers that write raw 8-bit headers (see the rule at the top of this
// file). Every byte is read, nothing is lost.
func headerText(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	return decodeWindows1252([]byte(s))
}

// windows1252High maps the bytes 0x80-0x9F of Windows-1252 to Unicode, as
// the WHATWG Encoding Standard's index does
// (https://encoding.spec.whatwg.org/index-windows-1252.txt). The bytes
// 0x00-0x7F are ASCII and 0xA0-0xFF are U+00A0-U+00FF, the same as
// ISO-8859-1, so those need no table. The five bytes Microsoft leaves
// undefined (0x81, 0x8D, 0x8F, 0x90, 0x9D) are, as in the index, the C1
// controls of the same number, so that every byte has a character and
// decoding never loses one. (golang.org/x/text's table maps those five to
// U+FFFD, which is why the bridge does not use it here.)
var windows1252High = [32]rune{
	0x20AC, 0x0081, 0x201A, 0x0192, 0x201E, 0x2026, 0x2020, 0x2021, // 0x80-0x87
	0x02C6, 0x2030, 0x0160, 0x2039, 0x0152, 0x008D, 0x017D, 0x008F, // 0x88-0x8F
	0x0090, 0x2018, 0x2019, 0x201C, 0x201D, 0x2022, 0x2013, 0x2014, // 0x90-0x97
	0x02DC, 0x2122, 0x0161, 0x203A, 0x0153, 0x009D, 0x017E, 0x0178, // 0x98-0x9F
}

// decodeWindows1252 decodes Windows-1252 (see windows1252High).
func decodeWindows1252(b []byte) string { s, _ := decodeWindows1252Max(b, false, 0); return s }

var crlfBytes = []byte("\r\n")

// decodeWindows1252Max is decodeWindows1252, with CRLF made LF when lf
// is set, and ErrTextTooLong, before anything is built, when the text
// would be longer than max (max above 0). The result's length is counted
// first, so it is built in one allocation of its size (growing by
// doubling held up to three times it).
func decodeWindows1252Max(b []byte, lf bool, max int64) (string, error) {
	n := 0
	for i, c := range b {
		switch {
		case lf && c == '\r' && i+1 < len(b) && b[i+1] == '\n':
		case c < 0x80:
			n++
		case c < 0xA0:
			n += utf8.RuneLen(windows1252High[c-0x80])
		default:
			n += 2
		}
	}
	if max > 0 && int64(n) > max {
		return "", ErrTextTooLong
	}
	var sb strings.Builder
	sb.Grow(n)
	for i, c := range b {
		switch {
		case lf && c == '\r' && i+1 < len(b) && b[i+1] == '\n':
		case c < 0x80:
			sb.WriteByte(c)
		case c < 0xA0:
			sb.WriteRune(windows1252High[c-0x80])
		default:
			sb.WriteRune(rune(c))
		}
	}
	return sb.String(), nil
}

// crlfToLF is b as a string with CRLF made LF, in one allocation.
func crlfToLF(b []byte) string {
	var sb strings.Builder
	sb.Grow(len(b) - bytes.Count(b, []byte("\r\n")))
	for {
		i := bytes.Index(b, []byte("\r\n"))
		if i < 0 {
			break
		}
		sb.Write(b[:i])
		sb.WriteByte('\n')
		b = b[i+2:]
	}
	sb.Write(b)
	return sb.String()
}

func isASCIIBytes(b []byte) bool {
	for _, c := range b {
		if c >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// safeLabel is label if it is a plain token fit for an error text, else "".
// A label comes from the message, and errors end up in logs.
func safeLabel(label string) string {
	if label == "" || len(label) > 40 {
		return ""
	}
	for i := 0; i < len(label); i++ {
		c := label[i]
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || strings.IndexByte("-_.:", c) >= 0) {
			return ""
		}
	}
	return label
}
