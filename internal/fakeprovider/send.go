package fakeprovider

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net/mail"
	"strings"

	"github.com/directbridge/directbridge/internal/mimeconv"
	"github.com/directbridge/directbridge/upstream"
	"github.com/directbridge/directbridge/upstream/directapi"
)

// Sending, in the small: the message is composed as the sandbox composes
// it (mimeconv.Compose), delivered to the INBOX of every recipient this
// provider holds (Delivered), recorded as Waiting for any other, and
// filed unread in the sender's INBOX.Sent. The fake knows no T-users:
// every ...WithTuser credential is refused (code 1).

// Send sends a message and returns its smtpId.
func (p *Provider) Send(ctx context.Context, auth upstream.Auth, tuser string, msg directapi.MessageWithHeader, withHeaders bool) (string, error) {
	var id string
	err := p.op(ctx, "Send", "Send", true, auth, func(a *account) error {
		if tuser != "" {
			return errAuth
		}
		var headers []directapi.MessageHeader
		if withHeaders {
			headers = msg.Headers
		}
		var err error
		id, err = p.send(a, msg.Message, headers, nil, "Send")
		return err
	})
	return id, err
}

// Forward sends stored messages to recipients as message/rfc822
// attachments of a new message. One missing UID refuses all.
func (p *Provider) Forward(ctx context.Context, auth upstream.Auth, name string, uids []int64, recipients []directapi.Recipient) (string, error) {
	var id string
	err := p.op(ctx, "Forward", "Forward", true, auth, func(a *account) error {
		f, err := a.folder(name)
		if err != nil {
			return err
		}
		ms, err := f.require(uids)
		if err != nil {
			return err
		}
		var attached [][]byte
		for _, m := range ms {
			attached = append(attached, m.raw)
		}
		msg := directapi.Message{Sender: a.address, Subject: "Fwd", Recipients: recipients}
		id, err = p.send(a, msg, nil, attached, "Forward")
		return err
	})
	return id, err
}

// send delivers and files one message. Called with p.mu.
func (p *Provider) send(a *account, msg directapi.Message, headers []directapi.MessageHeader, attached [][]byte, op string) (string, error) {
	sender, err := mail.ParseAddress(msg.Sender)
	if err != nil || !strings.EqualFold(sender.Address, a.address) {
		return "", errAddress("message.sender must be the sending address %s", a.address)
	}
	if len(msg.Recipients) == 0 {
		return "", errAddress("message has no recipients")
	}
	b := make([]byte, 16)
	rand.Read(b)
	id := hex.EncodeToString(b) + "@" + a.address[strings.LastIndexByte(a.address, '@')+1:]
	now := receivedNow(p.now)
	raw, err := mimeconv.Compose(msg, mimeconv.ComposeOptions{MessageID: id, Date: now, Headers: headers, Attached: attached})
	switch {
	case errors.Is(err, mimeconv.ErrInvalidAddress):
		return "", errAddress("%v", err)
	case err != nil:
		return "", errInvalid("%v", err)
	}
	for _, r := range msg.Recipients {
		to := strings.ToLower(strings.TrimSpace(r.Email))
		status := directapi.StatusWaiting
		if rcpt := p.accounts[to]; rcpt != nil {
			m := rcpt.ensureFolder(Inbox).insert(raw, true, now, "")
			p.record(Event{Op: op, User: rcpt.address, Folder: Inbox, New: []int64{m.uid}, Raws: [][]byte{raw}})
			status = directapi.StatusDelivered
		}
		a.sent = append(a.sent, directapi.DirectMessageLog{From: a.address, To: to, MessageID: id,
			MessageSize: int64(len(raw)), Status: status, TS: directapi.NewDate(now)})
	}
	m := a.ensureFolder(Sent).insert(raw, true, now, "")
	p.record(Event{Op: op, User: a.address, Folder: Sent, New: []int64{m.uid}, Raws: [][]byte{raw}})
	return id, nil
}

// Status returns the delivery records of messages the user sent; an
// unknown smtpId contributes nothing.
func (p *Provider) Status(ctx context.Context, auth upstream.Auth, smtpIDs []string) ([]directapi.DirectMessageLog, error) {
	var out []directapi.DirectMessageLog
	err := p.op(ctx, "Status", "GetMessageStatus", false, auth, func(a *account) error {
		if len(smtpIDs) == 0 {
			return errInvalid("smtpIds missing")
		}
		out = []directapi.DirectMessageLog{}
		for _, l := range a.sent {
			for _, id := range smtpIDs {
				if strings.Trim(strings.TrimSpace(id), "<>") == l.MessageID {
					out = append(out, l)
				}
			}
		}
		return nil
	})
	return out, err
}

// CheckTuser refuses every T-user: the fake has none.
func (p *Provider) CheckTuser(ctx context.Context, auth directapi.AuthenticationWithTuser) error {
	return p.tuser(ctx, "CheckTuser")
}

// TuserStatus refuses every T-user: the fake has none.
func (p *Provider) TuserStatus(ctx context.Context, auth directapi.AuthenticationWithTuser, smtpID string) ([]directapi.DirectMessageLog, error) {
	return nil, p.tuser(ctx, "TuserStatus")
}

func (p *Provider) tuser(ctx context.Context, method string) error {
	before, after, fail, _ := p.chaos.draw(method, false)
	if err := pause(ctx, before+after); err != nil {
		return classified("GetMessageStatusWithTuser", upstream.ErrTemporary, "", err)
	}
	if fail {
		return classified("GetMessageStatusWithTuser", upstream.ErrTemporary, "", errInjected)
	}
	return classify("GetMessageStatusWithTuser", errAuth)
}
