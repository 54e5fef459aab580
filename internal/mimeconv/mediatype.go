package mimeconv

import (
	"mime"
	"strings"
)

// parseMediaType parses a Content-Type or Content-Disposition value
// (RFC 2045 §5.1, RFC 2183 §2) into a lower-case type and parameters.
// Parameters in RFC 2231 form and RFC 2047 encoded-words in parameter values
// are decoded. When the strict parser of the standard library rejects the
// value (raw 8-bit parameters, stray semicolons, duplicates), a liberal
// parser keeps what it can. The type is "" when none can be read.
func parseMediaType(v string) (string, map[string]string) {
	mt, params, _ := parseMediaTypeText(v)
	return mt, params
}

// parseMediaTypeText is parseMediaType, and for each parameter whose value
// could not be decoded to UTF-8 without loss (decodeWords, decodeText) an
// error wrapping ErrUndecodableText, by parameter name; nil if there is
// none.
func parseMediaTypeText(v string) (string, map[string]string, map[string]error) {
	if strings.TrimSpace(v) == "" {
		return "", nil, nil
	}
	var lossy map[string]error
	mt, params, err := mime.ParseMediaType(v)
	switch {
	case err != nil:
		mt, params, lossy = parseMediaTypeLiberally(v)
	case strings.Contains(v, "*="):
		// The standard library drops an RFC 2231 value in a charset
		// other than utf-8 and us-ascii without a word
		// (filename*=iso-8859-1''M%FCller.pdf), which would lose an
		// attachment's name; the liberal parser reads it (decodeExtValue).
		_, lib, libLossy := parseMediaTypeLiberally(v)
		for k, pv := range lib {
			if _, ok := params[k]; !ok {
				params[k] = pv
				if e := libLossy[k]; e != nil {
					if lossy == nil {
						lossy = map[string]error{}
					}
					lossy[k] = e
				}
			}
		}
	}
	for k, pv := range params {
		d, err := decodeWords(pv)
		if err != nil && lossy[k] == nil {
			if lossy == nil {
				lossy = map[string]error{}
			}
			lossy[k] = err
		}
		params[k] = d
	}
	return mt, params, lossy
}

// parseMediaTypeLiberally is the fallback of parseMediaType. lossy names
// the RFC 2231 values that could not be decoded without loss.
func parseMediaTypeLiberally(v string) (mt string, params map[string]string, lossy map[string]error) {
	items := splitOutsideQuotes(v, ';')
	mt = strings.ToLower(strings.TrimSpace(items[0]))
	if !validMediaType(mt) {
		mt = ""
	}
	params = make(map[string]string)
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
		var err error
		if extended && !continued {
			pv, err = decodeExtValue(pv)
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
		if err != nil {
			if lossy == nil {
				lossy = map[string]error{}
			}
			lossy[k] = err
		}
	}
	return mt, params, lossy
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

// decodeExtValue decodes an RFC 2231 §4 extended value charset'lang'%XX
// (decodeText), reporting text it could not read without loss.
func decodeExtValue(s string) (string, error) {
	parts := strings.SplitN(s, "'", 3)
	if len(parts) != 3 {
		return s, nil
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
	return decodeText(parts[0], raw)
}
