package director

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
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
	live    Live
	server  *tls.Config
	client  *tls.Config
	down    cluster.DownSet // homes that did not answer lately

	mu       sync.Mutex
	watching map[string]chan struct{} // AwaitGone's, by home: closed once it is known gone
}

// Live reports whether a replica is alive now (cluster.Cluster.Live:
// dead the moment PostgreSQL saw its connection close).
type Live func(ctx context.Context, replica string) bool

// New returns the director of the replicas holding journalKey, whose
// live members members reports, and whose life live tells (nil: never
// asked, AwaitGone returns at once).
func New(journalKey []byte, members Members, live Live) (*Director, error) {
	server, client, err := linkTLS(journalKey)
	if err != nil {
		return nil, err
	}
	return &Director{members: members, live: live, server: server, client: client}, nil
}

// MarkDown notes that replica did not serve a link a moment ago: it is
// not a home for cluster.DownFor.
func (d *Director) MarkDown(replica string) { d.down.Mark(replica) }

// awaitGoneFor bounds AwaitGone: PostgreSQL sees a killed replica's
// connection close within milliseconds; one whose machine vanished takes
// its keepalive's time (package cluster), which a client is not held for.
const awaitGoneFor = 3 * time.Second

// AwaitGone waits until replica is known dead, or awaitGoneFor passed.
// A relay whose home broke off holds its client until then: the
// client's retry of a change the home was making is then answered from
// the journal as one whose replica died (undecided), never taken for a
// change under way in a live replica and made twice. The relays of one
// home share one watch: a home that dies with a thousand clients costs
// one question to PostgreSQL every 20 ms, not a thousand.
func (d *Director) AwaitGone(replica string) {
	if d.live == nil {
		return
	}
	d.mu.Lock()
	w, ok := d.watching[replica]
	if !ok {
		w = make(chan struct{})
		if d.watching == nil {
			d.watching = map[string]chan struct{}{}
		}
		d.watching[replica] = w
		go d.watchGone(replica, w)
	}
	d.mu.Unlock()
	<-w
}

