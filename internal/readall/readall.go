// Package readall reads a body of known (or announced) size into one
// buffer of that size. io.ReadAll grows its buffer by doubling, so a 20 MB
// message costs about 60 MB of allocations and holds up to twice its size
// at the moment the buffer grows; messages of tens of megabytes are what
// Direct carries (C-CDA documents, XDM packages).
package readall

import (
	"io"
)

// maxUpFront bounds the memory reserved before the bytes arrive.
const maxUpFront = 8 << 20

// Sized reads r, which is expected to hold about size bytes (a literal's
// size, a Content-Length; 0 or less when unknown), and at most limit
// bytes: a body longer than limit returns the first limit+1 bytes, for
// the caller to refuse.
//
// The buffer is sized once when size is right. A client announcing more
// than it sends must not make the bridge hold memory for nothing, so only
// maxUpFront is reserved before the bytes come; once that much has
// arrived, the buffer is grown in one step to the announced size (one
// copy of maxUpFront, where doubling would copy and hold up to twice the
// message). Past the announced size, or without one, the bytes are kept
// in pieces and joined once at the end: the body is held twice for a
// moment, where doubling holds it three times and keeps up to twice its
// size.
func Sized(r io.Reader, size, limit int64) ([]byte, error) {
	r = io.LimitReader(r, limit+1)
	size = min(size, limit+1)
	// One byte more than expected: the read that sees EOF needs room.
	buf := make([]byte, 0, max(min(size, maxUpFront), 512)+1)
	var pieces [][]byte // full buffers, in order, when the body outgrew size
	got := 0            // bytes in pieces
	for {
		if len(buf) == cap(buf) {
			if int64(len(buf)) < size+1 {
				grown := make([]byte, len(buf), size+1)
				copy(grown, buf)
				buf = grown
			} else {
				// Pieces as large as what came so far, up to pieceSize:
				// a small body without an announced size stays small.
				pieces = append(pieces, buf)
				got += len(buf)
				buf = make([]byte, 0, min(max(got, 4096), pieceSize))
			}
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return join(pieces, buf), nil
		}
		if err != nil {
			return join(pieces, buf), err
		}
	}
}

// pieceSize is the largest piece past the announced size.
const pieceSize = 4 << 20

// join returns pieces and last as one slice.
func join(pieces [][]byte, last []byte) []byte {
	if len(pieces) == 0 {
		return last
	}
	n := len(last)
	for _, p := range pieces {
		n += len(p)
	}
	out := make([]byte, 0, n)
	for _, p := range pieces {
		out = append(out, p...)
	}
	return append(out, last...)
}
