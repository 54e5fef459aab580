package director

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"time"
)

// After the Hello, each direction of a link is a stream of frames: a
// 4-byte big-endian length and that many bytes of the IMAP stream. A
// frame of length zero is its sender's clean end: the client left, the
// session ended (LOGOUT, BYE). A link that ends without one lost its
// sender (killed, its machine or the network gone), and what was sent
// last may not have reached the client: the home then takes the answers
// it gave lately as lost (mailstore.AnswerPath), the accepting replica
// waits for the home to be known dead before letting its client retry.
// TLS alone cannot tell the two: it takes a connection that closes at a
// record boundary for a clean close.

// maxFrame bounds a frame: what one write carries (go-imap's buffers,
// the relay's 32 KiB).
const maxFrame = 1 << 20

// errBroke is a link that ended without its sender's end frame.
var errBroke = errors.New("director: the link broke off")

// frameWriter writes frames to w; its writes may come from two
// goroutines (the session's, and End from a closer).
//
// The home's side of a link is corked: go-imap writes an answer line by
// line, and a frame (a TLS record, a write, and a read and a write at the
// relaying replica) per line made a FETCH of fifty messages fifty of
// each. What the session writes waits, and goes out as one frame when the
// session waits for its client (inbox.Read calls Flush), at corkMax, at
// the end, and at the latest corkDelay after its first byte (untagged
// responses while the session waits, as during IDLE). The client's side
// (Link) is not corked: a command goes out as the client sent it.
type frameWriter struct {
	mu    sync.Mutex
	w     io.Writer
	buf   []byte
	ended bool

	corked  bool
	pending []byte      // corked bytes not sent yet
	timer   *time.Timer // the delayed flush, while bytes wait
	err     error       // a delayed flush's failure, for the next Write
	// conn and deadline: a corked writer's connection, and the write
	// deadline its user set (setDeadline), which a flush keeps within
	// corkWriteTimeout: the bytes leave later than the writes that
	// deadline covered, and a relay that stops reading must not hold a
	// flush (and the session's next write) for ever.
	conn     interface{ SetWriteDeadline(time.Time) error }
	deadline time.Time
	// delay is how long corked bytes may wait (corkDelay; tests set
	// more); broken is called once when a flush fails: the link is dead
	// for its session, which may be waiting for its client and would not
	// learn of it from its writes.
	delay  time.Duration
	broken func()
}

// corkWriteTimeout bounds a corked writer's flush.
const corkWriteTimeout = 30 * time.Second

// setDeadline sets the write deadline of the link's session side.
func (f *frameWriter) setDeadline(t time.Time) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.deadline = t
	if f.conn == nil {
		return nil
	}
	return f.conn.SetWriteDeadline(t)
}

// corkMax and corkDelay bound what a corked frameWriter holds back.
const (
	corkMax   = 64 << 10
	corkDelay = 2 * time.Millisecond
)

// Write sends p in frames, each header and payload in one write (one
// TLS record); corked, it keeps p for the next flush.
func (f *frameWriter) Write(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.ended {
		return 0, io.ErrClosedPipe
	}
	if f.err != nil {
		return 0, f.err
	}
	if !f.corked {
		return f.send(p)
	}
	if len(p) >= corkMax {
		// A large write (a message's literal) goes as it comes, under
		// its writer's deadline (go-imap gives a literal minutes), after
		// what waits: neither copied nor held to a flush's bound.
		if err := f.flushLocked(); err != nil {
			return 0, err
		}
		n, err := f.send(p)
		if err != nil {
			f.fail(err)
		}
		return n, err
	}
	f.pending = append(f.pending, p...)
	if len(f.pending) >= corkMax {
		if err := f.flushLocked(); err != nil {
			return 0, err
		}
	} else if f.timer == nil {
		delay := f.delay
		if delay <= 0 {
			delay = corkDelay
		}
		f.timer = time.AfterFunc(delay, func() { f.Flush() })
	}
	return len(p), nil
}

// fail notes a failed write of a corked writer (under f.mu).
func (f *frameWriter) fail(err error) {
	if f.err == nil {
		f.err = err
	}
	if f.broken != nil {
		go f.broken()
		f.broken = nil
	}
}

// send writes p in frames of at most maxFrame bytes.
func (f *frameWriter) send(p []byte) (int, error) {
	n := 0
	for len(p) > 0 {
		chunk := p[:min(len(p), maxFrame)]
		f.buf = binary.BigEndian.AppendUint32(f.buf[:0], uint32(len(chunk)))
		f.buf = append(f.buf, chunk...)
		if _, err := f.w.Write(f.buf); err != nil {
			return n, err
		}
		n += len(chunk)
		p = p[len(chunk):]
	}
	if cap(f.buf) > corkMax {
		f.buf = nil // not kept for ever after a large write
	}
	return n, nil
}

// Flush sends what a corked writer holds back.
func (f *frameWriter) Flush() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.flushLocked()
}

func (f *frameWriter) flushLocked() error {
	if f.timer != nil {
		f.timer.Stop()
		f.timer = nil
	}
	if f.err != nil || len(f.pending) == 0 || f.ended {
		return f.err
	}
	if f.conn != nil {
		dl := f.deadline
		if limit := time.Now().Add(corkWriteTimeout); dl.IsZero() || dl.After(limit) {
			dl = limit
		}
		f.conn.SetWriteDeadline(dl)
		defer f.conn.SetWriteDeadline(f.deadline)
	}
	if _, err := f.send(f.pending); err != nil {
		f.fail(err)
	}
	if cap(f.pending) > corkMax {
		f.pending = nil
	} else {
		f.pending = f.pending[:0]
	}
	return f.err
}

