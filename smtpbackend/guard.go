package smtpbackend

import (
	"crypto/tls"
	"errors"
	"net"
	"sync"
	"sync/atomic"
)

// Before a client authenticates it is a stranger, so it gets little:
// guardListener bounds the number of open connections, and each
// connection may send at most preAuthBudget bytes (TLS handshake and
// commands, counted as they arrive, encrypted or not) until AUTH
// succeeds. Lines may be long after AUTH (see lineSlack); before it, this
// budget keeps a stranger from making the server hold large lines.
const preAuthBudget = 256 << 10

// DefaultMaxConnections bounds the open SMTP connections of a listener.
const DefaultMaxConnections = 256

var errPreAuthBudget = errors.New("smtpbackend: too much data before authentication")

type guardListener struct {
	net.Listener
	slots chan struct{}
}

func (s *Server) guard(l net.Listener) net.Listener {
	return guardListener{Listener: l, slots: make(chan struct{}, s.cfg.MaxConnections)}
}

// Accept waits for a free slot, so excess clients queue in the kernel's
// backlog instead of costing memory here.
func (l guardListener) Accept() (net.Conn, error) {
	l.slots <- struct{}{}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.slots
		return nil, err
	}
	return &guardConn{Conn: c, release: func() { <-l.slots }}, nil
}

type guardConn struct {
	net.Conn
	authed  atomic.Bool
	read    atomic.Int64
	release func()
	once    sync.Once
}

func (c *guardConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if !c.authed.Load() && c.read.Add(int64(n)) > preAuthBudget {
		return n, errPreAuthBudget
	}
	return n, err
}

func (c *guardConn) Close() error {
	c.once.Do(c.release)
	return c.Conn.Close()
}

// authenticated lifts the pre-authentication budget of the connection
// under c (through TLS and other wrappers).
func authenticated(c net.Conn) {
	for range 4 {
		switch x := c.(type) {
		case *guardConn:
			x.authed.Store(true)
			return
		case *tls.Conn:
			c = x.NetConn()
		case interface{ Unwrap() net.Conn }:
			c = x.Unwrap()
		default:
			return
		}
	}
}
