package smtpbackend

import (
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
// replyConn, below any TLS, bounds instead the bytes a client sends
// without getting a reply while no message is being transferred: go-smtp
// answers every command, pipelined ones too (RFC 2920), as it reads
// them, so between two replies it reads one bufio buffer (4 KiB) and the
// rest of one command line, plus a TLS record or two; a message's bytes
// come after the 354 of DATA or with BDAT, while Session.Data runs.
// Past commandBytes the connection reads smtp.ErrTooLongLine, which
// go-smtp answers "500 5.4.0 Too long line, closing connection" (RFC
// 5321 §4.5.3.1.4 gives command lines 512 octets). What bufio had read
// of the line before the error is handed over as a line and may be
// answered as a command first, as with go-smtp's own limit: a line the
// client could have sent whole, since it is under the bound.
//
// The message transfer runs from Session.Data's start until the first
// reply after it returns: go-smtp reads the rest of a refused message
// before it answers, and that is message too. BDAT starts Data beside
// the chunk's copy, which reads at most one buffer (32 KiB) before Data
// has taken the first bytes: within commandBytes. A BDAT chunk read with
// no Data running (one after a refused chunk, or with no recipient) is
// counted as command bytes: the connection is closed with 500 instead of
// the chunk being discarded, after the transaction had failed anyway.
const commandBytes = 64 << 10

// Message transfer phases of a connection (replyConn.phase).
const (
	phaseCommands   = iota // bytes read count against commandBytes
	phaseMessage           // Session.Data is running
	phaseMessageEnd        // Data returned; ends at the next reply
)

// countRead counts n bytes read and reports whether the connection has
// passed commandBytes without a reply; once it has, every read fails.
func (c *replyConn) countRead(n int) error {
	if c.overLine.Load() {
		return smtp.ErrTooLongLine
	}
	if c.phase.Load() == phaseCommands && c.sinceReply.Add(int64(n)) > commandBytes {
		c.overLine.Store(true)
		return smtp.ErrTooLongLine
	}
	return nil
}

// replied notes a write: a reply, which ends a finished transfer.
func (c *replyConn) replied() {
	c.sinceReply.Store(0)
	c.phase.CompareAndSwap(phaseMessageEnd, phaseCommands)
}

// messageStarts and messageEnds bracket Session.Data.
func (c *replyConn) messageStarts() { c.phase.Store(phaseMessage) }
func (c *replyConn) messageEnds()   { c.phase.CompareAndSwap(phaseMessage, phaseMessageEnd) }
