package enginetest

import (
	"bufio"
	"bytes"
	"fmt"
	"math/rand/v2"
	"net/textproto"
	"strings"
)

// modelHeader names every message the test makes: a unique id, which
// copies keep, so that the model follows a message by content.
const modelHeader = "X-Model-Id"

// newMessage returns a small message carrying id. Some have no
// Message-ID, so that the bridge must pair its APPENDs by content.
func newMessage(id string, rng *rand.Rand) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "From: <sender@elsewhere.example>\r\nTo: <%s>\r\nSubject: model message %s\r\n", alice, id)
	fmt.Fprintf(&b, "Date: Mon, 02 Jan 2026 15:04:05 +0000\r\n")
	if rng.IntN(4) != 0 {
		fmt.Fprintf(&b, "Message-ID: <%s@model.example>\r\n", id)
	}
	fmt.Fprintf(&b, "%s: %s\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n", modelHeader, id)
	for range 1 + rng.IntN(6) {
		fmt.Fprintf(&b, "Line %d of %s.\r\n", rng.IntN(1000), id)
	}
	return b.Bytes()
}

// modelIDOf returns the model id of a message or of its header section,
// or "" when it has none.
func modelIDOf(raw []byte) string {
	r := textproto.NewReader(bufio.NewReader(bytes.NewReader(raw)))
	h, _ := r.ReadMIMEHeader() // a header section without its blank line ends in EOF
	return strings.TrimSpace(h.Get(modelHeader))
}
