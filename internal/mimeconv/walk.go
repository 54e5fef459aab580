package mimeconv

import (
	"encoding/base64"
	"errors"
	"fmt"
	"mime"
	"strings"

	"github.com/directbridge/directbridge/upstream/directapi"
)

// walker walks the tree of one message and fills a Parsed.
type walker struct {
	p          *Parsed
	bodyChosen bool
	// err is the first text that could not be read without loss (a
	// *CharsetError): the body or an attachment name.
	err error
	// maxText is ParseOptions.MaxText; tooLong the body that passed it.
	maxText int64
	tooLong error
}

// lost records err, the first one only.
func (w *walker) lost(where string, err error) {
	if err != nil && w.err == nil {
		w.err = in(where, err)
	}
}

// entity handles one entity: the body parts of a multipart, or a leaf.
// message/rfc822 parts are leaves here: Parse does not look inside them.
func (w *walker) entity(e *Part) {
	if e.Children == nil {
		w.leaf(e)
		return
	}
	var parts []*Part
	for _, c := range e.Children {
		if len(c.Header) == 0 && len(c.Body()) == 0 {
			continue // an empty part, e.g. after a delimiter that should have closed
		}
		parts = append(parts, c)
	}
	preferred := -1
	if e.Subtype == "alternative" {
		preferred = preferredAlternative(parts)
	}
	for i, c := range parts {
		if preferred >= 0 && i != preferred && !isAttachment(c.Header) && c.Type == "text" && (c.Subtype == "plain" || c.Subtype == "html") {
			continue // the same content as the preferred alternative
		}
		w.entity(c)
	}
}

// preferredAlternative picks the alternative to show (RFC 2046 §5.1.4):
// the first text/html, else the last multipart alternative (which is richer
// by the RFC's ordering and usually holds the HTML), else the first
// text/plain; -1 if there is none.
func preferredAlternative(parts []*Part) int {
	for i, c := range parts {
		if c.MediaType() == "text/html" && !isAttachment(c.Header) {
			return i
		}
	}
	for i := len(parts) - 1; i >= 0; i-- {
		if parts[i].Type == "multipart" {
			return i
		}
	}
	for i, c := range parts {
		if c.MediaType() == "text/plain" && !isAttachment(c.Header) {
			return i
		}
	}
	return -1
}

// leaf makes a leaf entity the body or an attachment.
func (w *walker) leaf(e *Part) {
	mt := e.MediaType()
	name, err := filenameText(e.Header)
	if (mt == "text/plain" || mt == "text/html") && !isAttachment(e.Header) && !w.bodyChosen {
		w.bodyChosen = true
		w.p.HTMLBody = mt == "text/html"
		data, _ := e.Decoded()
		text, err := decodeTextLines(e.Params["charset"], data, true, w.maxText)
		if errors.Is(err, ErrTextTooLong) {
			w.tooLong = fmt.Errorf("mimeconv: parse: body: %w", err)
			return
		}
		w.lost("body", err)
		w.p.Body = text
		return
	}
	w.lost("attachment name", err)
	data, _ := e.Decoded() // an unknown encoding leaves the bytes as they are
	n := len(w.p.Attachments) + 1
	if name == "" {
		if mt == "message/rfc822" {
			name = fmt.Sprintf("message-%d.eml", n)
		} else {
			name = fmt.Sprintf("attachment-%d%s", n, extensions[mt])
		}
	}
	w.p.Attachments = append(w.p.Attachments, directapi.Attachment{
		Content:     base64Text(data),
		ContentType: attachmentType(mt, e.Params),
		Filename:    name,
	})
}

