package director

import (
	"bufio"
	"errors"
	"net"
	"sync"
	"time"
)

// chanListener is a net.Listener fed by a goroutine: push hands it a
// connection, Accept takes the next.
type chanListener struct {
	addr  net.Addr
	close func() error // closes what feeds it

	conns chan net.Conn
	done  chan struct{}
	once  sync.Once

	mu  sync.Mutex
	err error // the feeder's error, once it stopped
}

func newChanListener(addr net.Addr, closeFeed func() error) *chanListener {
	return &chanListener{addr: addr, close: closeFeed, conns: make(chan net.Conn), done: make(chan struct{})}
}

// push hands c to Accept; false once the listener is closed.
func (l *chanListener) push(c net.Conn) bool {
	select {
	case l.conns <- c:
		return true
	case <-l.done:
		return false
	}
}

// fail ends the listener with the feeder's error.
func (l *chanListener) fail(err error) {
	l.mu.Lock()
	if l.err == nil {
		l.err = err
	}
	l.mu.Unlock()
	l.Close()
}

func (l *chanListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.err != nil {
			return nil, l.err
		}
		return nil, net.ErrClosed
	}
}

func (l *chanListener) Close() error {
	var err error
	l.once.Do(func() {
		close(l.done)
		if l.close != nil {
			err = l.close()
		}
	})
	return err
}

func (l *chanListener) Addr() net.Addr { return l.addr }

// tlsRecord is the first byte of every TLS connection (a handshake
// record, RFC 8446 §5.1): what tells a link from a peerfetch request.
const tlsRecord = 0x16

// sniffTimeout bounds the wait for a connection's first byte.
const sniffTimeout = 5 * time.Second

// Split serves two protocols on one listener, the replicas' peer port
// (DIRECTBRIDGE_PEER_ADDR): connections that begin with a TLS handshake
// go to links, the others (peerfetch's sealed HTTP) to rest. Each closes
// on its own (the IMAP server stops taking links when it shuts down,
// peerfetch serves on); ln closes with the second.
func Split(ln net.Listener) (links, rest net.Listener) {
	var mu sync.Mutex
	open := 2
	closeOne := func() error {
		mu.Lock()
		defer mu.Unlock()
		if open--; open == 0 {
			return ln.Close()
		}
		return nil
	}
	lk := newChanListener(ln.Addr(), closeOne)
	rs := newChanListener(ln.Addr(), closeOne)
	go func() {
		err := AcceptLoop(ln, func(c net.Conn) {
			c.SetReadDeadline(time.Now().Add(sniffTimeout))
			br := bufio.NewReaderSize(c, 1024)
			first, err := br.Peek(1)
			c.SetReadDeadline(time.Time{})
			if err != nil {
				c.Close()
				return
			}
			pc := &peekedConn{Conn: c, r: br}
			to := rs
			if first[0] == tlsRecord {
				to = lk
			}
			if !to.push(pc) {
				c.Close()
			}
		})
		lk.fail(err)
		rs.fail(err)
	}()
	return lk, rs
}

// AcceptLoop accepts connections on ln and hands each to handle in a
// goroutine of its own, until ln fails for good; its error is returned.
// A temporary failure (out of file descriptors) is waited out with a
// backoff of up to a second, as net/http and go-imap do: a flood must
// not close a listener for good.
func AcceptLoop(ln net.Listener, handle func(net.Conn)) error {
	var delay time.Duration
	for {
		c, err := ln.Accept()
		if err != nil {
			var ne interface{ Temporary() bool }
			if errors.As(err, &ne) && ne.Temporary() {
				delay = min(max(2*delay, 5*time.Millisecond), time.Second)
				time.Sleep(delay)
				continue
			}
			return err
		}
		delay = 0
		go handle(c)
	}
}

// peekedConn is a connection whose first bytes were read into r.
type peekedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *peekedConn) Read(p []byte) (int, error) { return c.r.Read(p) }
func (c *peekedConn) Unwrap() net.Conn           { return c.Conn }

// Queue is a listener that connections are handed to in the process:
// the accepting half of the director gives the IMAP server the
// connections it took the login of, for users whose home this replica
// is.
type Queue struct{ l *chanListener }

// NewQueue returns an empty Queue reporting addr as its address.
func NewQueue(addr net.Addr) *Queue { return &Queue{l: newChanListener(addr, nil)} }

// Push hands c to the next Accept; false once the queue is closed.
func (q *Queue) Push(c net.Conn) bool { return q.l.push(c) }

// Accept returns the next connection pushed.
func (q *Queue) Accept() (net.Conn, error) { return q.l.Accept() }

// Close ends the queue: Accept and Push fail from now on.
func (q *Queue) Close() error { return q.l.Close() }

// Addr is the address NewQueue was given.
func (q *Queue) Addr() net.Addr { return q.l.Addr() }
