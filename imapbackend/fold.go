package imapbackend

// equalFold compares ASCII case-insensitively, as IMAP compares atoms
// such as flag and keyword names (RFC 9051 §2.3.2) and as header field
// names compare (RFC 5322 §1.2.2): strings.EqualFold would also fold
// non-ASCII letters (U+017F, the long s, matches "s").
func equalFold(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		x, y := a[i], b[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}
