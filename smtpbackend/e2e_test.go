package smtpbackend_test

// End-to-end tests of the SMTP submission front through real TCP: a
// go-smtp client (or raw bytes on a socket) talks to smtpbackend.Server on
// 127.0.0.1, which calls the sandbox provider over HTTP. What the provider
// did is checked through its REST API (recipient mailboxes, INBOX.Sent) and
// its test hooks (call counters, recorded request bodies).

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http/httptest"
	"net/textproto"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"

	"github.com/directbridge/directbridge/internal/login"
	"github.com/directbridge/directbridge/internal/state"
	"github.com/directbridge/directbridge/restclient"
	"github.com/directbridge/directbridge/sandbox"
	"github.com/directbridge/directbridge/smtpbackend"
	"github.com/directbridge/directbridge/upstream/directapi"
)

// Accounts seeded in every sandbox.
const (
	aliceAddr = "alice@direct.example"
	bobAddr   = "bob@direct.example"
	carolAddr = "carol@direct.example"
	tuserName = "tuser"
)

var passwords = map[string]string{
	aliceAddr: "alice-pw-8d2f41",
	bobAddr:   "bob-pw-19ac07",
	carolAddr: "carol-pw-77e0c3",
	tuserName: "tuser-pw-5b31aa",
}

// fakeClock is real time whose Sleep returns at once, so the REST client's
// retries (1 s, 2 s, 4 s, or 30-60 s after a 503) cost nothing here.
type fakeClock struct{}

func (fakeClock) Now() time.Time { return time.Now() }

func (fakeClock) Sleep(ctx context.Context, _ time.Duration) error { return ctx.Err() }

// harness is one bridge in front of one sandbox.
type harness struct {
	sb       *sandbox.Server
	provider *httptest.Server   // the provider URL the bridge uses
	admin    *restclient.Client // inspection through a second server on the same sandbox
	store    *state.Store
	srv      *smtpbackend.Server
	cfg      smtpbackend.Config
	subAddr  string // submission with STARTTLS
	tlsAddr  string // implicit TLS
	seq      atomic.Int64

	mu     sync.Mutex
	served []chan error // one per Serve call, checked after Shutdown
}

// newHarness starts a sandbox, a bridge and its two listeners; tweak may
// change the bridge's Config before New. Everything stops at cleanup.
func newHarness(t testing.TB, tweak func(*smtpbackend.Config)) *harness {
	t.Helper()
	return newHarnessWith(t, nil, tweak)
}

// newHarnessWith is newHarness with the sandbox's options changed by sbTweak.
func newHarnessWith(t testing.TB, sbTweak func(*sandbox.Options), tweak func(*smtpbackend.Config)) *harness {
	t.Helper()
	opts := sandbox.Options{
		Users: []sandbox.Account{
			{Name: aliceAddr, Password: passwords[aliceAddr]},
			{Name: bobAddr, Password: passwords[bobAddr]},
			{Name: carolAddr, Password: passwords[carolAddr]},
		},
		Resellers:    []sandbox.Account{{Name: tuserName, Password: passwords[tuserName]}},
		KeepRequests: 50,
	}
	if sbTweak != nil {
		sbTweak(&opts)
	}
	sb, err := sandbox.Open(opts)
	if err != nil {
		t.Fatalf("sandbox.Open: %v", err)
	}
	t.Cleanup(func() { sb.Close() })
	h := &harness{sb: sb}
	h.provider = httptest.NewServer(sb)
	t.Cleanup(h.provider.Close)
	adminHTTP := httptest.NewServer(sb)
	t.Cleanup(adminHTTP.Close)

	rc, err := restclient.New(restclient.Options{BaseURL: h.provider.URL, Clock: fakeClock{}})
	if err != nil {
		t.Fatalf("restclient.New: %v", err)
	}
	h.admin, err = restclient.New(restclient.Options{BaseURL: adminHTTP.URL, Clock: fakeClock{}})
	if err != nil {
		t.Fatalf("restclient.New: %v", err)
	}
	h.store, err = state.OpenStore(t.TempDir())
	if err != nil {
		t.Fatalf("OpenStore: %v", err)
	}
	t.Cleanup(func() { h.store.Close() })

	h.cfg = smtpbackend.Config{
		Provider:  restclient.Upstream(rc),
		Verifier:  login.NewVerifier(restclient.Upstream(rc), 0),
		Store:     h.store,
		Hostname:  "bridge.test",
		TLSConfig: serverTLS(t),
	}
	if tweak != nil {
		tweak(&h.cfg)
	}
	h.srv, err = smtpbackend.New(h.cfg)
	if err != nil {
		t.Fatalf("smtpbackend.New: %v", err)
	}
	h.subAddr = h.serve(t, h.srv.ServeSubmission, "127.0.0.1:0")
	h.tlsAddr = h.serve(t, h.srv.ServeImplicitTLS, "127.0.0.1:0")
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := h.srv.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
		h.mu.Lock()
		served := h.served
		h.mu.Unlock()
		for _, done := range served {
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("Serve returned %v after Shutdown", err)
				}
			case <-ctx.Done():
				t.Errorf("Serve did not return after Shutdown")
			}
		}
	})
	return h
}

// serve runs one of the Serve methods on a new listener at addr and
// returns the listener's address. The harness's cleanup checks that Serve
// returns nil after Shutdown.
func (h *harness) serve(t testing.TB, serve func(net.Listener) error, addr string) string {
	t.Helper()
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	done := make(chan error, 1)
	h.mu.Lock()
	h.served = append(h.served, done)
	h.mu.Unlock()
	go func() { done <- serve(l) }()
	return l.Addr().String()
}

var (
	certOnce sync.Once
	certPair tls.Certificate
	certErr  error
)

// serverTLS returns a TLS configuration with a self-signed certificate for
// 127.0.0.1, made once per test binary.
func serverTLS(t testing.TB) *tls.Config {
	t.Helper()
	certOnce.Do(func() {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			certErr = err
			return
		}
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(time.Now().UnixNano()),
			Subject:      pkix.Name{CommonName: "directbridge e2e test"},
			NotBefore:    time.Now().Add(-time.Hour),
			NotAfter:     time.Now().Add(24 * time.Hour),
			KeyUsage:     x509.KeyUsageDigitalSignature,
			ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
			IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
			DNSNames:     []string{"localhost"},
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
		if err != nil {
			certErr = err
			return
		}
		certPair = tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
	})
	if certErr != nil {
		t.Fatalf("test certificate: %v", certErr)
	}
	return &tls.Config{Certificates: []tls.Certificate{certPair}, MinVersion: tls.VersionTLS12}
}

func clientTLS() *tls.Config { return &tls.Config{InsecureSkipVerify: true} }

// Client timeouts: a server that does not answer fails the test instead
// of hanging it.
const clientTimeout = 20 * time.Second

func withTimeouts(t *testing.T, c *smtp.Client) *smtp.Client {
	c.CommandTimeout = clientTimeout
	c.SubmissionTimeout = clientTimeout
	t.Cleanup(func() { c.Close() })
	return c
}

// dialStartTLS connects to the submission listener and upgrades with STARTTLS.
func (h *harness) dialStartTLS(t *testing.T) *smtp.Client {
	t.Helper()
	c, err := smtp.DialStartTLS(h.subAddr, clientTLS())
	if err != nil {
		t.Fatalf("DialStartTLS: %v", err)
	}
	return withTimeouts(t, c)
}

