package smtpbackend

import (
	"bytes"
	"errors"
)

// Bare LF. RFC 5321 §2.3.8 allows line breaks only as CRLF in SMTP data,
// yet common submitters send LF alone: Python's smtplib.sendmail with
// msg.as_bytes(), curl --upload-file of a Unix file, scripts of legacy EHR
// systems. Refusing them loses mail; Postfix normalises them on submission,
// and so does the bridge: every LF not preceded by CR becomes CRLF.
//
// SMTP smuggling stays impossible. go-smtp ends DATA only at
// <CRLF>.<CRLF>, so "\n.\n" never ends it; and a message that holds a line
// of a lone dot ended or begun by a bare LF is refused: no submitter writes
// one (such a line is dot-stuffed to ".." by every client, RFC 5321
// §4.5.2), and a server downstream that took bare LF for a line break
// would read it as the end of the data and what follows as a second,
// forged message. A bare CR is refused too: it is not a line break
// anywhere, and the provider's model cannot carry it.
//
// Dot-stuffing: go-smtp removes the stuffed dot only at the start of a
// line begun by CRLF; after a bare LF the client's ".." arrives as is, and
// normaliseLineEnds removes the stuffed dot there.

// errSmuggling reports a lone-dot line next to a bare LF.
var errSmuggling = errors.New("smtpbackend: a line of a lone dot next to a bare LF")

// normaliseLineEnds returns raw with every bare LF made CRLF (and the
// client's dot-stuffing after it undone), or raw itself when it has none.
// It fails with ErrBareLineEnding for a bare CR and errSmuggling for a
// lone-dot line ended or begun by a bare LF.
func normaliseLineEnds(raw []byte) ([]byte, error) {
	if !hasBareLineEnding(raw) {
		return raw, nil
	}
	out := make([]byte, 0, len(raw)+bytes.Count(raw, []byte{'\n'}))
	bareBefore := false // the line being read began after a bare LF
	stuffed := false    // and its first dot was the client's stuffing
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		switch {
		case c == '\r' && (i+1 >= len(raw) || raw[i+1] != '\n'):
			return nil, ErrBareLineEnding
		case c == '\r':
			// CRLF: the line ends as it should.
			if err := checkDotLine(out, bareBefore && !stuffed, false); err != nil {
				return nil, err
			}
			out = append(out, '\r', '\n')
			i++
			bareBefore, stuffed = false, false
			continue
		case c == '\n':
			if !stuffed {
				if err := checkDotLine(out, bareBefore, true); err != nil {
					return nil, err
				}
			}
			out = append(out, '\r', '\n')
			bareBefore, stuffed = true, false
			if i+2 < len(raw) && raw[i+1] == '.' && raw[i+2] == '.' {
				i++ // the client's stuffed dot, which go-smtp left
				stuffed = true
			}
			continue
		}
		out = append(out, c)
	}
	return out, nil
}

// checkDotLine fails when the line just read (the end of out) is a lone
// dot and a bare LF begins or ends it.
func checkDotLine(out []byte, bareBefore, bareAfter bool) error {
	if !bareBefore && !bareAfter {
		return nil
	}
	n := len(out)
	if n >= 1 && out[n-1] == '.' && (n == 1 || out[n-2] == '\n') {
		return errSmuggling
	}
	return nil
}
