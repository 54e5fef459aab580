// Package limits bounds what clients can take from the bridge: the
// connections of strangers (clients not yet logged in) and the message
// bytes held at once (budget.go). It owns no protocol: the fronts wrap
// their listeners with Listener and their message readers with a Budget,
// and answer a refusal in their own words.
//
// Strangers are kept from starving the users of a listener (IMAP or
// SMTP). Before a client authenticates it is a stranger and gets
// little:
//
//   - at most Limits.PerAddress connections per client address (an IPv4
//     address or an IPv6 /64, as login.Key: a clinic's users behind
//     one NAT address are counted apart once logged in) and
//     Limits.PerPrefix per wider prefix (an IPv4 /24, an IPv6 /48: the
//     holder of a /56 does not get 256 addresses' worth), see prefix.go;
//   - at most Limits.PreAuthTotal strangers in all, well below the
//     listener's Limits.Total, so that the rest stays with logged-in
//     users whatever the strangers do; when the strangers' room is full a
//     newcomer displaces the oldest stranger of the most represented
//     prefix, if that prefix holds more than the newcomer's (strangers.go
//     says why: a user is a stranger too until its login completes);
//   - a connection over a limit is answered at once with the protocol's
//     "too many connections" line and closed, rather than left waiting in
//     the backlog, so a real user is never queued behind a flood;
//   - Limits.PreAuthTime to authenticate, whatever read timeouts the
//     protocol library sets meanwhile;
//   - Limits.PreAuthBytes of input (TLS handshake and commands, counted as
//     they arrive) until it authenticates.
//
// The front calls Authenticated on a successful login: the connection
// moves from the strangers to the users, and the protocol's own timeouts
// apply. The limits derive from the process's file-descriptor limit
// (Derive, RaiseFileLimit), which a server checks at start.
package limits

import (
	"container/list"
	"crypto/tls"
	"errors"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"
)

// ErrPreAuthBytes ends a connection that sent too much before
// authenticating.
var ErrPreAuthBytes = errors.New("limits: too much data before authentication")

// Listener wraps l. refusal is the line written to a connection refused
// for the limits (e.g. "* BYE Too many connections\r\n"). Zero fields
// of lim take the defaults; lim is not checked (Derive does that).
func Listener(l net.Listener, lim Limits, refusal string) net.Listener {
	return ObservedListener(l, lim, refusal, nil)
}

// Reasons a connection is turned away, for ObservedListener.
const (
	Refused   = "refused"   // over a limit when it arrived: refusal written, closed
	Displaced = "displaced" // a stranger let go for a newcomer (strangers.go)
)

// ObservedListener is Listener, telling turnedAway (when not nil) of
// every connection it turns away, with the reason (Refused, Displaced):
// an operator sees a flood by it, which the users' own figures do not
// show. turnedAway must not block.
func ObservedListener(l net.Listener, lim Limits, refusal string, turnedAway func(reason string)) net.Listener {
	lim = lim.withDefaults(DefaultTotal)
	if turnedAway == nil {
		turnedAway = func(string) {}
	}
	return &listener{Listener: l, lim: lim, refusal: []byte(refusal), pool: newPool(lim), turnedAway: turnedAway}
}

type listener struct {
	net.Listener
	lim        Limits
	refusal    []byte
	turnedAway func(reason string)

	mu   sync.Mutex
	pool *pool
}

// Accept returns the next connection within the limits; those over them
// are refused on the side and not returned.
func (l *listener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		addr, prefix := clientKeys(c.RemoteAddr())
		gc := &Conn{Conn: c, l: l, addr: addr, prefix: prefix, budget: l.lim.PreAuthBytes, deadline: time.Now().Add(l.lim.PreAuthTime)}
		l.mu.Lock()
		displaced, ok := l.pool.admit(gc)
		l.mu.Unlock()
		if displaced != nil {
			displaced.Conn.Close() // counted out already; its own Close finds it so
			l.turnedAway(Displaced)
		}
		if !ok {
			go l.refuse(c)
			l.turnedAway(Refused)
			continue
		}
		gc.Conn.SetReadDeadline(gc.deadline)
		return gc, nil
	}
}