// dialTLS connects to the implicit TLS listener.
func (h *harness) dialTLS(t *testing.T) *smtp.Client {
	t.Helper()
	c, err := smtp.DialTLS(h.tlsAddr, clientTLS())
	if err != nil {
		t.Fatalf("DialTLS: %v", err)
	}
	return withTimeouts(t, c)
}

// login dials with STARTTLS and authenticates user with PLAIN.
func (h *harness) login(t *testing.T, user string) *smtp.Client {
	t.Helper()
	c := h.dialStartTLS(t)
	if err := c.Auth(sasl.NewPlainClient("", user, passwords[user])); err != nil {
		t.Fatalf("AUTH PLAIN %s: %v", user, err)
	}
	return c
}

// submit runs one transaction and returns the text of the final 250 reply,
// or the first error (from MAIL, RCPT, DATA or the end of data).
func submit(c *smtp.Client, from string, rcpts []string, raw []byte) (string, error) {
	if err := c.Mail(from, nil); err != nil {
		return "", fmt.Errorf("MAIL: %w", err)
	}
	for _, r := range rcpts {
		if err := c.Rcpt(r, nil); err != nil {
			return "", fmt.Errorf("RCPT %s: %w", r, err)
		}
	}
	w, err := c.Data()
	if err != nil {
		return "", fmt.Errorf("DATA: %w", err)
	}
	if _, err := w.Write(raw); err != nil {
		return "", fmt.Errorf("writing data: %w", err)
	}
	resp, err := w.CloseWithResponse()
	if err != nil {
		return "", fmt.Errorf("end of data: %w", err)
	}
	return resp.StatusText, nil
}

// mustSubmit is submit that must succeed.
func mustSubmit(t *testing.T, c *smtp.Client, from string, rcpts []string, raw []byte) string {
	t.Helper()
	reply, err := submit(c, from, rcpts, raw)
	if err != nil {
		t.Fatalf("submit: %v", err)
	}
	return reply
}

// wantReply checks that err is an SMTP reply with code and, if enh is not
// nil, that enhanced code; enh entries < 0 are not checked.
func wantReply(t *testing.T, err error, code int, enh ...int) *smtp.SMTPError {
	t.Helper()
	var se *smtp.SMTPError
	if !errors.As(err, &se) {
		t.Fatalf("got %v, want SMTP reply %d", err, code)
	}
	if se.Code != code {
		t.Fatalf("got reply %d %v %q, want %d", se.Code, se.EnhancedCode, se.Message, code)
	}
	if se.EnhancedCode[0] != code/100 {
		t.Errorf("reply %d has enhanced code %v of another class", se.Code, se.EnhancedCode)
	}
	for i, want := range enh {
		if want >= 0 && se.EnhancedCode[i] != want {
			t.Errorf("reply %d: enhanced code %v, want %v", se.Code, se.EnhancedCode, enh)
			break
		}
	}
	return se
}

// ---- messages ----

type attachment struct {
	contentType, filename string
	data                  []byte
}

// message builds an RFC 5322 message with CRLF line breaks: the header
// lines as given, then a text/plain body, or multipart/mixed with the body
// and base64 attachments.
func message(header []string, body string, atts ...attachment) []byte {
	var b strings.Builder
	for _, l := range header {
		b.WriteString(l + "\r\n")
	}
	b.WriteString("MIME-Version: 1.0\r\n")
	body = crlf(body)
	if len(atts) == 0 {
		b.WriteString("Content-Type: text/plain; charset=utf-8\r\nContent-Transfer-Encoding: 8bit\r\n\r\n")
		b.WriteString(body)
		return []byte(b.String())
	}
	const boundary = "=_e2e_boundary_7c1f"
	b.WriteString(`Content-Type: multipart/mixed; boundary="` + boundary + "\"\r\n\r\n")
	b.WriteString("This is a multi-part message in MIME format.\r\n")
	b.WriteString("--" + boundary + "\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Transfer-Encoding: 8bit\r\n\r\n")
	b.WriteString(body)
	for _, a := range atts {
		fmt.Fprintf(&b, "\r\n--%s\r\nContent-Type: %s; name=\"%s\"\r\nContent-Transfer-Encoding: base64\r\nContent-Disposition: attachment; filename=\"%s\"\r\n\r\n",
			boundary, a.contentType, a.filename, a.filename)
		enc := base64.StdEncoding.EncodeToString(a.data)
		for len(enc) > 76 {
			b.WriteString(enc[:76] + "\r\n")
			enc = enc[76:]
		}
		b.WriteString(enc + "\r\n")
	}
	b.WriteString("--" + boundary + "--\r\n")
	return []byte(b.String())
}

// simple is a plain-text message from alice to bob.
func simple(subject, body string, extra ...string) []byte {
	return message(append([]string{"From: " + aliceAddr, "To: Bob <" + bobAddr + ">", "Subject: " + subject}, extra...), body)
}

func crlf(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "\r\n", "\n"), "\n", "\r\n")
}

// normBody compares bodies regardless of line-break convention and
// trailing line breaks.
func normBody(s string) string {
	return strings.TrimRight(strings.ReplaceAll(s, "\r\n", "\n"), "\n")
}

// subject returns a subject unique within the harness, so that messages
// are told apart in mailboxes and retries of different messages never look
// alike.
func (h *harness) subject(label string) string {
	return fmt.Sprintf("%s #%d", label, h.seq.Add(1))
}

