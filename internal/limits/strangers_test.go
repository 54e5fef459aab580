package limits

import (
	"fmt"
	"net"
	"testing"
	"time"
)

// flood dials n connections from each address of srcs and returns the
// ones the listener took.
func flood(t *testing.T, l net.Listener, srcs []string, n int) []*client {
	t.Helper()
	var taken []*client
	for _, src := range srcs {
		for range n {
			if c, ok := dialFrom(t, l, src); ok {
				taken = append(taken, c)
			}
		}
	}
	return taken
}

// TestStrangersCannotTakeUsersShare: strangers from many addresses hold
// at most PreAuthTotal connections, so the listener's other places stay
// with users: a user connecting while the strangers are at their cap is
// taken (a stranger makes room), logs in, and keeps its connection
// through further floods, until the users hold their whole reserved share
// beside a full pool of strangers.
func TestStrangersCannotTakeUsersShare(t *testing.T) {
	lim := Limits{PerAddress: 2, PerPrefix: 4, PreAuthTotal: 6, Total: 10}
	l := guarded(t, lim)
	// Three /24s of four addresses each: up to 12 strangers by the
	// per-address and per-prefix limits, 10 by the total.
	var srcs []string
	for p := 1; p <= 3; p++ {
		for a := 1; a <= 4; a++ {
			srcs = append(srcs, fmt.Sprintf("127.0.%d.%d", p, a))
		}
	}
	strangers := flood(t, l, srcs, 3)
	if n := alive(strangers); n != lim.PreAuthTotal {
		t.Fatalf("%d strangers hold connections; want the pre-login total %d", n, lim.PreAuthTotal)
	}
	if s, u := l.counts(); s != lim.PreAuthTotal || u != 0 {
		t.Fatalf("counted %d strangers and %d users; want %d and 0", s, u, lim.PreAuthTotal)
	}
	var users []*client
	for u := range lim.Total - lim.PreAuthTotal {
		c, ok := dialFrom(t, l, fmt.Sprintf("127.0.%d.1", 10+u))
		if !ok {
			t.Fatalf("user %d refused while the strangers are at their cap", u+1)
		}
		if got := c.say("LOGIN"); got != "OK\r\n" {
			t.Fatalf("user %d's login: %q", u+1, got)
		}
		users = append(users, c)
		strangers = append(strangers, flood(t, l, srcs, 3)...)
		s, n := l.counts()
		if s > lim.PreAuthTotal || n != u+1 {
			t.Fatalf("after user %d and another flood: %d strangers, %d users; want at most %d and %d", u+1, s, n, lim.PreAuthTotal, u+1)
		}
	}
	if n := alive(users); n != len(users) {
		t.Fatalf("%d of %d logged-in users lost their connection to the floods", len(users)-n, len(users))
	}
	if n := alive(strangers); n != lim.PreAuthTotal {
		t.Fatalf("%d strangers hold connections beside the users; want %d", n, lim.PreAuthTotal)
	}
	if s, u := l.counts(); s+u != lim.Total {
		t.Fatalf("%d strangers and %d users; want the listener full (%d)", s, u, lim.Total)
	}
}

