package mimeconv

import (
	"fmt"
	"strings"
)

// Part is one entity of a parsed message (RFC 2045 §2.4): the message
// itself, a body part of a multipart, or the message a message/rfc822 part
// encapsulates. ParseTree builds the whole tree once; every reader of a
// message (the IMAP front's BODYSTRUCTURE, ENVELOPE, BODY[section],
// BINARY and SEARCH, and the SMTP front's conversion through Parse) takes
// it from there, so they cannot disagree about where a part starts, what
// its type is or how its content decodes.
//
// A Part records offsets into the bytes it was parsed from, so sections are
// slices of the message as stored, never re-serialised. The one exception
// is a message/rfc822 part with a transfer encoding other than 7bit, 8bit
// or binary (which RFC 2046 §5.2.1 forbids but some mailers write): its
// encapsulated message is parsed from the decoded bytes, and the offsets
// of that sub-tree index those.
//
// A Part is read-only once built and safe for concurrent readers.
type Part struct {
	buf                   []byte // the bytes the offsets index
	start, bodyStart, end int    // entity, body and end offsets in buf

	// Header is the entity's header section: for the message itself its
	// header, for a body part its MIME header (RFC 2045 §3).
	Header Header
	// Type and Subtype are the media type in lower case (RFC 2045 §5.1),
	// with the defaults of RFC 2045 §5.2 (text/plain) and RFC 2046
	// §5.1.5 (message/rfc822 in a multipart/digest) applied when the
	// Content-Type is absent or unreadable. A multipart whose body parts
	// cannot be found is text/plain too (RFC 2045 §5.2: an invalid
	// Content-Type); one cut off by a ParseOptions limit is
	// application/octet-stream, opaque data.
	Type, Subtype string
	// Params are the Content-Type parameters, names in lower case, values
	// decoded from RFC 2231 and RFC 2047. A defaulted text/plain has
	// charset us-ascii unless the header named another charset.
	Params map[string]string
	// Encoding is the Content-Transfer-Encoding mechanism in lower case
	// (its first word, as some mailers add junk after it), or "" when
	// there is none, which means 7bit (RFC 2045 §6.1).
	Encoding string
	// Children are the body parts of a multipart, in order; nil for any
	// other type. A multipart Part always has at least one child.
	Children []*Part
	// Message is the encapsulated message of a message/rfc822 or
	// message/global part (RFC 2046 §5.2.1, RFC 6532 §3.5); nil for any
	// other type and for one cut off by a limit.
	Message *Part
	// Depth is the nesting depth: 0 for the message, one more for each
	// multipart body part or encapsulated message on the way down.
	Depth int
}

// ParseTree parses raw (RFC 5322 with MIME, RFC 2045-2049) into its tree
// of parts. It never fails to return a usable tree and never panics, on any
// input: a message without a header has an empty Header and its whole
// bytes as body, broken MIME is read as far as it goes (see readFields and
// splitMultipart), and the work is bounded by opts (MaxDepth and MaxParts,
// with their defaults; SkipBodies parses the top-level header only).
//
// When a limit cut the tree short, the tree is still returned, with the
// parts beyond the limit left opaque, together with an error that wraps
// ErrTooComplex.
func ParseTree(raw []byte, opts ParseOptions) (*Part, error) {
	if opts.MaxDepth <= 0 {
		opts.MaxDepth = DefaultMaxDepth
	}
	if opts.MaxParts <= 0 {
		opts.MaxParts = DefaultMaxParts
	}
	b := &treeBuilder{opts: opts}
	root := b.entity(raw, 0, len(raw), 0, "text/plain", true)
	if !opts.SkipBodies {
		b.expand(root)
	}
	return root, b.err
}

// treeBuilder carries the limits and counts of one ParseTree.
type treeBuilder struct {
	opts  ParseOptions
	parts int
	err   error
}

// cut records that a limit stopped the parse.
func (b *treeBuilder) cut(format string, a ...any) {
	if b.err == nil {
		b.err = fmt.Errorf("mimeconv: parse: "+format+": %w", append(a, ErrTooComplex)...)
	}
}

