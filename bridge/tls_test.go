package bridge

import (
	"os"
	"path/filepath"
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