func readTestdata(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "e2e", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// ---- mailbox inspection (through the admin client) ----

func auth(user string) directapi.Authentication {
	return directapi.Authentication{Username: user, Password: directapi.Secret(passwords[user])}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// messages returns the full messages of user's folder.
func (h *harness) messages(t *testing.T, user, folder string) []directapi.MessageDetail {
	t.Helper()
	ms, err := h.admin.GetMessages(ctxT(t), auth(user), folder)
	if err != nil {
		t.Fatalf("GetMessages %s %s: %v", user, folder, err)
	}
	return ms
}

// withSubject returns the messages of user's folder with that subject.
func (h *harness) withSubject(t *testing.T, user, folder, subject string) []directapi.MessageDetail {
	t.Helper()
	var out []directapi.MessageDetail
	for _, m := range h.messages(t, user, folder) {
		if m.Subject == subject {
			out = append(out, m)
		}
	}
	return out
}

// count returns the number of messages in user's folder (by GetUIDs, so
// that the verifier's GetMessageCount calls stay countable).
func (h *harness) count(t *testing.T, user, folder string) int {
	t.Helper()
	uids, err := h.admin.GetUIDs(ctxT(t), auth(user), folder)
	if err != nil {
		var ae *restclient.APIError
		if folder == "INBOX.Sent" && errors.As(err, &ae) {
			return 0 // not created before the first send
		}
		t.Fatalf("GetUIDs %s %s: %v", user, folder, err)
	}
	return len(uids)
}

// raws returns the raw bytes of every message in user's folder.
func (h *harness) raws(t *testing.T, user, folder string) [][]byte {
	t.Helper()
	ctx := ctxT(t)
	uids, err := h.admin.GetUIDs(ctx, auth(user), folder)
	if err != nil {
		t.Fatalf("GetUIDs: %v", err)
	}
	rms, err := h.admin.GetRawMessagesByUIDs(ctx, auth(user), folder, uids)
	if err != nil {
		t.Fatalf("GetRawMessagesByUIDs: %v", err)
	}
	var out [][]byte
	for _, rm := range rms {
		b, err := rm.Bytes()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
	}
	return out
}

// counts snapshots the mailboxes a test may deliver to.
type counts struct{ bobInbox, carolInbox, aliceSent int }

func (h *harness) counts(t *testing.T) counts {
	t.Helper()
	return counts{h.count(t, bobAddr, "INBOX"), h.count(t, carolAddr, "INBOX"), h.count(t, aliceAddr, "INBOX.Sent")}
}

// smtpIDOf is the provider's smtpId of a stored message: its Message-ID
// without angle brackets (the sandbox writes its smtpId there).
func smtpIDOf(m directapi.MessageDetail) string { return strings.Trim(m.MsgID, "<> ") }

func lastRequest(t *testing.T, sb *sandbox.Server, op string, v any) {
	t.Helper()
	reqs := sb.Requests(op)
	if len(reqs) == 0 {
		t.Fatalf("no %s request recorded", op)
	}
	if err := json.Unmarshal(reqs[len(reqs)-1], v); err != nil {
		t.Fatalf("decoding %s request: %v", op, err)
	}
}

// ---- tests ----

// TestSubmitStartTLSPlainWithAttachments is the main path: STARTTLS, AUTH
// PLAIN, a message with a C-CDA document and an XDM package; the recipient
// gets the same subject, body and attachment bytes, the sender an unread
// copy in INBOX.Sent, and the state store links the client's Message-ID
// to the provider's smtpId from the reply.
func TestSubmitStartTLSPlainWithAttachments(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	ccd := readTestdata(t, "ccd.xml")
	xdm := readTestdata(t, "ccda-inpatient-xdm.zip")
	subject := h.subject("Transition of care for patient 4711")
	body := "Dear Bob,\n\nthe CCD and the XDM package of the inpatient stay are attached.\n\nAlice\n"
	msgID := fmt.Sprintf("<e2e-%d.%d@client.example>", time.Now().UnixNano(), h.seq.Add(1))
	raw := message([]string{
		"From: Alice Example <" + aliceAddr + ">",
		"To: Bob Example <" + bobAddr + ">",
		"Subject: " + subject,
		"Date: " + time.Now().Format(time.RFC1123Z),
		"Message-ID: " + msgID,
	}, body,
		attachment{"text/xml", "ccd.xml", ccd},
		attachment{"application/zip", "ccda-inpatient-xdm.zip", xdm},
	)

	c := h.dialStartTLS(t)
	if ok, mechs := c.Extension("AUTH"); !ok || !strings.Contains(mechs, "PLAIN") || !strings.Contains(mechs, "LOGIN") {
		t.Fatalf("AUTH after STARTTLS: %v %q, want PLAIN and LOGIN", ok, mechs)
	}
	if st, ok := c.TLSConnectionState(); !ok || !st.HandshakeComplete {
		t.Fatal("STARTTLS did not give a TLS connection")
	}
	if err := c.Auth(sasl.NewPlainClient("", aliceAddr, passwords[aliceAddr])); err != nil {
		t.Fatalf("AUTH PLAIN: %v", err)
	}
	since := time.Now().Add(-time.Second)
	reply := mustSubmit(t, c, aliceAddr, []string{bobAddr}, raw)

	got := h.withSubject(t, bobAddr, "INBOX", subject)
	if len(got) != 1 {
		t.Fatalf("bob's INBOX has %d messages with the subject, want 1", len(got))
	}
	m := got[0]
	id := smtpIDOf(m)
	if id == "" || !strings.Contains(reply, id) {
		t.Errorf("250 reply %q does not carry the provider's smtpId %q", reply, id)
	}
	if !strings.EqualFold(m.Sender, aliceAddr) {
		t.Errorf("sender %q, want %s", m.Sender, aliceAddr)
	}
	if m.Body != body || m.HTMLBody {
		t.Errorf("body %q (html %v), want %q as plain text", m.Body, m.HTMLBody, body)
	}
	wantAttachments(t, m.AttachmentList, []attachment{
		{"text/xml", "ccd.xml", ccd},
		{"application/zip", "ccda-inpatient-xdm.zip", xdm},
	})

	// Sent copy: unread, same message (same smtpId).
	unread, err := h.admin.GetUnreadMessages(ctxT(t), auth(aliceAddr), "INBOX.Sent")
	if err != nil {
		t.Fatal(err)
	}
	var sent []directapi.MessageDetail
	for _, s := range unread {
		if s.Subject == subject {
			sent = append(sent, s)
		}
	}
	if len(sent) != 1 || smtpIDOf(sent[0]) != id {
		t.Errorf("alice's unread INBOX.Sent copies with the subject: %d (want 1 with smtpId %s)", len(sent), id)
	}

	rec, ok, err := h.store.FindSent(ctxT(t), aliceAddr, msgID, since)
	if err != nil || !ok {
		t.Fatalf("FindSent(%s): ok %v err %v", msgID, ok, err)
	}
	if rec.SmtpID != id || !strings.Contains(reply, rec.SmtpID) {
		t.Errorf("recorded smtpId %q; reply %q, provider id %q", rec.SmtpID, reply, id)
	}
	if !strings.EqualFold(rec.Username, aliceAddr) {
		t.Errorf("recorded user %q", rec.Username)
	}
	if err := c.Quit(); err != nil {
		t.Errorf("QUIT: %v", err)
	}
}

// wantAttachments compares attachments by filename, media type and the
// decoded bytes.
func wantAttachments(t *testing.T, got []directapi.Attachment, want []attachment) {
	t.Helper()
	if len(got) != len(want) {
		names := []string{}
		for _, a := range got {
			names = append(names, a.Filename)
		}
		t.Fatalf("%d attachments %v, want %d", len(got), names, len(want))
	}
	for i, w := range want {
		g := got[i]
		if g.Filename != w.filename {
			t.Errorf("attachment %d: filename %q, want %q", i, g.Filename, w.filename)
		}
		if mt, _, _ := strings.Cut(g.ContentType, ";"); !strings.EqualFold(strings.TrimSpace(mt), w.contentType) {
			t.Errorf("attachment %d: content type %q, want %s", i, g.ContentType, w.contentType)
		}
		data, err := base64.StdEncoding.DecodeString(g.Content)
		if err != nil {
			t.Errorf("attachment %d: content is not base64: %v", i, err)
			continue
		}
		if !bytes.Equal(data, w.data) {
			t.Errorf("attachment %d (%s): %d bytes differ from the %d sent", i, w.filename, len(data), len(w.data))
		}
	}
}

// loginNoIR is the LOGIN mechanism without an initial response: the
// server must ask for the username first.
type loginNoIR struct{ user, pass string }

func (l *loginNoIR) Start() (string, []byte, error) { return sasl.Login, nil, nil }

func (l *loginNoIR) Next(challenge []byte) ([]byte, error) {
	switch string(challenge) {
	case "Username:":
		return []byte(l.user), nil
	case "Password:":
		return []byte(l.pass), nil
	}
	return nil, fmt.Errorf("unexpected LOGIN challenge %q", challenge)
}

// TestSubmitImplicitTLSLogin uses the implicit TLS listener and AUTH LOGIN,
// with and without the username as initial response.
func TestSubmitImplicitTLSLogin(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	for _, tc := range []struct {
		name string
		mech sasl.Client
	}{
		{"initial-response", sasl.NewLoginClient(aliceAddr, passwords[aliceAddr])},
		{"challenge", &loginNoIR{aliceAddr, passwords[aliceAddr]}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := h.dialTLS(t)
			if _, ok := c.TLSConnectionState(); !ok {
				t.Fatal("not TLS")
			}
			if ok, _ := c.Extension("STARTTLS"); ok {
				t.Error("STARTTLS offered on an implicit TLS connection")
			}
			if err := c.Auth(tc.mech); err != nil {
				t.Fatalf("AUTH LOGIN: %v", err)
			}
			subject := h.subject("implicit TLS " + tc.name)
			reply := mustSubmit(t, c, aliceAddr, []string{bobAddr}, simple(subject, "sent over implicit TLS\n"))
			got := h.withSubject(t, bobAddr, "INBOX", subject)
			if len(got) != 1 || !strings.Contains(reply, smtpIDOf(got[0])) {
				t.Fatalf("bob has %d copies; reply %q", len(got), reply)
			}
		})
	}
	t.Run("wrong-password", func(t *testing.T) {
		c := h.dialTLS(t)
		err := c.Auth(sasl.NewLoginClient(aliceAddr, "not-the-password"))
		wantReply(t, err, 535, 5, 7, 8)
	})
}

// TestBccHidden: an envelope recipient named in no To or Cc field is sent
// as BCC; it receives the message, and neither its copy nor the others'
// mention it.
func TestBccHidden(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	c := h.login(t, aliceAddr)
	subject := h.subject("Consult request")
	raw := message([]string{
		"From: " + aliceAddr,
		"To: Bob <" + bobAddr + ">",
		"Bcc: Carol <" + carolAddr + ">",
		"Subject: " + subject,
	}, "Please see the patient next week.\n")
	mustSubmit(t, c, aliceAddr, []string{bobAddr, carolAddr}, raw)

	var req directapi.SendRequest
	lastRequest(t, h.sb, "Send", &req)
	types := map[string]directapi.RecipientType{}
	for _, r := range req.Message.Recipients {
		types[strings.ToLower(r.Email)] = r.Type
	}
	if len(types) != 2 || types[bobAddr] != directapi.TO || types[carolAddr] != directapi.BCC {
		t.Errorf("provider request recipients %+v, want bob TO and carol BCC", req.Message.Recipients)
	}
	if n := h.sb.Calls("SendWithHeader"); n != 0 {
		t.Errorf("SendWithHeader called %d times for a message without pass-through headers", n)
	}

	for _, user := range []string{bobAddr, carolAddr} {
		got := h.withSubject(t, user, "INBOX", subject)
		if len(got) != 1 {
			t.Fatalf("%s has %d copies, want 1", user, len(got))
		}
		for _, r := range got[0].Recipients {
			if strings.EqualFold(r.Email, carolAddr) {
				t.Errorf("%s's copy lists carol as %s", user, r.Type)
			}
		}
		for _, raw := range h.raws(t, user, "INBOX") {
			if bytes.Contains(bytes.ToLower(raw), []byte("carol")) {
				t.Errorf("%s's raw message mentions carol:\n%s", user, raw)
			}
		}
	}
	for _, raw := range h.raws(t, aliceAddr, "INBOX.Sent") {
		if bytes.Contains(bytes.ToLower(raw), []byte("bcc:")) {
			t.Errorf("alice's Sent copy carries a Bcc field")
		}
	}
}

// TestSendOperationChoice: SendWithHeader only for messages with fields the
// provider's Message cannot carry.
func TestSendOperationChoice(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	c := h.login(t, aliceAddr)
	for _, tc := range []struct {
		name       string
		extra      []string
		withHeader bool
		passed     string // a field name SendWithHeader must carry
	}{
		{"plain", nil, false, ""},
		{"date-and-user-agent-only", []string{"Date: " + time.Now().Format(time.RFC1123Z), "User-Agent: e2e"}, false, ""},
		{"message-id", []string{"Message-ID: <choice-1@client.example>"}, true, "Message-ID"},
		{"in-reply-to", []string{"In-Reply-To: <earlier@client.example>"}, true, "In-Reply-To"},
		{"x-header", []string{"X-Direct-Final-Destination-Delivery: optional,true"}, true, "X-Direct-Final-Destination-Delivery"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			send, withHeader := h.sb.Calls("Send"), h.sb.Calls("SendWithHeader")
			subject := h.subject(tc.name)
			mustSubmit(t, c, aliceAddr, []string{bobAddr}, simple(subject, "operation choice\n", tc.extra...))
			dSend, dHeader := h.sb.Calls("Send")-send, h.sb.Calls("SendWithHeader")-withHeader
			if tc.withHeader && (dSend != 0 || dHeader != 1) || !tc.withHeader && (dSend != 1 || dHeader != 0) {
				t.Fatalf("Send +%d, SendWithHeader +%d; want SendWithHeader: %v", dSend, dHeader, tc.withHeader)
			}
			if tc.withHeader {
				var req directapi.SendRequestWithHeader
				lastRequest(t, h.sb, "SendWithHeader", &req)
				if !slices.ContainsFunc(req.Message.Headers, func(m directapi.MessageHeader) bool {
					return strings.EqualFold(m.Name, tc.passed)
				}) {
					t.Errorf("headers %+v do not carry %s", req.Message.Headers, tc.passed)
				}
			}
			if len(h.withSubject(t, bobAddr, "INBOX", subject)) != 1 {
				t.Errorf("bob did not receive exactly one copy")
			}
		})
	}
}

