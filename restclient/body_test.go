package restclient

import (
	"bytes"
	"encoding/base64"
	"io"
	"strings"
	"testing"

	"github.com/directbridge/directbridge/directapi"
)

// TestSendBodyIsTheSameJSON: a send request written with its attachments
// put back in place is, byte for byte, the JSON of the whole request;
// the caller's message is not changed.
func TestSendBodyIsTheSameJSON(t *testing.T) {
	big := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{0, 1, 2, 0xff}, 5000))
	notBase64 := strings.Repeat("<é\"\\>", 2000)
	atts := []directapi.Attachment{
		{Content: big, ContentType: "application/pdf", Filename: "a.pdf"},
		{Content: "c21hbGw=", ContentType: "text/plain", Filename: "small.txt"},
		{Content: notBase64, ContentType: "text/plain", Filename: "odd.txt"},
	}
	for range 9 { // ten holes and more: token 1 is not token 10
		atts = append(atts, directapi.Attachment{Content: big[:len(big)-4] + "QUJD", ContentType: "application/xml", Filename: "b.xml"})
	}
	msg := directapi.MessageWithHeader{Message: directapi.Message{Sender: "a@d.example", Subject: "s", Body: "b",
		Recipients: []directapi.Recipient{{Email: "b@d.example", Type: directapi.TO}}, AttachmentList: atts},
		Headers: []directapi.MessageHeader{{Name: "X", Value: "y"}}}
	auth := directapi.Authentication{Username: "a@d.example", Password: "pw"}
	want, err := encodeJSON(directapi.SendRequestWithHeader{Authentication: auth, Message: msg})
	if err != nil {
		t.Fatal(err)
	}

	cutMsg := msg
	var cut *holes
	cutMsg.AttachmentList, cut = cutAttachments(msg.AttachmentList)
	if cut == nil || len(cut.contents) != 10 {
		t.Fatalf("cut out %v; want the ten large base64 contents", cut)
	}
	if msg.AttachmentList[0].Content != big {
		t.Fatal("the caller's attachments were changed")
	}
	encoded, err := encodeJSON(directapi.SendRequestWithHeader{Authentication: auth, Message: cutMsg})
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(encoded, []byte(big[:64])) {
		t.Errorf("the encoded skeleton (%d bytes) holds the large attachments", len(encoded))
	}
	b, err := cut.fill(encoded)
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(b.Open())
	if err != nil || !bytes.Equal(got, want) || b.Len() != int64(len(want)) {
		t.Fatalf("body of %d bytes (Len %d) differs from the JSON of %d bytes: %v", len(got), b.Len(), len(want), err)
	}
}
