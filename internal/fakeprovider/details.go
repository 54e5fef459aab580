package fakeprovider

import (
	"time"

	"github.com/directbridge/directbridge/internal/mimeconv"
	"github.com/directbridge/directbridge/upstream/directapi"
)

// detail builds the MessageDetail of a stored message as the sandbox
// does: metadata answers (full false) carry every header-derived field
// but no body or attachments; msgnum is the message's 1-based position
// in the folder.
func detail(folder string, msgnum int, m *message, full bool) directapi.MessageDetail {
	d := directapi.MessageDetail{
		UID:          m.uid,
		MsgNum:       msgnum,
		Folder:       folder,
		Size:         len(m.raw),
		ReceivedDate: directapi.NewDate(m.received.UTC()),
	}
	p, err := mimeconv.Parse(m.raw, mimeconv.ParseOptions{SkipBodies: !full})
	if err != nil && full {
		// Too complex to take apart: still report what the headers say.
		p, err = mimeconv.Parse(m.raw, mimeconv.ParseOptions{SkipBodies: true})
	}
	if err == nil {
		d.Sender, d.Subject, d.Recipients = p.Sender, p.Subject, p.Recipients
		d.MsgID, d.ReplyTo, d.Headers = p.MessageID, p.ReplyTo, p.Headers
		if !p.SentDate.IsZero() {
			d.SentDate = directapi.NewDate(p.SentDate)
		}
		if full {
			d.Body, d.HTMLBody, d.AttachmentList = p.Body, p.HTMLBody, p.Attachments
		}
	}
	if d.Recipients == nil {
		d.Recipients = []directapi.Recipient{}
	}
	return d
}

// receivedNow is the received date of a message filed now, at the
// millisecond the provider keeps.
func receivedNow(now func() time.Time) time.Time {
	return now().Truncate(time.Millisecond)
}
