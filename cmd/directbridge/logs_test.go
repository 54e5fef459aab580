package main

import (
	"crypto/tls"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"
	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"
)

// TestNoHealthDataInLogs runs a full session at debug level: an SMTP
// submission with an attachment, then IMAP login, listing, search, fetch,
// flagging and expunge. The log must show the events, and never the
// password, subject, body or attachment name.
func TestNoHealthDataInLogs(t *testing.T) {
	p := startBridge(t, "DIRECTBRIDGE_LOG_LEVEL=debug")
	const (
		password   = "sandbox-demo"
		subject    = "Diagnosis-Subject-4471"
		body       = "Patient-Body-Text-9902"
		attachment = "lab-result-patient-3318.pdf"
	)
	msg := "From: alice@direct.example\r\nTo: bob@direct.example\r\nSubject: " + subject + "\r\n" +
		"MIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=b\r\n\r\n--b\r\n" +
		"Content-Type: text/plain\r\n\r\n" + body + "\r\n--b\r\n" +
		"Content-Type: application/pdf; name=" + attachment + "\r\nContent-Disposition: attachment; filename=" + attachment +
		"\r\nContent-Transfer-Encoding: base64\r\n\r\nJVBERi0xLjQK\r\n--b--\r\n"
	tlsCfg := &tls.Config{InsecureSkipVerify: true}
	sc, err := smtp.DialStartTLS(p.addrs["SMTP submission (STARTTLS)"], tlsCfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := sc.Auth(sasl.NewPlainClient("", "alice@direct.example", password)); err != nil {
		t.Fatal(err)
	}
	if err := sc.SendMail("alice@direct.example", []string{"bob@direct.example"}, strings.NewReader(msg)); err != nil {
		t.Fatal(err)
	}
	sc.Quit()

	ic, err := imapclient.DialStartTLS(p.addrs["IMAP (STARTTLS)"], &imapclient.Options{TLSConfig: tlsCfg})
	if err != nil {
		t.Fatal(err)
	}
	defer ic.Close()
	if err := ic.Login("bob@direct.example", password).Wait(); err != nil {
		t.Fatal(err)
	}
	if _, err := ic.List("", "*", nil).Collect(); err != nil {
		t.Fatal(err)
	}
	if _, err := ic.Select("INBOX", nil).Wait(); err != nil {
		t.Fatal(err)
	}
	found, err := ic.UIDSearch(&imap.SearchCriteria{Header: []imap.SearchCriteriaHeaderField{{Key: "Subject", Value: subject}}}, nil).Wait()
	if err != nil || len(found.AllUIDs()) != 1 {
		t.Fatalf("SEARCH SUBJECT: %v, %v", found, err)
	}
	msgs, err := ic.Fetch(imap.UIDSetNum(found.AllUIDs()...), &imap.FetchOptions{
		Envelope: true, BodyStructure: &imap.FetchItemBodyStructure{Extended: true},
		BodySection: []*imap.FetchItemBodySection{{}},
	}).Collect()
	if err != nil || len(msgs) != 1 || !strings.Contains(string(msgs[0].FindBodySection(&imap.FetchItemBodySection{})), body) {
		t.Fatalf("FETCH: %v", err)
	}
	if err := ic.Store(imap.UIDSetNum(found.AllUIDs()...), &imap.StoreFlags{Op: imap.StoreFlagsAdd, Flags: []imap.Flag{imap.FlagFlagged, imap.FlagDeleted}}, nil).Close(); err != nil {
		t.Fatal(err)
	}
	if err := ic.Expunge().Close(); err != nil {
		t.Fatal(err)
	}
	ic.Logout().Wait()

	p.cmd.Process.Signal(syscall.SIGTERM)
	if err := p.wait(t, 20*time.Second); err != nil {
		t.Fatalf("exit: %v", err)
	}
	logs := p.logs.String()
	for _, event := range []string{"smtp message sent", "imap login", "rest call"} {
		if !strings.Contains(logs, event) {
			t.Errorf("debug log lacks %q", event)
		}
	}
	for _, secret := range []string{password, subject, body, attachment, "Patient", "Diagnosis"} {
		if strings.Contains(logs, secret) {
			t.Errorf("log contains %q", secret)
		}
	}
	if t.Failed() {
		t.Logf("log:\n%s", logs)
	}
}