// End sends what waits and the end frame, once.
func (f *frameWriter) End() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.ended {
		return nil
	}
	f.flushLocked()
	f.ended = true
	_, err := f.w.Write([]byte{0, 0, 0, 0})
	return err
}

// frameReader reads the IMAP stream out of frames: io.EOF at the end
// frame, errBroke (wrapping what ended it) when the link ends without.
type frameReader struct {
	r     io.Reader
	left  int
	ended bool
	err   error
}

func (f *frameReader) Read(p []byte) (int, error) {
	if f.err != nil {
		return 0, f.err
	}
	for f.left == 0 {
		var h [4]byte
		if _, err := io.ReadFull(f.r, h[:]); err != nil {
			f.err = fmt.Errorf("%w: %v", errBroke, err) // %v: never io.EOF, which is the clean end
			return 0, f.err
		}
		n := binary.BigEndian.Uint32(h[:])
		if n == 0 {
			f.ended = true
			f.err = io.EOF
			return 0, io.EOF
		}
		if n > maxFrame {
			f.err = fmt.Errorf("%w: a frame of %d bytes", errBroke, n)
			return 0, f.err
		}
		f.left = int(n)
	}
	n, err := f.r.Read(p[:min(len(p), f.left)])
	f.left -= n
	if err != nil {
		// Mid-frame, or the stream's end with no end frame after.
		f.err = fmt.Errorf("%w: %v", errBroke, err) // %v: never io.EOF, which is the clean end
		if n > 0 {
			return n, nil
		}
		return 0, f.err
	}
	return n, nil
}

// inbox holds what a link's pump read and the session has not yet: the
// pump reads the link at once, so that its end (clean or not) is known
// while the session runs a command and reads nothing. Reads take a
// deadline, as go-imap sets them.
type inbox struct {
	mu       sync.Mutex
	buf      []byte
	err      error // after buf: io.EOF, errBroke, or net.ErrClosed (stop)
	broke    bool  // the link ended without its end frame (err is errBroke)
	deadline time.Time
	readable chan struct{} // a byte, an end or a new deadline came
	room     chan struct{} // the session read: the pump may go on
	// flush sends what the session wrote (a corked frameWriter) when it
	// waits for its client; nil: nothing to send.
	flush func() error
}

// inboxMax bounds what the pump reads ahead of the session.
const inboxMax = 256 << 10

func newInbox() *inbox {
	return &inbox{readable: make(chan struct{}, 1), room: make(chan struct{}, 1)}
}

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// fill runs the pump: frames from r into the inbox until the link ends.
// It returns the end: nil for the sender's end frame.
func (b *inbox) fill(r io.Reader) error {
	fr := &frameReader{r: r}
	chunk := make([]byte, 32<<10)
	for {
		n, err := fr.Read(chunk)
		b.mu.Lock()
		b.buf = append(b.buf, chunk[:n]...)
		if err != nil && b.err == nil { // not stopped here first
			b.err = err
			if b.broke = !errors.Is(err, io.EOF); b.broke {
				// What the client sent last is not run: its answers
				// would go nowhere, and its retry runs it elsewhere.
				b.buf = nil
			}
		}
		full := len(b.buf) >= inboxMax && b.err == nil
		b.mu.Unlock()
		signal(b.readable)
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		for full {
			<-b.room
			b.mu.Lock()
			full = len(b.buf) >= inboxMax && b.err == nil
			b.mu.Unlock()
		}
	}
}

// stop ends the inbox from the reading side (the connection closed here):
// the pump, waiting for room, goes on to find the link closed.
func (b *inbox) stop() {
	b.mu.Lock()
	if b.err == nil {
		b.err = net.ErrClosed
	}
	b.buf = nil
	b.mu.Unlock()
	signal(b.room)
	signal(b.readable)
}

func (b *inbox) Read(p []byte) (int, error) {
	for {
		b.mu.Lock()
		if len(b.buf) > 0 {
			n := copy(p, b.buf)
			b.buf = b.buf[n:]
			if len(b.buf) == 0 {
				b.buf = nil
			}
			b.mu.Unlock()
			signal(b.room)
			return n, nil
		}
		if b.err != nil {
			err := b.err
			b.mu.Unlock()
			return 0, err
		}
		dl := b.deadline
		b.mu.Unlock()
		if b.flush != nil {
			// The session waits for its client: its answer goes now.
			if err := b.flush(); err != nil {
				return 0, err
			}
		}
		var timer *time.Timer
		var timeout <-chan time.Time
		if !dl.IsZero() {
			d := time.Until(dl)
			if d <= 0 {
				return 0, os.ErrDeadlineExceeded
			}
			timer = time.NewTimer(d)
			timeout = timer.C
		}
		select {
		case <-b.readable:
			if timer != nil {
				timer.Stop()
			}
		case <-timeout:
			return 0, os.ErrDeadlineExceeded
		}
	}
}

// isBroke reports that the link ended without its end frame.
func (b *inbox) isBroke() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.broke
}

func (b *inbox) setDeadline(t time.Time) {
	b.mu.Lock()
	b.deadline = t
	b.mu.Unlock()
	signal(b.readable)
}
