package restclient

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/directbridge/directbridge/upstream/directapi"
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
	sizes := make([]int64, len(b.raws))
	for i, r := range b.raws {
		sizes[i] = int64(len(r))
	}
	return rawBodyLen(len(b.authJSON), sizes)
}

// rawBodyLen is the length of a rawBody whose auth JSON is authLen bytes
// long, for messages of the given sizes.
func rawBodyLen(authLen int, sizes []int64) int64 {
	n := int64(len(rawOpen) + authLen + len(rawMessages) + len(rawEnd))
	for i, size := range sizes {
		n += int64(len(rawMsgOpen)) + 4*((size+2)/3) + int64(len(rawMsgClose)) // base64.StdEncoding.EncodedLen, in int64
		if i > 0 {
			n++
		}
	}
	return n
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

// A send request carries the whole message as JSON strings: the body,
// the subject, header values and each attachment's base64 text. Encoding
// it whole (json.Marshal) would hold the message once more in the
// encoder's buffer, up to six times its size for text JSON must escape,
// and could tell the request's size only after building it. Instead each
// long string is cut out of the request and replaced by a unique token
// (holes.cut); the rest, a few hundred bytes, is encoded by encoding/json
// as any request, and the request is written as that skeleton with each
// token's place filled by its string, escaped as it is written
// (splicedBody, jsonStringReader). The bytes are the very ones json would
// have written, and their number is counted before any is written.

// minHole is the shortest string cut out of a request: shorter ones cost
// more as parts of a splicedBody than as bytes of its skeleton.
const minHole = 256

// holes are the strings cut out of one request.
type holes struct {
	min   int    // the shortest string cut; at least 1 (see cut)
	token string // the random prefix of every token
	strs  []string
}

// newHoles returns holes that cut strings of minLen bytes or more.
func newHoles(minLen int) *holes {
	var r [12]byte
	rand.Read(r[:])
	return &holes{min: max(minLen, 1), token: "directbridge-hole-" + hex.EncodeToString(r[:]) + "-"}
}

// cut returns a token in place of s when s is long enough, else s. An
// empty string is never cut: omitempty fields must stay empty.
func (h *holes) cut(s string) string {
	if len(s) < h.min {
		return s
	}
	h.strs = append(h.strs, s)
	return h.token + strconv.Itoa(len(h.strs)-1)
}

// message returns m with its strings cut; m's slices are not changed.
func (h *holes) message(m directapi.Message) directapi.Message {
	m.Sender, m.Subject, m.Body = h.cut(m.Sender), h.cut(m.Subject), h.cut(m.Body)
	m.Recipients = slices.Clone(m.Recipients)
	for i := range m.Recipients {
		m.Recipients[i].Email = h.cut(m.Recipients[i].Email)
	}
	m.AttachmentList = slices.Clone(m.AttachmentList)
	for i := range m.AttachmentList {
		a := &m.AttachmentList[i]
		a.Content, a.ContentType, a.Filename = h.cut(a.Content), h.cut(a.ContentType), h.cut(a.Filename)
	}
	return m
}

// headers returns hs with their strings cut; hs is not changed.
func (h *holes) headers(hs []directapi.MessageHeader) []directapi.MessageHeader {
	hs = slices.Clone(hs)
	for i := range hs {
		hs[i].Name, hs[i].Value = h.cut(hs[i].Name), h.cut(hs[i].Value)
	}
	return hs
}

// messageWithHeader returns m with its strings cut (message, headers).
func (h *holes) messageWithHeader(m directapi.MessageWithHeader) directapi.MessageWithHeader {
	return directapi.MessageWithHeader{Message: h.message(m.Message), Headers: h.headers(m.Headers)}
}

// body returns the request body of v, a request whose strings h cut.
func (h *holes) body(v any) (*splicedBody, error) {
	skeleton, err := encodeJSON(v)
	if err != nil {
		return nil, err
	}
	return h.splice(string(skeleton))
}

// splice cuts the encoded skeleton at every token, in the order json
// wrote them, which need not be the order they were cut in.
func (h *holes) splice(skeleton string) (*splicedBody, error) {
	b := &splicedBody{strs: make([]string, 0, len(h.strs))}
	found := make([]bool, len(h.strs))
	rest := skeleton
	for {
		at := strings.Index(rest, `"`+h.token)
		if at < 0 {
			break
		}
		digits := rest[at+1+len(h.token):]
		end := strings.IndexByte(digits, '"')
		i, err := strconv.Atoi(digits[:max(end, 0)])
		if end < 0 || err != nil || i < 0 || i >= len(h.strs) || found[i] {
			return nil, errors.New("a string cut out of the request is not found in it once")
		}
		found[i] = true
		b.parts = append(b.parts, rest[:at])
		b.strs = append(b.strs, h.strs[i])
		rest = digits[end+1:]
	}
	if len(b.strs) != len(h.strs) {
		return nil, fmt.Errorf("%d of %d strings cut out of the request not found in it", len(h.strs)-len(b.strs), len(h.strs))
	}
	b.parts = append(b.parts, rest)
	for _, p := range b.parts {
		b.n += int64(len(p))
	}
	for _, s := range b.strs {
		b.n += jsonStringLen(s, false)
	}
	return b, nil
}

// splicedBody is a request written as parts[0], strs[0] as a JSON
// string, parts[1], strs[1], …, parts[len(strs)].
type splicedBody struct {
	parts []string
	strs  []string
	n     int64 // counted once: Len is asked before each attempt
}

func (b *splicedBody) Len() int64 { return b.n }

func (b *splicedBody) Open() io.Reader {
	rs := make([]io.Reader, 0, 4*len(b.strs)+1)
	for i, s := range b.strs {
		rs = append(rs, strings.NewReader(b.parts[i]), strings.NewReader(`"`), &jsonStringReader{s: s}, strings.NewReader(`"`))
	}
	return io.MultiReader(append(rs, strings.NewReader(b.parts[len(b.strs)]))...)
}
