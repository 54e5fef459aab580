package bridge

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/directbridge/directbridge/internal/peerfetch"
)

// Replicas give each other the messages they hold in memory
// (internal/peerfetch) when DIRECTBRIDGE_PEER_ADDR is set: the listener
// opens before the replica joins the cluster, whose heartbeats carry the
// address the others reach it at, and serves once the engine exists.

// listenPeers opens DIRECTBRIDGE_PEER_ADDR and returns the address to
// advertise; "" and a nil listener when it is not set.
func (b *Bridge) listenPeers() (net.Listener, string, error) {
	if b.cfg.PeerAddr == "" {
		return nil, "", nil
	}
	ln, err := net.Listen("tcp", b.cfg.PeerAddr)
	if err != nil {
		return nil, "", fmt.Errorf("DIRECTBRIDGE_PEER_ADDR: %w", err)
	}
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	advertise, err := advertised(b.cfg.PeerAdvertise, b.cfg.PeerAddr, port)
	if err != nil {
		ln.Close()
		return nil, "", err
	}
	if host, _, _ := net.SplitHostPort(advertise); host == "localhost" || net.ParseIP(host).IsLoopback() {
		b.log.Warn("DIRECTBRIDGE_PEER_ADVERTISE is a loopback address: only replicas on this machine can reach it", "addr", advertise)
	}
	return ln, advertise, nil
}

// advertised is the address other replicas reach this one at: setting
// (host:port, or a bare host such as a pod's IP, IPv6 included, which
// takes the listener's port), else the listen address's host, else the
// machine's first address that is not a loopback one.
func advertised(setting, listen, port string) (string, error) {
	if setting != "" {
		if _, _, err := net.SplitHostPort(setting); err == nil {
			return setting, nil
		}
		return net.JoinHostPort(strings.Trim(setting, "[]"), port), nil
	}
	host, _, _ := net.SplitHostPort(listen)
	if ip := net.ParseIP(host); host != "" && (ip == nil || !ip.IsUnspecified()) {
		return net.JoinHostPort(host, port), nil
	}
	ip, err := firstAddress()
	if err != nil {
		return "", fmt.Errorf("DIRECTBRIDGE_PEER_ADDR names no host and %w: set DIRECTBRIDGE_PEER_ADVERTISE", err)
	}
	return net.JoinHostPort(ip.String(), port), nil
}

// validHostPort reports a host:port with a host and a numeric port.
func validHostPort(a string) bool {
	host, port, err := net.SplitHostPort(a)
	if err != nil || host == "" || strings.ContainsAny(host, " /") || strings.Contains(host, ":") && net.ParseIP(host) == nil {
		return false
	}
	n, err := strconv.Atoi(port)
	return err == nil && n > 0 && n < 65536
}

// firstAddress is this machine's first unicast address that is not a
// loopback one (a pod's or a container's own), IPv4 first.
func firstAddress() (net.IP, error) {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil, err
	}
	var v6 net.IP
	for _, a := range addrs {
		n, ok := a.(*net.IPNet)
		if !ok || n.IP.IsLoopback() || !n.IP.IsGlobalUnicast() {
			continue
		}
		if n.IP.To4() != nil {
			return n.IP, nil
		}
		if v6 == nil {
			v6 = n.IP
		}
	}
	if v6 != nil {
		return v6, nil
	}
	return nil, fmt.Errorf("this machine has no address but loopback ones")
}

// servePeers serves the engine's messages on ln to the other replicas.
func (b *Bridge) servePeers(ln net.Listener, journalKey []byte) error {
	srv, err := peerfetch.NewServer(journalKey, b.engine.Holding, b.log.With("component", "peerfetch"))
	if err != nil {
		return err
	}
	b.peerSrv = srv
	b.peerLn = nil // the server's now
	go srv.Serve(ln)
	return nil
}

// closePeers stops serving the other replicas (answers under way end
// within a second).
func (b *Bridge) closePeers() {
	if b.linksLn != nil { // split, never served (open failed after it)
		b.linksLn.Close()
		b.linksLn = nil
	}
	if b.peerLn != nil { // opened, never served (open failed after it)
		b.peerLn.Close()
		b.peerLn = nil
	}
	if b.peerSrv == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	b.peerSrv.Close(ctx)
}
