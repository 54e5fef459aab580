package login_test

import (
	"context"
	"errors"
	"net"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"
	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"

	"github.com/directbridge/directbridge/imapbackend"
	"github.com/directbridge/directbridge/internal/login"
	"github.com/directbridge/directbridge/internal/mailstore"
	"github.com/directbridge/directbridge/internal/state"
	"github.com/directbridge/directbridge/restclient"
	"github.com/directbridge/directbridge/sandbox"
	"github.com/directbridge/directbridge/smtpbackend"
)

// TestSpreadAttackOverFronts: the IMAP and SMTP fronts, sharing a guard
// and a verifier as in the bridge, over real sockets from loopback
// addresses 127.0.0.x, pass the verifier the context they gave the
// guard, so the gate knows each attempt's address. Guesses from eight
// addresses reach the provider SpreadAddresses+1 times, the others are
// answered as a wrong password (NO [AUTHENTICATIONFAILED], 535 5.7.8);
// alice's new password then gets in at once from the address where she
// logged in before, over either protocol, and is held back from a new
// one (were the context not linked, both would be held back).
func TestSpreadAttackOverFronts(t *testing.T) {
	srv, err := sandbox.Open(sandbox.Options{Users: []sandbox.Account{{Name: alice, Password: string(alicePW)}}})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	c, err := restclient.New(restclient.Options{BaseURL: hs.URL, MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	store, err := state.OpenStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	engine := mailstore.New(mailstore.Config{Provider: restclient.Upstream(c), State: store, PollInterval: time.Hour})
	guard := login.NewGuard(login.GuardConfig{UserCheckInterval: time.Hour, MaxDelay: 20 * time.Millisecond})
	verifier := login.NewVerifier(restclient.Upstream(c), time.Minute)
	verifier.SetGate(guard)
	is, err := imapbackend.New(imapbackend.Config{Engine: engine, Verifier: verifier, Guard: guard})
	if err != nil {
		t.Fatal(err)
	}
	ss, err := smtpbackend.New(smtpbackend.Config{Provider: restclient.Upstream(c), Verifier: verifier, Guard: guard})
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go is.ServePlain(l)
	go ss.ServeSubmission(sl)
	t.Cleanup(func() {
		ss.Shutdown(context.Background())
		is.Shutdown(context.Background())
		engine.Close(context.Background())
		hs.Close()
		store.Close()
		srv.Close()
	})
	imapLogin := func(src string, pw string) error {
		t.Helper()
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 5 * time.Second}
		conn, err := d.Dial("tcp", l.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		ic := imapclient.New(conn, nil)
		defer ic.Close()
		return ic.Login(alice, pw).Wait()
	}
	auth := func(src string, pw string) error {
		t.Helper()
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 5 * time.Second}
		conn, err := d.Dial("tcp", sl.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		sc := smtp.NewClient(conn)
		defer sc.Close()
		return sc.Auth(sasl.NewPlainClient("", alice, pw))
	}
	wrongPassword := func(err error) bool {
		var ie *imap.Error
		var se *smtp.SMTPError
		return errors.As(err, &ie) && ie.Code == imap.ResponseCodeAuthenticationFailed ||
			errors.As(err, &se) && se.Code == 535 && se.EnhancedCode == smtp.EnhancedCode{5, 7, 8}
	}

	if err := imapLogin("127.0.0.2", string(alicePW)); err != nil {
		t.Fatalf("alice from 127.0.0.2: %v", err)
	}
	const newPW = "alice-new-password"
	if err := srv.AddUser(context.Background(), alice, newPW); err != nil {
		t.Fatal(err)
	}
	before := srv.Calls(checkOp)
	for i := 10; i < 18; i++ {
		try := imapLogin
		if i%2 == 1 {
			try = auth
		}
		if err := try(net.IPv4(127, 0, 0, byte(i)).String(), "guess"); !wrongPassword(err) {
			t.Fatalf("guess from 127.0.0.%d: %v; want a wrong password", i, err)
		}
	}
	if n := srv.Calls(checkOp) - before; n != login.DefaultSpreadAddresses+1 {
		t.Fatalf("8 guesses from 8 addresses made %d provider checks; want %d", n, login.DefaultSpreadAddresses+1)
	}
	before = srv.Calls(checkOp)
	if err := imapLogin("127.0.0.3", newPW); !wrongPassword(err) {
		t.Fatalf("IMAP: alice's new password from a new address: %v; want held back as a wrong password", err)
	}
	if err := auth("127.0.0.4", newPW); !wrongPassword(err) {
		t.Fatalf("SMTP: alice's new password from a new address: %v; want held back as a wrong password", err)
	}
	if n := srv.Calls(checkOp) - before; n != 0 {
		t.Fatalf("held-back logins made %d provider checks", n)
	}
	if err := auth("127.0.0.2", newPW); err != nil {
		t.Fatalf("SMTP: alice's new password from her address: %v; want in", err)
	}
	if err := srv.AddUser(context.Background(), alice, newPW+"2"); err != nil {
		t.Fatal(err)
	}
	if err := imapLogin("127.0.0.2", newPW+"2"); err != nil {
		t.Fatalf("IMAP: alice's next new password from her address: %v; want in", err)
	}
}
