package bridge_test

import (
	"crypto/tls"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2/imapclient"

	"github.com/directbridge/directbridge/bridge"
)

// TestProxyProtocol: behind a balancer that sends PROXY headers, the
// bridge counts each client by the address in the header: failures from
// one client address refuse it, not the others behind the same balancer;
// a connection from the balancer without a header is not served.
func TestProxyProtocol(t *testing.T) {
	cfg := testConfig(t)
	cfg.ProxyProtocolFrom = "127.0.0.0/8"
	cfg.AuthFreeFailures, cfg.AuthRefuseAfter, cfg.AuthMaxDelay = 1, 3, time.Second
	b, err := bridge.New(cfg, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	startBridge(t, b)
	addr := b.Addr("IMAP (TLS)")
	login := func(client, pw string) error {
		t.Helper()
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		_, port, _ := net.SplitHostPort(addr)
		fmt.Fprintf(conn, "PROXY TCP4 %s 127.0.0.1 40000 %s\r\n", client, port)
		c := imapclient.New(tls.Client(conn, &tls.Config{InsecureSkipVerify: true}), nil)
		defer c.Close()
		return c.Login("alice@direct.example", pw).Wait()
	}
	for range 3 {
		if login("203.0.113.7", "wrong") == nil {
			t.Fatal("a wrong password got in")
		}
	}
	if err := login("203.0.113.7", "sandbox-demo"); err == nil || !strings.Contains(err.Error(), "UNAVAILABLE") {
		t.Fatalf("the guessing client address after 3 failures: %v, want NO [UNAVAILABLE]", err)
	}
	if err := login("198.51.100.9", "sandbox-demo"); err != nil {
		t.Fatalf("another client behind the same balancer: %v, want in", err)
	}
	// No header from a balancer's address: not served.
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	c := imapclient.New(tls.Client(conn, &tls.Config{InsecureSkipVerify: true}), nil)
	if err := c.Login("alice@direct.example", "sandbox-demo").Wait(); err == nil {
		t.Fatal("a connection without its PROXY header was served")
	}
}

func TestProxyProtocolConfig(t *testing.T) {
	cfg := testConfig(t)
	cfg.ProxyProtocolFrom = "10.0.0.0/8, haproxy.local"
	if _, err := bridge.New(cfg, nil, nil); err == nil || !strings.Contains(err.Error(), "DIRECTBRIDGE_PROXY_PROTOCOL_FROM") {
		t.Fatalf("a host name among the balancers: %v, want an error naming the variable", err)
	}
}