// TestTuser: a PLAIN authorization identity other than the login makes
// the T-user act for that Direct address.
func TestTuser(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	c := h.dialStartTLS(t)
	if err := c.Auth(sasl.NewPlainClient(aliceAddr, tuserName, passwords[tuserName])); err != nil {
		t.Fatalf("AUTH PLAIN as T-user for alice: %v", err)
	}

	check := func(op string, msgID bool) {
		t.Helper()
		subject := h.subject("T-user " + op)
		var extra []string
		if msgID {
			extra = append(extra, fmt.Sprintf("Message-ID: <tuser-%d@client.example>", h.seq.Add(1)))
		}
		before := h.sb.Calls(op)
		reply := mustSubmit(t, c, aliceAddr, []string{bobAddr}, simple(subject, "sent by a T-user\n", extra...))
		if h.sb.Calls(op) != before+1 {
			t.Fatalf("%s calls %d -> %d", op, before, h.sb.Calls(op))
		}
		var req struct {
			Authentication directapi.AuthenticationWithTuser `json:"authentication"`
			Message        directapi.Message                 `json:"message"`
		}
		lastRequest(t, h.sb, op, &req)
		if req.Authentication.Username != tuserName || !strings.EqualFold(req.Authentication.DirectAddr, aliceAddr) ||
			!strings.EqualFold(req.Message.Sender, aliceAddr) {
			t.Errorf("%s request: username %q directAddr %q sender %q", op, req.Authentication.Username,
				req.Authentication.DirectAddr, req.Message.Sender)
		}
		got := h.withSubject(t, bobAddr, "INBOX", subject)
		if len(got) != 1 || !strings.Contains(reply, smtpIDOf(got[0])) || !strings.EqualFold(got[0].Sender, aliceAddr) {
			t.Errorf("bob's copies %d; reply %q", len(got), reply)
		}
	}
	// A T-user's message always carries a Message-ID, the bridge's when
	// the client gave none, so that a lost answer can be looked up by its
	// status (journal.go): both go through SendWithHeaderWithTuser.
	check("SendWithHeaderWithTuser", false)
	check("SendWithHeaderWithTuser", true)
	if n := h.sb.Calls("SendWithTuser"); n != 0 {
		t.Errorf("SendWithTuser called %d times; a T-user's message carries a Message-ID", n)
	}
	if n := h.sb.Calls("Send") + h.sb.Calls("SendWithHeader"); n != 0 {
		t.Errorf("mailbox send operations called %d times for a T-user", n)
	}

	_, err := submit(c, bobAddr, []string{carolAddr}, simple(h.subject("not alice"), "x\n"))
	wantReply(t, err, 553, 5, 7, 1)
	if err := c.Reset(); err != nil {
		t.Fatal(err)
	}
	// The From field must be the directAddr too.
	raw := message([]string{"From: " + tuserName + "@direct.example", "To: " + bobAddr, "Subject: " + h.subject("wrong From")}, "x\n")
	_, err = submit(c, aliceAddr, []string{bobAddr}, raw)
	wantReply(t, err, 553, 5, 7, 1)

	t.Run("unknown-direct-address", func(t *testing.T) {
		c := h.dialStartTLS(t)
		err := c.Auth(sasl.NewPlainClient("nobody@direct.example", tuserName, passwords[tuserName]))
		wantReply(t, err, 535, 5, 7, 8)
	})
	t.Run("identity-equal-to-login", func(t *testing.T) {
		c := h.dialStartTLS(t)
		if err := c.Auth(sasl.NewPlainClient(aliceAddr, aliceAddr, passwords[aliceAddr])); err != nil {
			t.Fatal(err)
		}
		before := h.sb.Calls("Send")
		mustSubmit(t, c, aliceAddr, []string{bobAddr}, simple(h.subject("own identity"), "x\n"))
		if h.sb.Calls("Send") != before+1 {
			t.Errorf("an authorization identity equal to the login must use plain Send")
		}
	})
}

