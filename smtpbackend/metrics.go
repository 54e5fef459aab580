package smtpbackend

import (
	"errors"
	"net"
	"sync"

	"github.com/directbridge/directbridge/internal/login"
	"github.com/emersion/go-smtp"
)

// Metrics receives the SMTP front's events (package internal/observe implements
// it). Every argument comes from a fixed set: never an address, subject or
// other message content. Methods must be quick and safe for concurrent use.
type Metrics interface {
	// ConnOpened and ConnClosed bracket every accepted connection.
	ConnOpened()
	ConnClosed()
	// Command reports the reply to AUTH, MAIL, RCPT or DATA: result
	// "ok" (2xx, 3xx), "temporary" (4xx) or "permanent" (5xx).
	Command(name, result string)
	// AuthFailed reports a refused AUTH: reason "credentials" (the
	// provider refused them) or "unavailable" (it could not be asked).
	AuthFailed(reason string)
	// Message reports the fate of a message received in DATA: "sent",
	// "refused" (5xx) or "temporary" (4xx).
	Message(result string)
	// TurnedAway reports a connection the listener's limits on
	// strangers turned away: reason "refused" (over a limit on arrival)
	// or "displaced" (let go for a newcomer), see package limits.
	TurnedAway(reason string)
}

type nopMetrics struct{}

func (nopMetrics) ConnOpened()            {}
func (nopMetrics) ConnClosed()            {}
func (nopMetrics) Command(string, string) {}
func (nopMetrics) AuthFailed(string)      {}
func (nopMetrics) Message(string)         {}
func (nopMetrics) TurnedAway(string)      {}

// replyClass classifies the reply go-smtp writes for a session method's
// result. A *smtp.SMTPError with a 2xx code is a success with a custom
// text; other errors become 4xx replies.
func replyClass(err error) string {
	if err == nil {
		return "ok"
	}
	var se *smtp.SMTPError
	switch {
	case !errors.As(err, &se):
		return "temporary"
	case se.Code < 400:
		return "ok"
	case se.Code < 500:
		return "temporary"
	default:
		return "permanent"
	}
}

// messageResult maps DATA's reply class to a message result.
func messageResult(class string) string {
	switch class {
	case "ok":
		return "sent"
	case "permanent":
		return "refused"
	default:
		return "temporary"
	}
}

// authFailReason maps a credential check failure.
func authFailReason(err error) string {
	if errors.Is(err, login.ErrAuthFailed) || errors.Is(err, login.ErrAddress) {
		return "credentials"
	}
	return "unavailable"
}

// countConns reports every connection accepted on l to the metrics. It
// wraps the plain listener (below any TLS), so go-smtp still sees its
// *tls.Conn on implicit TLS and after STARTTLS.
func (s *Server) countConns(l net.Listener) net.Listener {
	if _, nop := s.metrics.(nopMetrics); nop {
		return l
	}
	return countingListener{l, s.metrics}
}

type countingListener struct {
	net.Listener
	m Metrics
}

func (l countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	l.m.ConnOpened()
	return &countingConn{Conn: c, m: l.m}, nil
}

type countingConn struct {
	net.Conn
	m    Metrics
	once sync.Once
}

// Unwrap gives the connection underneath, for authenticated.
func (c *countingConn) Unwrap() net.Conn { return c.Conn }

func (c *countingConn) Close() error {
	c.once.Do(c.m.ConnClosed)
	return c.Conn.Close()
}
