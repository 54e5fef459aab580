package smtpbackend

import (
	"net"

	"github.com/directbridge/directbridge/internal/limits"
)

// Before a client authenticates it is a stranger, so it gets little
// (package limits): a few connections per address, a bounded number in
// all, refused at once with 421 over either instead of waiting in the
// backlog; DefaultPreAuthTime to authenticate; a byte budget until then.
// The budget keeps a stranger from sending much at all; command lines
// are bounded for everyone (cmdlines.go).

// refusal answers a connection over the limits (RFC 5321 §3.8: 421 and
// close).
const refusal = "421 4.7.0 Too many connections from your address or in all; try again later\r\n"

func (s *Server) guard(l net.Listener) net.Listener {
	return limits.ObservedListener(l, s.cfg.Connections, refusal, s.metrics.TurnedAway)
}

// authenticated lifts the stranger's limits of the connection under c.
func authenticated(c net.Conn) { limits.Authenticated(c) }