// TestAuthRequired: MAIL before AUTH is 530; a wrong password 535; both
// leave the connection usable.
func TestAuthRequired(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	c := h.dialStartTLS(t)
	err := c.Mail(aliceAddr, nil)
	wantReply(t, err, 530, 5, 7, 0)
	if err := c.Reset(); err != nil {
		t.Fatal(err)
	}
	err = c.Auth(sasl.NewPlainClient("", aliceAddr, "wrong-password"))
	wantReply(t, err, 535, 5, 7, 8)
	err = c.Auth(sasl.NewPlainClient("", "nobody@direct.example", passwords[aliceAddr]))
	wantReply(t, err, 535, 5, 7, 8)
	err = c.Mail(aliceAddr, nil)
	wantReply(t, err, 530, 5, 7, 0)
	if err := c.Reset(); err != nil {
		t.Fatal(err)
	}
	if err := c.Auth(sasl.NewPlainClient("", aliceAddr, passwords[aliceAddr])); err != nil {
		t.Fatalf("AUTH after failures: %v", err)
	}
	subject := h.subject("after auth failures")
	mustSubmit(t, c, aliceAddr, []string{bobAddr}, simple(subject, "x\n"))
	if len(h.withSubject(t, bobAddr, "INBOX", subject)) != 1 {
		t.Error("message after successful AUTH not delivered")
	}
}

// nestedMultipart is a message whose text part sits depth multipart
// levels deep.
func nestedMultipart(depth int) []byte {
	var b strings.Builder
	b.WriteString("From: " + aliceAddr + "\r\nTo: " + bobAddr + "\r\nSubject: nested\r\nMIME-Version: 1.0\r\n")
	for i := range depth {
		fmt.Fprintf(&b, "Content-Type: multipart/mixed; boundary=\"level%d\"\r\n\r\n--level%d\r\n", i, i)
	}
	b.WriteString("Content-Type: text/plain\r\n\r\ndeep inside\r\n")
	for i := depth - 1; i >= 0; i-- {
		fmt.Fprintf(&b, "--level%d--\r\n", i)
	}
	return []byte(b.String())
}

// TestSessionSurvivesErrors refuses one bad transaction after another on a
// single connection; after each, RSET and a valid transaction succeed and
// only the valid message is delivered.
func TestSessionSurvivesErrors(t *testing.T) {
	t.Parallel()
	const maxBytes, maxRcpts = 64 << 10, 5
	h := newHarness(t, func(c *smtpbackend.Config) {
		c.MaxMessageBytes = maxBytes
		c.MaxRecipients = maxRcpts
	})
	c := h.login(t, aliceAddr)
	if ok, size := c.Extension("SIZE"); !ok || size != "" {
		t.Errorf("EHLO SIZE %v %q, want SIZE without a number (size.go)", ok, size)
	}
	if ok, limits := c.Extension("LIMITS"); !ok || !strings.Contains(limits, "RCPTMAX="+strconv.Itoa(maxRcpts)) {
		t.Errorf("EHLO LIMITS %v %q, want RCPTMAX=%d", ok, limits, maxRcpts)
	}

	big := simple("too big", strings.Repeat(strings.Repeat("0123456789", 7)+"\n", maxBytes/70+100))
	many := []string{bobAddr}
	for i := range maxRcpts {
		many = append(many, fmt.Sprintf("extra%d@direct.example", i))
	}
	noFrom := message([]string{"To: " + bobAddr, "Subject: no from"}, "who sent this?\n")
	wrongFrom := message([]string{"From: " + bobAddr, "To: " + bobAddr, "Subject: forged"}, "x\n")
	twoFroms := message([]string{"From: " + aliceAddr + ", " + bobAddr, "To: " + bobAddr, "Subject: two authors"}, "x\n")
	displayTrick := message([]string{`From: "` + aliceAddr + `" <mallory@evil.example>`, "To: " + bobAddr, "Subject: display name"}, "x\n")
	noHeader := []byte("\r\njust a body, no header at all\r\n")
	ctrlInXHeader := simple("control char", "x\n", "X-Trace: a\x01b")

	for _, tc := range []struct {
		name  string
		run   func() error
		code  int
		enh   []int
		atEnd bool // refused at the end of DATA (the data must have been read)
	}{
		{"mail-from-other", func() error { return c.Mail(bobAddr, nil) }, 553, []int{5, 7, 1}, false},
		{"mail-from-null", func() error { return c.Mail("", nil) }, 553, []int{5, 7, 1}, false},
		{"from-header-other", func() error { _, err := submit(c, aliceAddr, []string{bobAddr}, wrongFrom); return err }, 553, []int{5, 7, 1}, true},
		{"from-two-addresses", func() error { _, err := submit(c, aliceAddr, []string{bobAddr}, twoFroms); return err }, 553, []int{5, 7, 1}, true},
		{"from-display-name-trick", func() error { _, err := submit(c, aliceAddr, []string{bobAddr}, displayTrick); return err }, 553, []int{5, 7, 1}, true},
		{"from-missing", func() error { _, err := submit(c, aliceAddr, []string{bobAddr}, noFrom); return err }, 554, []int{5, -1, -1}, true},
		{"no-header", func() error { _, err := submit(c, aliceAddr, []string{bobAddr}, noHeader); return err }, 554, []int{5, -1, -1}, true},
		{"control-char-in-x-header", func() error { _, err := submit(c, aliceAddr, []string{bobAddr}, ctrlInXHeader); return err }, 554, []int{5, 6, 0}, true},
		{"rcpt-no-domain", func() error { _, err := submit(c, aliceAddr, []string{"bob"}, simple("x", "x\n")); return err }, 501, []int{5, -1, -1}, false},
		{"rcpt-bad-domain", func() error {
			_, err := submit(c, aliceAddr, []string{"bob@direct(example"}, simple("x", "x\n"))
			return err
		}, 501, []int{5, 1, 3}, false},
		{"too-many-recipients", func() error { _, err := submit(c, aliceAddr, many, simple("x", "x\n")); return err }, 452, []int{4, 5, 3}, false},
		{"size-declared", func() error { return c.Mail(aliceAddr, &smtp.MailOptions{Size: 2 * maxBytes}) }, 552, []int{5, 3, 4}, false},
		{"size-actual", func() error { _, err := submit(c, aliceAddr, []string{bobAddr}, big); return err }, 552, []int{5, 3, 4}, true},
		{"nested-60", func() error { _, err := submit(c, aliceAddr, []string{bobAddr}, nestedMultipart(60)); return err }, 554, []int{5, 6, 0}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := h.counts(t)
			err := tc.run()
			wantReply(t, err, tc.code, tc.enh...)
			if tc.atEnd && !strings.Contains(err.Error(), "end of data") {
				t.Errorf("refused before the end of data: %v", err)
			}
			if got := h.counts(t); got != before {
				t.Fatalf("a refused transaction changed the mailboxes: %+v -> %+v", before, got)
			}
			if err := c.Reset(); err != nil {
				t.Fatalf("RSET after the refusal: %v", err)
			}
			subject := h.subject("valid after " + tc.name)
			reply := mustSubmit(t, c, aliceAddr, []string{bobAddr}, simple(subject, "still here\n"))
			got := h.withSubject(t, bobAddr, "INBOX", subject)
			if len(got) != 1 || !strings.Contains(reply, smtpIDOf(got[0])) {
				t.Fatalf("valid transaction after the refusal: %d copies, reply %q", len(got), reply)
			}
			if after := h.counts(t); after.bobInbox != before.bobInbox+1 || after.aliceSent != before.aliceSent+1 || after.carolInbox != before.carolInbox {
				t.Fatalf("mailboxes %+v -> %+v, want exactly the valid message", before, after)
			}
		})
	}
}