// TestRealUserLogsInBesideFlood: 260 addresses in as many /24s open 20
// connections each and never log in (the flood of the reliability
// issue, which used to fill the whole listener); a real user then logs
// in within 5 s, and a second one who connected but has not logged in
// yet keeps its connection while the flood reconnects all over again.
func TestRealUserLogsInBesideFlood(t *testing.T) {
	lim := Limits{PerAddress: 20, Total: 1200} // 600 strangers, 80 per prefix by default
	l := guarded(t, lim)
	var srcs []string
	for i := range 260 {
		srcs = append(srcs, fmt.Sprintf("127.%d.%d.1", 1+i/200, 1+i%200))
	}
	strangers := flood(t, l, srcs, 20)
	if s, _ := l.counts(); s != lim.Total/2 {
		t.Fatalf("the flood holds %d places; want the pool full (%d)", s, lim.Total/2)
	}
	began := time.Now()
	user, ok := dialFrom(t, l, "127.250.0.1")
	if !ok {
		t.Fatal("the real user was refused beside the flood")
	}
	if got := user.say("LOGIN"); got != "OK\r\n" {
		t.Fatalf("the real user's login: %q", got)
	}
	if took := time.Since(began); took > 5*time.Second {
		t.Fatalf("the real user's login took %v", took)
	}
	pending, ok := dialFrom(t, l, "127.251.0.1")
	if !ok {
		t.Fatal("the second user was refused beside the flood")
	}
	strangers = append(strangers, flood(t, l, srcs, 20)...)
	if got := pending.say("LOGIN"); got != "OK\r\n" {
		t.Fatalf("the user who connected before the flood's second round lost its connection: %q", got)
	}
	if got := user.say("PING"); got != "PONG\r\n" {
		t.Fatalf("the logged-in user lost its connection: %q", got)
	}
	if s, u := l.counts(); s > lim.Total/2 || u != 2 {
		t.Fatalf("%d strangers, %d users; want at most %d and 2", s, u, lim.Total/2)
	}
	if n := alive(strangers); n > lim.Total/2 {
		t.Fatalf("%d strangers hold connections; want at most %d", n, lim.Total/2)
	}
}

// fake returns a connection from ip for the pool alone (no socket).
func fake(ip string) *Conn {
	addr, prefix := prefixKeys(net.ParseIP(ip))
	return &Conn{addr: addr, prefix: prefix}
}

// TestDisplacement: with the strangers' room full, a newcomer displaces
// the oldest stranger of the most represented prefix only while that
// prefix holds more than the newcomer's; a lone stranger is not
// displaced while another prefix holds more, and a newcomer of the most
// represented prefix is refused.
func TestDisplacement(t *testing.T) {
	p := newPool(Limits{PerAddress: 4, PerPrefix: 4, PreAuthTotal: 4, Total: 100})
	admit := func(c *Conn) (*Conn, bool) {
		t.Helper()
		d, ok := p.admit(c)
		if p.strangers > 4 {
			t.Fatalf("%d strangers in a room of 4", p.strangers)
		}
		return d, ok
	}
	var a []*Conn
	for range 4 {
		c := fake("192.0.2.1")
		if _, ok := admit(c); !ok {
			t.Fatal("a stranger refused with room left")
		}
		a = append(a, c)
	}
	if _, ok := admit(fake("192.0.2.2")); ok {
		t.Fatal("a newcomer of the only (most represented) prefix was taken")
	}
	b1 := fake("198.51.100.1")
	if d, ok := admit(b1); !ok || d != a[0] {
		t.Fatalf("first newcomer of another prefix: taken %v, displaced %p; want a[0] %p, the oldest", ok, d, a[0])
	}
	if d, ok := admit(fake("198.51.100.1")); !ok || d != a[1] {
		t.Fatalf("second newcomer (its prefix holds 1, the other 3): taken %v, displaced %p; want a[1] %p", ok, d, a[1])
	}
	if _, ok := admit(fake("198.51.100.1")); ok {
		t.Fatal("a newcomer whose prefix holds as many as the most represented was taken")
	}
	// Now 192.0.2/24 and 198.51.100/24 hold two each. A lone user from a
	// third prefix displaces one; the flood's further newcomers from its
	// two prefixes cannot displace the user, nor grow past each other.
	user := fake("203.0.113.9")
	if d, ok := admit(user); !ok || d == nil {
		t.Fatalf("the user: taken %v, displaced %v", ok, d)
	}
	for range 10 {
		for _, ip := range []string{"192.0.2.3", "198.51.100.3"} {
			if d, ok := admit(fake(ip)); ok && d == user {
				t.Fatal("a flood's newcomer displaced the user's only pending login")
			}
		}
	}
	if !user.counted || !user.stranger {
		t.Fatal("the user's pending login is no longer counted")
	}
	if !p.authenticate(user) || p.users != 1 || p.strangers != 3 {
		t.Fatalf("after the user's login: %d users, %d strangers; want 1 and 3", p.users, p.strangers)
	}
}
