package smtpbackend_test

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/textproto"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-sasl"

	"github.com/directbridge/directbridge/smtpbackend"
)

// lineFlood writes "NOOP " and then up to total bytes of one command line
// on nc, until a write fails, and returns how many bytes it wrote.
func lineFlood(nc net.Conn, total int) int {
	chunk := bytes.Repeat([]byte("a"), 256<<10)
	n, _ := nc.Write([]byte("NOOP "))
	for n < total {
		m, err := nc.Write(chunk)
		n += m
		if err != nil {
			break
		}
	}
	return n
}

// TestLongCommandLineRefused: after AUTH, a 50 MB command line (with and
// without TLS) is refused with 500 5.4.0 and the connection closed once
// its first 64 KiB are read: the server does not read, let alone hold, the
// rest (the client's writes fail long before 50 MB, what socket buffers
// take aside). The server goes on serving: a message on a new connection
// is delivered.
func TestLongCommandLineRefused(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	const total = 50 << 20
	for _, tc := range []struct {
		name string
		dial func(*testing.T) *rawConn
	}{
		{"plain", h.dialRawPlain},
		{"implicit-tls", h.dialRaw},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, msg, n, err := floodLine(tc.dial(t), total)
			var te *textproto.Error
			if errors.As(err, &te) && code == 500 {
				err = nil
			}
			if err != nil && !isReset(err) {
				t.Fatalf("reply to the long line: %d %q %v, want 500 5.4.0 (or the reset that may overtake it)", code, msg, err)
			}
			if err == nil && !strings.HasPrefix(msg, "5.4.0") {
				t.Errorf("reply %d %q, want 500 5.4.0", code, msg)
			}
			if n >= total {
				t.Fatalf("the client wrote all %d bytes of the line: the server read it", n)
			}
			t.Logf("reply %d %q; the client wrote %d bytes before the server closed", code, msg, n)
		})
	}
	c := h.login(t, aliceAddr)
	subject := h.subject("after the long lines")
	mustSubmit(t, c, aliceAddr, []string{bobAddr}, simple(subject, "still serving\n"))
	if got := h.withSubject(t, bobAddr, "INBOX", subject); len(got) != 1 {
		t.Fatalf("bob has %d copies of the message sent after the long lines, want 1", len(got))
	}
}

// floodLine sends a command line of total bytes on r and reads the
// replies until one that is not 250: what was read of the line before the
// bound may be answered as a command first (bufio hands over what it
// holds with the read error; go-smtp's own line limit does the same), a
// NOOP here. It returns that reply and how many bytes the client wrote.
func floodLine(r *rawConn, total int) (code int, msg string, wrote int, err error) {
	r.nc.SetDeadline(time.Now().Add(30 * time.Second))
	done := make(chan int, 1)
	go func() { done <- lineFlood(r.nc, total) }()
	code, msg, err = r.tc.ReadResponse(0)
	for err == nil && code == 250 {
		code, msg, err = r.tc.ReadResponse(0)
	}
	wrote = <-done
	return code, msg, wrote, err
}

// bdatOpen logs alice in and leaves a BDAT transfer open after its first
// chunk of one byte: Data runs, waiting for the next.
func bdatOpen(t *testing.T, h *harness) *rawConn {
	t.Helper()
	r := h.dialRaw(t)
	r.cmd(250, "MAIL FROM:<"+aliceAddr+">")
	r.cmd(250, "RCPT TO:<"+bobAddr+">")
	r.tc.W.WriteString("BDAT 1\r\nX")
	r.tc.W.Flush()
	r.expect(250)
	return r
}

// isReset reports a connection the server closed while the client still
// wrote: its reply may be lost to the reset.
func isReset(err error) bool {
	s := err.Error()
	return strings.Contains(s, "reset by peer") || strings.Contains(s, "broken pipe") || strings.Contains(s, "EOF")
}

