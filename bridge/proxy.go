package bridge

import (
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/pires/go-proxyproto"
)

// Behind a TCP balancer (HAProxy in TCP mode, deploy/haproxy.cfg) every
// client would seem to come from the balancer's address, and the limits
// kept per client address (strangers' connections, the guessing
// slowdown) would hold all clients together: one guesser would lock out
// a clinic's whole staff. The PROXY protocol (HAProxy's send-proxy-v2)
// gives the bridge each connection's real client address, from the
// balancers named in Config.ProxyProtocolFrom only: a header from anyone
// else would let a client pick its own address.

// proxyHeaderTimeout bounds the wait for a balancer's PROXY header, which
// it sends at once. The header is read where the listener's accept loop
// first asks a connection's address (internal/limits), so a connection
// from a balancer's range that sends nothing holds the next accepts up to
// this long: short, and from the trusted ranges only.
const proxyHeaderTimeout = 2 * time.Second

// proxyRanges parses Config.ProxyProtocolFrom: addresses or CIDR ranges,
// comma-separated; empty is none.
func proxyRanges(s string) ([]string, error) {
	var out []string
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		if _, _, err := net.ParseCIDR(f); err != nil && net.ParseIP(f) == nil {
			return nil, fmt.Errorf("%q is not an address or a CIDR range", f)
		}
		out = append(out, f)
	}
	return out, nil
}

// behindBalancer wraps a protocol listener so that connections from the
// configured balancers must begin with a PROXY header (v1 or v2), whose
// client address RemoteAddr then returns; connections from elsewhere are
// taken as they are (a header from them is not read, and reaches the
// protocol as a bad command).
func (b *Bridge) behindBalancer(l net.Listener) (net.Listener, error) {
	ranges, err := proxyRanges(b.cfg.ProxyProtocolFrom)
	if err != nil || len(ranges) == 0 {
		return l, err
	}
	policy, err := proxyproto.PolicyFromRanges(ranges, proxyproto.REQUIRE, proxyproto.SKIP)
	if err != nil {
		return nil, fmt.Errorf("DIRECTBRIDGE_PROXY_PROTOCOL_FROM: %w", err)
	}
	return &proxyproto.Listener{Listener: l, ConnPolicy: policy, ReadHeaderTimeout: proxyHeaderTimeout}, nil
}
