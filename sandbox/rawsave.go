package sandbox

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/directbridge/directbridge/upstream/directapi"
)

// SaveRawMessages carries whole messages in base64 inside JSON: a 20 MB
// message is a 27 MB request. Read as every other request is (the body
// in a buffer, json into a RawMessage's string, base64 into bytes), the
// embedded sandbox would hold the message three times over in the
// bridge's own process while SQLite stores it. Its request is instead
// read as it streams in: the base64 of each message is decoded into one
// buffer as it is read, and nothing else of size is kept. What is
// accepted is what encoding/json accepts into RawMessagesRequestType
// (field names matched without regard to case, unknown fields ignored);
// the base64 is read as directapi.RawMessage.Bytes reads it (padding
// optional, either alphabet, line breaks ignored).

// rawSaveRequest is directapi.RawMessagesRequestType as the sandbox
// reads it. A message whose data is missing, null or not base64 has nil
// Data, for the handler to refuse with the message's number.
type rawSaveRequest struct {
	Auth     directapi.Authentication
	Messages []rawSaveMessage
}

type rawSaveMessage struct{ Data []byte }

// decodeStream reads the request from r, whose announced length is size
// (-1 when unknown).
func (q *rawSaveRequest) decodeStream(r io.Reader, size int64) error {
	js := &jsonStream{r: bufio.NewReaderSize(r, 64<<10)}
	if size > 0 {
		// Every message's bytes go into one buffer: base64 decodes to
		// three quarters of its length, and the JSON around it is small.
		js.out = make([]byte, 0, size/4*3+3)
	}
	member := func(key string) error {
		switch {
		case strings.EqualFold(key, "auth"):
			raw, err := js.value()
			if err != nil {
				return err
			}
			if err := json.Unmarshal(raw, &q.Auth); err != nil {
				return err
			}
		case strings.EqualFold(key, "messages"):
			if js.peekIs('n') { // null
				_, err := js.value()
				return err
			}
			return js.array(func() error {
				var m rawSaveMessage
				if js.peekIs('n') {
					q.Messages = append(q.Messages, m)
					_, err := js.value()
					return err
				}
				err := js.object(func(key string) error {
					if !strings.EqualFold(key, "data") {
						_, err := js.value()
						return err
					}
					var err error
					m.Data, err = js.base64String()
					return err
				})
				q.Messages = append(q.Messages, m)
				return err
			})
		default:
			_, err := js.value()
			return err
		}
		return nil
	}
	var err error
	if js.peekIs('n') {
		_, err = js.value() // null: an empty request, as encoding/json reads it
	} else {
		err = js.object(member)
	}
	if err != nil {
		return err
	}
	if c, err := js.peek(); err != io.EOF {
		if err != nil {
			return err
		}
		return js.syntax(fmt.Sprintf("unexpected %q after the request", c))
	}
	return nil
}

// jsonStream reads JSON tokens from a stream, counting bytes for error
// messages that say where (never what) the problem is.
type jsonStream struct {
	r   *bufio.Reader
	off int64
	out []byte // decoded message bytes
}

// streamSyntaxError is a malformed request; the handler answers 400.
type streamSyntaxError struct {
	off int64
	msg string
}

func (e *streamSyntaxError) Error() string {
	return fmt.Sprintf("syntax error at byte %d (%s)", e.off, e.msg)
}

func (js *jsonStream) syntax(msg string) error { return &streamSyntaxError{off: js.off, msg: msg} }

func (js *jsonStream) readByte() (byte, error) {
	c, err := js.r.ReadByte()
	if err == nil {
		js.off++
	} else if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return c, err
}

// peek skips white space and returns the next byte without taking it;
// io.EOF at the end of the stream.
func (js *jsonStream) peek() (byte, error) {
	for {
		c, err := js.r.ReadByte()
		if err != nil {
			return 0, err
		}
		switch c {
		case ' ', '\t', '\r', '\n':
			js.off++
			continue
		}
		return c, js.r.UnreadByte()
	}
}

func (js *jsonStream) peekIs(c byte) bool {
	got, err := js.peek()
	return err == nil && got == c
}

