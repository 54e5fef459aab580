package smtpbackend

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/directbridge/directbridge/internal/limits"
)

// Whether a 250 reached the client decides what identical bytes without a
// Message-ID mean afterwards (journal.go): a retry, if the client may not
// have seen it, or a second submission, if it has. go-smtp writes the
// reply after Session.Data returns and ignores the write's error
// (conn.go, handleData: writeResponse, then the deferred reset, which
// calls Session.Reset). So the bridge watches the writes on the
// connection itself: every accepted connection is wrapped (replyConn),
// below any TLS, and the 250 counts as written when, between Data's
// return and go-smtp's Reset, at least one write reached the socket and
// none failed. Nothing else writes on the connection in that interval:
// go-smtp's connection goroutine is busy with the reply (BDAT's too:
// it waits for Data's result, then writes).
//
// The limits of that signal, the honest ones available to a server:
//   - a write that returned has reached the kernel, not the client: a
//     client that died, or whose network broke silently, after the
//     reply left is taken to have it (its retry of identical bytes
//     without a Message-ID is then sent again). A peer that reset the
//     connection before the write makes it fail, and is recognised; one
//     that only closed it (FIN) usually lets the first write through.
//   - under TLS the write seen is the encrypted record of the reply: a
//     failure in the TLS layer above (a connection closed for a shutdown)
//     never reaches the socket, so a close in the interval also means
//     not written. go-smtp's Close calls Session.Logout first, under the
//     lock its reset takes, so a shutdown's close drops the pending
//     answer before TLS writes its close_notify.
//   - a bridge killed before Reset never records it: a retry after the
//     restart is one (the default, on purpose).

// watchReplies wraps every connection accepted on l so that the session
// can tell whether its reply was written (replyConn). It wraps the plain
// listener, below any TLS, like countConns.
func watchReplies(l net.Listener) net.Listener { return replyListener{l} }

type replyListener struct{ net.Listener }

func (l replyListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &replyConn{Conn: c}, nil
}

// replyConn counts the writes on a connection that returned and those
// that failed, and notes its close. It also bounds command lines
// (cmdlines.go).
type replyConn struct {
	net.Conn
	written atomic.Uint64 // Write calls that returned without error
	failed  atomic.Uint64 // Write calls that returned an error
	closed  atomic.Bool

	sinceReply   atomic.Int64 // bytes read since the last write
	messageBytes atomic.Int64 // of them, message bytes Data took (cmdlines.go)
	overLine     atomic.Bool  // commandBytes passed: every read fails
}

func (c *replyConn) Read(p []byte) (int, error) {
	if err := c.countRead(0); err != nil {
		return 0, err
	}
	n, err := c.Conn.Read(p)
	if over := c.countRead(n); over != nil {
		return 0, over
	}
	return n, err
}

// Unwrap gives the connection underneath, for limits.
func (c *replyConn) Unwrap() net.Conn { return c.Conn }

func (c *replyConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	if err != nil {
		c.failed.Add(1)
	} else {
		c.written.Add(1)
	}
	c.replied()
	return n, err
}

func (c *replyConn) Close() error {
	c.closed.Store(true)
	return c.Conn.Close()
}

// replyMark is where a connection's writes stood when a reply was about
// to be written.
type replyMark struct{ written, failed uint64 }

func (c *replyConn) mark() replyMark {
	return replyMark{written: c.written.Load(), failed: c.failed.Load()}
}

// writtenSince reports whether the reply after m reached the socket: a
// write returned since, none failed, and the connection is not closed.
func (c *replyConn) writtenSince(m replyMark) bool {
	return !c.closed.Load() && c.failed.Load() == m.failed && c.written.Load() > m.written
}

// findReplyConn finds the replyConn under c, through TLS and the other
// wrappers (Unwrap), or nil: a connection not accepted through
// watchReplies never has its replies recorded as written.
func findReplyConn(c net.Conn) *replyConn {
	x, _ := limits.Under[*replyConn](c)
	return x
}

