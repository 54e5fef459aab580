package mimeconv

import (
	"encoding/base64"
	"fmt"
	"strings"

	"github.com/directbridge/directbridge/directapi"
)

// walker walks the MIME tree of one message and fills a Parsed.
type walker struct {
	opts       ParseOptions
	p          *Parsed
	parts      int
	bodyChosen bool
}

// part is one body part of a multipart entity.
type part struct {
	h    header
	body []byte
	mt   string // media type, lower case
	att  bool   // an attachment by disposition or filename
}

// entity handles one entity at nesting depth depth; defaultType is the media
// type of an entity without a usable Content-Type (RFC 2045 §5.2,
// RFC 2046 §5.1.5 for multipart/digest).
func (w *walker) entity(h header, body []byte, depth int, defaultType string) error {
	mt, params := contentType(h, defaultType)
	if strings.HasPrefix(mt, "multipart/") {
		if boundary := params["boundary"]; boundary != "" {
			if raws, ok := splitMultipart(body, boundary); ok {
				return w.multipart(mt, raws, depth)
			}
		}
		// A multipart entity that cannot be split has an invalid
		// Content-Type, which RFC 2045 §5.2 says to read as the default
		// text/plain; charset=us-ascii.
		mt, params = "text/plain", nil
	}
	w.leaf(h, body, mt, params)
	return nil
}

// multipart handles the parts of a multipart entity of type mt.
func (w *walker) multipart(mt string, raws [][]byte, depth int) error {
	if depth+1 > w.opts.MaxDepth {
		return fmt.Errorf("mimeconv: parse: nesting deeper than %d: %w", w.opts.MaxDepth, ErrTooComplex)
	}
	childDefault := "text/plain"
	if mt == "multipart/digest" {
		childDefault = "message/rfc822"
	}
	var parts []part
	for _, raw := range raws {
		w.parts++
		if w.parts > w.opts.MaxParts {
			return fmt.Errorf("mimeconv: parse: more than %d parts: %w", w.opts.MaxParts, ErrTooComplex)
		}
		h, body := readHeader(raw)
		if len(h) == 0 && len(body) == 0 {
			continue // an empty part, e.g. after a delimiter that should have closed
		}
		pmt, _ := contentType(h, childDefault)
		parts = append(parts, part{h: h, body: body, mt: pmt, att: isAttachment(h)})
	}
	preferred := -1
	if mt == "multipart/alternative" {
		preferred = preferredAlternative(parts)
	}
	for i, c := range parts {
		if preferred >= 0 && i != preferred && !c.att && (c.mt == "text/plain" || c.mt == "text/html") {
			continue // the same content as the preferred alternative
		}
		if err := w.entity(c.h, c.body, depth+1, childDefault); err != nil {
			return err
		}
	}
	return nil
}

// preferredAlternative picks the alternative to show (RFC 2046 §5.1.4):
// the first text/html, else the last multipart alternative (which is richer
// by the RFC's ordering and usually holds the HTML), else the first
// text/plain; -1 if there is none.
func preferredAlternative(parts []part) int {
	for i, c := range parts {
		if c.mt == "text/html" && !c.att {
			return i
		}
	}
	for i := len(parts) - 1; i >= 0; i-- {
		if strings.HasPrefix(parts[i].mt, "multipart/") {
			return i
		}
	}
	for i, c := range parts {
		if c.mt == "text/plain" && !c.att {
			return i
		}
	}
	return -1
}

// leaf makes a leaf entity the body or an attachment.
func (w *walker) leaf(h header, body []byte, mt string, params map[string]string) {
	data := decodeTransfer(firstToken(h.get("Content-Transfer-Encoding")), body)
	name := filename(h)
	if (mt == "text/plain" || mt == "text/html") && !isAttachment(h) && !w.bodyChosen {
		w.bodyChosen = true
		w.p.HTMLBody = mt == "text/html"
		text := toUTF8(params["charset"], data)
		w.p.Body = strings.ReplaceAll(text, "\r\n", "\n")
		return
	}
	n := len(w.p.Attachments) + 1
	if name == "" {
		if mt == "message/rfc822" {
			name = fmt.Sprintf("message-%d.eml", n)
		} else {
			name = fmt.Sprintf("attachment-%d%s", n, extensions[mt])
		}
	}
	w.p.Attachments = append(w.p.Attachments, directapi.Attachment{
		Content:     base64.StdEncoding.EncodeToString(data),
		ContentType: mt,
		Filename:    name,
	})
}

// contentType returns the media type and parameters of an entity, or
// defaultType when Content-Type is absent or unreadable (RFC 2045 §5.2).
func contentType(h header, defaultType string) (string, map[string]string) {
	mt, params := parseMediaType(h.get("Content-Type"))
	if mt == "" || !strings.Contains(mt, "/") {
		return defaultType, params
	}
	return mt, params
}

// isAttachment reports whether an entity is meant as a file: it has
// Content-Disposition attachment (RFC 2183 §2.2) or a file name.
func isAttachment(h header) bool {
	disp, _ := parseMediaType(h.get("Content-Disposition"))
	return disp == "attachment" || filename(h) != ""
}

// filename returns the Content-Disposition filename parameter (RFC 2183
// §2.3), else the Content-Type name parameter that older mailers use, decoded
// from RFC 2231 or RFC 2047 and as valid UTF-8; "" if there is none.
func filename(h header) string {
	_, dp := parseMediaType(h.get("Content-Disposition"))
	name := strings.TrimSpace(dp["filename"])
	if name == "" {
		_, cp := parseMediaType(h.get("Content-Type"))
		name = strings.TrimSpace(cp["name"])
	}
	return strings.ToValidUTF8(name, "\uFFFD")
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
