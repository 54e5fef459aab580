package smtpbackend

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/mail"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"

	"github.com/directbridge/directbridge/internal/delivery"
	"github.com/directbridge/directbridge/internal/limits"
	"github.com/directbridge/directbridge/internal/login"
	"github.com/directbridge/directbridge/internal/mimeconv"
	"github.com/directbridge/directbridge/internal/readall"
	"github.com/directbridge/directbridge/restclient"
	"github.com/directbridge/directbridge/upstream/directapi"
)

// session is one SMTP connection.
type session struct {
	s    *Server
	conn *smtp.Conn

	// Set by AUTH: the account's credentials (memory only) and, for a
	// T-user, the Direct address it acts for.
	username   string
	password   directapi.Secret
	directAddr string

	rcpts   []string    // this transaction's recipients, deduplicated
	counted atomic.Bool // counted in Server.inTx (Logout may come from another goroutine)
	// ESMTP DSN parameters of this transaction (RFC 3461).
	envID  string
	size   int64 // the SIZE announced in MAIL FROM (RFC 1870), 0 if none
	notify map[string]delivery.Notify

	// answer is the 250 Data returned, until go-smtp has written it
	// (replyconn.go); ended is set by Logout, after which none is kept.
	// Logout may come from another goroutine, while Data runs.
	answerMu sync.Mutex
	answer   *pendingAnswer
	ended    bool

	// follow is the message of the DATA under way that the delivery
	// tracker is to follow once sent (Config.Tracker): Data makes it
	// before the send, the journal's completion records it (completed).
	follow *delivery.Message
}

var _ smtp.AuthSession = (*session)(nil)

func (s *Server) newSession(c *smtp.Conn) (smtp.Session, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, reply(421, smtp.EnhancedCode{4, 3, 2}, "Shutting down; try again later")
	}
	s.conns[c] = struct{}{}
	return &session{s: s, conn: c}, nil
}

// sender is the address messages must come from: the T-user's directAddr,
// or the authenticated address.
func (ss *session) sender() string {
	if ss.directAddr != "" {
		return ss.directAddr
	}
	return ss.username
}

// AuthMechanisms lists PLAIN (RFC 4616) and LOGIN.
func (ss *session) AuthMechanisms() []string { return []string{sasl.Plain, sasl.Login} }

// Auth checks credentials with the provider (shared with the IMAP side's
// short-lived verification). A PLAIN authorization identity other than
// the login selects the T-user operations, acting for that identity.
func (ss *session) Auth(mech string) (sasl.Server, error) {
	switch mech {
	case sasl.Plain:
		return sasl.NewPlainServer(func(identity, username, password string) error {
			return ss.login(identity, username, password)
		}), nil
	case sasl.Login:
		return newLoginServer(func(username, password string) error {
			return ss.login("", username, password)
		}), nil
	}
	return nil, smtp.ErrAuthUnknownMechanism
}

