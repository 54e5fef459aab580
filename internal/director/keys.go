package director

import (
	"crypto/ed25519"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"math/big"
	"time"
)

// keyLabel is the HKDF info of the link's key: a key of its own, never
// the journal key itself.
const keyLabel = "directbridge director link v1"

// serverName is the name each side's certificate carries. Nothing
// checks it: a peer is known by its key.
const serverName = "directbridge-replica"

// errNotReplica is a peer whose certificate's key is not the cluster's.
var errNotReplica = errors.New("director: the peer does not hold the cluster's key")

// linkTLS returns the TLS configurations of the link's two ends: both
// present a certificate for the key derived from journalKey and accept
// only a peer presenting the same key (TLS 1.3, mutual).
func linkTLS(journalKey []byte) (server, client *tls.Config, err error) {
	if len(journalKey) < 16 {
		return nil, nil, fmt.Errorf("director: a journal key of %d bytes is too short", len(journalKey))
	}
	seed, err := hkdf.Key(sha256.New, journalKey, nil, keyLabel, ed25519.SeedSize)
	if err != nil {
		return nil, nil, fmt.Errorf("director: deriving the key: %w", err)
	}
	priv := ed25519.NewKeyFromSeed(seed)
	pub := priv.Public().(ed25519.PublicKey)
	// Each replica signs its own certificate for the shared key: its
	// dates and serial are its own, and only the key is checked.
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: serverName},
		DNSNames:     []string{serverName},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(100 * 365 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, pub, priv)
	if err != nil {
		return nil, nil, fmt.Errorf("director: certificate: %w", err)
	}
	cert := tls.Certificate{Certificate: [][]byte{der}, PrivateKey: priv}
	verify := func(raw [][]byte, _ [][]*x509.Certificate) error {
		if len(raw) == 0 {
			return errNotReplica
		}
		c, err := x509.ParseCertificate(raw[0])
		if err != nil {
			return errNotReplica
		}
		k, ok := c.PublicKey.(ed25519.PublicKey)
		if !ok || subtle.ConstantTimeCompare(k, pub) != 1 {
			return errNotReplica
		}
		return nil
	}
	server = &tls.Config{
		MinVersion:            tls.VersionTLS13,
		Certificates:          []tls.Certificate{cert},
		ClientAuth:            tls.RequireAnyClientCert,
		VerifyPeerCertificate: verify,
	}
	client = &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{cert},
		ServerName:   serverName,
		// The chain is not checked against any authority: the peer is
		// known by its key, which verify checks.
		InsecureSkipVerify:    true,
		VerifyPeerCertificate: verify,
	}
	return server, client, nil
}
