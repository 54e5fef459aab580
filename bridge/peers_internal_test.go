package bridge

import (
	"net"
	"testing"
)

// TestAdvertised: the address other replicas reach this one's peer
// listener at, from the settings as operators write them.
func TestAdvertised(t *testing.T) {
	for _, tc := range []struct{ setting, listen, want string }{
		{"10.0.0.7:7144", ":7144", "10.0.0.7:7144"},
		{"10.0.0.7", "0.0.0.0:7144", "10.0.0.7:7144"},          // a pod's IP alone
		{"fd00::7", "[::]:7144", "[fd00::7]:7144"},             // an IPv6 pod's IP alone
		{"[fd00::7]", ":7144", "[fd00::7]:7144"},               // bracketed
		{"replica-1.bridge", ":7144", "replica-1.bridge:7144"}, // a name
		{"", "127.0.0.2:7144", "127.0.0.2:7144"},               // the listen address's host
	} {
		got, err := advertised(tc.setting, tc.listen, "7144")
		if err != nil || got != tc.want {
			t.Errorf("advertised(%q, %q) = %q, %v; want %q", tc.setting, tc.listen, got, err, tc.want)
		}
	}
	for _, a := range []string{"10.0.0.7:7144", "[fd00::7]:7144", "replica-1.bridge:7144"} {
		if !validHostPort(a) {
			t.Errorf("validHostPort(%q) = false", a)
		}
	}
	for _, a := range []string{"replica-1:", ":7144", "[a:b:c]:7144", "host:99999"} {
		if validHostPort(a) {
			t.Errorf("validHostPort(%q) = true", a)
		}
	}
	// No host anywhere: the machine's own address, never a loopback one.
	if got, err := advertised("", ":7144", "7144"); err == nil {
		host, _, _ := net.SplitHostPort(got)
		if ip := net.ParseIP(host); ip == nil || ip.IsLoopback() {
			t.Errorf("advertised from :7144 = %q, want a non-loopback address", got)
		}
	}
}