func (ss *session) login(identity, username, password string) (err error) {
	defer func() { ss.s.metrics.Command("AUTH", replyClass(err)) }()
	username = strings.TrimSpace(username)
	identity = strings.TrimSpace(identity)
	if strings.EqualFold(identity, username) {
		identity = ""
	}
	ctx, cancel := context.WithTimeout(context.Background(), ss.s.cfg.SendTimeout)
	defer cancel()
	// Guessing is slowed (package internal/login), as on the IMAP side.
	addr := login.Key(ss.conn.Conn().RemoteAddr())
	release, _, err := ss.s.auth.Admit(ctx, addr, username)
	if errors.Is(err, login.ErrRefused) {
		ss.s.log.Warn("authentication refused", "proto", "smtp", "remote", addr, "user", strings.ToLower(username), "reason", "too many failures from the address")
		ss.s.metrics.AuthFailed("refused")
		return errTooManyFailures
	}
	if err != nil {
		return errAuthTempFail
	}
	if identity == "" {
		err = ss.s.cfg.Verifier.Verify(ctx, username, directapi.Secret(password))
	} else {
		err = ss.s.cfg.Verifier.VerifyTuser(ctx, username, directapi.Secret(password), identity)
	}
	release()
	if err != nil {
		if errors.Is(err, login.ErrAuthFailed) {
			ss.s.log.Warn("authentication failed", "proto", "smtp", "remote", addr, "user", strings.ToLower(username), "tuser", identity != "")
			ss.s.auth.Failed(ctx, addr, username)
		} else {
			ss.s.log.Info("smtp auth failed", "remote", addr, "tuser", identity != "", "unavailable", errors.Is(err, login.ErrUnavailable))
		}
		ss.s.metrics.AuthFailed(authFailReason(err))
		return authReply(err)
	}
	if p, ok := ss.s.journal.(interface{ Ping(context.Context) error }); ok {
		// Every message is written down in the state store before it
		// leaves: without the store none could be sent, so say so now.
		if err := p.Ping(ctx); err != nil {
			ss.s.log.Warn("smtp auth refused: the state store does not answer", "user", strings.ToLower(username), "err", err)
			return errStateUnavailable
		}
	}
	ss.username, ss.password, ss.directAddr = strings.ToLower(username), directapi.Secret(password), strings.ToLower(identity)
	authenticated(ss.conn.Conn())
	ss.s.log.Info("smtp auth", "user", ss.username, "tuser", identity != "")
	return nil
}

// Mail starts a transaction. The reverse-path must be the sender's
// address: a Direct mailbox sends only as itself (RFC 6409 §6.1 lets an
// MSA refuse other addresses).
func (ss *session) Mail(from string, opts *smtp.MailOptions) (err error) {
	defer func() { ss.s.metrics.Command("MAIL", replyClass(err)) }()
	if ss.username == "" {
		return errAuthRequired
	}
	if ss.s.isClosed() {
		// A shutdown is under way: no new transaction may start, or it
		// could be cut off after the provider took the message.
		return reply(421, smtp.EnhancedCode{4, 3, 2}, "Shutting down; try again later")
	}
	if !strings.EqualFold(strings.TrimSpace(from), ss.sender()) {
		return senderRefused(ss.sender())
	}
	ss.settleAnswer(false) // go-smtp's Reset would have settled it: unknown
	ss.rcpts, ss.envID, ss.notify, ss.size = nil, "", nil, 0
	ss.endTx()
	if opts != nil {
		if opts.Size > ss.s.cfg.MaxMessageBytes {
			return sizeRefused(ss.s.cfg.MaxMessageBytes) // size.go
		}
		ss.envID = opts.EnvelopeID
		ss.size = opts.Size
	}
	return nil
}

// Rcpt adds a recipient; the address must be a valid addr-spec.
func (ss *session) Rcpt(to string, opts *smtp.RcptOptions) (err error) {
	defer func() { ss.s.metrics.Command("RCPT", replyClass(err)) }()
	if ss.username == "" {
		return errAuthRequired
	}
	a, err := mail.ParseAddress("<" + strings.TrimSpace(to) + ">")
	if err != nil || !strings.Contains(a.Address, "@") {
		return errBadAddress
	}
	addr := strings.ToLower(a.Address)
	if opts != nil && len(opts.Notify) > 0 {
		if ss.notify == nil {
			ss.notify = map[string]delivery.Notify{}
		}
		ss.notify[addr] = notifyOf(opts.Notify)
	}
	for _, r := range ss.rcpts {
		if r == addr {
			return nil
		}
	}
	ss.rcpts = append(ss.rcpts, addr)
	if ss.counted.CompareAndSwap(false, true) {
		ss.s.inTx.Add(1)
	}
	return nil
}

// endTx stops counting the transaction in Server.inTx.
func (ss *session) endTx() {
	if ss.counted.CompareAndSwap(true, false) {
		ss.s.inTx.Add(-1)
	}
}

