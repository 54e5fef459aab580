package bridge

import (
	"crypto/tls"
	"net"
	"testing"
)

// TestTLS12OffersAEADOnly: a TLS 1.2 client offering only a CBC-SHA1
// suite is refused; one offering GCM is served.
func TestTLS12OffersAEADOnly(t *testing.T) {
	dir := t.TempDir()
	cert, key, err := selfSigned(dir)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := loadCertSource(cert, key)
	if err != nil {
		t.Fatal(err)
	}
	cfg := cs.tlsConfig()
	l, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() { c.(*tls.Conn).Handshake(); c.Close() }()
		}
	}()
	dial := func(suite uint16) error {
		c, err := net.Dial("tcp", l.Addr().String())
		if err != nil {
			return err
		}
		defer c.Close()
		tc := tls.Client(c, &tls.Config{InsecureSkipVerify: true, MaxVersion: tls.VersionTLS12, CipherSuites: []uint16{suite}})
		return tc.Handshake()
	}
	if err := dial(tls.TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA); err == nil {
		t.Error("a CBC-SHA1 suite was accepted over TLS 1.2")
	}
	if err := dial(tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256); err != nil {
		t.Errorf("a GCM suite was refused: %v", err)
	}
}
