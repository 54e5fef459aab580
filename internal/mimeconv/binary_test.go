package mimeconv

import (
	"bytes"
	"testing"
)

// TestEncodeBinaryParts: parts with CTE binary become base64 and decode
// to the same octets (BINARY[n]); every other byte stays as it was.
func TestEncodeBinaryParts(t *testing.T) {
	payload := []byte("\x00-\xe4\n\r\n\n")
	single := []byte("From: a@example.org\r\nContent-Type: application/octet-stream\r\nContent-Transfer-Encoding: BINARY\r\n\r\n")
	single = append(single, payload...)
	out, changed := EncodeBinaryParts(single)
	if !changed {
		t.Fatal("a binary message was not changed")
	}
	if bytes.IndexByte(out, 0) >= 0 {
		t.Fatalf("NUL left in %q", out)
	}
	root, err := ParseTree(out, ParseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if root.Encoding != "base64" {
		t.Fatalf("encoding %q; want base64", root.Encoding)
	}
	if got, err := root.Decoded(); err != nil || !bytes.Equal(got, payload) {
		t.Fatalf("decoded %q, %v; want %q", got, err, payload)
	}
	if !bytes.HasPrefix(out, []byte("From: a@example.org\r\nContent-Type: application/octet-stream\r\nContent-Transfer-Encoding: base64\r\n\r\n")) {
		t.Fatalf("header changed beyond the CTE field: %q", out)
	}

	multi := []byte("Content-Type: multipart/mixed; boundary=b\r\n\r\npreamble\r\n--b\r\nContent-Type: text/plain\r\n\r\nhello\r\n--b\r\n" +
		"Content-Type: application/octet-stream\r\nContent-Transfer-Encoding: binary\r\n\r\n")
	multi = append(multi, bytes.Repeat(payload, 20)...)
	multi = append(multi, []byte("\r\n--b--\r\nepilogue\r\n")...)
	out, changed = EncodeBinaryParts(multi)
	if !changed {
		t.Fatal("a multipart with a binary part was not changed")
	}
	root, _ = ParseTree(out, ParseOptions{})
	if len(root.Children) != 2 || string(root.Children[0].Body()) != "hello" {
		t.Fatalf("parts after the rewrite: %q", out)
	}
	if got, err := root.Children[1].Decoded(); err != nil || !bytes.Equal(got, bytes.Repeat(payload, 20)) {
		t.Fatalf("binary part decoded %q, %v", got, err)
	}
	if !bytes.HasSuffix(out, []byte("\r\n--b--\r\nepilogue\r\n")) {
		t.Fatalf("the rest changed: %q", out)
	}

	// A message written with bare LF keeps bare LF.
	lf := []byte("Content-Transfer-Encoding: binary\n\n" + string(bytes.Repeat(payload, 30)))
	out, _ = EncodeBinaryParts(lf)
	if bytes.Contains(out, []byte("\r\n")) || !bytes.HasPrefix(out, []byte("Content-Transfer-Encoding: base64\n\n")) {
		t.Fatalf("bare-LF message got CRLF: %q", out)
	}
	if root, _ := ParseTree(out, ParseOptions{}); root == nil {
		t.Fatal("no tree")
	} else if got, err := root.Decoded(); err != nil || !bytes.Equal(got, bytes.Repeat(payload, 30)) {
		t.Fatalf("bare-LF decoded %q, %v", got, err)
	}

	for _, raw := range [][]byte{
		[]byte("Subject: binary options\r\n\r\nno binary part here\r\n"),
		[]byte("Content-Transfer-Encoding: base64\r\n\r\nAAEC\r\n"),
		nil,
	} {
		if out, changed := EncodeBinaryParts(raw); changed || !bytes.Equal(out, raw) {
			t.Errorf("EncodeBinaryParts(%q) changed it to %q", raw, out)
		}
	}
}