// Data converts the message and sends it through the provider. The reply
// is 250 only when the provider answered success, and it carries the
// provider's smtpId.
func (ss *session) Data(r io.Reader) (err error) {
	if rc := findReplyConn(ss.conn.Conn()); rc != nil {
		// The message's bytes are not command bytes (cmdlines.go).
		_, bdat := r.(*io.PipeReader)
		r = rc.messageReader(r)
		defer func() {
			if err != nil && !bdat {
				drainMessage(r)
			}
		}()
	}
	defer func() { ss.s.metrics.Command("DATA", replyClass(err)) }()
	if ss.username == "" {
		return errAuthRequired
	}
	defer func() { ss.s.metrics.Message(messageResult(replyClass(err))) }()
	ss.s.inData.Add(1) // a shutdown waits for this answer
	defer ss.s.inData.Add(-1)
	stalled, stop := watchData(ss.conn.Conn(), ss.s.cfg.DataIdle)
	// The size the client announced in MAIL FROM (RFC 1870), when it
	// did, sizes the buffer once.
	held := ss.s.cfg.Messages.NewReader(r) // bounded with the IMAP front's (limits.Budget)
	defer held.Close()
	raw, err := readall.Sized(held, ss.size, ss.s.cfg.MaxMessageBytes)
	stop()
	if int64(len(raw)) > ss.s.cfg.MaxMessageBytes && !stalled.Load() {
		// Over the limit whatever else the read met (the budget may
		// refuse the byte past it): the answer is the permanent one.
		ss.s.log.Info("smtp data refused: over the size limit", "user", ss.username, "limit", ss.s.cfg.MaxMessageBytes)
		return tooLarge(ss.s.cfg.MaxMessageBytes) // size.go
	}
	if err != nil {
		switch {
		case errors.Is(err, limits.ErrSpent):
			ss.s.log.Info("smtp data refused: message bytes in flight at the bound", "user", ss.username, "size", len(raw))
			return dataReply(err)
		case stalled.Load():
			// Nothing came for DataIdle: a dead client, or go-smtp
			// missed the end of data after a bare CR (datastall.go).
			ss.s.log.Info("smtp data stalled", "user", ss.username, "size", len(raw))
			return reply(451, smtp.EnhancedCode{4, 4, 2}, "No data came for a while; the end of data may have been missed after a bare CR: lines must end with CRLF (RFC 5321 section 2.3.8)")
		case errors.Is(err, smtp.ErrTooLongLine):
			return tooLarge(ss.s.cfg.MaxMessageBytes) // a line longer than the whole size limit
		}
		return reply(451, smtp.EnhancedCode{4, 3, 0}, "Message not received completely")
	}
	start := time.Now()
	lim := ss.s.cfg.Limits
	lim.MaxText = ss.s.cfg.MaxRequestBytes
	sub, err := Convert(raw, Envelope{From: ss.sender(), Recipients: ss.rcpts}, ss.sender(), lim)
	if err != nil {
		ss.s.log.Info("smtp message refused", "user", ss.username, "size", len(raw), "reason", errReason(err))
		return dataReply(err)
	}
	// Before admit sizes the request: a T-user's message may gain its
	// Message-ID here (journal.go).
	att := ss.prepare(raw, sub)
	if err := ss.admit(held, sub); err != nil {
		ss.s.log.Info("smtp message refused", "user", ss.username, "size", len(raw), "reason", errReason(err))
		return dataReply(err)
	}
	// The send ends by the attempt's start plus SendTimeout, the time the
	// journal counts the hold of an attempt still sending from.
	ctx, cancel := context.WithDeadline(context.Background(), att.at.Add(ss.s.cfg.SendTimeout))
	defer cancel()
	if ss.s.cfg.Tracker != nil {
		ss.follow = &delivery.Message{Auth: directapi.Authentication{Username: ss.username, Password: ss.password},
			DirectAddr: ss.directAddr, Sender: ss.sender(), MessageID: sub.MessageID, Raw: raw,
			EnvID: ss.envID, At: start, Recipients: slices.Clone(ss.rcpts), Notify: ss.notify}
		defer func() { ss.follow = nil }()
	}
	smtpID, err := ss.send(ctx, att, sub)
	if err != nil {
		ss.s.log.Warn("smtp send failed", "user", ss.username, "recipients", len(ss.rcpts), "size", len(raw),
			"duration", time.Since(start), "err", err)
		return dataReply(err)
	}
	// The journal recorded it (journal.go), with the sent record and
	// the tracker's record.
	if f := ss.follow; f != nil {
		f.SmtpID = smtpID
		ss.s.cfg.Tracker.Track(*f)
	}
	ss.s.log.Info("smtp message sent", "user", ss.username, "recipients", len(ss.rcpts), "size", len(raw),
		"smtp_id", smtpID, "duration", time.Since(start))
	ss.awaitAnswer(att.key, smtpID, sub)
	return reply(250, smtp.EnhancedCode{2, 0, 0}, "OK: queued as "+smtpID)
}

