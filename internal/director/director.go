package director

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/directbridge/directbridge/internal/cluster"
)

// Timing of a link.
const (
	// dialTimeout bounds the connection and TLS handshake to a home: a
	// home that takes longer is busy or gone, and the accepting replica
	// serves the client itself.
	dialTimeout = 2 * time.Second
	// greetingTimeout bounds the home's answer to a Hello: it checks its
	// state store and waits up to a second for a connection slot.
	greetingTimeout = 15 * time.Second
	// handshakeTimeout bounds an incoming link's TLS handshake and Hello.
	handshakeTimeout = 5 * time.Second
)

// Director chooses each user's home replica and opens links to it.
type Director struct {
	members Members
	server  *tls.Config
	client  *tls.Config
	down    cluster.DownSet // homes that did not answer lately
}

// New returns the director of the replicas holding journalKey, whose
// live members members reports.
func New(journalKey []byte, members Members) (*Director, error) {
	server, client, err := linkTLS(journalKey)
	if err != nil {
		return nil, err
	}
	return &Director{members: members, server: server, client: client}, nil
}

// Home returns the replica that serves user's sessions, and the address
// it accepts links at; remote is false when this replica is the home,
// or when the home did not answer a moment ago (this replica serves the
// user meanwhile).
func (d *Director) Home(user string) (replica, addr string, remote bool) {
	self, addrs := d.members()
	id := home(strings.ToLower(user), addrs)
	if id == "" || id == self || d.down.IsDown(id) {
		return self, "", false
	}
	return id, addrs[id], true
}

// Link is an open link to a home that answered a Hello.
type Link struct {
	*tls.Conn
	r *bufio.Reader
	// Greeting is the home's IMAP greeting, without its line end: an
	// untagged PREAUTH when it took the session, BYE when it did not.
	Greeting string
}

// Read reads what the home sends after its greeting.
func (l *Link) Read(p []byte) (int, error) { return l.r.Read(p) }

// Dial opens a link to replica at addr and sends h. A home that cannot
// be reached is left alone for cluster.DownFor.
func (d *Director) Dial(ctx context.Context, replica, addr string, h Hello) (*Link, error) {
	dctx, cancel := context.WithTimeout(ctx, dialTimeout)
	defer cancel()
	raw, err := (&net.Dialer{}).DialContext(dctx, "tcp", addr)
	if err != nil {
		d.down.Mark(replica)
		return nil, fmt.Errorf("director: link to %s: %w", replica, err)
	}
	c := tls.Client(raw, d.client)
	if err := c.HandshakeContext(dctx); err != nil {
		raw.Close()
		d.down.Mark(replica)
		return nil, fmt.Errorf("director: link to %s: %w", replica, err)
	}
	c.SetDeadline(time.Now().Add(greetingTimeout))
	l := &Link{Conn: c, r: bufio.NewReader(c)}
	if err := writeHello(c, h); err != nil {
		c.Close()
		return nil, fmt.Errorf("director: link to %s: %w", replica, err)
	}
	g, err := readLine(l.r)
	if err != nil {
		c.Close()
		d.down.Mark(replica)
		return nil, fmt.Errorf("director: link to %s: greeting: %w", replica, err)
	}
	c.SetDeadline(time.Time{})
	l.Greeting = string(g)
	return l, nil
}

// Incoming is a link another replica opened to this one, after its
// Hello.
type Incoming struct {
	*tls.Conn
	r     *bufio.Reader
	Hello Hello
}

// Read reads what the accepting replica relays from its client.
func (in *Incoming) Read(p []byte) (int, error) { return in.r.Read(p) }

// RemoteAddr is the client's address (Hello.Client), not the
// accepting replica's: this is what the home's logs and limits want.
func (in *Incoming) RemoteAddr() net.Addr { return in.Hello.ClientAddr() }

// Unwrap returns the TLS connection under the link.
func (in *Incoming) Unwrap() net.Conn { return in.Conn }

// Listen returns a listener whose Accept yields the links other
// replicas open on ln, each after its TLS handshake (a peer without the
// cluster's key is refused there) and Hello. Handshakes run side by
// side: one slow peer does not hold up the others.
func (d *Director) Listen(ln net.Listener) net.Listener {
	l := newChanListener(ln.Addr(), ln.Close)
	go func() {
		for {
			raw, err := ln.Accept()
			if err != nil {
				l.fail(err)
				return
			}
			go func() {
				in, err := d.accept(raw)
				if err != nil {
					raw.Close()
					return
				}
				if !l.push(in) {
					in.Close()
				}
			}()
		}
	}()
	return l
}

func (d *Director) accept(raw net.Conn) (*Incoming, error) {
	raw.SetDeadline(time.Now().Add(handshakeTimeout))
	c := tls.Server(raw, d.server)
	if err := c.Handshake(); err != nil {
		return nil, err
	}
	in := &Incoming{Conn: c, r: bufio.NewReader(c)}
	h, err := readHello(in.r)
	if err != nil {
		return nil, err
	}
	raw.SetDeadline(time.Time{})
	in.Hello = h
	return in, nil
}
