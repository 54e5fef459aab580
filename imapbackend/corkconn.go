package imapbackend

import (
	"net"
	"sync"
	"time"
)

// go-imap flushes its writer at the end of every response line, so a
// FETCH of fifty messages costs fifty-one write system calls and as many
// TCP segments; under imaptest's stress these writes were a fifth of the
// bridge's CPU. A corked connection gathers the lines of one answer into
// one write, the way Dovecot sends them:
//
//   - what go-imap writes is kept in a buffer;
//   - the buffer goes out before the connection reads (the server has
//     finished answering and waits for the client: nothing stays behind
//     a command), when it reaches corkMax, before Close, and at the
//     latest corkDelay after the first byte waiting (untagged responses
//     written while the server waits for the client, as during IDLE, and
//     the first part of a long FETCH).
//
// Errors of a delayed write are returned by the next Write or Read, and
// the connection is then closed by go-imap as after any write error.

const (
	corkMax   = 64 << 10
	corkDelay = 2 * time.Millisecond
)

// corkWriteTimeout bounds a flush when go-imap set no write deadline of
// its own: go-imap sets one around each response it writes and clears it
// after, but the bytes leave later, on the next read or the timer; a
// client that stops reading must not hold a flush (and the connection's
// lock) for ever.
const corkWriteTimeout = 30 * time.Second

// corkListener wraps the connections a listener accepts.
type corkListener struct{ net.Listener }

func (l corkListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &corkConn{Conn: c}, nil
}

// corkConn is a net.Conn whose writes are gathered (see above).
type corkConn struct {
	net.Conn
	mu       sync.Mutex
	buf      []byte
	timer    *time.Timer // pending delayed flush, if any
	err      error       // the first failed write
	deadline time.Time   // the write deadline go-imap set, zero if none
	// writeTimeout bounds a flush without a deadline of go-imap's
	// (corkWriteTimeout; zero also means that).
	writeTimeout time.Duration
	// through: writes go out at once (uncork).
	through bool
}

// SetWriteDeadline remembers go-imap's deadline for the flushes, which
// come later than the writes it covers.
func (c *corkConn) SetWriteDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.deadline = t
	return c.Conn.SetWriteDeadline(t)
}

// SetDeadline is SetReadDeadline and SetWriteDeadline.
func (c *corkConn) SetDeadline(t time.Time) error {
	if err := c.Conn.SetReadDeadline(t); err != nil {
		return err
	}
	return c.SetWriteDeadline(t)
}

func (c *corkConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return 0, c.err
	}
	if c.through {
		if err := c.flushLocked(); err != nil {
			return 0, err
		}
		n, err := c.Conn.Write(p)
		c.err = err
		return n, err
	}
	if len(c.buf)+len(p) > corkMax {
		if err := c.flushLocked(); err != nil {
			return 0, err
		}
		if len(p) >= corkMax {
			n, err := c.Conn.Write(p)
			c.err = err
			return n, err
		}
	}
	c.buf = append(c.buf, p...)
	if c.timer == nil {
		c.timer = time.AfterFunc(corkDelay, c.delayedFlush)
	}
	return len(p), nil
}

// flushLocked writes what waits. Called with c.mu held.
func (c *corkConn) flushLocked() error {
	if c.timer != nil {
		c.timer.Stop()
		c.timer = nil
	}
	if c.err != nil || len(c.buf) == 0 {
		return c.err
	}
	limit := c.writeTimeout
	if limit <= 0 {
		limit = corkWriteTimeout
	}
	dl := c.deadline
	if dl.IsZero() || time.Until(dl) > limit {
		dl = time.Now().Add(limit)
	}
	c.Conn.SetWriteDeadline(dl)
	_, c.err = c.Conn.Write(c.buf)
	c.Conn.SetWriteDeadline(c.deadline)
	if cap(c.buf) > corkMax {
		c.buf = nil // let a large answer's buffer go
	} else {
		c.buf = c.buf[:0]
	}
	return c.err
}

func (c *corkConn) delayedFlush() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.timer = nil
	c.flushLocked()
}

// uncork makes every later write go out at once, after what waits: a
// client connection this replica relays to the user's home (proxy.go).
// Its writes are the home's answers, each gathered there in one frame
// already (director's corked frameWriter); its reads wait for the
// client all along, so they never flush, and each answer would wait for
// the timer, corkDelay late.
func (c *corkConn) uncork() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.through = true
	c.flushLocked()
}

// Unwrap gives the connection underneath (limits.Authenticated).
func (c *corkConn) Unwrap() net.Conn { return c.Conn }

// Read sends what waits first: the server reads when it is done writing.
func (c *corkConn) Read(p []byte) (int, error) {
	c.mu.Lock()
	err := c.flushLocked()
	c.mu.Unlock()
	if err != nil {
		return 0, err
	}
	return c.Conn.Read(p)
}

// Close sends what waits (a BYE, say), then closes. It never waits for a
// client that does not read: a write already blocked is cut short by the
// close, and the last flush gets closeFlushTime.
func (c *corkConn) Close() error {
	if c.mu.TryLock() {
		c.deadline = time.Now().Add(closeFlushTime)
		c.flushLocked()
		c.mu.Unlock()
	}
	return c.Conn.Close()
}

// closeFlushTime bounds the last write before a close.
const closeFlushTime = time.Second
