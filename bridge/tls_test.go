package bridge

import (
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// TestSelfSignedOnceAndReload: the self-signed certificate is made once
// and reused; a certificate file that changes is picked up without a
// restart, and one that stops loading keeps the last good certificate.
func TestSelfSignedOnceAndReload(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile, err := selfSigned(dir)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := loadCertSource(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	first := cs.fingerprint()
	if again, _, _ := selfSigned(dir); again != certFile {
		t.Fatal("second call made another certificate file")
	}
	if cs2, _ := loadCertSource(certFile, keyFile); cs2.fingerprint() != first {
		t.Fatal("the self-signed certificate changed between loads")
	}
	if fi, _ := os.Stat(keyFile); fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode %v; want 0600", fi.Mode().Perm())
	}

	// Replace the files with a new certificate, as a renewal would.
	other := t.TempDir()
	newCert, newKey, err := selfSigned(other)
	if err != nil {
		t.Fatal(err)
	}
	for src, dst := range map[string]string{newCert: certFile, newKey: keyFile} {
		data, _ := os.ReadFile(src)
		if err := os.WriteFile(dst, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	future := time.Now().Add(time.Minute)
	os.Chtimes(certFile, future, future)
	cs.checked = time.Time{} // as if reloadEvery had passed
	cs.get(nil)
	if cs.fingerprint() == first {
		t.Fatal("a changed certificate file was not reloaded")
	}
	renewed := cs.fingerprint()

	os.WriteFile(filepath.Join(dir, "tls", "localhost-cert.pem"), []byte("garbage"), 0o644)
	later := future.Add(time.Minute)
	os.Chtimes(certFile, later, later)
	cs.checked = time.Time{}
	if c, err := cs.get(nil); err != nil || c == nil || cs.fingerprint() != renewed {
		t.Fatal("a broken certificate file replaced the good certificate")
	}
}

// TestSelfSignedNames: the certificate names localhost, the loopback
// addresses (as IP and as DNS SANs, for clients such as offlineimap that
// compare a configured "127.0.0.1" with DNS names only) and the listen
// hosts; a certificate on disk that lacks a listen host is made again.
func TestSelfSignedNames(t *testing.T) {
	dir := t.TempDir()
	certFile, _, err := selfSigned(dir)
	if err != nil {
		t.Fatal(err)
	}
	cert := parseCertFile(t, certFile)
	for _, name := range []string{"localhost", "127.0.0.1", "::1"} {
		if !slices.Contains(cert.DNSNames, name) {
			t.Errorf("DNS SANs %q lack %q", cert.DNSNames, name)
		}
	}
	for _, host := range []string{"localhost", "127.0.0.1", "::1"} {
		if err := cert.VerifyHostname(host); err != nil {
			t.Errorf("VerifyHostname(%q): %v", host, err)
		}
	}
	first := cert.SerialNumber

	// An unspecified address adds nothing: the certificate made above
	// is kept (a container's host name changes with every container).
	if _, _, err := selfSigned(dir, listenHosts("0.0.0.0:1143", ":1993", "[::]:1587")...); err != nil {
		t.Fatal(err)
	}
	if parseCertFile(t, certFile).SerialNumber.Cmp(first) != 0 {
		t.Fatal("unspecified listen addresses made a new certificate")
	}

	hosts := listenHosts("mail.example.org:1143", "10.1.2.3:1993", "off", "[fd00::5]:1587")
	if _, _, err := selfSigned(dir, hosts...); err != nil {
		t.Fatal(err)
	}
	cert = parseCertFile(t, certFile)
	if cert.SerialNumber.Cmp(first) == 0 {
		t.Fatal("a certificate lacking the listen hosts was kept")
	}
	for _, host := range []string{"mail.example.org", "10.1.2.3", "fd00::5", "127.0.0.1"} {
		if err := cert.VerifyHostname(host); err != nil {
			t.Errorf("VerifyHostname(%q): %v", host, err)
		}
	}
	second := cert.SerialNumber
	if _, _, err := selfSigned(dir, hosts...); err != nil {
		t.Fatal(err)
	}
	if parseCertFile(t, certFile).SerialNumber.Cmp(second) != 0 {
		t.Fatal("a certificate naming every host was made again")
	}
}

func parseCertFile(t *testing.T, path string) *x509.Certificate {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(data)
	if block == nil {
		t.Fatal("no PEM block")
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}
