package limits

import (
	"fmt"
	"net"
	"testing"
)

// TestPrefixKeys: an IPv6 client is counted by its /64 and its /48, an
// IPv4 one (also written IPv4-mapped) by its address and its /24; a zone
// is dropped, and non-IP addresses share the zero keys.
func TestPrefixKeys(t *testing.T) {
	for _, tc := range []struct{ ip, addr, prefix string }{
		{"2001:db8:1:ab01::1", "2001:db8:1:ab01::/64", "2001:db8:1::/48"},
		{"2001:db8:1:ab01:ffff:ffff:ffff:ffff", "2001:db8:1:ab01::/64", "2001:db8:1::/48"},
		{"2001:db8:1:abff::7", "2001:db8:1:abff::/64", "2001:db8:1::/48"},
		{"2001:db8:2::1", "2001:db8:2::/64", "2001:db8:2::/48"},
		{"192.0.2.77", "192.0.2.77/32", "192.0.2.0/24"},
		{"::ffff:192.0.2.77", "192.0.2.77/32", "192.0.2.0/24"},
	} {
		addr, prefix := prefixKeys(net.ParseIP(tc.ip))
		if addr.String() != tc.addr || prefix.String() != tc.prefix {
			t.Errorf("%s: keys %s and %s; want %s and %s", tc.ip, addr, prefix, tc.addr, tc.prefix)
		}
	}
	addr, prefix := clientKeys(&net.TCPAddr{IP: net.ParseIP("fe80::1"), Port: 993, Zone: "eth0"})
	if addr.String() != "fe80::/64" || prefix.String() != "fe80::/48" {
		t.Errorf("fe80::1%%eth0: keys %s and %s", addr, prefix)
	}
	if addr, prefix := clientKeys(&net.UnixAddr{Name: "@x", Net: "unix"}); addr.IsValid() || prefix.IsValid() {
		t.Errorf("a Unix socket: keys %s and %s; want the zero keys", addr, prefix)
	}
}

// TestIPv6PrefixLimit: the holder of a /56 (256 /64s, each a client
// address of its own) gets PerPrefix strangers in all, not 256 times
// PerAddress; a client of another /48 is still taken.
func TestIPv6PrefixLimit(t *testing.T) {
	lim := Limits{PerAddress: 20, Total: 10000}.withDefaults(nil)
	if lim.PerPrefix != 80 || lim.PreAuthTotal != 5000 {
		t.Fatalf("defaults: %d per prefix, %d before login; want 80 and 5000", lim.PerPrefix, lim.PreAuthTotal)
	}
	p := newPool(lim)
	keys := map[string]bool{}
	taken := 0
	for sub := range 256 {
		ip := fmt.Sprintf("2001:db8:1:ab%02x::1", sub)
		keys[fake(ip).addr.String()] = true
		for range lim.PerAddress {
			if _, ok := p.admit(fake(ip)); ok {
				taken++
			}
		}
	}
	if len(keys) != 256 {
		t.Fatalf("the /56 gave %d address keys; want 256", len(keys))
	}
	if taken != lim.PerPrefix {
		t.Fatalf("the /56 holder got %d strangers; want the per-prefix limit %d", taken, lim.PerPrefix)
	}
	if _, ok := p.admit(fake("2001:db8:2::1")); !ok {
		t.Fatal("a client of another /48 was refused")
	}
}

// TestIPv4PrefixLimit: over real sockets, the addresses of one /24 hold
// PerPrefix strangers together; the next one is refused with the
// refusal line, and a client of another /24 is taken.
func TestIPv4PrefixLimit(t *testing.T) {
	l := guarded(t, Limits{PerAddress: 2, PerPrefix: 5, Total: 100})
	var srcs []string
	for a := 1; a <= 4; a++ {
		srcs = append(srcs, fmt.Sprintf("127.0.9.%d", a))
	}
	if taken := flood(t, l, srcs, 2); len(taken) != 5 {
		t.Fatalf("four addresses of one /24 got %d connections; want the per-prefix limit 5", len(taken))
	}
	if _, ok := dialFrom(t, l, "127.0.10.1"); !ok {
		t.Fatal("a client of another /24 was refused")
	}
}
