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
func (cs *certSource) tlsConfig() *tls.Config {
	return &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: cs.get, CipherSuites: tls12Suites}
}

// selfSigned returns the paths of a self-signed certificate for localhost
// in dir, generating it on first use.
func selfSigned(dir string) (certFile, keyFile string, err error) {
	dir = filepath.Join(dir, "tls")
	certFile, keyFile = filepath.Join(dir, "localhost-cert.pem"), filepath.Join(dir, "localhost-key.pem")
	if _, err := os.Stat(certFile); err == nil {
		return certFile, keyFile, nil
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
		DNSNames:              []string{"localhost"},
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return "", "", err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return "", "", err
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		return "", "", err
	}
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		return "", "", err
	}
	return certFile, keyFile, nil
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
