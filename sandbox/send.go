package sandbox

import (
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"net/mail"
	"strings"
	"time"

	"github.com/directbridge/directbridge/internal/mimeconv"
	"github.com/directbridge/directbridge/internal/sqlstmt"
	"github.com/directbridge/directbridge/upstream/directapi"
)

// MDNTimeout is how long a delivery to another provider may stay Waiting
// before it becomes NO MDN Received (messaging-rest.md, "Limits").
const MDNTimeout = time.Hour

// outgoing is a message to send on behalf of a mailbox.
type outgoing struct {
	msg      directapi.Message
	headers  []directapi.MessageHeader
	attached [][]byte // whole messages to attach as message/rfc822 (Forward)
}

// newSMTPID makes a fresh Message-ID for a message sent from addr. The
// smtpId the operations return is this Message-ID without its angle
// brackets (the form that sits well in a URL path); status look-ups accept
// it with or without them.
func newSMTPID(addr string) string {
	b := make([]byte, 16)
	rand.Read(b)
	return hex.EncodeToString(b) + "@" + domainOf(addr)
}

// clientMessageID returns the Message-ID the client gave in
// SendWithHeader's headers, without brackets, when it is valid (RFC 5322
// §3.6.4) and no message sent through the sandbox has it already: the
// message keeps it and it becomes the smtpId, so receipts (MDNs), which
// Direct matches to the original by Message-ID, find the client's own.
// What a provider does with a client's Message-ID is not shown; keeping
// it is what mail servers do. "" means mint one (also always with
// Options.MintMessageIDs).
func (s *Server) clientMessageID(tx *sqlstmt.Tx, headers []directapi.MessageHeader) (string, error) {
	if s.mintIDs {
		return "", nil
	}
	for _, h := range headers {
		if !strings.EqualFold(strings.TrimSpace(h.Name), "Message-ID") {
			continue
		}
		id := strings.TrimSpace(h.Value)
		if !strings.HasPrefix(id, "<") || !strings.HasSuffix(id, ">") {
			return "", nil
		}
		id = normSMTPID(id)
		if !mimeconv.ValidMessageID(id) {
			return "", nil
		}
		var n int
		if err := tx.QueryRow(`SELECT COUNT(*) FROM delivery_logs WHERE smtp_id = ?`, id).Scan(&n); err != nil {
			return "", err
		}
		if n > 0 {
			return "", nil
		}
		return id, nil
	}
	return "", nil
}

// fromName is the display name of a From field given in SendWithHeader's
// headers when its address is the sender's: the sandbox is a provider
// that accepts a From header for its display name (what a provider does
// with one is not shown). Any other From is ignored: the sender is who
// authenticated.
func fromName(headers []directapi.MessageHeader, sender string) string {
	for _, h := range headers {
		if !strings.EqualFold(strings.TrimSpace(h.Name), "From") {
			continue
		}
		a, err := mail.ParseAddress(h.Value) // decodes RFC 2047 words itself
		if err != nil || !strings.EqualFold(a.Address, sender) {
			return ""
		}
		return a.Name
	}
	return ""
}

// normSMTPID strips white space and angle brackets.
func normSMTPID(id string) string {
	return strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(id), "<"), ">")
}

// send validates and composes the message, delivers a copy to every
// recipient mailbox the sandbox holds, files an unread copy in the sender's
// INBOX.Sent and records one delivery log per recipient. It runs inside the
// caller's transaction, so a failure leaves no trace.
func (s *Server) send(tx *sqlstmt.Tx, from user, out outgoing) (string, error) {
	msg := out.msg
	sender, err := normAddress(msg.Sender)
	if err != nil || sender != from.address {
		return "", errAddress("message.sender must be the sending address %s", from.address)
	}
	if err := s.sendable(tx, from); err != nil {
		return "", err
	}
	if len(msg.Recipients) == 0 {
		return "", errAddress("message has no recipients")
	}
	var rcpts []string
	seen := map[string]bool{}
	for i := range msg.Recipients {
		r := &msg.Recipients[i]
		switch directapi.RecipientType(strings.ToUpper(string(r.Type))) {
		case directapi.TO, directapi.CC, directapi.BCC:
			r.Type = directapi.RecipientType(strings.ToUpper(string(r.Type)))
		default:
			return "", errInvalid("recipient %d: type must be TO, CC or BCC", i+1)
		}
		addr, err := normAddress(r.Email)
		if err != nil {
			return "", errAddress("recipient %d: %v", i+1, err)
		}
		r.Email = addr
		if !seen[addr] {
			seen[addr] = true
			rcpts = append(rcpts, addr)
		}
	}
	for i, a := range msg.AttachmentList {
		if a.Filename == "" {
			msg.AttachmentList[i].Filename = fmt.Sprintf("attachment-%d", i+1)
		}
	}
	now := s.now()
	smtpID, err := s.clientMessageID(tx, out.headers)
	if err != nil {
		return "", err
	}
	if smtpID == "" {
		smtpID = newSMTPID(from.address)
	}
	raw, err := mimeconv.Compose(msg, mimeconv.ComposeOptions{FromName: fromName(out.headers, from.address), MessageID: smtpID,
		Date: now, Headers: out.headers, Attached: out.attached})
	if err != nil {
		switch {
		case errors.Is(err, mimeconv.ErrInvalidAddress):
			return "", errAddress("%v", err)
		case errors.Is(err, mimeconv.ErrInvalidHeader), errors.Is(err, mimeconv.ErrInvalidAttachment):
			return "", errInvalid("%v", err)
		}
		return "", err
	}
	for _, rcpt := range rcpts {
		status, details, err := s.deliver(tx, rcpt, raw, now)
		if err != nil {
			return "", err
		}
		_, err = tx.Exec(`INSERT INTO delivery_logs (smtp_id, sender, recipient, size, status, details, ts) VALUES (?, ?, ?, ?, ?, ?, ?)`,
			smtpID, from.address, rcpt, len(raw), status, details, now.UnixMilli())
		if err != nil {
			return "", err
		}
	}
	sent, err := ensureFolder(tx, from, Sent)
	if err != nil {
		return "", err
	}
	if _, err := insertMessage(tx, sent, raw, true, now, ""); err != nil {
		return "", err
	}
	return smtpID, nil
}

