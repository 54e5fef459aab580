package directapi

import (
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