// refuse answers a connection over the limits and closes it, never
// waiting long for a client that does not read.
func (l *listener) refuse(c net.Conn) {
	c.SetWriteDeadline(time.Now().Add(time.Second))
	c.Write(l.refusal)
	c.Close()
}

// Conn is a connection within the limits.
type Conn struct {
	net.Conn
	l        *listener
	addr     netip.Prefix // per-address key
	prefix   netip.Prefix // per-prefix key
	authed   atomic.Bool
	budget   int64 // bytes left before authentication
	deadline time.Time
	read     atomic.Int64
	lastRead atomic.Int64 // Unix ns of the last byte read

	// Guarded by l.mu (the pool's state of this connection).
	counted  bool          // in the pool, as a stranger or a user
	stranger bool          // among the strangers
	group    *group        // its prefix's strangers, while a stranger
	elem     *list.Element // in group.conns
}

func (c *Conn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.lastRead.Store(time.Now().UnixNano())
	}
	if !c.authed.Load() && c.read.Add(int64(n)) > c.budget {
		return n, ErrPreAuthBytes
	}
	return n, err
}

// SetReadDeadline keeps a stranger's deadline: before authentication a
// later deadline than the pre-authentication one is cut to it.
func (c *Conn) SetReadDeadline(t time.Time) error {
	if !c.authed.Load() && (t.IsZero() || t.After(c.deadline)) {
		t = c.deadline
	}
	return c.Conn.SetReadDeadline(t)
}

// SetDeadline is SetReadDeadline and SetWriteDeadline.
func (c *Conn) SetDeadline(t time.Time) error {
	if err := c.Conn.SetWriteDeadline(t); err != nil {
		return err
	}
	return c.SetReadDeadline(t)
}

// Close counts the connection out (once, and not at all when it was
// displaced) and closes it.
func (c *Conn) Close() error {
	c.l.mu.Lock()
	c.l.pool.release(c)
	c.l.mu.Unlock()
	return c.Conn.Close()
}

// authenticate ends the stranger's limits, once: the connection moves to
// the users. A connection closed or displaced meanwhile stays out.
func (c *Conn) authenticate() {
	c.l.mu.Lock()
	moved := c.l.pool.authenticate(c)
	if moved {
		c.authed.Store(true)
	}
	c.l.mu.Unlock()
	if moved {
		c.Conn.SetReadDeadline(time.Time{})
	}
}

// LastRead is when bytes last came in on the connection under c (through
// TLS and wrappers with Unwrap), or the zero time when c is not one of
// this package's.
func LastRead(c net.Conn) time.Time {
	if x := find(c); x != nil {
		if ns := x.lastRead.Load(); ns != 0 {
			return time.Unix(0, ns)
		}
	}
	return time.Time{}
}

// find returns the Conn under c.
func find(c net.Conn) *Conn {
	x, _ := Under[*Conn](c)
	return x
}

// Under finds the connection of type T under c, through TLS and the
// wrappers that have an Unwrap() net.Conn method (a few levels at most),
// for the layers that wrap accepted connections and must find their own
// wrapper again from what the protocol library hands them.
func Under[T net.Conn](c net.Conn) (T, bool) {
	for range 6 {
		if x, ok := c.(T); ok {
			return x, true
		}
		switch x := c.(type) {
		case *tls.Conn:
			c = x.NetConn()
		case interface{ Unwrap() net.Conn }:
			c = x.Unwrap()
		default:
			var zero T
			return zero, false
		}
	}
	var zero T
	return zero, false
}

// Authenticated lifts the stranger's limits of the connection under c
// (through TLS and other wrappers that have an Unwrap method) and clears
// the pre-authentication deadline.
func Authenticated(c net.Conn) {
	if x := find(c); x != nil {
		x.authenticate()
	}
}
