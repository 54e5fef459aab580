package director

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

// TestHomeIsStableAndSpread: every replica that sees the same members
// picks the same home; users spread over the replicas; a replica that
// leaves moves only its own users.
func TestHomeIsStableAndSpread(t *testing.T) {
	three := map[string]string{"a": "a:1", "b": "b:1", "c": "c:1"}
	count := map[string]int{}
	moved := 0
	for i := range 3000 {
		u := fmt.Sprintf("user%d@direct.example", i)
		h := home(u, three)
		if h != home(u, map[string]string{"c": "c:1", "a": "a:1", "b": "b:1"}) {
			t.Fatal("the home depends on the order of the members")
		}
		count[h]++
		two := map[string]string{"a": "a:1", "b": "b:1"}
		if h2 := home(u, two); h != "c" && h2 != h {
			moved++
		}
	}
	for r, n := range count {
		if n < 800 || n > 1200 {
			t.Errorf("replica %s is home to %d of 3000 users", r, n)
		}
	}
	if moved != 0 {
		t.Errorf("%d users whose home stayed moved when another replica left", moved)
	}
}

// serveLinks runs d's link listener on a loopback port and returns its
// address and the links accepted.
func serveLinks(t *testing.T, d *Director) (string, <-chan *Incoming) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	links, rest := Split(ln)
	t.Cleanup(func() { links.Close(); rest.Close() })
	l := d.Listen(links)
	got := make(chan *Incoming, 4)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			in := c.(*Incoming)
			got <- in
			in.Write([]byte("* PREAUTH [CAPABILITY IMAP4rev1] IMAP server ready\r\n"))
		}
	}()
	// What is not TLS goes to rest.
	go func() {
		c, err := rest.Accept()
		if err == nil {
			c.Write([]byte("rest\n"))
			c.Close()
		}
	}()
	return ln.Addr().String(), got
}

