package restclient

import (
	"io"
	"unicode/utf8"
)

// A JSON string written as it is read, and its length counted without
// writing it. Message text travels inside the provider's JSON, where
// some bytes grow: a control character becomes \u00XX (six bytes), a
// quote or backslash two, a byte that is not UTF-8 \ufffd. Building the
// escaped text whole costs up to six times a 50 MB body before its size
// can even be compared with the provider's limit; counting first and
// escaping as the request is written costs nothing beyond the text.
//
// The escaping is encoding/json's (encode.go, appendString), byte for
// byte, so that a request reads the same whichever way it was written:
//   - `"` and `\` as \" and \\; \b, \f, \n, \r, \t as such; other bytes
//     below 0x20 as \u00XX, lower-case hex;
//   - with HTML escaping (json.Marshal; the client's own encoder turns
//     it off, see encodeJSON) <, > and & as \u003c, \u003e, \u0026;
//   - each byte that does not start a valid UTF-8 sequence as \ufffd;
//   - U+2028 and U+2029 as \u2028 and \u2029, always;
//   - everything else (DEL included) as it stands.

const hexDigits = "0123456789abcdef"

// asciiEscape[b] is the escaped form of the ASCII byte b, "" when it
// stands as it is (without HTML escaping).
var asciiEscape = func() (t [utf8.RuneSelf]string) {
	for b := range 0x20 {
		t[b] = `\u00` + string(hexDigits[b>>4]) + string(hexDigits[b&0xf])
	}
	t['"'], t['\\'] = `\"`, `\\`
	t['\b'], t['\f'], t['\n'], t['\r'], t['\t'] = `\b`, `\f`, `\n`, `\r`, `\t`
	return t
}()

// htmlEscape is the escaped form of the characters HTML escaping adds.
var htmlEscape = [utf8.RuneSelf]string{'<': `\u003c`, '>': `\u003e`, '&': `\u0026`}

// jsonUnit returns how the text at the start of s is written: verbatim
// (out is "" and plain true) or escaped as out, and how many bytes of s
// that unit is. s must not be empty.
func jsonUnit(s string, escapeHTML bool) (out string, size int, plain bool) {
	if b := s[0]; b < utf8.RuneSelf {
		if e := asciiEscape[b]; e != "" {
			return e, 1, false
		}
		if escapeHTML && htmlEscape[b] != "" {
			return htmlEscape[b], 1, false
		}
		return "", 1, true
	}
	r, size := utf8.DecodeRuneInString(s)
	switch {
	case r == utf8.RuneError && size == 1:
		return `\ufffd`, 1, false
	case r == '\u2028':
		return `\u2028`, size, false
	case r == '\u2029':
		return `\u2029`, size, false
	}
	return "", size, true
}

// jsonStringLen is the length of s written as a JSON string, quotes
// included.
func jsonStringLen(s string, escapeHTML bool) int64 {
	n := int64(len(s)) + 2
	for i := 0; i < len(s); {
		if b := s[i]; b < utf8.RuneSelf && asciiEscape[b] == "" && !(escapeHTML && htmlEscape[b] != "") {
			i++ // the common case, kept short
			continue
		}
		out, size, plain := jsonUnit(s[i:], escapeHTML)
		if !plain {
			n += int64(len(out) - size)
		}
		i += size
	}
	return n
}

// jsonStringReader reads s as the inside of a JSON string (without
// quotes), escaped as it is read; a read may be of any size.
type jsonStringReader struct {
	s          string
	escapeHTML bool
	pending    string // the rest of a unit a short read could not take
}

func (r *jsonStringReader) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		if r.pending != "" {
			c := copy(p[n:], r.pending)
			r.pending, n = r.pending[c:], n+c
			continue
		}
		if r.s == "" {
			break
		}
		// The bytes that stand as they are, as many as fit, whole
		// characters only: the next read must start at a character.
		run := 0
		for room := len(p) - n; run < len(r.s) && run < room; {
			if b := r.s[run]; b < utf8.RuneSelf && asciiEscape[b] == "" && !(r.escapeHTML && htmlEscape[b] != "") {
				run++
				continue
			}
			_, size, plain := jsonUnit(r.s[run:], r.escapeHTML)
			if !plain || run+size > room {
				break
			}
			run += size
		}
		if run > 0 {
			n += copy(p[n:], r.s[:run])
			r.s = r.s[run:]
			continue
		}
		out, size, plain := jsonUnit(r.s, r.escapeHTML)
		if plain {
			out = r.s[:size] // a character longer than the room left
		}
		c := copy(p[n:], out)
		r.pending, r.s, n = out[c:], r.s[size:], n+c
	}
	if n == 0 && len(p) > 0 {
		return 0, io.EOF
	}
	return n, nil
}