// sendable refuses senders whose certificate is invalid: their outbound
// messages are rejected (registration-rest.md, UserStateType).
func (s *Server) sendable(tx *sqlstmt.Tx, from user) error {
	var state string
	if err := tx.QueryRow(`SELECT state FROM users WHERE id = ?`, from.id).Scan(&state); err != nil {
		return err
	}
	switch directapi.UserStateType(state) {
	case directapi.UserStateCertExpired, directapi.UserStateCertRevoked:
		return errAddress("sender %s cannot send: its certificate is %s", from.address, state)
	}
	return nil
}

// deliver hands raw to one recipient and returns the delivery status: a
// mailbox of the sandbox gets it in its INBOX (Delivered); an unknown
// address in a domain the sandbox hosts is Locally Failed; any other domain
// is Waiting for the receiving provider's MDN.
func (s *Server) deliver(tx *sqlstmt.Tx, rcpt string, raw []byte, now time.Time) (status, details string, err error) {
	var u user
	var state string
	err = tx.QueryRow(`SELECT id, address, state FROM users WHERE address = ?`, rcpt).Scan(&u.id, &u.address, &state)
	switch {
	case err == nil:
		switch directapi.UserStateType(state) {
		case directapi.UserStateCertExpired, directapi.UserStateCertRevoked:
			return directapi.StatusLocallyFailed, "recipient certificate is not valid", nil
		}
		inbox, err := ensureFolder(tx, u, Inbox)
		if err != nil {
			return "", "", err
		}
		if _, err := insertMessage(tx, inbox, raw, true, now, ""); err != nil {
			return "", "", err
		}
		return directapi.StatusDelivered, "delivered to mailbox", nil
	case !errors.Is(err, sql.ErrNoRows):
		return "", "", err
	}
	local, err := s.hostsDomain(tx, domainOf(rcpt))
	if err != nil {
		return "", "", err
	}
	if local {
		return directapi.StatusLocallyFailed, "no such mailbox", nil
	}
	return directapi.StatusWaiting, "waiting for MDN from the receiving provider", nil
}

// forwardMessage builds the message Forward sends. One UID is forwarded
// inline: its body and attachments under "Fwd:" plus the subject. Several
// UIDs are attached whole as message/rfc822 parts (messaging-rest.md,
// operation 3).
func forwardMessage(from user, folder string, ms []storedMsg, rcpts []directapi.Recipient) outgoing {
	out := outgoing{msg: directapi.Message{Sender: from.address, Recipients: rcpts}}
	if len(ms) == 1 {
		d := detail(folder, ms[0], true)
		out.msg.Subject = fwdSubject(d.Subject)
		out.msg.HTMLBody = d.HTMLBody
		out.msg.Body = d.Body
		out.msg.AttachmentList = d.AttachmentList
		return out
	}
	out.msg.Subject = fmt.Sprintf("Fwd: %d messages", len(ms))
	out.msg.Body = fmt.Sprintf("%d forwarded messages are attached.", len(ms))
	for _, m := range ms {
		out.attached = append(out.attached, m.raw)
	}
	return out
}

func fwdSubject(s string) string {
	if strings.HasPrefix(strings.ToLower(s), "fwd:") {
		return s
	}
	return "Fwd: " + s
}
