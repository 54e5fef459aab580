package limits

import (
	"net"
	"net/netip"
)

// The prefixes a client is counted under. The address is what one host
// holds: an IPv4 address, or an IPv6 /64 (SLAAC and privacy addresses
// give one host a whole /64; login.Key counts the same). The wider
// prefix is what one holder cheaply has many addresses of: an IPv4 /24
// (a small hosting block), an IPv6 /48 (a site; a /56 home allocation
// lies inside one, so its 256 /64s count once there).
const (
	ipv4Address = 32
	ipv4Prefix  = 24
	ipv6Address = 64
	ipv6Prefix  = 48
)

// clientKeys returns the keys of the connection's client address for the
// per-address and per-prefix limits. Non-IP addresses (pipes, Unix
// sockets) all share the zero keys, so that they are limited together.
func clientKeys(remote net.Addr) (addr, prefix netip.Prefix) {
	var ip net.IP
	switch a := remote.(type) {
	case *net.TCPAddr:
		ip = a.IP
	case nil:
		return netip.Prefix{}, netip.Prefix{}
	default:
		host, _, err := net.SplitHostPort(a.String())
		if err != nil {
			host = a.String()
		}
		ip = net.ParseIP(host)
	}
	return prefixKeys(ip)
}

// prefixKeys returns the per-address and per-prefix keys of ip: its /32
// and /24 for IPv4 (an IPv4-mapped IPv6 address counts as IPv4), its /64
// and /48 for IPv6, the zone dropped; zero keys for nil or a malformed ip.
func prefixKeys(ip net.IP) (addr, prefix netip.Prefix) {
	a, ok := netip.AddrFromSlice(ip)
	if !ok {
		return netip.Prefix{}, netip.Prefix{}
	}
	a = a.Unmap().WithZone("")
	hostBits, prefixBits := ipv6Address, ipv6Prefix
	if a.Is4() {
		hostBits, prefixBits = ipv4Address, ipv4Prefix
	}
	addr, _ = a.Prefix(hostBits) // cannot fail: the lengths fit the family
	prefix, _ = a.Prefix(prefixBits)
	return addr, prefix
}