// TestLongLinesInMessageAccepted: the bound on command lines leaves the
// message alone: a message with a 300 KB line goes through DATA, one of
// 1 MB through BDAT in one chunk, and a pipelined group of MAIL, 100 RCPTs
// and DATA (RFC 2920) is answered command by command.
func TestLongLinesInMessageAccepted(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	r := h.dialRaw(t)

	subject := h.subject("long line by DATA")
	long := strings.Repeat("0123456789", 30_000)
	code, msg := r.data(aliceAddr, []string{bobAddr}, string(simple(subject, long+"\n"))+".\r\n")
	if code != 250 {
		t.Fatalf("DATA with a 300 KB line: %d %q, want 250", code, msg)
	}
	if got := h.withSubject(t, bobAddr, "INBOX", subject); len(got) != 1 || !strings.Contains(got[0].Body, long) {
		t.Fatalf("bob has %d copies of the long-line message (or its line was cut)", len(got))
	}

	subject = h.subject("long line by BDAT")
	body := simple(subject, strings.Repeat("abcdefghij", 100_000)+"\n")
	r.cmd(250, "MAIL FROM:<"+aliceAddr+">")
	r.cmd(250, "RCPT TO:<"+bobAddr+">")
	fmt.Fprintf(r.tc.W, "BDAT %d LAST\r\n", len(body))
	r.tc.W.Write(body)
	r.tc.W.Flush()
	if msg := r.expect(250); !strings.Contains(msg, "queued") {
		t.Fatalf("BDAT of 1 MB: %q", msg)
	}

	subject = h.subject("pipelined")
	var group strings.Builder
	group.WriteString("MAIL FROM:<" + aliceAddr + ">\r\n")
	for i := range 100 {
		fmt.Fprintf(&group, "RCPT TO:<pipelined-%03d-with-a-longer-local-part@%s>\r\n", i, strings.SplitN(bobAddr, "@", 2)[1])
	}
	group.WriteString("DATA\r\n")
	r.tc.W.WriteString(group.String())
	r.tc.W.Flush()
	for range 101 {
		r.expect(250)
	}
	r.expect(354)
	r.tc.W.Write(simple(subject, "to many\n"))
	r.tc.W.WriteString(".\r\n")
	r.tc.W.Flush()
	code, msg, err := r.tc.ReadResponse(0)
	if err != nil && code/100 != 2 && code/100 != 5 {
		t.Fatalf("pipelined DATA: %d %q %v", code, msg, err)
	}
	if code == 500 {
		t.Fatalf("pipelined group refused as a long line: %d %q", code, msg)
	}
}

// TestLongCommandLineRefusedAroundBDAT: the bound holds where a message
// transfer is open but not sending: between two BDAT chunks (Data waits
// for the next one) and after RSET of a BDAT transfer (go-smtp does not
// wait for Data to end). After RSET a new transfer's chunk of 200 KB is
// taken whole, and a DATA message over the size limit gets its 552, not
// a 500, though its rest is read as the answer waits.
func TestLongCommandLineRefusedAroundBDAT(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil) // go-smtp's own line limit is the message size, 50 MB
	flood := func(t *testing.T, r *rawConn) {
		t.Helper()
		const total = 20 << 20
		if code, msg, n, err := floodLine(r, total); n >= total {
			t.Fatalf("the client wrote all %d bytes of the line: the server read it (last reply %d %q %v)", n, code, msg, err)
		}
	}
	t.Run("between-chunks", func(t *testing.T) {
		r := bdatOpen(t, h)
		flood(t, r)
	})
	t.Run("after-rset", func(t *testing.T) {
		r := bdatOpen(t, h)
		r.cmd(250, "RSET")
		flood(t, r)
	})
	t.Run("new-transfer-after-rset", func(t *testing.T) {
		r := bdatOpen(t, h)
		r.cmd(250, "RSET")
		subject := h.subject("BDAT after RSET")
		body := simple(subject, strings.Repeat("after the reset, a chunk of some size\n", 200_000/38))
		r.cmd(250, "MAIL FROM:<"+aliceAddr+">")
		r.cmd(250, "RCPT TO:<"+bobAddr+">")
		fmt.Fprintf(r.tc.W, "BDAT %d LAST\r\n", len(body))
		r.tc.W.Write(body)
		r.tc.W.Flush()
		r.expect(250)
		if got := h.withSubject(t, bobAddr, "INBOX", subject); len(got) != 1 {
			t.Fatalf("bob has %d copies of the message sent after RSET, want 1", len(got))
		}
	})
	t.Run("oversized-data", func(t *testing.T) {
		h := newHarness(t, func(c *smtpbackend.Config) { c.MaxMessageBytes = 1 << 20 })
		r := h.dialRaw(t)
		big := simple(h.subject("over the limit"), strings.Repeat(strings.Repeat("z", 70)+"\n", (3<<20)/71))
		code, msg := r.data(aliceAddr, []string{bobAddr}, string(big)+".\r\n")
		if code != 552 || !strings.HasPrefix(msg, "5.3.4") {
			t.Fatalf("a 3 MB message over a 1 MB limit: %d %q, want 552 5.3.4", code, msg)
		}
	})
}

// TestAuthRefusedWithoutStateStore: while the state store, where every
// message is written down before it leaves, does not answer, AUTH is
// refused with 454 4.3.0 saying so, rather than taking messages that
// could only be answered 451.
func TestAuthRefusedWithoutStateStore(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	h.login(t, aliceAddr).Close() // the store answers: in
	h.store.Close()
	c := h.dialStartTLS(t)
	err := c.Auth(sasl.NewPlainClient("", aliceAddr, passwords[aliceAddr]))
	if se := wantReply(t, err, 454, 4, 3, 0); se != nil && !strings.Contains(se.Message, "state store") {
		t.Errorf("AUTH with the state store closed: %v; want it to name the state store", err)
	}
}
