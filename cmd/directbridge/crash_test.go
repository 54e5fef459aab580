package main

import (
	"bufio"
	"context"
	"encoding/base64"
	"net"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"

	"github.com/directbridge/directbridge/directapi"
	"github.com/directbridge/directbridge/restclient"
	"github.com/directbridge/directbridge/sandbox"
)

// TestKillDuringSendNoDuplicate: the bridge is killed (SIGKILL) after the
// provider processed a Send and before its answer arrived. The client's
// retry, made to the restarted bridge, is recognised from the send
// journal kept in the state store and the provider's Sent copy: answered
// 250 with that copy's smtpId, and the message is delivered once.
func TestKillDuringSendNoDuplicate(t *testing.T) {
	const alice, bob, pw = "alice@direct.example", "bob@direct.example", "crash-pw"
	sb, err := sandbox.Open(sandbox.Options{Users: []sandbox.Account{{Name: alice, Password: pw}, {Name: bob, Password: pw}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sb.Close() })
	// The provider as the bridge sees it: a Send is carried out, then
	// its answer is held back until the test ends.
	release := make(chan struct{})
	var processed atomic.Int32
	provider := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.Contains(r.URL.Path, "/Send") {
			sb.ServeHTTP(w, r)
			return
		}
		rec := httptest.NewRecorder()
		sb.ServeHTTP(rec, r)
		processed.Add(1)
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(provider.Close)
	t.Cleanup(func() { close(release) })

	dir, smtpAddr := t.TempDir(), freeAddr(t)
	start := func() *exec.Cmd { return startOnProvider(t, dir, provider.URL, "DIRECTBRIDGE_SMTP_ADDR", smtpAddr) }
	raw := "From: " + alice + "\r\nTo: " + bob + "\r\nSubject: crash test\r\nMessage-ID: <crash-1@client.example>\r\n\r\nexactly once\r\n.\r\n"
	// submit runs one transaction and returns the reply to the data.
	submit := func() (string, error) {
		c, err := net.Dial("tcp", smtpAddr)
		if err != nil {
			return "", err
		}
		defer c.Close()
		r := bufio.NewReader(c)
		smtpLine(t, c, r, "")
		smtpLine(t, c, r, "EHLO client.example")
		plain := base64.StdEncoding.EncodeToString([]byte("\x00" + alice + "\x00" + pw))
		if got := smtpLine(t, c, r, "AUTH PLAIN "+plain); !strings.HasPrefix(got, "235") {
			t.Fatalf("AUTH: %q", got)
		}
		smtpLine(t, c, r, "MAIL FROM:<"+alice+">")
		smtpLine(t, c, r, "RCPT TO:<"+bob+">")
		if got := smtpLine(t, c, r, "DATA"); !strings.HasPrefix(got, "354") {
			t.Fatalf("DATA: %q", got)
		}
		c.Write([]byte(raw))
		return r.ReadString('\n')
	}

	first := start()
	answered := make(chan error, 1)
	go func() {
		reply, err := submit()
		if err == nil {
			t.Errorf("the first attempt was answered %q although its answer was held back", reply)
		}
		answered <- nil
	}()
	for deadline := time.Now().Add(20 * time.Second); processed.Load() == 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the provider never saw the Send")
		}
	}
	first.Process.Kill()
	first.Wait()
	<-answered

	start()
	reply, err := submit()
	if err != nil || !strings.HasPrefix(reply, "250") {
		t.Fatalf("the retry after the restart got %q, %v; want 250", reply, err)
	}
	rc, err := restclient.New(restclient.Options{BaseURL: provider.URL})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	got, err := rc.GetMessageMetaData(ctx, directapi.Authentication{Username: bob, Password: pw}, "INBOX")
	if err != nil {
		t.Fatal(err)
	}
	copies := 0
	for _, m := range got {
		if m.Subject == "crash test" {
			copies++
			if !strings.Contains(reply, strings.Trim(m.MsgID, "<>")) {
				t.Errorf("reply %q does not name the delivered message %s", reply, m.MsgID)
			}
		}
	}
	if copies != 1 || processed.Load() != 1 {
		t.Fatalf("bob has %d copies, the provider processed %d sends; want 1 and 1", copies, processed.Load())
	}
}