// rawConn is an SMTP connection driven byte by byte, for input a
// well-behaved client library would never produce.
type rawConn struct {
	t  *testing.T
	tc *textproto.Conn
	nc net.Conn
}

// dialRaw opens an implicit TLS connection and authenticates alice.
func (h *harness) dialRaw(t *testing.T) *rawConn {
	t.Helper()
	nc, err := tls.DialWithDialer(&net.Dialer{Timeout: clientTimeout}, "tcp", h.tlsAddr, clientTLS())
	if err != nil {
		t.Fatal(err)
	}
	return rawLogin(t, nc)
}

// dialRawPlain is dialRaw on the submission port without TLS (AUTH is
// allowed there on loopback).
func (h *harness) dialRawPlain(t *testing.T) *rawConn {
	t.Helper()
	nc, err := net.DialTimeout("tcp", h.subAddr, clientTimeout)
	if err != nil {
		t.Fatal(err)
	}
	return rawLogin(t, nc)
}

// rawLogin greets, says EHLO and authenticates alice on nc.
func rawLogin(t *testing.T, nc net.Conn) *rawConn {
	t.Helper()
	t.Cleanup(func() { nc.Close() })
	nc.SetDeadline(time.Now().Add(2 * clientTimeout))
	r := &rawConn{t: t, tc: textproto.NewConn(nc), nc: nc}
	r.expect(220)
	r.cmd(250, "EHLO raw.client.example")
	ir := base64.StdEncoding.EncodeToString([]byte("\x00" + aliceAddr + "\x00" + passwords[aliceAddr]))
	r.cmd(235, "AUTH PLAIN "+ir)
	return r
}

func (r *rawConn) expect(code int) string {
	r.t.Helper()
	_, msg, err := r.tc.ReadResponse(code)
	if err != nil {
		r.t.Fatalf("want %d: %v", code, err)
	}
	return msg
}

func (r *rawConn) cmd(code int, line string) string {
	r.t.Helper()
	if err := r.tc.PrintfLine("%s", line); err != nil {
		r.t.Fatal(err)
	}
	return r.expect(code)
}

// data runs MAIL, RCPT and DATA and writes payload as is (it must end the
// data itself); it returns the final reply's code and text.
func (r *rawConn) data(from string, rcpts []string, payload string) (int, string) {
	r.t.Helper()
	r.cmd(250, "MAIL FROM:<"+from+">")
	for _, rc := range rcpts {
		r.cmd(250, "RCPT TO:<"+rc+">")
	}
	r.cmd(354, "DATA")
	if _, err := r.tc.W.WriteString(payload); err != nil {
		r.t.Fatal(err)
	}
	if err := r.tc.W.Flush(); err != nil {
		r.t.Fatal(err)
	}
	code, msg, err := r.tc.ReadResponse(0)
	var te *textproto.Error
	if err != nil && !errors.As(err, &te) {
		r.t.Fatalf("reading the reply to the data: %v", err)
	}
	return code, msg
}

// TestBareLineEndingsRefused: data with the SMTP smuggling pattern (a
// lone dot between bare LFs, followed by a second transaction) or a bare
// CR is refused whole with 550 5.6.0, nothing of it is delivered, and the
// connection goes on. (Other bare LFs are made CRLF: TestBareLFAccepted.)
func TestBareLineEndingsRefused(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	r := h.dialRaw(t)
	for _, tc := range []struct{ name, payload string }{
		{"brief-example", "From: " + aliceAddr + "\r\nTo: " + bobAddr + "\r\nSubject: x\r\n\r\nhello\n.\nRSET\r\n.\r\n"},
		{"smuggled-transaction", "From: " + aliceAddr + "\r\nTo: " + bobAddr + "\r\nSubject: cover\r\n\r\nhello\n.\n" +
			"MAIL FROM:<" + aliceAddr + ">\nRCPT TO:<" + carolAddr + ">\nDATA\nFrom: " + aliceAddr + "\nTo: " + carolAddr +
			"\nSubject: smuggled\n\nsmuggled body\n.\n\r\n.\r\n"},
		{"bare-cr", "From: " + aliceAddr + "\r\nTo: " + bobAddr + "\r\nSubject: cr\r\n\r\nhello\r.\rworld\r\n.\r\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := h.counts(t)
			code, msg := r.data(aliceAddr, []string{bobAddr}, tc.payload)
			if code != 550 || !strings.HasPrefix(msg, "5.6.0") {
				t.Fatalf("reply %d %q, want 550 5.6.0", code, msg)
			}
			if got := h.counts(t); got != before {
				t.Fatalf("mailboxes changed: %+v -> %+v", before, got)
			}
			subject := h.subject("valid after " + tc.name)
			code, msg = r.data(aliceAddr, []string{bobAddr}, string(simple(subject, "a proper message\n"))+".\r\n")
			if code != 250 {
				t.Fatalf("valid transaction on the same connection: %d %q", code, msg)
			}
			got := h.withSubject(t, bobAddr, "INBOX", subject)
			if len(got) != 1 || !strings.Contains(msg, smtpIDOf(got[0])) {
				t.Fatalf("valid message: %d copies, reply %q", len(got), msg)
			}
			if after := h.counts(t); after.carolInbox != before.carolInbox || after.bobInbox != before.bobInbox+1 {
				t.Fatalf("mailboxes %+v -> %+v", before, after)
			}
		})
	}
	r.cmd(221, "QUIT")
}

