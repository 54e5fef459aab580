package mimeconv

import "bytes"

// splitMultipart returns where the body parts of a multipart body delimited
// by boundary are (RFC 2046 §5.1.1), as start and end offsets into body. It
// returns none when no part was found, so the caller can read the entity as
// a single part.
//
// Tolerated defects: bare LF line endings, whitespace after a delimiter,
// and a missing close delimiter (the last part then runs to the end of the
// input). As RFC 2046 §5.1.1 says, the line break before a delimiter
// belongs to the delimiter, so a part's bytes are found exactly.
func splitMultipart(body []byte, boundary string) [][2]int {
	if boundary == "" {
		return nil
	}
	dash := []byte("--" + boundary)
	var parts [][2]int
	start := -1 // start of the current part, -1 before the first delimiter
	pos := 0
	for pos < len(body) {
		next := len(body)
		lineEnd := len(body)
		if i := bytes.IndexByte(body[pos:], '\n'); i >= 0 {
			lineEnd = pos + i
			next = lineEnd + 1
		}
		line := bytes.TrimSuffix(body[pos:lineEnd], []byte{'\r'})
		if bytes.HasPrefix(line, dash) {
			rest := line[len(dash):]
			closing := bytes.HasPrefix(rest, []byte("--"))
			if closing {
				rest = rest[2:]
			}
			if len(bytes.Trim(rest, " \t")) == 0 {
				if start >= 0 {
					parts = append(parts, [2]int{start, partEnd(body, start, pos)})
				}
				if closing {
					return parts
				}
				start = next
			}
		}
		pos = next
	}
	if start >= 0 && start < len(body) {
		// No close delimiter: the last part runs to the end, unless the
		// last delimiter ends the body (then it was meant to close).
		parts = append(parts, [2]int{start, len(body)})
	}
	return parts
}

// partEnd returns where a part that starts at start ends when the next
// delimiter line starts at delim: before the line break that precedes it.
func partEnd(body []byte, start, delim int) int {
	end := delim
	if end > start && body[end-1] == '\n' {
		end--
		if end > start && body[end-1] == '\r' {
			end--
		}
	}
	return end
}
