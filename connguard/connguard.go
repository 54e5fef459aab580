// Package connguard keeps strangers from starving the users of a listener
// (IMAP or SMTP). Before a client authenticates it is a stranger and gets
// little:
//
//   - at most Limits.PerAddress connections per client address that have
//     not authenticated yet (an IPv4 address or an IPv6 /64, as
//     authguard.Key: a clinic's users behind one NAT address are counted
//     apart once logged in) and Limits.Total open connections in all; a
//     connection over either is answered at once with the
//     protocol's "too many connections" line and closed, rather than left
//     waiting in the backlog, so a real user is never queued behind a
//     flood;
//   - Limits.PreAuthTime to authenticate, whatever read timeouts the
//     protocol library sets meanwhile;
//   - Limits.PreAuthBytes of input (TLS handshake and commands, counted as
//     they arrive) until it authenticates.
//
// The front calls Authenticated on a successful login; then the protocol's
// own timeouts apply.
package connguard

import (
	"crypto/tls"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/directbridge/directbridge/authguard"
)

// Limits of one listener; zero values take the defaults.
type Limits struct {
	PerAddress   int           // default 20
	Total        int           // default DefaultTotal()
	PreAuthTime  time.Duration // default 30 s
	PreAuthBytes int64         // default 256 KiB
}

// Defaults.
const (
	DefaultPerAddress   = 20
	DefaultPreAuthTime  = 30 * time.Second
	DefaultPreAuthBytes = 256 << 10
	// maxTotal bounds the default total of one listener.
	maxTotal = 10000
	// fdHeadroom is the file descriptors kept free of client connections
	// (the state store, the provider's connections, the other listeners'
	// accepts, logs).
	fdHeadroom = 128
	// listeners is how many client listeners share the process's file
	// descriptors (IMAP, IMAPS, SMTP, SMTPS).
	listeners = 4
)

// DefaultTotal is the connections one listener may hold: its share of the
// process's file descriptor limit after a headroom, so that a flood of one
// listener never leaves the others (or /readyz) without a descriptor;
// at most 10,000 (the 1,000 idle users of BENCHMARKS.md fit many times).
func DefaultTotal() int {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil || rl.Cur == 0 {
		return maxTotal
	}
	share := (int64(rl.Cur) - fdHeadroom) / listeners
	return int(max(16, min(share, maxTotal)))
}

// ErrPreAuthBytes ends a connection that sent too much before
// authenticating.
var ErrPreAuthBytes = errors.New("connguard: too much data before authentication")

// Listener wraps l. refusal is the line written to a connection refused
// for the limits (e.g. "* BYE Too many connections\r\n").
func Listener(l net.Listener, lim Limits, refusal string) net.Listener {
	if lim.PerAddress <= 0 {
		lim.PerAddress = DefaultPerAddress
	}
	if lim.Total <= 0 {
		lim.Total = DefaultTotal()
	}
	if lim.PreAuthTime <= 0 {
		lim.PreAuthTime = DefaultPreAuthTime
	}
	if lim.PreAuthBytes <= 0 {
		lim.PreAuthBytes = DefaultPreAuthBytes
	}
	return &listener{Listener: l, lim: lim, refusal: []byte(refusal), per: map[string]int{}}
}

type listener struct {
	net.Listener
	lim     Limits
	refusal []byte

	mu    sync.Mutex
	per   map[string]int
	total int
}

// Accept returns the next connection within the limits; those over them
// are refused on the side and not returned.
func (l *listener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		key := authguard.Key(c.RemoteAddr())
		l.mu.Lock()
		ok := l.total < l.lim.Total && l.per[key] < l.lim.PerAddress
		if ok {
			l.total++
			l.per[key]++
		}
		l.mu.Unlock()
		if !ok {
			go l.refuse(c)
			continue
		}
		gc := &Conn{Conn: c, l: l, key: key, budget: l.lim.PreAuthBytes, deadline: time.Now().Add(l.lim.PreAuthTime)}
		gc.Conn.SetReadDeadline(gc.deadline)
		return gc, nil
	}
}

// release counts a connection out: of the total, and of its address's
// strangers unless it authenticated (then it was counted out already).
func (l *listener) release(key string, stranger bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.total--
	if stranger {
		l.leaveLocked(key)
	}
}

// leaveLocked counts a stranger of key out. Called with l.mu held.
func (l *listener) leaveLocked(key string) {
	if l.per[key]--; l.per[key] <= 0 {
		delete(l.per, key)
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
	key      string
	mu       sync.Mutex // orders authenticated and closed
	authed   atomic.Bool
	closed   bool
	budget   int64 // bytes left before authentication
	deadline time.Time
	read     atomic.Int64
	lastRead atomic.Int64 // Unix ns of the last byte read
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

func (c *Conn) Close() error {
	c.mu.Lock()
	if !c.closed {
		c.closed = true
		c.l.release(c.key, !c.authed.Load())
	}
	c.mu.Unlock()
	return c.Conn.Close()
}

// authenticate ends the stranger's limits, once.
func (c *Conn) authenticate() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || c.authed.Load() {
		return
	}
	c.authed.Store(true)
	c.l.mu.Lock()
	c.l.leaveLocked(c.key)
	c.l.mu.Unlock()
	c.Conn.SetReadDeadline(time.Time{})
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
	for range 6 {
		switch x := c.(type) {
		case *Conn:
			return x
		case *tls.Conn:
			c = x.NetConn()
		case interface{ Unwrap() net.Conn }:
			c = x.Unwrap()
		default:
			return nil
		}
	}
	return nil
}

// Authenticated lifts the stranger's limits of the connection under c
// (through TLS and other wrappers that have an Unwrap method) and clears
// the pre-authentication deadline.
func Authenticated(c net.Conn) {
	if x := find(c); x != nil {
		x.authenticate()
	}
}
