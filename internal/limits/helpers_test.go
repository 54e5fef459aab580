package limits

import (
	"bufio"
	"net"
	"strings"
	"testing"
	"time"
)

// testRefusal is the refusal line of the test listeners.
const testRefusal = "NO MORE\r\n"

// guarded listens on 127.0.0.1 behind a limits listener with lim and
// serves a tiny protocol on it: the greeting HELLO, then LOGIN (the
// connection authenticates, answer OK) and PING (answer PONG).
func guarded(t *testing.T, lim Limits) *listener {
	t.Helper()
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := Listener(raw, lim, testRefusal).(*listener)
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				c.Write([]byte("HELLO\r\n"))
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					switch strings.TrimSpace(line) {
					case "LOGIN":
						Authenticated(c)
						c.Write([]byte("OK\r\n"))
					case "PING":
						c.Write([]byte("PONG\r\n"))
					}
				}
			}()
		}
	}()
	return l
}

// client is a test connection.
type client struct {
	net.Conn
	r *bufio.Reader
}

// line reads one line, "" on an error or after 5 s.
func (c *client) line() string {
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	s, _ := c.r.ReadString('\n')
	return s
}

// say sends cmd and returns the answer ("" when the connection is gone).
func (c *client) say(cmd string) string {
	if _, err := c.Write([]byte(cmd + "\r\n")); err != nil {
		return ""
	}
	return c.line()
}

// dialFrom connects to l from the loopback source address src (any
// 127.x.y.z is a distinct client address on Linux) and reports whether
// the listener took the connection (its greeting) or refused it (the
// refusal line, after which the connection is closed).
func dialFrom(t *testing.T, l net.Listener, src string) (c *client, taken bool) {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 5 * time.Second}
	nc, err := d.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatalf("dial from %s: %v", src, err)
	}
	c = &client{Conn: nc, r: bufio.NewReader(nc)}
	switch first := c.line(); first {
	case "HELLO\r\n":
		t.Cleanup(func() { nc.Close() })
		return c, true
	case testRefusal:
		nc.Close()
		return nil, false
	default:
		nc.Close()
		t.Fatalf("dial from %s: first line %q; want the greeting or the refusal", src, first)
		return nil, false
	}
}

// counts returns the listener's strangers and users.
func (l *listener) counts() (strangers, users int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.pool.strangers, l.pool.users
}

// alive counts the clients the server still answers.
func alive(cs []*client) int {
	n := 0
	for _, c := range cs {
		if c.say("PING") == "PONG\r\n" {
			n++
		}
	}
	return n
}