func (d *Director) watchGone(replica string, done chan struct{}) {
	defer func() {
		d.mu.Lock()
		delete(d.watching, replica)
		d.mu.Unlock()
		close(done)
	}()
	ctx, cancel := context.WithTimeout(context.Background(), awaitGoneFor)
	defer cancel()
	for d.live(ctx, replica) {
		select {
		case <-ctx.Done():
			return
		case <-time.After(20 * time.Millisecond):
		}
	}
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

// Link is an open link to a home that answered a Hello. Its reads and
// writes are the IMAP stream, framed on the wire (frame.go).
type Link struct {
	*tls.Conn
	r  *bufio.Reader // the home's stream, out of its frames
	fw *frameWriter
	// Greeting is the home's IMAP greeting, without its line end: an
	// untagged PREAUTH when it took the session, BYE when it did not.
	Greeting string
}

// Read reads what the home sends after its greeting: io.EOF when the
// home ended the session, an error IsBroke reports when the link broke.
func (l *Link) Read(p []byte) (int, error) { return l.r.Read(p) }

// Write sends the client's bytes to the home.
func (l *Link) Write(p []byte) (int, error) { return l.fw.Write(p) }

// End ends the client's side cleanly, with the end frame alone: the
// home finishes the command it runs, answers it, and ends the session
// (a drain).
func (l *Link) End() error { return l.fw.End() }

// CloseWrite ends the client's side because the client left: the end
// frame, TLS's close_notify and the socket's own end, which the home's
// check for clients gone sees even while it runs a command.
func (l *Link) CloseWrite() error {
	err := l.fw.End()
	l.Conn.CloseWrite()
	if tc, ok := l.Conn.NetConn().(interface{ CloseWrite() error }); ok {
		tc.CloseWrite()
	}
	return err
}

// IsBroke reports an error of a link that ended without its sender's
// clean end.
func IsBroke(err error) bool { return errors.Is(err, errBroke) }

// Dial opens a link to replica at addr and sends h. A home that cannot
// be reached is left alone for cluster.DownFor.
func (d *Director) Dial(ctx context.Context, replica, addr string, h Hello) (*Link, error) {
	dctx, cancel := context.WithTimeout(ctx, dialTimeout)
	defer cancel()
	raw, err := (&net.Dialer{KeepAliveConfig: linkKeepAlive}).DialContext(dctx, "tcp", addr)
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
	l := &Link{Conn: c, r: bufio.NewReader(&frameReader{r: c}), fw: &frameWriter{w: c}}
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
// Hello. A pump reads it from then on (inbox), so that its end is known
// at once, whether the session reads or not.
type Incoming struct {
	*tls.Conn
	in     *inbox
	fw     *frameWriter
	Hello  Hello
	closed atomic.Bool
}

// Read reads what the accepting replica relays from its client: io.EOF
// at its clean end.
func (in *Incoming) Read(p []byte) (int, error) { return in.in.Read(p) }

// Write sends the session's bytes to the accepting replica.
func (in *Incoming) Write(p []byte) (int, error) { return in.fw.Write(p) }

// SetReadDeadline bounds the session's reads (the pump reads on).
func (in *Incoming) SetReadDeadline(t time.Time) error {
	in.in.setDeadline(t)
	return nil
}

// SetDeadline bounds the session's reads and writes.
func (in *Incoming) SetDeadline(t time.Time) error {
	in.in.setDeadline(t)
	return in.fw.setDeadline(t)
}

// SetWriteDeadline bounds the session's writes, and the flushes of what
// they leave waiting (frameWriter).
func (in *Incoming) SetWriteDeadline(t time.Time) error { return in.fw.setDeadline(t) }

// Close ends the session's side cleanly (the end frame) and the link.
func (in *Incoming) Close() error {
	if in.closed.Swap(true) {
		return nil
	}
	in.fw.setDeadline(time.Now().Add(time.Second))
	in.fw.End()
	in.in.stop()
	return in.Conn.Close()
}

// Broke reports that the link ended without the accepting replica's
// clean end (its client left, or it drains): the replica was killed, or
// its machine or the network failed, and what the home answered last
// may not have reached the client.
func (in *Incoming) Broke() bool { return in.in.isBroke() }

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
		l.fail(AcceptLoop(ln, func(raw net.Conn) {
			in, err := d.accept(raw)
			if err != nil {
				raw.Close()
				return
			}
			if !l.push(in) {
				in.Close()
			}
		}))
	}()
	return l
}

// linkKeepAlive finds a link whose other end vanished without closing
// it (its machine or the network gone) within about four seconds: the
// home then takes what it answered on it lately as lost (Broke), before
// the client, whose own connection dies with that machine, retries.
var linkKeepAlive = net.KeepAliveConfig{Enable: true, Idle: time.Second, Interval: time.Second, Count: 3}

func (d *Director) accept(raw net.Conn) (*Incoming, error) {
	if tc, ok := underTCP(raw); ok {
		tc.SetKeepAliveConfig(linkKeepAlive)
	}
	raw.SetDeadline(time.Now().Add(handshakeTimeout))
	c := tls.Server(raw, d.server)
	if err := c.Handshake(); err != nil {
		return nil, err
	}
	r := bufio.NewReader(c)
	h, err := readHello(r)
	if err != nil {
		return nil, err
	}
	raw.SetDeadline(time.Time{})
	in := &Incoming{Conn: c, in: newInbox(), fw: &frameWriter{w: c, corked: true, conn: c}, Hello: h}
	in.in.flush = in.fw.Flush
	// A flush that failed (the relaying replica gone, or not reading for
	// corkWriteTimeout) ends the link: the pump's read then fails, and
	// the session waiting for its client learns of it.
	in.fw.broken = func() { raw.Close() }
	go in.in.fill(r)
	return in, nil
}

// underTCP finds the TCP connection under c (through wrappers with an
// Unwrap method).
func underTCP(c net.Conn) (*net.TCPConn, bool) {
	for range 6 {
		switch x := c.(type) {
		case *net.TCPConn:
			return x, true
		case interface{ Unwrap() net.Conn }:
			c = x.Unwrap()
		default:
			return nil, false
		}
	}
	return nil, false
}