func TestLinkCarriesHelloAndGreeting(t *testing.T) {
	key := []byte(strings.Repeat("k", 32))
	home, err := New(key, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	addr, got := serveLinks(t, home)
	front, _ := New(key, nil, nil)
	l, err := front.Dial(context.Background(), "h", addr, Hello{User: "alice@direct.example", Password: "pw", Client: "192.0.2.7:4242"})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if !strings.HasPrefix(l.Greeting, "* PREAUTH ") {
		t.Errorf("greeting %q", l.Greeting)
	}
	in := <-got
	if in.Hello.User != "alice@direct.example" || in.Hello.Password != "pw" || in.RemoteAddr().String() != "192.0.2.7:4242" {
		t.Errorf("hello %+v, client %v", in.Hello, in.RemoteAddr())
	}
	// A plain connection on the same port is not a link.
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	c.Write([]byte("POST / HTTP/1.1\r\n"))
	if line, _ := bufio.NewReader(c).ReadString('\n'); line != "rest\n" {
		t.Errorf("a plain connection got %q, want it handed to the rest", line)
	}
	c.Close()
}

// TestLinkRefusesStrangers: a replica with another journal key can
// neither open a link nor be opened one, and is then left alone.
func TestLinkRefusesStrangers(t *testing.T) {
	home, _ := New([]byte(strings.Repeat("k", 32)), nil, nil)
	addr, got := serveLinks(t, home)
	stranger, _ := New([]byte(strings.Repeat("x", 32)), func() (string, map[string]string) {
		return "s", map[string]string{"s": "s:1", "h": addr}
	}, nil)
	if _, err := stranger.Dial(context.Background(), "h", addr, Hello{User: "alice@direct.example", Password: "pw"}); err == nil {
		t.Fatal("a stranger opened a link")
	}
	select {
	case in := <-got:
		t.Fatalf("the home accepted a stranger's link for %q", in.Hello.User)
	case <-time.After(200 * time.Millisecond):
	}
	// Whoever the home is, a replica that failed to answer is skipped.
	for i := range 50 {
		if _, _, remote := stranger.Home(fmt.Sprintf("u%d", i)); remote {
			t.Fatal("a home that failed to answer was chosen again within DownFor")
		}
	}
}

// TestLinkTellsCleanEndFromBreak: a link the accepting replica ends
// (its client left) reads io.EOF at the home and is not broken; one
// whose replica vanishes (its socket closed at a TLS record boundary,
// as a killed process's is) is known broken at once, while the session
// reads nothing, which TLS alone would take for a clean close.
func TestLinkTellsCleanEndFromBreak(t *testing.T) {
	key := []byte(strings.Repeat("k", 32))
	home, _ := New(key, nil, nil)
	addr, got := serveLinks(t, home)
	front, _ := New(key, nil, nil)
	dial := func() (*Link, *Incoming) {
		l, err := front.Dial(context.Background(), "h", addr, Hello{User: "alice@direct.example", Password: "pw"})
		if err != nil {
			t.Fatal(err)
		}
		return l, <-got
	}

	l, in := dial()
	l.Write([]byte("a NOOP\r\n"))
	l.CloseWrite()
	b, err := io.ReadAll(in)
	if err != nil || string(b) != "a NOOP\r\n" || in.Broke() {
		t.Errorf("clean end: read %q, %v, broke %v; want the bytes, io.EOF, not broke", b, err, in.Broke())
	}

	l, in = dial()
	l.Write([]byte("a APPEND INBOX {5+}\r\nhello\r\n"))
	time.Sleep(50 * time.Millisecond)
	l.Conn.NetConn().Close() // no end frame, no close_notify
	deadline := time.Now().Add(2 * time.Second)
	for !in.Broke() {
		if time.Now().After(deadline) {
			t.Fatal("a link whose replica vanished is not known broken")
		}
		time.Sleep(10 * time.Millisecond)
	}
	// What came and was not read is dropped: its answers would go
	// nowhere, and the client's retry runs it through another replica.
	b, err = io.ReadAll(in)
	if len(b) != 0 || !IsBroke(err) {
		t.Errorf("broken link: read %q, %v; want nothing, then the break", b, err)
	}
}

// corkedLink opens a link and returns both its ends, the home's with no
// timer flush within a test, however slow the machine: only the
// session's wait, or a large write, sends what it wrote.
func corkedLink(t *testing.T) (*Link, *Incoming) {
	t.Helper()
	key := []byte(strings.Repeat("k", 32))
	home, _ := New(key, nil, nil)
	addr, got := serveLinks(t, home)
	front, _ := New(key, nil, nil)
	l, err := front.Dial(context.Background(), "h", addr, Hello{User: "alice@direct.example", Password: "pw"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	in := <-got
	t.Cleanup(func() { in.Close() })
	in.fw.mu.Lock()
	in.fw.delay = time.Hour
	in.fw.mu.Unlock()
	return l, in
}

// TestLargeWriteIsNotHeld: a write of corkMax or more (a message's
// literal) leaves at once, after what waited, in order.
func TestLargeWriteIsNotHeld(t *testing.T) {
	l, in := corkedLink(t)
	head := "* 1 FETCH (BODY[] {200000}\r\n"
	body := strings.Repeat("x", 200000)
	in.Write([]byte(head))
	in.Write([]byte(body))
	l.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, len(head)+len(body))
	if _, err := io.ReadFull(l, buf); err != nil {
		t.Fatalf("the large write was held back: %v", err)
	}
	if string(buf) != head+body {
		t.Fatal("the bytes came in another order")
	}
}

// TestHomeAnswerIsOneFrame: the lines the home's session writes for one
// answer cross the link as one frame, sent when the session waits for
// its client (its next read): the relaying replica reads the answer in
// one piece and writes it to its client at once, instead of a frame, a
// TLS record and two writes per line.
func TestHomeAnswerIsOneFrame(t *testing.T) {
	l, in := corkedLink(t)
	want := ""
	for i := range 50 {
		line := fmt.Sprintf("* %d FETCH (FLAGS (\\Seen))\r\n", i+1)
		in.Write([]byte(line))
		want += line
	}
	in.Write([]byte("a OK FETCH completed\r\n"))
	want += "a OK FETCH completed\r\n"
	go in.Read(make([]byte, 1)) // the session waits for its client
	l.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 64<<10)
	n, err := l.Read(buf)
	if err != nil {
		t.Fatal(err)
	}
	if string(buf[:n]) != want {
		t.Fatalf("the first read at the relaying end has %d of the answer's %d bytes; want it whole, one frame", n, len(want))
	}
}

// deadlineRecorder is a connection that notes the write deadline in
// effect at each write.
type deadlineRecorder struct {
	cur  time.Time
	seen []time.Time
}

func (d *deadlineRecorder) SetWriteDeadline(t time.Time) error { d.cur = t; return nil }
func (d *deadlineRecorder) Write(p []byte) (int, error) {
	d.seen = append(d.seen, d.cur)
	return len(p), nil
}

// TestLargeWriteKeepsItsDeadline: what waits is flushed within
// corkWriteTimeout, but a large write (a literal, which go-imap gives
// minutes) goes under its writer's own deadline, not that bound.
func TestLargeWriteKeepsItsDeadline(t *testing.T) {
	rec := &deadlineRecorder{}
	fw := &frameWriter{w: rec, conn: rec, corked: true, delay: time.Hour}
	user := time.Now().Add(5 * time.Minute)
	fw.setDeadline(user)
	fw.Write([]byte("* 1 FETCH (BODY[] {100000}\r\n"))
	fw.Write(make([]byte, 100000))
	if len(rec.seen) != 2 {
		t.Fatalf("%d writes; want the line waiting, then the literal", len(rec.seen))
	}
	if rec.seen[0].After(time.Now().Add(corkWriteTimeout)) {
		t.Errorf("the flush of what waited had deadline %v; want at most corkWriteTimeout away", rec.seen[0])
	}
	if !rec.seen[1].Equal(user) {
		t.Errorf("the literal was written under deadline %v; want its writer's %v", rec.seen[1], user)
	}
	if !rec.cur.Equal(user) {
		t.Errorf("the deadline left after the writes is %v; want the writer's %v", rec.cur, user)
	}
}
