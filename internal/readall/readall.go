// Package readall reads a body of known (or announced) size into one
// buffer of that size. io.ReadAll grows its buffer by doubling, so a 20 MB
// message costs about 60 MB of allocations and holds up to twice its size
// at the moment the buffer grows; messages of tens of megabytes are what
// Direct carries (C-CDA documents, XDM packages).
package readall

import (
	"bytes"
	"io"
)

// maxUpFront bounds the memory reserved before the bytes arrive.
const maxUpFront = 8 << 20

// Sized reads r, which is expected to hold about size bytes (a literal's
// size, a Content-Length; 0 or less when unknown), and at most limit
// bytes: a body longer than limit returns the first limit+1 bytes, for
// the caller to refuse. The buffer is allocated once when size is right,
// up to maxUpFront: a client announcing more than it sends must not make
// the bridge hold memory for nothing; past it the buffer grows as the
// bytes come.
func Sized(r io.Reader, size, limit int64) ([]byte, error) {
	var buf bytes.Buffer
	size = min(size, maxUpFront)
	if size > 0 {
		// bytes.MinRead more: ReadFrom wants that much room for the read
		// that sees EOF, and would double the buffer to get it.
		buf.Grow(int(min(size, limit)) + bytes.MinRead)
	}
	_, err := buf.ReadFrom(io.LimitReader(r, limit+1))
	return buf.Bytes(), err
}
