package peerfetch

import (
	"encoding/binary"
	"encoding/json"
	"errors"

	"github.com/emersion/go-imap/v2"

	"github.com/directbridge/directbridge/internal/mailstore"
	"github.com/directbridge/directbridge/upstream/directapi"
)

// request asks for the messages I of folder F of user U under
// UIDVALIDITY V; T is when it was made (Unix milliseconds).
type request struct {
	T int64    `json:"t"`
	U string   `json:"u"`
	F string   `json:"f"`
	V uint32   `json:"v"`
	I []uint32 `json:"i"`
}

// An answer is its messages one after another, each as
//
//	uid (4 bytes) | metadata length (4) | metadata (JSON) | raw length (4) | raw
//
// (big-endian), a length of 0 for what the replica does not hold. Raw
// bytes travel as they are: no base64 to make and undo on each side.

// appendHeld writes one message of an answer.
func appendHeld(b []byte, h mailstore.HeldMessage) []byte {
	var meta []byte
	if h.Meta != nil {
		meta, _ = json.Marshal(h.Meta) // plain data: cannot fail
	}
	b = binary.BigEndian.AppendUint32(b, uint32(h.UID))
	b = binary.BigEndian.AppendUint32(b, uint32(len(meta)))
	b = append(b, meta...)
	b = binary.BigEndian.AppendUint32(b, uint32(len(h.Raw)))
	return append(b, h.Raw...)
}

var errAnswer = errors.New("peerfetch: an answer that does not parse")

// parseAnswer reads the messages of an answer; raw bytes are copied out
// of b, so that a cached message does not keep the whole answer alive.
func parseAnswer(b []byte) ([]mailstore.HeldMessage, error) {
	var out []mailstore.HeldMessage
	next := func() ([]byte, bool) {
		if len(b) < 4 {
			return nil, false
		}
		n := binary.BigEndian.Uint32(b)
		if uint64(len(b)-4) < uint64(n) {
			return nil, false
		}
		v := b[4 : 4+n]
		b = b[4+n:]
		return v, true
	}
	for len(b) > 0 {
		if len(b) < 4 {
			return nil, errAnswer
		}
		h := mailstore.HeldMessage{UID: imap.UID(binary.BigEndian.Uint32(b))}
		b = b[4:]
		meta, ok := next()
		if !ok {
			return nil, errAnswer
		}
		if len(meta) > 0 {
			var d directapi.MessageDetail
			if err := json.Unmarshal(meta, &d); err != nil {
				return nil, errAnswer
			}
			h.Meta = &d
		}
		raw, ok := next()
		if !ok {
			return nil, errAnswer
		}
		if len(raw) > 0 {
			h.Raw = append([]byte(nil), raw...)
		}
		out = append(out, h)
	}
	return out, nil
}