// TestAuthOfferedBeforeSTARTTLSOnLoopbackOnly: the loopback listener offers
// AUTH in clear text; a listener on another address offers it only after
// STARTTLS, and refuses AUTH before.
func TestAuthOfferedBeforeSTARTTLSOnLoopbackOnly(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	c, err := smtp.Dial(h.subAddr)
	if err != nil {
		t.Fatal(err)
	}
	withTimeouts(t, c)
	if err := c.Hello("client.example"); err != nil {
		t.Fatal(err)
	}
	if ok, _ := c.Extension("STARTTLS"); !ok {
		t.Error("STARTTLS not offered on the submission listener")
	}
	ok, mechs := c.Extension("AUTH")
	if !ok || !strings.Contains(mechs, "PLAIN") || !strings.Contains(mechs, "LOGIN") {
		t.Fatalf("AUTH in clear text on loopback: %v %q, want PLAIN LOGIN", ok, mechs)
	}
	if err := c.Auth(sasl.NewPlainClient("", aliceAddr, passwords[aliceAddr])); err != nil {
		t.Fatalf("AUTH in clear text on loopback: %v", err)
	}
	subject := h.subject("clear text loopback")
	mustSubmit(t, c, aliceAddr, []string{bobAddr}, simple(subject, "x\n"))

	t.Run("non-loopback", func(t *testing.T) {
		ip := nonLoopbackIPv4(t)
		addr := h.serve(t, h.srv.ServeSubmission, net.JoinHostPort(ip.String(), "0"))
		c, err := smtp.Dial(addr)
		if err != nil {
			t.Fatal(err)
		}
		withTimeouts(t, c)
		if err := c.Hello("client.example"); err != nil {
			t.Fatal(err)
		}
		if ok, _ := c.Extension("AUTH"); ok {
			t.Error("AUTH offered in clear text on a non-loopback listener")
		}
		err = c.Auth(sasl.NewPlainClient("", aliceAddr, passwords[aliceAddr]))
		if se := new(smtp.SMTPError); !errors.As(err, &se) || se.Code/100 != 5 {
			t.Errorf("AUTH in clear text on a non-loopback listener: %v, want a 5xx refusal", err)
		}
		c2, err := smtp.DialStartTLS(addr, clientTLS())
		if err != nil {
			t.Fatal(err)
		}
		withTimeouts(t, c2)
		if err := c2.Hello("client.example"); err != nil {
			t.Fatal(err)
		}
		if ok, _ := c2.Extension("AUTH"); !ok {
			t.Error("AUTH not offered after STARTTLS")
		}
		if err := c2.Auth(sasl.NewPlainClient("", aliceAddr, passwords[aliceAddr])); err != nil {
			t.Errorf("AUTH after STARTTLS: %v", err)
		}
	})
}

// nonLoopbackIPv4 returns an address of this host that is not loopback,
// or skips.
func nonLoopbackIPv4(t *testing.T) net.IP {
	t.Helper()
	ifs, err := net.Interfaces()
	if err != nil {
		t.Skip(err)
	}
	for _, ifc := range ifs {
		if ifc.Flags&net.FlagUp == 0 || ifc.Flags&net.FlagLoopback != 0 {
			continue
		}
		addrs, _ := ifc.Addrs()
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() && !n.IP.IsLinkLocalUnicast() {
				return n.IP
			}
		}
	}
	t.Skip("no non-loopback IPv4 address")
	return nil
}

// lineSource produces n bytes of 76-character CRLF lines without holding
// them in memory.
type lineSource struct{ left int64 }

var sourceLine = []byte(strings.Repeat("ABCDEFGHIJKLMNOPQRSTUVWXYZ", 3)[:76] + "\r\n")

func (s *lineSource) Read(p []byte) (int, error) {
	if s.left <= 0 {
		return 0, io.EOF
	}
	n := 0
	for n+len(sourceLine) <= len(p) && s.left > 0 {
		n += copy(p[n:], sourceLine)
		s.left -= int64(len(sourceLine))
	}
	if n == 0 {
		n = copy(p, sourceLine[:min(len(p), len(sourceLine))])
		s.left -= int64(n)
	}
	return n, nil
}

// heapPeak samples the heap in use until stop is called and returns the
// largest value seen.
func heapPeak() (stop func() uint64) {
	var peak atomic.Uint64
	sample := func() {
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		if ms.HeapInuse > peak.Load() {
			peak.Store(ms.HeapInuse)
		}
	}
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			sample()
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	}()
	return func() uint64 {
		close(done)
		<-finished
		sample()
		return peak.Load()
	}
}

// TestOversizeMessageBounded: 40 MB against a 1 MB limit is refused with
// 552 quickly and without the server holding the message in memory; the
// connection is still usable. Not parallel, so that the heap measured is
// this test's.
func TestOversizeMessageBounded(t *testing.T) {
	const limit = 1 << 20
	const size = 40 << 20
	h := newHarness(t, func(c *smtpbackend.Config) { c.MaxMessageBytes = limit })
	c := h.login(t, aliceAddr)

	// Declared with SIZE: refused at MAIL.
	err := c.Mail(aliceAddr, &smtp.MailOptions{Size: size})
	wantReply(t, err, 552, 5, 3, 4)
	if err := c.Reset(); err != nil {
		t.Fatal(err)
	}

	before := h.counts(t)
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base := ms.HeapInuse
	stop := heapPeak()
	start := time.Now()
	if err := c.Mail(aliceAddr, nil); err != nil {
		t.Fatal(err)
	}
	if err := c.Rcpt(bobAddr, nil); err != nil {
		t.Fatal(err)
	}
	w, err := c.Data()
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(w, "From: "+aliceAddr+"\r\nTo: "+bobAddr+"\r\nSubject: huge\r\n\r\n")
	if _, err := io.Copy(w, &lineSource{left: size}); err != nil {
		t.Fatalf("writing 40 MB: %v", err)
	}
	_, err = w.CloseWithResponse()
	elapsed := time.Since(start)
	peak := stop()
	wantReply(t, err, 552, 5, 3, 4)
	if elapsed > 15*time.Second {
		t.Errorf("refusing 40 MB took %v", elapsed)
	}
	// Client and server share this heap; holding the message would add
	// at least its 40 MB.
	growth := int64(peak) - int64(base)
	if growth > size/4 {
		t.Errorf("heap grew by %d MB while a 40 MB message was refused against a 1 MB limit", growth>>20)
	}
	t.Logf("40 MB refused in %v; heap peak %d KB above the %d KB before", elapsed, growth>>10, base>>10)
	if got := h.counts(t); got != before {
		t.Errorf("mailboxes changed: %+v -> %+v", before, got)
	}
	subject := h.subject("after the oversize message")
	mustSubmit(t, c, aliceAddr, []string{bobAddr}, simple(subject, "small\n"))
	if len(h.withSubject(t, bobAddr, "INBOX", subject)) != 1 {
		t.Error("message after the oversize one not delivered")
	}
}

