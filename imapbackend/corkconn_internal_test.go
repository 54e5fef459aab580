package imapbackend

import (
	"bytes"
	"net"
	"sync"
	"testing"
	"time"
)

// countConn is a net.Conn that records what is written and how many
// writes it took; reads return nothing until closed.
type countConn struct {
	net.Conn // nil: other methods are not called
	mu       sync.Mutex
	writes   int
	data     bytes.Buffer
	closed   chan struct{}
}

func newCountConn() *countConn { return &countConn{closed: make(chan struct{})} }

func (c *countConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.writes++
	return c.data.Write(p)
}

func (c *countConn) Read(p []byte) (int, error) { return 0, nil }

func (c *countConn) Close() error { close(c.closed); return nil }

func (c *countConn) SetWriteDeadline(time.Time) error { return nil }

func (c *countConn) snapshot() (int, string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.writes, c.data.String()
}

// TestCorkGathersAnswer: the lines of one answer leave in one write when
// the server next reads; nothing is lost or reordered.
func TestCorkGathersAnswer(t *testing.T) {
	raw := newCountConn()
	c := &corkConn{Conn: raw}
	want := ""
	for i := 0; i < 50; i++ {
		line := "* 1 FETCH (FLAGS (\\Seen))\r\n"
		c.Write([]byte(line))
		want += line
	}
	if n, _ := raw.snapshot(); n != 0 {
		t.Fatalf("%d writes before the server read; want 0", n)
	}
	c.Read(make([]byte, 1))
	if n, got := raw.snapshot(); n != 1 || got != want {
		t.Fatalf("after a read: %d writes, %d bytes; want 1 write of %d bytes", n, len(got), len(want))
	}
}

// TestCorkFlushesUnsolicited: a response written while the server waits
// for the client (IDLE) leaves within corkDelay without any read.
func TestCorkFlushesUnsolicited(t *testing.T) {
	raw := newCountConn()
	c := &corkConn{Conn: raw}
	c.Write([]byte("* 3 EXISTS\r\n"))
	deadline := time.Now().Add(2 * time.Second)
	for {
		if _, got := raw.snapshot(); got == "* 3 EXISTS\r\n" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("an unsolicited response never left")
		}
		time.Sleep(time.Millisecond)
	}
}

// TestCorkLargeAndClose: an answer over corkMax goes out in order without
// waiting, and Close sends what waits.
func TestCorkLargeAndClose(t *testing.T) {
	raw := newCountConn()
	c := &corkConn{Conn: raw}
	c.Write([]byte("a"))
	big := bytes.Repeat([]byte("b"), corkMax+10)
	c.Write(big)
	c.Write([]byte("* BYE\r\n"))
	c.Close()
	_, got := raw.snapshot()
	if want := "a" + string(big) + "* BYE\r\n"; got != want {
		t.Fatalf("got %d bytes, want %d in order", len(got), len(want))
	}
}

// TestCorkCloseDoesNotWaitForReader: Close returns although a client that
// does not read blocks a write.
func TestCorkCloseDoesNotWaitForReader(t *testing.T) {
	server, client := net.Pipe() // synchronous: a write blocks until read
	defer client.Close()
	c := &corkConn{Conn: server}
	c.Write([]byte("* 1 EXISTS\r\n"))
	blocked := make(chan struct{})
	go func() {
		c.Read(make([]byte, 1)) // flushes, and blocks: nobody reads
		close(blocked)
	}()
	time.Sleep(20 * time.Millisecond)
	closed := make(chan struct{})
	go func() {
		c.Close()
		close(closed)
	}()
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("Close waited for a client that does not read")
	}
	<-blocked
}

// TestCorkFlushNeverHangs: a client that stops reading cannot hold a
// flush for ever, even when go-imap cleared its write deadline before the
// bytes left: the flush has its own deadline, and a read after it is not
// blocked behind it.
func TestCorkFlushNeverHangs(t *testing.T) {
	server, client := net.Pipe() // synchronous: a write blocks until read
	defer client.Close()
	c := &corkConn{Conn: server, writeTimeout: 200 * time.Millisecond}
	c.SetWriteDeadline(time.Now().Add(50 * time.Millisecond))
	c.Write([]byte("* OK\r\n"))
	c.SetWriteDeadline(time.Time{}) // what go-imap does after a response
	c.Conn.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	done := make(chan error, 1)
	go func() {
		_, err := c.Read(make([]byte, 1)) // flushes first; nobody reads
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("the read succeeded with no client")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a flush to a client that does not read hung")
	}
}

// TestUncorkedWritesAtOnce: a relayed client's connection (uncork) sends
// what waited, then each write as it comes, with no read or timer.
func TestUncorkedWritesAtOnce(t *testing.T) {
	raw := newCountConn()
	c := &corkConn{Conn: raw}
	c.Write([]byte("* OK waiting\r\n"))
	c.uncork()
	if n, got := raw.snapshot(); n != 1 || got != "* OK waiting\r\n" {
		t.Fatalf("uncork: %d writes of %q; want what waited, at once", n, got)
	}
	c.Write([]byte("a OK done\r\n"))
	if n, got := raw.snapshot(); n != 2 || got != "* OK waiting\r\na OK done\r\n" {
		t.Fatalf("after a write: %d writes of %q; want it sent at once", n, got)
	}
}