func (js *jsonStream) expect(want byte) error {
	c, err := js.peek()
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	if err != nil {
		return err
	}
	if c != want {
		return js.syntax(fmt.Sprintf("expected %q", want))
	}
	_, err = js.readByte()
	return err
}

// object reads an object, calling member for each key with the stream
// at the key's value, which member must read.
func (js *jsonStream) object(member func(key string) error) error {
	if err := js.expect('{'); err != nil {
		return err
	}
	if js.peekIs('}') {
		_, err := js.readByte()
		return err
	}
	for {
		raw, err := js.stringToken()
		if err != nil {
			return err
		}
		var key string
		if err := json.Unmarshal(raw, &key); err != nil || !utf8.Valid(raw) {
			return js.syntax("bad key")
		}
		if err := js.expect(':'); err != nil {
			return err
		}
		if err := member(key); err != nil {
			return err
		}
		if done, err := js.more('}'); done || err != nil {
			return err
		}
	}
}

// array reads an array, calling elem with the stream at each element.
func (js *jsonStream) array(elem func() error) error {
	if err := js.expect('['); err != nil {
		return err
	}
	if js.peekIs(']') {
		_, err := js.readByte()
		return err
	}
	for {
		if err := elem(); err != nil {
			return err
		}
		if done, err := js.more(']'); done || err != nil {
			return err
		}
	}
}

// more takes the ',' before another member or the closing byte.
func (js *jsonStream) more(closing byte) (done bool, err error) {
	c, err := js.peek()
	if err == io.EOF {
		return false, io.ErrUnexpectedEOF
	}
	if err != nil {
		return false, err
	}
	if c != ',' && c != closing {
		return false, js.syntax(fmt.Sprintf("expected ',' or %q", closing))
	}
	_, err = js.readByte()
	return c == closing, err
}

// stringToken reads a string token, quotes included, as written.
func (js *jsonStream) stringToken() ([]byte, error) {
	if err := js.expect('"'); err != nil {
		return nil, err
	}
	tok := []byte{'"'}
	for {
		c, err := js.readByte()
		if err != nil {
			return nil, err
		}
		tok = append(tok, c)
		switch {
		case c == '"':
			return tok, nil
		case c == '\\':
			e, err := js.readByte()
			if err != nil {
				return nil, err
			}
			tok = append(tok, e)
		case c < 0x20:
			return nil, js.syntax("control character in string")
		}
	}
}

// value reads any value and returns it as written, checked to be JSON.
func (js *jsonStream) value() ([]byte, error) {
	c, err := js.peek()
	if err == io.EOF {
		return nil, io.ErrUnexpectedEOF
	}
	if err != nil {
		return nil, err
	}
	var tok []byte
	switch c {
	case '"':
		tok, err = js.stringToken()
	case '{', '[':
		tok, err = js.nested()
	default:
		for {
			c, err := js.r.ReadByte()
			if err == io.EOF {
				break
			}
			if err != nil {
				return nil, err
			}
			if strings.IndexByte(",}] \t\r\n", c) >= 0 {
				js.r.UnreadByte()
				break
			}
			js.off++
			tok = append(tok, c)
		}
	}
	if err != nil {
		return nil, err
	}
	if !json.Valid(tok) || !utf8.Valid(tok) {
		return nil, js.syntax("malformed value")
	}
	return tok, nil
}

// nested reads an object or array as written.
func (js *jsonStream) nested() ([]byte, error) {
	var tok []byte
	depth := 0
	for {
		c, err := js.peek()
		if err == io.EOF {
			return nil, io.ErrUnexpectedEOF
		}
		if err != nil {
			return nil, err
		}
		if c == '"' {
			s, err := js.stringToken()
			if err != nil {
				return nil, err
			}
			tok = append(tok, s...)
			continue
		}
		if _, err := js.readByte(); err != nil {
			return nil, err
		}
		tok = append(tok, c)
		switch c {
		case '{', '[':
			depth++
		case '}', ']':
			if depth--; depth == 0 {
				return tok, nil
			}
		}
	}
}

