package connguard

import (
	"bufio"
	"net"
	"strings"
	"testing"
	"time"
)

// serve accepts on l and keeps the connections, handing them out.
func serve(t *testing.T, l net.Listener) chan net.Conn {
	t.Helper()
	conns := make(chan net.Conn, 100)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				close(conns)
				return
			}
			conns <- c
		}
	}()
	return conns
}

// TestStrangersPerAddress: the per-address limit counts connections that
// have not authenticated; one that authenticates frees its place, the
// next stranger over the limit is refused with the refusal line.
func TestStrangersPerAddress(t *testing.T) {
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := Listener(raw, Limits{PerAddress: 2, Total: 10}, "NO MORE\r\n")
	defer l.Close()
	conns := serve(t, l)
	dial := func() net.Conn {
		c, err := net.Dial("tcp", raw.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	refused := func(c net.Conn) bool {
		c.SetReadDeadline(time.Now().Add(2 * time.Second))
		line, _ := bufio.NewReader(c).ReadString('\n')
		return strings.HasPrefix(line, "NO MORE")
	}
	dial()
	dial()
	first, second := <-conns, <-conns
	if c := dial(); !refused(c) {
		t.Fatal("a third stranger from one address was not refused")
	}
	Authenticated(first)
	dial()
	<-conns // let in: the authenticated one no longer counts
	if c := dial(); !refused(c) {
		t.Fatal("over the limit again, not refused")
	}
	second.Close()
	dial()
	if c, ok := <-conns; !ok || c == nil {
		t.Fatal("a place freed by a closed stranger was not given")
	}
}

// TestPreAuthDeadline: before authentication a read deadline later than
// the pre-authentication time is cut to it; afterwards it stands.
func TestPreAuthDeadline(t *testing.T) {
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := Listener(raw, Limits{PreAuthTime: 200 * time.Millisecond, PreAuthBytes: 10}, "x\r\n")
	defer l.Close()
	conns := serve(t, l)
	c, err := net.Dial("tcp", raw.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sc := <-conns
	sc.SetReadDeadline(time.Now().Add(time.Hour)) // what a protocol library does
	start := time.Now()
	if _, err := sc.Read(make([]byte, 1)); err == nil || time.Since(start) > 2*time.Second {
		t.Fatalf("read before authentication: %v after %v; want a timeout at about 200 ms", err, time.Since(start))
	}
	// The byte budget.
	c2, _ := net.Dial("tcp", raw.Addr().String())
	defer c2.Close()
	sc2 := <-conns
	c2.Write([]byte("0123456789ABCDEF"))
	buf := make([]byte, 64)
	var got int
	var rerr error
	for rerr == nil && got < 16 {
		var n int
		n, rerr = sc2.Read(buf[got:])
		got += n
	}
	if rerr != ErrPreAuthBytes {
		t.Fatalf("16 bytes before authentication with a budget of 10: %v", rerr)
	}
	if LastRead(sc2).IsZero() {
		t.Error("LastRead is zero after reading")
	}
}
