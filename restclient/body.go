package restclient

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/directbridge/directbridge/directapi"
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
	head, err := encodeJSON(auth)
	if err != nil {
		return nil, err
	}
	return &rawBody{authJSON: bytes.TrimSuffix(head, []byte("\n")), raws: raws}, nil
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

// Attachments travel in a send request as base64 text inside the JSON.
// Encoding the request whole would copy every attachment into the
// encoder's buffer, and that buffer into the request: for a 50 MB message
// 150 MB more while it is sent. Instead each large attachment's content
// is swapped for a unique token before encoding, and the request is
// written as the encoded JSON with the contents put back in place of the
// tokens (holeyBody). This gives the very bytes json would have written
// because base64 text needs no JSON escaping; content that is not plain
// base64 is left to the encoder.

// minHole is the smallest content worth cutting out.
const minHole = 4 << 10

// holes are the attachment contents cut out of a request.
type holes struct {
	token    string
	contents []string // by order of appearance in the request
}

// cutAttachments returns a copy of atts with each large base64 content
// replaced by a token, and the contents cut out. atts is not changed.
func cutAttachments(atts []directapi.Attachment) ([]directapi.Attachment, *holes) {
	h := &holes{}
	var out []directapi.Attachment
	for i, a := range atts {
		if len(a.Content) < minHole || !isBase64Text(a.Content) {
			continue
		}
		if out == nil {
			out = slices.Clone(atts)
			var r [12]byte
			rand.Read(r[:])
			h.token = "directbridge-hole-" + hex.EncodeToString(r[:]) + "-"
		}
		out[i].Content = h.token + strconv.Itoa(len(h.contents))
		h.contents = append(h.contents, a.Content)
	}
	if out == nil {
		return atts, nil
	}
	return out, h
}

// isBase64Text reports whether s is standard base64 text, which JSON
// writes as it stands.
func isBase64Text(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '+' || c == '/' || c == '=') {
			return false
		}
	}
	return true
}

// fill returns the body of the request whose JSON (with the tokens) is
// encoded.
func (h *holes) fill(encoded []byte) (body, error) {
	if h == nil {
		return jsonBody(encoded), nil
	}
	var parts []string
	rest := string(encoded)
	for i, content := range h.contents {
		tok := h.token + strconv.Itoa(i) + `"` // the quote: token 1 is not token 10
		at := strings.Index(rest, tok)
		if at < 0 {
			return nil, fmt.Errorf("attachment %d not found in the encoded request", i+1)
		}
		parts = append(parts, rest[:at], content)
		rest = rest[at+len(tok)-1:]
	}
	return holeyBody(append(parts, rest)), nil
}

// holeyBody is a request written as the concatenation of its parts.
type holeyBody []string

func (b holeyBody) Len() int64 {
	var n int64
	for _, p := range b {
		n += int64(len(p))
	}
	return n
}

func (b holeyBody) Open() io.Reader {
	rs := make([]io.Reader, len(b))
	for i, p := range b {
		rs[i] = strings.NewReader(p)
	}
	return io.MultiReader(rs...)
}