// base64String reads a string of base64 and decodes it into js.out,
// returning the bytes it decoded to; nil (and no error) when the value
// is null or not base64. A value of another type is refused, as
// encoding/json refuses it.
func (js *jsonStream) base64String() ([]byte, error) {
	if !js.peekIs('"') {
		v, err := js.value()
		if err != nil || string(v) == "null" {
			return nil, err
		}
		return nil, &json.UnmarshalTypeError{Value: "non-string", Type: reflect.TypeFor[string](), Field: "messages.data"}
	}
	js.readByte()
	start := len(js.out)
	bad, padded := false, false
	// RawMessage.Bytes takes the standard or the URL alphabet, not a mix
	// of the two ('+' or '/' with '-' or '_').
	std, url := false, false
	var quads [4096]byte // base64 characters not yet decoded
	n := 0
	flush := func(final bool) {
		take := n
		if !final {
			take -= take % 4
		}
		if bad || take == 0 {
			return
		}
		js.out = slices.Grow(js.out, base64.RawStdEncoding.DecodedLen(take))
		w, err := base64.RawStdEncoding.Decode(js.out[len(js.out):cap(js.out)], quads[:take])
		js.out = js.out[:len(js.out)+w]
		if err != nil {
			bad = true
		}
		n = copy(quads[:], quads[take:n])
	}
	for {
		c, err := js.readByte()
		if err != nil {
			return nil, err
		}
		switch c {
		case '"':
			flush(true)
			if bad || std && url || len(js.out) == start {
				js.out = js.out[:start]
				return nil, nil
			}
			return js.out[start:len(js.out):len(js.out)], nil
		case '\\':
			if c, err = js.unescape(); err != nil {
				return nil, err
			}
			if c == '"' || c == '\\' || c >= 0x80 {
				bad = true // an escaped quote, backslash or letter: not base64
				continue
			}
		default:
			if c < 0x20 {
				return nil, js.syntax("control character in string")
			}
		}
		switch {
		case c == '\r' || c == '\n' || c == '\t' || c == ' ':
			continue
		case c == '=':
			padded = true
			continue
		case c >= 0x80:
			// Never base64; the request must still be UTF-8, as every
			// request is (readBody).
			if !js.utf8Rune(c) {
				return nil, errNotUTF8
			}
			bad = true
			continue
		case padded:
			bad = true // data after the padding
			continue
		case c == '+' || c == '/':
			std = true
		case c == '-':
			c, url = '+', true
		case c == '_':
			c, url = '/', true
		}
		quads[n] = c
		if n++; n == len(quads) {
			flush(false)
		}
	}
}

// errNotUTF8 is a request that is not UTF-8 (RFC 8259 §8.1).
var errNotUTF8 = errors.New("request body is not valid UTF-8")

// utf8Rune reads the rest of a character beginning with first and reports
// whether it is valid UTF-8.
func (js *jsonStream) utf8Rune(first byte) bool {
	buf := []byte{first}
	for !utf8.FullRune(buf) {
		c, err := js.readByte()
		if err != nil {
			return false
		}
		buf = append(buf, c)
	}
	return utf8.Valid(buf)
}

// unescape reads the rest of an escape inside a string (after '\') and
// returns the byte it stands for; characters beyond ASCII, which base64
// never holds, come back as 0x80.
func (js *jsonStream) unescape() (byte, error) {
	e, err := js.readByte()
	if err != nil {
		return 0, err
	}
	switch e {
	case '"', '\\', '/':
		return e, nil
	case 'b', 'f':
		return 0x80, nil
	case 'n':
		return '\n', nil
	case 'r':
		return '\r', nil
	case 't':
		return '\t', nil
	case 'u':
		var hex [4]byte
		for i := range hex {
			if hex[i], err = js.readByte(); err != nil {
				return 0, err
			}
		}
		r, err := strconv.ParseUint(string(hex[:]), 16, 16)
		if err != nil {
			return 0, js.syntax("bad \\u escape")
		}
		if r >= 0x80 {
			return 0x80, nil
		}
		return byte(r), nil
	}
	return 0, js.syntax("bad escape")
}

// streamDecoder is a request type read as it streams in (see above).
type streamDecoder interface {
	decodeStream(r io.Reader, size int64) error
}
