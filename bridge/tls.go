package bridge

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// certSource serves the TLS certificate and reloads it when its files
// change, so a renewed certificate takes effect without a restart. Files
// are checked at most every reloadEvery.
type certSource struct {
	certFile, keyFile string

	mu      sync.Mutex
	cert    *tls.Certificate
	modTime time.Time
	checked time.Time
}

const reloadEvery = 10 * time.Second

func loadCertSource(certFile, keyFile string) (*certSource, error) {
	cs := &certSource{certFile: certFile, keyFile: keyFile}
	if err := cs.reload(); err != nil {
		return nil, err
	}
	return cs, nil
}

func (cs *certSource) reload() error {
	cert, err := tls.LoadX509KeyPair(cs.certFile, cs.keyFile)
	if err != nil {
		return fmt.Errorf("TLS certificate: %w", err)
	}
	fi, err := os.Stat(cs.certFile)
	if err != nil {
		return fmt.Errorf("TLS certificate: %w", err)
	}
	cs.cert, cs.modTime = &cert, fi.ModTime()
	return nil
}

// get returns the current certificate, reloading it if the file changed.
// A file that changed but does not load keeps the old certificate.
func (cs *certSource) get(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if time.Since(cs.checked) >= reloadEvery {
		cs.checked = time.Now()
		if fi, err := os.Stat(cs.certFile); err == nil && !fi.ModTime().Equal(cs.modTime) {
			cs.reload()
		}
	}
	return cs.cert, nil
}

// fingerprint is the SHA-256 of the certificate, as mail clients show it.
func (cs *certSource) fingerprint() string {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	sum := sha256.Sum256(cs.cert.Certificate[0])
	parts := make([]string, len(sum))
	for i, b := range sum {
		parts[i] = strings.ToUpper(hex.EncodeToString([]byte{b}))
	}
	return strings.Join(parts, ":")
}

// tlsConfig is the server TLS configuration: TLS 1.2 at least (RFC 8314 §4.1).
//
// Session tickets are off: under TLS 1.3 the server sends them after the
// handshake, unasked, and a client that reads and writes the upgraded
// connection from two threads right after STARTTLS (offlineimap's
// imaplib2) stalls on them now and then. Resumption saves one handshake
// per connection, which mail clients that stay connected do not miss.
func (cs *certSource) tlsConfig() *tls.Config {
	return &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: cs.get, CipherSuites: tls12Suites, SessionTicketsDisabled: true}
}

// selfSigned returns the paths of a self-signed certificate in dir for
// localhost, 127.0.0.1, ::1 and the given host names (the hosts of the
// configured listen addresses), generating it on first use and again when
// the one on disk does not name all of them (an older certificate, or a
// listener moved to another host).
//
// Addresses are written twice: as IP SANs, which RFC 6125 §6.2.1 and
// most TLS stacks check, and as DNS SANs too, because some clients
// (offlineimap's own check) compare the configured host only with DNS
// names and the subject CN and refuse "127.0.0.1" otherwise.
func selfSigned(dir string, hosts ...string) (certFile, keyFile string, err error) {
	dir = filepath.Join(dir, "tls")
	certFile, keyFile = filepath.Join(dir, "localhost-cert.pem"), filepath.Join(dir, "localhost-key.pem")
	dnsNames, ips := certNames(hosts)
	if pemBytes, err := os.ReadFile(certFile); err == nil {
		if certCovers(pemBytes, dnsNames, ips) {
			return certFile, keyFile, nil
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", "", err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", "", err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", err
	}
	serial, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "localhost", Organization: []string{"directbridge (self-signed)"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.AddDate(5, 0, 0),
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		DNSNames:              dnsNames,
		IPAddresses:           ips,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return "", "", err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return "", "", err
	}
	// The key first: a reader that sees the new certificate must find
	// its key (certSource reloads both when the certificate changes).
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		return "", "", err
	}
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		return "", "", err
	}
	return certFile, keyFile, nil
}

// certNames are the DNS and IP SANs of the self-signed certificate:
// the loopback names always, then each host named. An unspecified
// address (empty, 0.0.0.0 or ::) names no host: the machine's host name
// is not taken for it, since a container's changes with every new
// container, and the certificate (and its fingerprint, which clients
// were told to accept) would change with it.
func certNames(hosts []string) (dnsNames []string, ips []net.IP) {
	seen := map[string]bool{}
	addDNS := func(name string) {
		name = strings.ToLower(strings.TrimSuffix(name, "."))
		if name != "" && !seen[name] {
			seen[name] = true
			dnsNames = append(dnsNames, name)
		}
	}
	addIP := func(ip net.IP) {
		for _, have := range ips {
			if have.Equal(ip) {
				return
			}
		}
		ips = append(ips, ip)
		addDNS(ip.String())
	}
	addDNS("localhost")
	addIP(net.IPv4(127, 0, 0, 1))
	addIP(net.IPv6loopback)
	for _, h := range hosts {
		h = strings.Trim(h, "[]")
		if ip := net.ParseIP(h); ip != nil {
			if !ip.IsUnspecified() {
				addIP(ip)
			}
			continue
		}
		addDNS(h)
	}
	return dnsNames, ips
}

// certCovers reports whether the PEM certificate names every one of
// dnsNames and ips.
func certCovers(pemBytes []byte, dnsNames []string, ips []net.IP) bool {
	block, _ := pem.Decode(pemBytes)
	if block == nil {
		return false
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return false
	}
	has := map[string]bool{}
	for _, n := range cert.DNSNames {
		has[strings.ToLower(n)] = true
	}
	for _, n := range dnsNames {
		if !has[n] {
			return false
		}
	}
next:
	for _, ip := range ips {
		for _, have := range cert.IPAddresses {
			if have.Equal(ip) {
				continue next
			}
		}
		return false
	}
	return true
}

// listenHosts are the host parts of the configured listen addresses.
func listenHosts(addrs ...string) []string {
	var hosts []string
	for _, a := range addrs {
		if a == "" || a == Off {
			continue
		}
		if h, _, err := net.SplitHostPort(a); err == nil {
			hosts = append(hosts, h)
		}
	}
	return hosts
}

// tls12Suites are the TLS 1.2 cipher suites offered: forward-secret AEAD
// only (no CBC, no SHA-1 MACs), as RFC 9325 §4.2 recommends. TLS 1.3's
// suites are all AEAD and not configurable.
var tls12Suites = []uint16{
	tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
	tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
	tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
	tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
	tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
	tls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
}