// TestEightBitGarbageInHeaders: raw 8-bit bytes in header fields either go
// through (the recipient gets exactly one message) or are refused with a
// permanent 5xx that leaves nothing delivered; never 4xx (the client would
// retry forever), never 250 without delivery, never a hang.
func TestEightBitGarbageInHeaders(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	c := h.login(t, aliceAddr)
	garbage := "\xff\xfe\x80\x81\xc3\x28\xa0\xa1\xe2\x28\xa1\xf0\x90\x28\xbc"
	for _, tc := range []struct {
		name   string
		header []string
	}{
		{"subject", []string{"From: " + aliceAddr, "To: " + bobAddr, "Subject: %s " + garbage}},
		{"x-header", []string{"From: " + aliceAddr, "To: " + bobAddr, "Subject: %s", "X-Garbage: " + garbage}},
		{"from-display-name", []string{"From: \xc9ric " + garbage + " <" + aliceAddr + ">", "To: " + bobAddr, "Subject: %s"}},
		{"to-display-name", []string{"From: " + aliceAddr, "To: " + garbage + " <" + bobAddr + ">", "Subject: %s"}},
		{"reply-to", []string{"From: " + aliceAddr, "To: " + bobAddr, "Subject: %s", "Reply-To: " + garbage}},
		{"message-id", []string{"From: " + aliceAddr, "To: " + bobAddr, "Subject: %s", "Message-ID: <" + garbage + "@x>"}},
		{"latin1-subject", []string{"From: " + aliceAddr, "To: " + bobAddr, "Subject: %s Befund f\xfcr Zo\xeb"}},
		{"content-type", []string{"From: " + aliceAddr, "To: " + bobAddr, "Subject: %s", "Content-Type: text/plain; charset=\"" + garbage + "\""}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			subject := h.subject("garbage " + tc.name)
			hdr := slices.Clone(tc.header)
			for i, l := range hdr {
				if strings.Contains(l, "%s") {
					hdr[i] = strings.Replace(l, "%s", subject, 1)
				}
			}
			var b strings.Builder
			for _, l := range hdr {
				b.WriteString(l + "\r\n")
			}
			b.WriteString("\r\nbody " + garbage + "\r\n")
			before := h.counts(t)
			reply, err := submit(c, aliceAddr, []string{bobAddr}, []byte(b.String()))
			after := h.counts(t)
			if err == nil {
				if after.bobInbox != before.bobInbox+1 || after.aliceSent != before.aliceSent+1 {
					t.Fatalf("250 %q but mailboxes %+v -> %+v", reply, before, after)
				}
				var found bool
				for _, m := range h.messages(t, bobAddr, "INBOX") {
					if id := smtpIDOf(m); id != "" && strings.Contains(reply, id) {
						found = true
					}
				}
				if !found {
					t.Errorf("250 %q names no message in bob's INBOX", reply)
				}
			} else {
				var se *smtp.SMTPError
				if !errors.As(err, &se) || se.Code/100 != 5 {
					t.Fatalf("got %v, want 250 or a permanent 5xx", err)
				}
				if after != before {
					t.Fatalf("refused with %d but mailboxes %+v -> %+v", se.Code, before, after)
				}
				t.Logf("refused: %d %v %s", se.Code, se.EnhancedCode, se.Message)
				if err := c.Reset(); err != nil {
					t.Fatal(err)
				}
			}
			if err := c.Noop(); err != nil {
				t.Fatalf("connection lost after the garbage: %v", err)
			}
		})
	}
}

// TestLongLines: lines past RFC 5322's 998 characters occur in real mail
// (HTML without line breaks, unwrapped base64) and a long body line is
// delivered intact; a header field the provider could not write back is a
// precise 554; a line beyond any sane limit is a permanent 5xx, never a
// 4xx that makes the client retry the same bytes for days.
func TestLongLines(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	longLine := strings.Repeat("0123456789", 500) // 5000 characters

	t.Run("body-line-delivered", func(t *testing.T) {
		c := h.login(t, aliceAddr)
		subject := h.subject("long body line")
		reply := mustSubmit(t, c, aliceAddr, []string{bobAddr}, simple(subject, longLine+"\n"))
		got := h.withSubject(t, bobAddr, "INBOX", subject)
		if len(got) != 1 || !strings.Contains(reply, smtpIDOf(got[0])) {
			t.Fatalf("%d copies, reply %q", len(got), reply)
		}
		if !strings.Contains(strings.ReplaceAll(got[0].Body, "\r\n", ""), longLine) {
			t.Errorf("the long line did not arrive intact")
		}
	})
	t.Run("header-word-refused", func(t *testing.T) {
		c := h.login(t, aliceAddr)
		before := h.counts(t)
		_, err := submit(c, aliceAddr, []string{bobAddr}, simple(h.subject("long header"), "x\n", "X-Long: "+longLine))
		wantReply(t, err, 554, 5, 6, 0)
		if got := h.counts(t); got != before {
			t.Fatalf("mailboxes changed: %+v -> %+v", before, got)
		}
		if err := c.Reset(); err != nil {
			t.Fatal(err)
		}
		mustSubmit(t, c, aliceAddr, []string{bobAddr}, simple(h.subject("after long header"), "x\n"))
	})
	t.Run("huge-line-delivered", func(t *testing.T) {
		// A base64 attachment without line breaks, as some exporters
		// write: within the size limit, it is delivered intact rather
		// than refused (or worse, cut off mid-write, which a client reads
		// as a temporary failure and retries for days).
		c := h.login(t, aliceAddr)
		subject := h.subject("huge line")
		huge := strings.Repeat("A", 8<<20)
		mustSubmit(t, c, aliceAddr, []string{bobAddr}, simple(subject, huge+"\n"))
		got := h.withSubject(t, bobAddr, "INBOX", subject)
		if len(got) != 1 || !strings.Contains(got[0].Body, huge) {
			t.Fatalf("%d copies; the 8 MiB line must arrive intact", len(got))
		}
		mustSubmit(t, c, aliceAddr, []string{bobAddr}, simple(h.subject("after huge line"), "x\n"))
	})
}

// TestConcurrentSubmissions: several clients at once (Thunderbird and
// EHR integrations open parallel connections) each get their own 250 with
// their own smtpId, and every message arrives exactly once.
func TestConcurrentSubmissions(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	const clients, perClient = 6, 3
	type sent struct{ subject, reply string }
	results := make(chan sent, clients*perClient)
	var wg sync.WaitGroup
	for i := range clients {
		c := h.login(t, []string{aliceAddr, bobAddr, carolAddr}[i%3])
		wg.Add(1)
		go func(from string) {
			defer wg.Done()
			to := bobAddr
			if from == bobAddr {
				to = aliceAddr
			}
			for range perClient {
				subject := h.subject("concurrent from " + from)
				raw := message([]string{"From: " + from, "To: " + to, "Subject: " + subject}, "x\n")
				reply, err := submit(c, from, []string{to}, raw)
				if err != nil {
					t.Errorf("%s: %v", subject, err)
					return
				}
				results <- sent{subject, reply}
			}
		}([]string{aliceAddr, bobAddr, carolAddr}[i%3])
	}
	wg.Wait()
	close(results)
	ids := map[string]bool{}
	n := 0
	for r := range results {
		n++
		var found []directapi.MessageDetail
		for _, user := range []string{aliceAddr, bobAddr} {
			found = append(found, h.withSubject(t, user, "INBOX", r.subject)...)
		}
		if len(found) != 1 {
			t.Errorf("%s: %d copies", r.subject, len(found))
			continue
		}
		id := smtpIDOf(found[0])
		if !strings.Contains(r.reply, id) || ids[id] {
			t.Errorf("%s: reply %q, smtpId %s (seen before: %v)", r.subject, r.reply, id, ids[id])
		}
		ids[id] = true
	}
	if n != clients*perClient {
		t.Errorf("%d messages sent, want %d", n, clients*perClient)
	}
}

// TestClientMessageIDReachesRecipient: the Message-ID a client writes is
// the one the recipient sees (Direct matches receipts to the original by
// it), and the 250 reply names it as the smtpId.
func TestClientMessageIDReachesRecipient(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	c := h.login(t, aliceAddr)
	subject := h.subject("own message id")
	msgID := fmt.Sprintf("<own-%d@ehr.client.example>", h.seq.Add(1))
	reply := mustSubmit(t, c, aliceAddr, []string{bobAddr}, simple(subject, "body\n", "Message-ID: "+msgID))
	got := h.withSubject(t, bobAddr, "INBOX", subject)
	if len(got) != 1 || got[0].MsgID != msgID {
		t.Fatalf("bob's copy: %d messages, Message-ID %q; want %s", len(got), func() string {
			if len(got) > 0 {
				return got[0].MsgID
			}
			return ""
		}(), msgID)
	}
	if !strings.Contains(reply, strings.Trim(msgID, "<>")) {
		t.Errorf("reply %q does not name %s", reply, msgID)
	}
}