// attachmentType is the contentType of an attachment in the provider's
// request: the media type, and the charset the part declares, if any.
// The bytes of a text attachment are sent as they are (base64), so the
// label is what tells the recipient's mail reader how to read them: an
// ISO-8859-1 lab report without it would be read as UTF-8 or ASCII. The
// document's Attachment.contentType is "Content-Type of the attachment",
// a field that takes parameters; the file name goes in its own field, so
// charset is the one parameter carried.
// Only text types (RFC 2046 §4.1.2) and XML (RFC 7303 §3.2, which C-CDA
// documents are) define it.
func attachmentType(mt string, params map[string]string) string {
	cs := strings.TrimSpace(params["charset"])
	if cs == "" || !(strings.HasPrefix(mt, "text/") || strings.HasSuffix(mt, "/xml") || strings.HasSuffix(mt, "+xml")) {
		return mt
	}
	if ct := mime.FormatMediaType(mt, map[string]string{"charset": cs}); ct != "" {
		return ct
	}
	return mt // a label that cannot be written as a parameter value
}

// isAttachment reports whether an entity is meant as a file: it has
// Content-Disposition attachment (RFC 2183 §2.2) or a file name.
func isAttachment(h Header) bool {
	disp, _ := parseMediaType(h.Get("Content-Disposition"))
	return disp == "attachment" || filename(h) != ""
}

// filename returns the Content-Disposition filename parameter (RFC 2183
// §2.3), else the Content-Type name parameter that older mailers use, decoded
// from RFC 2231 or RFC 2047 and as valid UTF-8 (raw 8-bit bytes that are
// not UTF-8 read as Windows-1252, see headerText); "" if there is none.
func filename(h Header) string {
	name, _ := filenameText(h)
	return name
}

// filenameText is filename, and an error wrapping ErrUndecodableText when
// the name it returns could not be decoded without loss.
func filenameText(h Header) (string, error) {
	_, dp, lossy := parseMediaTypeText(h.Get("Content-Disposition"))
	name, err := strings.TrimSpace(dp["filename"]), lossy["filename"]
	if name == "" {
		_, cp, lossy := parseMediaTypeText(h.Get("Content-Type"))
		name, err = strings.TrimSpace(cp["name"]), lossy["name"]
	}
	return strings.ToValidUTF8(name, "\uFFFD"), err
}

// firstToken returns the first word of a field value, lower case, for
// fields such as Content-Transfer-Encoding that some mailers follow with
// junk.
func firstToken(v string) string {
	v = strings.TrimSpace(v)
	if i := strings.IndexAny(v, " \t;("); i >= 0 {
		v = v[:i]
	}
	return strings.ToLower(v)
}

// extensions gives generated attachment names an extension for common
// types. A fixed table keeps names the same on every host, which
// mime.ExtensionsByType (which reads the system's tables) would not.
var extensions = map[string]string{
	"text/plain":                       ".txt",
	"text/html":                        ".html",
	"text/xml":                         ".xml",
	"text/csv":                         ".csv",
	"text/calendar":                    ".ics",
	"application/xml":                  ".xml",
	"application/json":                 ".json",
	"application/pdf":                  ".pdf",
	"application/zip":                  ".zip",
	"application/x-zip-compressed":     ".zip",
	"application/msword":               ".doc",
	"application/pkcs7-signature":      ".p7s",
	"application/x-pkcs7-signature":    ".p7s",
	"application/pkcs7-mime":           ".p7m",
	"application/x-pkcs7-mime":         ".p7m",
	"image/png":                        ".png",
	"image/jpeg":                       ".jpg",
	"image/gif":                        ".gif",
	"image/tiff":                       ".tif",
	"message/disposition-notification": ".txt",
	"message/delivery-status":          ".txt",
}

// base64Text is base64.StdEncoding.EncodeToString without its copy: that
// encodes into a buffer and converts it to a string, holding a large
// attachment's base64 twice.
func base64Text(data []byte) string {
	var b strings.Builder
	b.Grow(base64.StdEncoding.EncodedLen(len(data)))
	enc := base64.NewEncoder(base64.StdEncoding, &b)
	enc.Write(data)
	enc.Close()
	return b.String()
}
