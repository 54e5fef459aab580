package imapbackend_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2/imapclient"

	"github.com/directbridge/directbridge/imapbackend"
	"github.com/directbridge/directbridge/internal/login"
	"github.com/directbridge/directbridge/internal/mailstore"
	"github.com/directbridge/directbridge/internal/state"
	"github.com/directbridge/directbridge/restclient"
	"github.com/directbridge/directbridge/sandbox"
	"github.com/directbridge/directbridge/upstream/directapi"
)

// Test accounts of every harness.
const (
	alice, alicePW = "alice@direct.example", "alice-password"
	bob, bobPW     = "bob@direct.example", "bob-password"
)

// env is one bridge IMAP front on a sandbox provider, over real TCP.
type env struct {
	t        testing.TB
	sandbox  *sandbox.Server
	client   *restclient.Client // for arranging and checking provider state
	server   *imapbackend.Server
	engine   *mailstore.Store
	store    state.StateStore // the state store under the engine
	addr     string           // STARTTLS listener (loopback: LOGIN allowed in clear)
	tlsAddr  string           // implicit TLS listener
	tlsConf  *tls.Config
	stateDir string
}

// options tweak the harness.
type options struct {
	pollInterval time.Duration
	cfg          func(*imapbackend.Config)
	engine       func(*mailstore.Config)
	stateDir     string
	sandboxDir   string
	sandbox      func(*sandbox.Options)
	// requestTimeout bounds each provider request (restclient's default
	// when 0).
	requestTimeout time.Duration
	// wrap, when set, stands between the bridge and the sandbox (to see
	// the requests as sent).
	wrap func(http.Handler) http.Handler
}

func newEnv(t testing.TB, o options) *env {
	t.Helper()
	if o.stateDir == "" {
		o.stateDir = t.TempDir()
	}
	sbOpts := sandbox.Options{
		Dir:          o.sandboxDir,
		Users:        []sandbox.Account{{Name: alice, Password: alicePW}, {Name: bob, Password: bobPW}},
		KeepRequests: 50,
	}
	if o.sandbox != nil {
		o.sandbox(&sbOpts)
	}
	srv, err := sandbox.Open(sbOpts)
	if err != nil {
		t.Fatal(err)
	}
	var h http.Handler = srv
	if o.wrap != nil {
		h = o.wrap(srv)
	}
	hs := httptest.NewServer(h)
	c, err := restclient.New(restclient.Options{BaseURL: hs.URL, MaxRetries: -1, RequestTimeout: o.requestTimeout})
	if err != nil {
		t.Fatal(err)
	}
	store, err := state.OpenStore(o.stateDir)
	if err != nil {
		t.Fatal(err)
	}
	tlsConf := selfSignedTLS(t)
	ecfg := mailstore.Config{Provider: restclient.Upstream(c), State: store, PollInterval: o.pollInterval}
	if ecfg.PollInterval == 0 {
		ecfg.PollInterval = time.Hour // tests that want polling say so
	}
	if o.engine != nil {
		o.engine(&ecfg)
	}
	engine := mailstore.New(ecfg)
	cfg := imapbackend.Config{
		Engine:    engine,
		Verifier:  login.NewVerifier(restclient.Upstream(c), time.Minute),
		TLSConfig: tlsConf,
	}
	if o.cfg != nil {
		o.cfg(&cfg)
	}
	is, err := imapbackend.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	l1, _ := net.Listen("tcp", "127.0.0.1:0")
	l2, _ := net.Listen("tcp", "127.0.0.1:0")
	go is.ServePlain(l1)
	go is.ServeTLS(l2)
	e := &env{t: t, sandbox: srv, client: c, server: is, engine: engine, store: store, addr: l1.Addr().String(), tlsAddr: l2.Addr().String(),
		tlsConf: &tls.Config{InsecureSkipVerify: true}, stateDir: o.stateDir}
	t.Cleanup(func() {
		is.Shutdown(context.Background())
		if err := engine.Close(context.Background()); err != nil {
			t.Errorf("engine close: %v", err)
		}
		hs.Close()
		store.Close()
		srv.Close()
	})
	return e
}

// dial connects with go-imap's client without logging in.
func (e *env) dial() *imapclient.Client {
	e.t.Helper()
	c, err := imapclient.DialInsecure(e.addr, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { c.Close() })
	return c
}

// login connects and logs in as user.
func (e *env) login(user, pw string) *imapclient.Client {
	e.t.Helper()
	c := e.dial()
	if err := c.Login(user, pw).Wait(); err != nil {
		e.t.Fatalf("login %s: %v", user, err)
	}
	return c
}

// auth is the provider credentials of a test account.
func auth(user string) directapi.Authentication {
	pw := alicePW
	if user == bob {
		pw = bobPW
	}
	return directapi.Authentication{Username: user, Password: directapi.Secret(pw)}
}

// deliver puts a message into a folder at the provider, as mail arriving
// from elsewhere would, and returns its UID.
func (e *env) deliver(user, folder, raw string) int64 {
	e.t.Helper()
	uid, err := e.sandbox.Deliver(context.Background(), user, folder, []byte(raw))
	if err != nil {
		e.t.Fatal(err)
	}
	return uid
}

// testMessage is a small valid message.
func testMessage(subject string) string {
	return "From: bob@direct.example\r\nTo: alice@direct.example\r\nSubject: " + subject +
		"\r\nDate: Mon, 02 Jan 2026 15:04:05 +0000\r\nMessage-ID: <" + subject + "@direct.example>\r\n" +
		"Content-Type: text/plain; charset=utf-8\r\n\r\nHello " + subject + "\r\n"
}

func selfSignedTLS(t testing.TB) *tls.Config {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, DNSNames: []string{"localhost"}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}, MinVersion: tls.VersionTLS12}
}