// entity reads the header of the entity buf[start:end] and types it;
// defaultType applies when it has no usable Content-Type.
func (b *treeBuilder) entity(buf []byte, start, end, depth int, defaultType string, top bool) *Part {
	h, bodyOff := readFields(buf[start:end], top)
	for i := range h {
		h[i].start += start
		h[i].end += start
	}
	p := &Part{buf: buf, start: start, bodyStart: start + bodyOff, end: end, Header: h, Depth: depth}
	p.Encoding = firstToken(h.Get("Content-Transfer-Encoding"))
	mt, params := parseMediaType(h.Get("Content-Type"))
	if mt == "" || !strings.Contains(mt, "/") {
		mt = defaultType
		if mt == "text/plain" {
			if params == nil {
				params = map[string]string{}
			}
			if params["charset"] == "" {
				params["charset"] = "us-ascii"
			}
		}
	}
	p.Type, p.Subtype, _ = strings.Cut(mt, "/")
	p.Params = params
	return p
}

// expand finds the body parts of a multipart p and the encapsulated
// message of a message/rfc822 p, recursively, within the limits.
func (b *treeBuilder) expand(p *Part) {
	switch {
	case p.Type == "multipart":
		b.multipart(p)
	case p.Type == "message" && (p.Subtype == "rfc822" || p.Subtype == "global"):
		b.message(p)
	}
}

func (b *treeBuilder) multipart(p *Part) {
	ranges := splitMultipart(p.buf[p.bodyStart:p.end], p.Params["boundary"])
	if len(ranges) == 0 {
		// RFC 2045 §5.2: an invalid Content-Type (here one whose body
		// parts cannot be found) is read as text/plain; charset=us-ascii.
		p.Type, p.Subtype = "text", "plain"
		p.Params = map[string]string{"charset": "us-ascii"}
		return
	}
	if p.Depth+1 > b.opts.MaxDepth {
		b.cut("nesting deeper than %d", b.opts.MaxDepth)
		p.Type, p.Subtype, p.Params = "application", "octet-stream", nil
		return
	}
	childDefault := "text/plain"
	if p.Subtype == "digest" {
		childDefault = "message/rfc822"
	}
	for _, r := range ranges {
		if b.parts >= b.opts.MaxParts {
			b.cut("more than %d parts", b.opts.MaxParts)
			break
		}
		b.parts++
		c := b.entity(p.buf, p.bodyStart+r[0], p.bodyStart+r[1], p.Depth+1, childDefault, false)
		p.Children = append(p.Children, c)
	}
	if len(p.Children) == 0 {
		p.Type, p.Subtype, p.Params = "application", "octet-stream", nil
		return
	}
	for _, c := range p.Children {
		b.expand(c)
	}
}

func (b *treeBuilder) message(p *Part) {
	if p.Depth+1 > b.opts.MaxDepth || b.parts >= b.opts.MaxParts {
		if p.Depth+1 > b.opts.MaxDepth {
			b.cut("nesting deeper than %d", b.opts.MaxDepth)
		} else {
			b.cut("more than %d parts", b.opts.MaxParts)
		}
		return
	}
	b.parts++
	buf, start, end := p.buf, p.bodyStart, p.end
	if !identityEncoding(p.Encoding) {
		// Not allowed for message/rfc822 (RFC 2046 §5.2.1), but written
		// by some mailers: the message is what the encoding hides.
		buf = decodeTransfer(p.Encoding, p.buf[p.bodyStart:p.end])
		start, end = 0, len(buf)
	}
	p.Message = b.entity(buf, start, end, p.Depth+1, "text/plain", true)
	b.expand(p.Message)
}

// identityEncoding reports a Content-Transfer-Encoding that leaves the
// bytes as they are (RFC 2045 §6.2): 7bit, 8bit, binary, or none.
func identityEncoding(enc string) bool {
	switch enc {
	case "", "7bit", "8bit", "binary":
		return true
	}
	return false
}

// MediaType is "type/subtype" in lower case.
func (p *Part) MediaType() string { return p.Type + "/" + p.Subtype }

// Bytes is the whole entity as written: header section and body.
func (p *Part) Bytes() []byte { return p.buf[p.start:p.end:p.end] }

// HeaderBytes is the header section as written, including the empty line
// that ends it when there is one; HeaderBytes followed by Body is Bytes.
func (p *Part) HeaderBytes() []byte { return p.buf[p.start:p.bodyStart:p.bodyStart] }

// Body is the body as written, transfer encoding and all. For a
// message/rfc822 part it is the encapsulated message.
func (p *Part) Body() []byte { return p.buf[p.bodyStart:p.end:p.end] }