// pendingAnswer is a 250 that Data returned and go-smtp has yet to
// write: the journal entry it answers, the connection, where the
// connection's writes stood, and the end of its in-flight mark.
type pendingAnswer struct {
	key, smtpID string
	conn        *replyConn
	at          replyMark
	done        func()
}

// awaitAnswer notes, as Data is about to return 250 with smtpID for the
// journal entry of key, that its reply is to be written. Only a
// submission without a Message-ID needs it: with one, identical bytes
// are a retry whatever the client saw.
func (ss *session) awaitAnswer(key, smtpID string, sub *Submission) {
	if sub.MessageID != "" {
		return
	}
	rc := findReplyConn(ss.conn.Conn())
	if rc == nil {
		return
	}
	ss.answerMu.Lock()
	defer ss.answerMu.Unlock()
	if ss.ended {
		// Closed while Data ran (a shutdown): go-smtp will not call
		// Reset, and the reply is not written.
		return
	}
	if ss.answer != nil {
		ss.answer.done()
	}
	ss.answer = &pendingAnswer{key: key, smtpID: smtpID, conn: rc, at: rc.mark(), done: ss.s.answering.start(key)}
}

// settleAnswer runs at go-smtp's Reset, after the reply was written or
// failed: it records in the journal that the 250 was written, when it
// was. written false drops the pending answer unrecorded (a new
// transaction began without the Reset that would have told).
func (ss *session) settleAnswer(written bool) {
	ss.answerMu.Lock()
	p := ss.answer
	ss.answer = nil
	ss.answerMu.Unlock()
	if p == nil {
		return
	}
	defer p.done()
	if !written || !p.conn.writtenSince(p.at) {
		ss.s.log.Info("smtp reply not written; identical bytes are a retry", "user", ss.username, "smtp_id", p.smtpID)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := ss.s.journal.AnswerSubmission(ctx, p.key, p.smtpID); err != nil {
		// Identical bytes will be taken for a retry of this message
		// (250 with its smtpId, not sent): the safe side of the two.
		ss.s.log.Warn("smtp journal: recording the reply written", "err", err)
	}
}

// endAnswers is Logout's: the connection is closing, so a 250 not yet
// settled may not have gone (go-smtp's Close calls Logout before it
// closes the connection, under the lock its Reset takes), and none is
// kept from now on.
func (ss *session) endAnswers() {
	ss.answerMu.Lock()
	ss.ended = true
	ss.answerMu.Unlock()
	ss.settleAnswer(false)
}

// answersInFlight marks the journal keys whose 250 is being written, so
// that identical bytes arriving meanwhile on another connection wait for
// the outcome (a few milliseconds; at most the write timeout) rather
// than be judged on an entry that cannot say yet.
type answersInFlight struct {
	mu sync.Mutex
	m  map[string]*inFlight
}

type inFlight struct {
	n    int
	done chan struct{}
}

// start marks key in flight until the returned function is called.
func (a *answersInFlight) start(key string) func() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.m == nil {
		a.m = map[string]*inFlight{}
	}
	f := a.m[key]
	if f == nil {
		f = &inFlight{done: make(chan struct{})}
		a.m[key] = f
	}
	f.n++
	var once sync.Once
	return func() {
		once.Do(func() {
			a.mu.Lock()
			defer a.mu.Unlock()
			if f.n--; f.n == 0 {
				close(f.done)
				delete(a.m, key)
			}
		})
	}
}

// wait returns once no answer of key is in flight, or ctx ends; it
// reports whether it had to wait.
func (a *answersInFlight) wait(ctx context.Context, key string) (bool, error) {
	a.mu.Lock()
	f := a.m[key]
	a.mu.Unlock()
	if f == nil {
		return false, nil
	}
	select {
	case <-f.done:
		return true, nil
	case <-ctx.Done():
		return true, ctx.Err()
	}
}
