package restclient

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"io"
)

// body is an encoded request body. It can be read more than once (a
// retry, a redirect) and knows its length, so requests carry an exact
// Content-Length rather than chunked encoding, which some providers'
// gateways refuse.
type body interface {
	// Len is the number of bytes Open yields.
	Len() int64
	// Open returns a reader of the whole body from its start.
	Open() io.Reader
}

// jsonBody is a body already encoded.
type jsonBody []byte

func (b jsonBody) Len() int64      { return int64(len(b)) }
func (b jsonBody) Open() io.Reader { return bytes.NewReader(b) }

// rawBody is the JSON of a RawMessagesRequestType holding raws, as
// json.Encoder writes it (HTML not escaped, a final newline), produced
// while the request is written: the base64 of each message is encoded
// from its bytes a few kilobytes at a time. Encoding RawMessage values
// would hold each message three times more (base64 string, JSON copy,
// request buffer); a 20 MB APPEND would cost 80 MB instead of nothing
// beyond its own bytes.
type rawBody struct {
	authJSON []byte
	raws     [][]byte
}

const rawOpen, rawMessages, rawMsgOpen, rawMsgClose, rawEnd = `{"auth":`, `,"messages":[`, `{"data":"`, `"}`, "]}\n"

func newRawBody(auth any, raws [][]byte) (*rawBody, error) {
	var head bytes.Buffer
	enc := json.NewEncoder(&head)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(auth); err != nil {
		return nil, err
	}
	return &rawBody{authJSON: bytes.TrimSuffix(head.Bytes(), []byte("\n")), raws: raws}, nil
}

func (b *rawBody) Len() int64 {
	n := len(rawOpen) + len(b.authJSON) + len(rawMessages) + len(rawEnd)
	for i, r := range b.raws {
		n += len(rawMsgOpen) + base64.StdEncoding.EncodedLen(len(r)) + len(rawMsgClose)
		if i > 0 {
			n++
		}
	}
	return int64(n)
}

func (b *rawBody) Open() io.Reader {
	parts := []io.Reader{bytes.NewReader([]byte(rawOpen)), bytes.NewReader(b.authJSON), bytes.NewReader([]byte(rawMessages))}
	for i, r := range b.raws {
		if i > 0 {
			parts = append(parts, bytes.NewReader([]byte(",")))
		}
		parts = append(parts, bytes.NewReader([]byte(rawMsgOpen)), &base64Reader{src: r}, bytes.NewReader([]byte(rawMsgClose)))
	}
	parts = append(parts, bytes.NewReader([]byte(rawEnd)))
	return io.MultiReader(parts...)
}

// base64Reader yields the standard base64 encoding of src.
type base64Reader struct {
	src     []byte
	pending []byte // encoded bytes not yet read (a read shorter than 4)
	quad    [4]byte
}

func (r *base64Reader) Read(p []byte) (int, error) {
	n := 0
	for len(p) > 0 {
		if len(r.pending) > 0 {
			c := copy(p, r.pending)
			r.pending, p, n = r.pending[c:], p[c:], n+c
			continue
		}
		if len(r.src) == 0 {
			break
		}
		if len(p) < 4 {
			// Too small for a whole group: encode one into quad.
			take := min(3, len(r.src))
			base64.StdEncoding.Encode(r.quad[:], r.src[:take])
			r.src, r.pending = r.src[take:], r.quad[:]
			continue
		}
		take := min(len(p)/4*3, len(r.src))
		if take < len(r.src) {
			take -= take % 3 // padding only at the very end
		}
		base64.StdEncoding.Encode(p, r.src[:take])
		w := base64.StdEncoding.EncodedLen(take)
		r.src, p, n = r.src[take:], p[w:], n+w
	}
	if n == 0 && len(r.src) == 0 && len(r.pending) == 0 {
		return 0, io.EOF
	}
	return n, nil
}
