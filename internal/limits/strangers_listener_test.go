package limits

import (
	"bufio"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
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

// TestTurnedAwayObserved: ObservedListener tells of every connection it
// turns away, refused on arrival or displaced for a newcomer, so that a
// flood shows in the metrics (directbridge_connections_turned_away_total).
func TestTurnedAwayObserved(t *testing.T) {
	raw, err := net.Listen("tcp", "[::]:0")
	if err != nil {
		t.Skip("no IPv6 listener here:", err)
	}
	var mu sync.Mutex
	turned := map[string]int{}
	l := ObservedListener(raw, Limits{PerAddress: 2, PerPrefix: 2, PreAuthTotal: 2, Total: 10}, "NO MORE\r\n", func(reason string) {
		mu.Lock()
		defer mu.Unlock()
		turned[reason]++
	})
	defer l.Close()
	conns := serve(t, l)
	port := raw.Addr().(*net.TCPAddr).Port
	dial := func(host string) net.Conn {
		c, err := net.Dial("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
		if err != nil {
			t.Skip("cannot dial", host, err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	dial("127.0.0.1")
	dial("127.0.0.1")
	<-conns
	<-conns
	// A third from the same address: refused.
	c := dial("127.0.0.1")
	c.SetReadDeadline(time.Now().Add(2 * time.Second))
	if line, _ := bufio.NewReader(c).ReadString('\n'); !strings.HasPrefix(line, "NO MORE") {
		t.Fatalf("a third stranger from one address: %q, want the refusal", line)
	}
	// One from another prefix: the room of two is full, the oldest
	// stranger of the most represented prefix makes way.
	dial("::1")
	<-conns
	deadline := time.Now().Add(2 * time.Second)
	for {
		mu.Lock()
		got := fmt.Sprint(turned)
		mu.Unlock()
		if got == "map[displaced:1 refused:1]" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("turned away: %s; want one refused, one displaced", got)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
