package main

import (
	"bytes"
	"crypto/tls"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/emersion/go-imap/v2/imapclient"
	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"
)

// TestAdvertisedLimitsHold: a message exactly at the advertised
// APPENDLIMIT, and one of exactly the SMTP size limit (which MAIL FROM
// SIZE= tells), are accepted by the provider: the
// limits are derived from the provider's request limit (here the
// sandbox's body limit, made small) after encoding.
func TestAdvertisedLimitsHold(t *testing.T) {
	const maxBody = 1 << 20
	p := startBridge(t, "DIRECTBRIDGE_API_MAX_REQUEST_BYTES="+strconv.Itoa(maxBody), "DIRECTBRIDGE_SANDBOX_MAX_BODY="+strconv.Itoa(maxBody))
	c, err := imapclient.DialInsecure(p.addrs["IMAP (STARTTLS)"], nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Login("alice@direct.example", "sandbox-demo").Wait(); err != nil {
		t.Fatal(err)
	}
	limit := 0
	for capName := range c.Caps() {
		if v, ok := strings.CutPrefix(string(capName), "APPENDLIMIT="); ok {
			limit, _ = strconv.Atoi(v)
		}
	}
	if limit == 0 || limit >= maxBody {
		t.Fatalf("APPENDLIMIT %d; want one under the request limit %d", limit, maxBody)
	}
	raw := filler("Subject: at the limit\r\n\r\n", limit)
	ac := c.Append("INBOX", int64(len(raw)), nil)
	ac.Write(raw)
	ac.Close()
	if _, err := ac.Wait(); err != nil {
		t.Fatalf("APPEND of exactly APPENDLIMIT (%d) bytes: %v", limit, err)
	}

	sc, err := smtp.DialStartTLS(p.addrs["SMTP submission (STARTTLS)"], &tls.Config{InsecureSkipVerify: true})
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	if err := sc.Hello("client.example"); err != nil {
		t.Fatal(err)
	}
	if ok, arg := sc.Extension("SIZE"); !ok || arg != "" {
		t.Fatalf("EHLO SIZE %v %q; want SIZE without a number (smtpbackend/size.go)", ok, arg)
	}
	if err := sc.Auth(sasl.NewPlainClient("", "alice@direct.example", "sandbox-demo")); err != nil {
		t.Fatal(err)
	}
	// The limit, as a client learns it: the largest size MAIL FROM
	// takes (RFC 1870 §6.1).
	size := sort.Search(maxBody, func(n int) bool {
		err := sc.Mail("alice@direct.example", &smtp.MailOptions{Size: int64(n + 1)})
		sc.Reset()
		return err != nil
	})
	if size == 0 || size >= maxBody {
		t.Fatalf("MAIL FROM takes sizes up to %d; want a limit under the request limit %d", size, maxBody)
	}
	msg := filler("From: alice@direct.example\r\nTo: bob@direct.example\r\nSubject: at the limit\r\n\r\n", size)
	if err := sc.SendMail("alice@direct.example", []string{"bob@direct.example"}, bytes.NewReader(msg)); err != nil {
		t.Fatalf("a message of exactly the limit (%d bytes): %v", size, err)
	}
}

// filler is header followed by text lines up to exactly n bytes.
func filler(header string, n int) []byte {
	b := []byte(header)
	for i := 0; len(b) < n; i++ {
		b = append(b, fmt.Sprintf("line %06d of a long clinical document, plain ASCII text\r\n", i)...)
	}
	b = b[:n-2]
	return append(b, "\r\n"...)
}
