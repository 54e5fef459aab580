package main

import (
	"bufio"
	"context"
	"encoding/base64"
	"fmt"
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

	"github.com/directbridge/directbridge/restclient"
	"github.com/directbridge/directbridge/sandbox"
	"github.com/directbridge/directbridge/upstream/directapi"
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

// killRounds is how many times in a row the crash tests below kill the
// bridge mid-change.
const killRounds = 3

// blockingProvider is the sandbox behind a proxy that carries out every
// request whose path contains op and then holds its answer until the test
// ends (or the bridge goes): the provider did the work, the bridge never
// hears of it. done counts those requests.
func blockingProvider(t *testing.T, sb *sandbox.Server, op string) (url string, done *atomic.Int32) {
	release := make(chan struct{})
	done = new(atomic.Int32)
	provider := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.Contains(r.URL.Path, op) {
			sb.ServeHTTP(w, r)
			return
		}
		rec := httptest.NewRecorder()
		sb.ServeHTTP(rec, r)
		done.Add(1)
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(provider.Close)
	t.Cleanup(func() { close(release) })
	return provider.URL, done
}

// crashUser starts the sandbox with alice, and returns a login function
// for the bridge at addr.
func crashUser(t *testing.T) (*sandbox.Server, func(addr string) *imapclient.Client) {
	const alice, pw = "alice@direct.example", "crash-pw"
	sb, err := sandbox.Open(sandbox.Options{Users: []sandbox.Account{{Name: alice, Password: pw}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sb.Close() })
	return sb, func(addr string) *imapclient.Client {
		c, err := imapclient.DialInsecure(addr, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		if err := c.Login(alice, pw).Wait(); err != nil {
			t.Fatal(err)
		}
		return c
	}
}

// waitFor waits until n reaches want, or fails.
func waitFor(t *testing.T, n *atomic.Int32, want int32, what string) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); n.Load() < want; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the provider never saw the %s", what)
		}
	}
}

// TestKillDuringMoveKeepsFlags: the bridge is killed (SIGKILL) after the
// provider carried out a MOVE of a \Flagged message with a keyword and
// before its answer arrived, several times in a row. The flags were
// written down before the call (under the destination, by Message-ID and
// size): after each restart the moved message shows them in the
// destination.
func TestKillDuringMoveKeepsFlags(t *testing.T) {
	sb, login := crashUser(t)
	url, moved := blockingProvider(t, sb, "/MoveMessages")
	dir, imapAddr := t.TempDir(), freeAddr(t)
	start := func() *exec.Cmd { return startOnProvider(t, dir, url, "DIRECTBRIDGE_IMAP_ADDR", imapAddr) }

	bridge := start()
	c := login(imapAddr)
	if err := c.Create("Kept", nil).Wait(); err != nil {
		t.Fatal(err)
	}
	for round := 1; round <= killRounds; round++ {
		raw := fmt.Sprintf("From: bob@direct.example\r\nTo: alice@direct.example\r\nSubject: flagged %d\r\nMessage-ID: <move-%d@direct.example>\r\n\r\nkeep my flags\r\n", round, round)
		if _, err := appendRaw(c, "INBOX", raw); err != nil {
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
		waitFor(t, moved, int32(round), "move")
		bridge.Process.Kill()
		bridge.Wait()

		bridge = start()
		c = login(imapAddr)
		if _, err := c.Select("Kept", nil).Wait(); err != nil {
			t.Fatal(err)
		}
		msgs, err := c.Fetch(imap.SeqSetNum(uint32(round)), &imap.FetchOptions{Flags: true, Envelope: true}).Collect()
		if err != nil || len(msgs) != 1 {
			t.Fatalf("round %d: moved message: %d, %v", round, len(msgs), err)
		}
		fl := msgs[0].Flags
		if msgs[0].Envelope.Subject != fmt.Sprintf("flagged %d", round) || !slices.Contains(fl, imap.FlagFlagged) || !slices.Contains(fl, imap.Flag("$Urgent")) {
			t.Fatalf("round %d: %q with flags %v after the restart; want \\Flagged and $Urgent", round, msgs[0].Envelope.Subject, fl)
		}
	}
}

// TestKillDuringAppendNoDuplicate: the bridge is killed (SIGKILL) after
// the provider stored an APPEND's message and before its answer arrived,
// several times in a row. The client's retry after each restart (the same
// bytes) is answered OK with the stored message's UID and flags, and the
// folder holds each message once (the journal of attempts, written before
// the request left, survives the kill).
func TestKillDuringAppendNoDuplicate(t *testing.T) {
	sb, login := crashUser(t)
	url, saved := blockingProvider(t, sb, "/SaveRawMessages")
	dir, imapAddr := t.TempDir(), freeAddr(t)
	start := func() *exec.Cmd { return startOnProvider(t, dir, url, "DIRECTBRIDGE_IMAP_ADDR", imapAddr) }

	bridge := start()
	c := login(imapAddr)
	for round := 1; round <= killRounds; round++ {
		raw := fmt.Sprintf("From: bob@direct.example\r\nTo: alice@direct.example\r\nSubject: appended %d\r\nMessage-ID: <append-%d@direct.example>\r\n\r\nonce only\r\n", round, round)
		go appendRaw(c, "INBOX", raw, imap.FlagFlagged)
		waitFor(t, saved, int32(round), "save")
		bridge.Process.Kill()
		bridge.Wait()

		bridge = start()
		c = login(imapAddr)
		data, err := appendRaw(c, "INBOX", raw, imap.FlagFlagged)
		if err != nil || data == nil || data.UID == 0 {
			t.Fatalf("round %d: the retry after the restart: %+v, %v; want OK with the stored message's UID", round, data, err)
		}
		if _, err := c.Select("INBOX", nil).Wait(); err != nil {
			t.Fatal(err)
		}
		msgs, err := c.Fetch(imap.SeqSet{{Start: 1, Stop: 0}}, &imap.FetchOptions{UID: true, Flags: true, Envelope: true}).Collect()
		if err != nil {
			t.Fatal(err)
		}
		if len(msgs) != round {
			t.Fatalf("round %d: INBOX holds %d messages; want %d (each appended once)", round, len(msgs), round)
		}
		last := msgs[len(msgs)-1]
		if last.UID != data.UID || last.Envelope.Subject != fmt.Sprintf("appended %d", round) || !slices.Contains(last.Flags, imap.FlagFlagged) {
			t.Fatalf("round %d: UID %d %q %v; want APPENDUID %d, the retried message, \\Flagged", round, last.UID, last.Envelope.Subject, last.Flags, data.UID)
		}
	}
}

// appendRaw appends raw to folder with flags.
func appendRaw(c *imapclient.Client, folder, raw string, flags ...imap.Flag) (*imap.AppendData, error) {
	ac := c.Append(folder, int64(len(raw)), &imap.AppendOptions{Flags: flags})
	if _, err := ac.Write([]byte(raw)); err != nil {
		return nil, err
	}
	if err := ac.Close(); err != nil {
		return nil, err
	}
	return ac.Wait()
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
