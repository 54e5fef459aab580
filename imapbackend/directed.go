package imapbackend

import (
	"errors"
	"io"
	"net"
	"strings"

	"github.com/emersion/go-imap/v2"

	"github.com/directbridge/directbridge/internal/director"
)

// Sessions the director hands to this replica (internal/director) begin
// logged in: go-imap greets them with PREAUTH (RFC 9051 §7.1.4), and
// the session takes its user from the connection. They come two ways:
//   - from this replica's own front (front.go), for users whose home
//     this is: a directedConn, whose login the front did entirely;
//   - from another replica's front over a link (director.Incoming): the
//     other replica checked the password, this one admits the session
//     (its state store, the user's connection slot) and refuses it with
//     a BYE greeting, which the other replica relays as NO.
//
// Both are served by go-imap servers of their own, without TLS settings
// (the connection is past STARTTLS) and with authentication allowed (a
// client that UNAUTHENTICATEs may log in again: it was allowed to once).

// directedConn is a client connection this replica's front logged in,
// handed to go-imap here.
type directedConn struct {
	net.Conn           // the client's
	r        io.Reader // the front's reader: what the client sent after LOGIN, then the connection
	remote   net.Addr
	user     string
	password string

	// greetTag and greetText: go-imap's PREAUTH greeting becomes the
	// tagged answer to the client's LOGIN (taggedGreeting); greeted once
	// it went out.
	greetTag, greetText string
	pending             []byte
	greeted             bool
}

func (c *directedConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// Write passes go-imap's writes to the client, but for its greeting,
// which becomes the tagged answer to LOGIN. go-imap writes it before
// anything else, from its goroutine: no lock is needed.
func (c *directedConn) Write(p []byte) (int, error) {
	if c.greeted {
		return c.Conn.Write(p)
	}
	c.pending = append(c.pending, p...)
	i := strings.Index(string(c.pending), "\n")
	if i < 0 {
		return len(p), nil
	}
	line, _ := taggedGreeting(c.greetTag, string(c.pending[:i+1]), c.greetText)
	if line == "" { // not PREAUTH: go-imap refused, which admit prevents
		line = c.greetTag + " NO [SERVERBUG] Internal server error\r\n"
	}
	out := append([]byte(line), c.pending[i+1:]...)
	c.pending, c.greeted = nil, true
	if _, err := c.Conn.Write(out); err != nil {
		return 0, err
	}
	return len(p), nil
}

// RemoteAddr is the client's address (behind a balancer, the PROXY
// header's).
func (c *directedConn) RemoteAddr() net.Addr { return c.remote }

// Unwrap returns the client's connection, for the layers that find
// their own wrapper under it (package limits, peergone.go).
func (c *directedConn) Unwrap() net.Conn { return c.Conn }

// preauth makes a directed session its user's, in go-imap's NewSession:
// nil for a connection that is not directed. A refusal is a BYE
// greeting (go-imap writes it and closes the connection).
func (s *session) preauth(nc net.Conn) (directed bool, err error) {
	var user, pass string
	switch x := nc.(type) {
	case *directedConn:
		user, pass = x.user, x.password // admitted by the front
	case *director.Incoming:
		user, pass = normalizeUser(x.Hello.User), x.Hello.Password
		s.path = &linkPath{in: x}
		if s.srv.isClosed() {
			// The relaying replica serves the user itself (front.go).
			return true, &imap.Error{Type: imap.StatusResponseTypeBye, Code: imap.ResponseCodeUnavailable, Text: "Server shutting down"}
		}
		ctx, cancel := s.ctx()
		defer cancel()
		if err := s.srv.admit(ctx, user); err != nil {
			var ie *imap.Error
			if !errors.As(err, &ie) {
				ie = internalError
			}
			return true, &imap.Error{Type: imap.StatusResponseTypeBye, Code: ie.Code, Text: ie.Text}
		}
	default:
		return false, nil
	}
	s.loggedIn(user, pass)
	return true, nil
}

// linkPath is the answer path (mailstore.AnswerPath) of a session
// another replica relays: its answers are lost with that replica, when
// the link broke off without its clean end (director.Incoming.Broke:
// known at once, whether the session reads or runs a command). A session
// whose client left, or that ended (LOGOUT), lost nothing.
type linkPath struct{ in *director.Incoming }

func (p *linkPath) Lost() bool { return p.in.Broke() }
