package smtpbackend

import (
	"io"

	"github.com/emersion/go-smtp"
)

// Command lines are bounded apart from the message. go-smtp (v0.25) has
// one line limit, MaxLineLength, for command lines and DATA lines alike,
// and the bridge sets it from the message size (see lineSlack): a DATA
// line longer than it drops the connection mid-message. So a command
// line after AUTH could be as long as a message, and net/textproto holds
// a line whole until its end: ten connections of one account sending 50
// MB command lines held over a gigabyte, outside the budget of message
// bytes in flight (limits.Budget).
//
// replyConn, below any TLS, bounds instead what a client sends between
// two replies that is not message: go-smtp answers every command,
// pipelined ones too (RFC 2920), as it reads them, so between two
// replies it reads one bufio buffer (4 KiB) and the rest of one command
// line, plus a TLS record or two. Message bytes are the ones
// Session.Data takes from its reader (messageReader counts them, in
// pieces of at most messagePiece, so that the count keeps up with the
// reads under it). Past commandBytes of the rest, with a slack of half
// the message bytes (TLS records and dot-stuffing make the wire longer
// than the message), the connection reads smtp.ErrTooLongLine, which
// go-smtp answers "500 5.4.0 Too long line, closing connection" (RFC
// 5321 §4.5.3.1.4 gives command lines 512 octets). What bufio had read
// of the line before the error is handed over as a line and may be
// answered as a command first, as with go-smtp's own limit: a line the
// client could have sent whole, since it is under the bound.
//
// Counting what Data takes, rather than when Data runs, keeps the bound
// between BDAT chunks (Data runs on, waiting for the next chunk) and
// after RSET (go-smtp does not wait for Data to end). A refused DATA
// message is read to its end by Data itself (drainMessage), so that its
// rest counts as message, not as a command. A BDAT chunk read with no
// Data taking it (one after a refused chunk, or with no recipient) counts
// as command bytes: the connection is closed with 500 instead of the
// chunk being discarded, after the transaction had failed anyway.
//
// What the bound cannot see: replyConn is below TLS, so a write the TLS
// layer makes on its own counts as a reply. A TLS 1.3 client that asks
// for a key update (KeyUpdate with update_requested) gets one written in
// answer, and could stretch a command line that way up to go-smtp's own
// limit, the message size; a line limit in go-smtp for commands alone
// would close that.
const commandBytes = 64 << 10

// messagePiece bounds one read of messageReader.
const messagePiece = 8 << 10

// countRead counts n bytes read and reports whether the connection has
// passed commandBytes of non-message bytes without a reply; once it has,
// every read fails.
func (c *replyConn) countRead(n int) error {
	if c.overLine.Load() {
		return smtp.ErrTooLongLine
	}
	read := c.sinceReply.Add(int64(n))
	msg := c.messageBytes.Load()
	if read-msg > commandBytes+msg/2 {
		c.overLine.Store(true)
		return smtp.ErrTooLongLine
	}
	return nil
}

// replied notes a write: a reply, which starts the count again.
func (c *replyConn) replied() {
	c.sinceReply.Store(0)
	c.messageBytes.Store(0)
}

// messageReader is r counting what it gives as message bytes of c.
func (c *replyConn) messageReader(r io.Reader) io.Reader { return &messageReader{r: r, c: c} }

type messageReader struct {
	r io.Reader
	c *replyConn
}

func (m *messageReader) Read(p []byte) (int, error) {
	if len(p) > messagePiece {
		p = p[:messagePiece]
	}
	n, err := m.r.Read(p)
	m.c.messageBytes.Add(int64(n))
	return n, err
}

// drainMessage reads the rest of a DATA message Data refused before its
// end, through messageReader, so that it counts as message bytes; go-smtp
// would read it anyway before it answers. Not for BDAT (Data's reader is
// then a pipe that runs on across chunks): go-smtp discards the rest of
// the chunk itself.
func drainMessage(r io.Reader) { io.Copy(io.Discard, r) }
