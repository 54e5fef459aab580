package directapi

import (
	"bytes"
	"encoding/base64"
	"fmt"
)

// NewRawMessage wraps the bytes of an RFC 5322 message for SaveRawMessages.
func NewRawMessage(data []byte) RawMessage {
	return RawMessage{Data: base64.StdEncoding.EncodeToString(data)}
}

// Bytes decodes the message's base64 data (liberal about padding, alphabet
// and line breaks).
func (m RawMessage) Bytes() ([]byte, error) {
	b, err := decodeBase64(m.Data)
	if err != nil {
		return nil, fmt.Errorf("directapi: raw message uid %d: %w", m.UID, err)
	}
	return b, nil
}

// DecodeBase64 decodes base64 text given as bytes (a slice of a request
// body) as Bytes does. Text with neither line breaks nor the URL
// alphabet, which is what encoders write, is decoded without a copy of
// it: for a message of tens of megabytes the copy is as large as the
// message.
func DecodeBase64(text []byte) ([]byte, error) {
	text = bytes.TrimRight(text, "=")
	if bytes.ContainsAny(text, "\r\n \t-_") {
		return decodeBase64(string(text))
	}
	out := make([]byte, base64.RawStdEncoding.DecodedLen(len(text)))
	n, err := base64.RawStdEncoding.Decode(out, text)
	return out[:n], err
}
