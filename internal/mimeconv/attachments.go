package mimeconv

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"mime"
	"strings"

	"github.com/directbridge/directbridge/upstream/directapi"
)

// filePart is an attachment ready to write.
type filePart struct {
	fields []field
	data   []byte
	// report is the report-type of a machine-readable report part
	// (RFC 6522 §3: "disposition-notification", "delivery-status"), ""
	// for any other part; reportMate marks a part that may follow one in
	// a multipart/report (the returned headers or message).
	report     string
	reportMate bool
}

// reportParts are the parts of a receipt (RFC 8098 §3) or bounce (RFC 3464
// §2) besides its human-readable text: the report itself and what may
// follow it. They keep their own type, inline, in 7bit or 8bit (the
// message/* types forbid base64, RFC 2046 §5.2.4), so that Compose can
// rebuild the multipart/report an agent recognises.
var reportParts = map[string]string{
	"message/disposition-notification":        "disposition-notification",
	"message/delivery-status":                 "delivery-status",
	"message/global-disposition-notification": "",
	"message/global-delivery-status":          "",
	"text/rfc822-headers":                     "",
	"message/global-headers":                  "",
}

// attachmentParts decodes and describes msg.AttachmentList.
func attachmentParts(list []directapi.Attachment) ([]filePart, error) {
	var parts []filePart
	for i, a := range list {
		data, err := decodeAttachment(a.Content)
		if err != nil {
			return nil, fmt.Errorf("mimeconv: compose: attachment %d %q: content is not base64: %v: %w", i, a.Filename, err, ErrInvalidAttachment)
		}
		name := strings.ToValidUTF8(strings.TrimSpace(a.Filename), "\uFFFD")
		mt, params, err := mime.ParseMediaType(a.ContentType)
		switch {
		case err != nil || !strings.Contains(mt, "/"):
			mt, params = "application/octet-stream", nil
		case mt == "message/rfc822":
			fp := messagePart(data, name)
			fp.reportMate = true
			parts = append(parts, fp)
			continue
		case isReportPart(mt, data):
			data = toCRLF(data)
			parts = append(parts, filePart{
				fields: []field{
					{"Content-Type", mt},
					{"Content-Transfer-Encoding", messageEncoding(data)},
				},
				data:       data,
				report:     reportParts[mt],
				reportMate: reportParts[mt] == "",
			})
			continue
		case strings.HasPrefix(mt, "multipart/") || strings.HasPrefix(mt, "message/"):
			// These types forbid base64 (RFC 2046 §5.1, §5.2) and the
			// content is not known to fit 7bit or 8bit, so send the bytes
			// as opaque data.
			mt, params = "application/octet-stream", nil
		}
		if params == nil {
			params = map[string]string{}
		}
		delete(params, "name")
		disp := map[string]string{}
		if name != "" {
			params["name"] = name
			disp["filename"] = name
		}
		// mime.FormatMediaType writes non-ASCII names in RFC 2231 form.
		ct := mime.FormatMediaType(mt, params)
		if ct == "" {
			ct = mime.FormatMediaType("application/octet-stream", map[string]string{"name": name})
		}
		parts = append(parts, filePart{
			fields: []field{
				{"Content-Type", ct},
				{"Content-Disposition", mime.FormatMediaType("attachment", disp)},
				{"Content-Transfer-Encoding", "base64"},
			},
			data: data,
		})
	}
	return parts, nil
}

// isReportPart reports a part of a receipt or bounce (reportParts) whose
// content fits 7bit or 8bit once its line breaks are CRLF: text fields,
// no NUL, no line over 998 octets (RFC 5322 §2.1.1).
func isReportPart(mt string, data []byte) bool {
	if _, ok := reportParts[mt]; !ok {
		return false
	}
	return messageEncoding(toCRLF(data)) != "binary"
}

// decodeAttachment decodes the base64 content of an Attachment. Line
// breaks and spaces, which MIME-style encoders insert, and missing padding
// are accepted; any other deviation is an error.
func decodeAttachment(s string) ([]byte, error) {
	s = strings.Map(func(r rune) rune {
		if r == ' ' || r == '\t' || r == '\r' || r == '\n' {
			return -1
		}
		return r
	}, s)
	data, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		if raw, rawErr := base64.RawStdEncoding.DecodeString(s); rawErr == nil {
			return raw, nil
		}
	}
	return data, err
}

// messagePart describes an attached message (RFC 2046 §5.2.1): line
// endings normalised to CRLF, and the Content-Transfer-Encoding 7bit, 8bit
// or, for lines longer than 998 octets or NUL (RFC 5322 §2.1.1, RFC 2045
// §2.7-2.8), binary; base64 is not allowed for message/rfc822.
func messagePart(raw []byte, name string) filePart {
	data := toCRLF(raw)
	disp := map[string]string{}
	if name != "" {
		disp["filename"] = name
	}
	return filePart{
		fields: []field{
			{"Content-Type", "message/rfc822"},
			{"Content-Disposition", mime.FormatMediaType("attachment", disp)},
			{"Content-Transfer-Encoding", messageEncoding(data)},
		},
		data: data,
	}
}

// messageEncoding returns the weakest Content-Transfer-Encoding that holds
// data, which has CRLF line endings.
func messageEncoding(data []byte) string {
	enc := "7bit"
	for _, line := range bytes.Split(data, []byte("\r\n")) {
		if len(line) > 998 || bytes.IndexByte(line, 0) >= 0 {
			return "binary"
		}
		if enc == "7bit" && !isASCII(string(line)) {
			enc = "8bit"
		}
	}
	return enc
}

// toCRLF makes every line break CRLF (RFC 5322 §2.1): bare LF and bare CR
// become CRLF.
func toCRLF(b []byte) []byte {
	out := make([]byte, 0, len(b)+len(b)/32)
	for i := 0; i < len(b); i++ {
		switch c := b[i]; c {
		case '\r':
			out = append(out, '\r', '\n')
			if i+1 < len(b) && b[i+1] == '\n' {
				i++
			}
		case '\n':
			out = append(out, '\r', '\n')
		default:
			out = append(out, c)
		}
	}
	return out
}