// admit decides, before the message is encoded, whether its send
// request may be built: its exact size (restclient.SendSize, the same
// arguments send passes to the provider) must be within the provider's
// request limit, or the message is refused for good (ErrTooBigEncoded,
// 552 5.3.4); and the budget of message bytes in flight must take that
// size (limits.ErrSpent, 452 4.3.1, try later). Counting is one pass
// over the message's text; nothing of the request is built.
func (ss *session) admit(held *limits.Reader, sub *Submission) error {
	auth := directapi.Authentication{Username: ss.username, Password: ss.password}
	size, err := restclient.SendSize(auth, ss.directAddr, sub.Message, sub.UseHeaders())
	if err != nil {
		return fmt.Errorf("smtpbackend: sizing the send request: %w", err)
	}
	if size > ss.s.cfg.MaxRequestBytes {
		return &TooBigError{RequestBytes: size, MaxRequestBytes: ss.s.cfg.MaxRequestBytes}
	}
	if err := held.Reserve(size); err != nil {
		return fmt.Errorf("smtpbackend: a send request of %d bytes: %w", size, err)
	}
	return nil
}

// errReason gives a loggable reason without message content.
func errReason(err error) string {
	var ce *ConvertError
	var tb *TooBigError
	switch {
	case errors.As(err, &ce):
		return ce.Reason
	case errors.As(err, &tb):
		return tb.Error()
	case errors.Is(err, limits.ErrSpent):
		return "message bytes in flight at the bound"
	case errors.Is(err, mimeconv.ErrTextTooLong):
		return "text longer than the provider's request limit once decoded"
	}
	return "unconvertible"
}

// Reset ends the transaction. After DATA go-smtp calls it once the reply
// is written (or failed), so it settles the 250 Data returned.
func (ss *session) Reset() {
	ss.settleAnswer(true)
	ss.rcpts, ss.envID, ss.notify, ss.size = nil, "", nil, 0
	ss.endTx()
}

// notifyOf reads a RCPT's NOTIFY parameter (RFC 3461 §4.1). DELAY is
// accepted and not acted on: the bridge reports only final outcomes.
func notifyOf(ns []smtp.DSNNotify) delivery.Notify {
	n := delivery.Notify{Set: true}
	for _, v := range ns {
		switch v {
		case smtp.DSNNotifyNever:
			n.Never = true
		case smtp.DSNNotifySuccess:
			n.Success = true
		case smtp.DSNNotifyFailure:
			n.Failure = true
		}
	}
	return n
}

// Logout forgets the connection; go-smtp calls it when the connection
// ends. The credentials go with the session to the garbage collector:
// clearing them here would race with a Data still running on a connection
// that a shutdown closes.
func (ss *session) Logout() error {
	ss.endAnswers()
	ss.endTx()
	ss.s.mu.Lock()
	delete(ss.s.conns, ss.conn)
	ss.s.mu.Unlock()
	return nil
}