// TestKillDuringMoveKeepsFlags: the bridge is killed (SIGKILL) after the
// provider carried out a MOVE of a \Flagged message with a keyword and
// before its answer arrived. The flags were written down before the call
// (under the destination, by Message-ID and size): after the restart the
// moved message shows them in the destination.
func TestKillDuringMoveKeepsFlags(t *testing.T) {
	const alice, pw = "alice@direct.example", "crash-pw"
	sb, err := sandbox.Open(sandbox.Options{Users: []sandbox.Account{{Name: alice, Password: pw}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sb.Close() })
	release := make(chan struct{})
	var moved atomic.Int32
	provider := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.Contains(r.URL.Path, "/MoveMessages") {
			sb.ServeHTTP(w, r)
			return
		}
		rec := httptest.NewRecorder()
		sb.ServeHTTP(rec, r)
		moved.Add(1)
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(provider.Close)
	t.Cleanup(func() { close(release) })

	dir, imapAddr := t.TempDir(), freeAddr(t)
	start := func() *exec.Cmd { return startOnProvider(t, dir, provider.URL, "DIRECTBRIDGE_IMAP_ADDR", imapAddr) }
	login := func() *imapclient.Client {
		c, err := imapclient.DialInsecure(imapAddr, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		if err := c.Login(alice, pw).Wait(); err != nil {
			t.Fatal(err)
		}
		return c
	}

	first := start()
	c := login()
	raw := "From: bob@direct.example\r\nTo: " + alice + "\r\nSubject: flagged\r\nMessage-ID: <move-1@direct.example>\r\n\r\nkeep my flags\r\n"
	ac := c.Append("INBOX", int64(len(raw)), nil)
	ac.Write([]byte(raw))
	if err := ac.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := ac.Wait(); err != nil {
		t.Fatal(err)
	}
	if err := c.Create("Kept", nil).Wait(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Select("INBOX", nil).Wait(); err != nil {
		t.Fatal(err)
	}
	// Metadata loaded, as a client listing the folder does before moving.
	if _, err := c.Fetch(imap.SeqSetNum(1), &imap.FetchOptions{Envelope: true, RFC822Size: true}).Collect(); err != nil {
		t.Fatal(err)
	}
	if err := c.Store(imap.SeqSetNum(1), &imap.StoreFlags{Op: imap.StoreFlagsAdd, Flags: []imap.Flag{imap.FlagFlagged, "$Urgent"}}, nil).Close(); err != nil {
		t.Fatal(err)
	}
	go c.Move(imap.SeqSetNum(1), "Kept").Wait()
	for deadline := time.Now().Add(20 * time.Second); moved.Load() == 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the provider never saw the move")
		}
	}
	first.Process.Kill()
	first.Wait()

	start()
	c = login()
	if _, err := c.Select("Kept", nil).Wait(); err != nil {
		t.Fatal(err)
	}
	msgs, err := c.Fetch(imap.SeqSetNum(1), &imap.FetchOptions{Flags: true, Envelope: true}).Collect()
	if err != nil || len(msgs) != 1 {
		t.Fatalf("moved message: %d, %v", len(msgs), err)
	}
	fl := msgs[0].Flags
	if !slices.Contains(fl, imap.FlagFlagged) || !slices.Contains(fl, imap.Flag("$Urgent")) {
		t.Fatalf("flags after the restart %v; want \\Flagged and $Urgent", fl)
	}
}

// freeAddr is a loopback address with a port free a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// startOnProvider runs the real binary against providerURL with its data
// in dir and one listener, listenVar (e.g. DIRECTBRIDGE_SMTP_ADDR) at addr,
// the others off, and returns once that listener accepts connections. The
// process is killed when the test ends.
func startOnProvider(t *testing.T, dir, providerURL, listenVar, addr string) *exec.Cmd {
	t.Helper()
	env := map[string]string{"DIRECTBRIDGE_SMTP_ADDR": "off", "DIRECTBRIDGE_SMTPS_ADDR": "off",
		"DIRECTBRIDGE_IMAP_ADDR": "off", "DIRECTBRIDGE_IMAPS_ADDR": "off"}
	env[listenVar] = addr
	vars := []string{"DIRECTBRIDGE_DATA_DIR=" + dir, "DIRECTBRIDGE_API_URL=" + providerURL,
		"DIRECTBRIDGE_API_RATE_LIMIT=unlimited", "DIRECTBRIDGE_ADMIN_SOCKET=off"}
	for k, v := range env {
		vars = append(vars, k+"="+v)
	}
	cmd := exec.Command(binPath)
	cmd.Env = cleanEnv(vars...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return cmd
		}
		if time.Now().After(deadline) {
			t.Fatal("the bridge did not listen")
		}
	}
}
