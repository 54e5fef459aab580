package mimeconv

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"
)

// readTestdata returns a file under testdata/.
func readTestdata(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// decodedContent returns the bytes of an Attachment's base64 content.
func decodedContent(t testing.TB, content string) []byte {
	t.Helper()
	b, err := base64.StdEncoding.DecodeString(content)
	if err != nil {
		t.Fatalf("attachment content is not base64: %v", err)
	}
	return b
}
