package login_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/directbridge/directbridge/internal/login"
	"github.com/directbridge/directbridge/restclient"
	"github.com/directbridge/directbridge/sandbox"
	"github.com/directbridge/directbridge/upstream/directapi"
)

// pw is alice's password (alice: spread_test.go).
const pw = alicePW

// newProvider starts a sandbox over real HTTP and a client for it.
func newProvider(t *testing.T) (*sandbox.Server, *restclient.Client) {
	t.Helper()
	srv, err := sandbox.Open(sandbox.Options{
		Users:     []sandbox.Account{{Name: alice, Password: string(pw)}, {Name: "bob@direct.example", Password: "bob-password"}},
		Resellers: []sandbox.Account{{Name: "tuser", Password: "tuser-password"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(func() { hs.Close(); srv.Close() })
	c, err := restclient.New(restclient.Options{BaseURL: hs.URL, MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	return srv, c
}

func TestVerifierSharesOneCheck(t *testing.T) {
	srv, c := newProvider(t)
	v := login.NewVerifier(restclient.Upstream(c), time.Minute)
	var wg sync.WaitGroup
	errs := make(chan error, 5)
	for range 5 { // Thunderbird's five connections
		wg.Add(1)
		go func() { defer wg.Done(); errs <- v.Verify(context.Background(), alice, pw) }()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := v.Verify(context.Background(), alice, pw); err != nil {
		t.Fatal(err)
	}
	if n := srv.Calls("GetMessageCount"); n != 1 {
		t.Fatalf("%d REST calls for six logins; want 1", n)
	}
}

func TestVerifierRefusesAndDoesNotRemember(t *testing.T) {
	srv, c := newProvider(t)
	v := login.NewVerifier(restclient.Upstream(c), time.Minute)
	for range 2 {
		if err := v.Verify(context.Background(), alice, "wrong"); !errors.Is(err, login.ErrAuthFailed) {
			t.Fatalf("wrong password: %v; want ErrAuthFailed", err)
		}
	}
	if n := srv.Calls("GetMessageCount"); n != 2 {
		t.Fatalf("%d calls; failures must not be cached", n)
	}
	// A success for alice does not let another password in.
	if err := v.Verify(context.Background(), alice, pw); err != nil {
		t.Fatal(err)
	}
	if err := v.Verify(context.Background(), alice, pw+"x"); !errors.Is(err, login.ErrAuthFailed) {
		t.Fatalf("other password after success: %v", err)
	}
	if err := v.Verify(context.Background(), "", ""); !errors.Is(err, login.ErrAuthFailed) {
		t.Fatalf("empty credentials: %v", err)
	}
}

func TestVerifierProviderDownIsUnavailable(t *testing.T) {
	srv, c := newProvider(t)
	v := login.NewVerifier(restclient.Upstream(c), time.Minute)
	for _, f := range []sandbox.Fault{{Status: 503}, {Malformed: true}, {Reset: true}, {Code: 4}} {
		srv.InjectFault("GetMessageCount", f)
		err := v.Verify(context.Background(), alice, pw)
		if !errors.Is(err, login.ErrUnavailable) || errors.Is(err, login.ErrAuthFailed) {
			t.Errorf("fault %+v: %v; want ErrUnavailable", f, err)
		}
	}
	srv.ClearFaults()
	if err := v.Verify(context.Background(), alice, pw); err != nil {
		t.Fatalf("provider back: %v", err)
	}
}

func TestVerifierExpires(t *testing.T) {
	srv, c := newProvider(t)
	v := login.NewVerifier(restclient.Upstream(c), 20*time.Millisecond)
	if err := v.Verify(context.Background(), alice, pw); err != nil {
		t.Fatal(err)
	}
	time.Sleep(30 * time.Millisecond)
	if err := v.Verify(context.Background(), alice, pw); err != nil {
		t.Fatal(err)
	}
	if n := srv.Calls("GetMessageCount"); n != 2 {
		t.Fatalf("%d calls; an expired success must be checked again", n)
	}
}

func TestVerifierTuser(t *testing.T) {
	_, c := newProvider(t)
	v := login.NewVerifier(restclient.Upstream(c), time.Minute)
	ctx := context.Background()
	if err := v.VerifyTuser(ctx, "tuser", "tuser-password", alice); err != nil {
		t.Fatalf("T-user: %v", err)
	}
	if err := v.VerifyTuser(ctx, "tuser", "wrong", alice); !errors.Is(err, login.ErrAuthFailed) {
		t.Fatalf("T-user wrong password: %v", err)
	}
	if err := v.VerifyTuser(ctx, "tuser", "tuser-password", "nobody@elsewhere.example"); !errors.Is(err, login.ErrAddress) {
		t.Fatalf("T-user unknown directAddr: %v", err)
	}
}

// gate is a login.CheckGate that lets checks through or not, and
// counts what it is asked and told.
type gate struct {
	mu               sync.Mutex
	allow            bool
	asked, succeeded int
}

func (g *gate) AllowCheck(context.Context, string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.asked++
	return g.allow
}

func (g *gate) CheckSucceeded(context.Context, string) {
	g.mu.Lock()
	g.succeeded++
	g.mu.Unlock()
}

func (g *gate) set(allow bool) { g.mu.Lock(); g.allow = allow; g.mu.Unlock() }

func (g *gate) counts() (asked, succeeded int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.asked, g.succeeded
}

// TestVerifierGateHoldsBackUnknown: credentials the verifier does not
// know reach the provider only if the gate lets them; held back, they
// are answered as a wrong password (ErrAuthFailed, with ErrWithheld
// beside it) without a call, right or wrong.
func TestVerifierGateHoldsBackUnknown(t *testing.T) {
	srv, c := newProvider(t)
	v := login.NewVerifier(restclient.Upstream(c), time.Minute)
	g := &gate{}
	v.SetGate(g)
	ctx := context.Background()
	for _, p := range []directapi.Secret{"guess", pw} {
		if err := v.Verify(ctx, alice, p); !errors.Is(err, login.ErrAuthFailed) || !errors.Is(err, login.ErrWithheld) {
			t.Fatalf("held back: %v; want ErrAuthFailed and ErrWithheld", err)
		}
	}
	if n := srv.Calls("GetMessageCount"); n != 0 {
		t.Fatalf("%d provider calls for held-back checks", n)
	}
	g.set(true)
	if err := v.Verify(ctx, alice, "guess"); !errors.Is(err, login.ErrAuthFailed) || errors.Is(err, login.ErrWithheld) {
		t.Fatalf("a wrong password let through: %v; want ErrAuthFailed only", err)
	}
	if err := v.Verify(ctx, alice, pw); err != nil {
		t.Fatal(err)
	}
	if asked, succeeded := g.counts(); asked != 4 || succeeded != 1 {
		t.Fatalf("gate asked %d times, told of %d successes; want 4 and 1", asked, succeeded)
	}
	if n := srv.Calls("GetMessageCount"); n != 2 {
		t.Fatalf("%d provider calls; want 2", n)
	}
}

// TestVerifierGateNeverHoldsBackAKnownPassword: a recent success is
// answered from memory without the gate or the provider, and after it
// expires the password is still checked without asking the gate. A
// password changed at the provider is forgotten at its first refusal,
// and so is one the fronts Forget.
func TestVerifierGateNeverHoldsBackAKnownPassword(t *testing.T) {
	srv, c := newProvider(t)
	v := login.NewVerifier(restclient.Upstream(c), 20*time.Millisecond)
	g := &gate{allow: true}
	v.SetGate(g)
	ctx := context.Background()
	if err := v.Verify(ctx, alice, pw); err != nil {
		t.Fatal(err)
	}
	g.set(false)
	if err := v.Verify(ctx, alice, pw); err != nil {
		t.Fatalf("a recent success, the gate closed: %v", err)
	}
	if n := srv.Calls("GetMessageCount"); n != 1 {
		t.Fatalf("%d provider calls; a recent success needs none", n)
	}
	time.Sleep(30 * time.Millisecond)
	if err := v.Verify(ctx, alice, pw); err != nil {
		t.Fatalf("a password that worked, its success expired, the gate closed: %v", err)
	}
	if n := srv.Calls("GetMessageCount"); n != 2 {
		t.Fatalf("%d provider calls; an expired success is checked again", n)
	}
	if asked, succeeded := g.counts(); asked != 1 || succeeded != 3 {
		t.Fatalf("gate asked %d times, told of %d successes; want 1 (the first check) and 3", asked, succeeded)
	}
	// Changed at the provider: refused once, then unknown.
	if err := srv.AddUser(ctx, alice, "changed"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(30 * time.Millisecond)
	if err := v.Verify(ctx, alice, pw); !errors.Is(err, login.ErrAuthFailed) || errors.Is(err, login.ErrWithheld) {
		t.Fatalf("the old password: %v; want refused by the provider", err)
	}
	if err := v.Verify(ctx, alice, pw); !errors.Is(err, login.ErrWithheld) {
		t.Fatalf("the old password again: %v; want held back", err)
	}
	// Forget drops the memory of a good password too.
	g.set(true)
	if err := v.Verify(ctx, alice, "changed"); err != nil {
		t.Fatal(err)
	}
	g.set(false)
	v.Forget(alice, "changed", "")
	if err := v.Verify(ctx, alice, "changed"); !errors.Is(err, login.ErrWithheld) {
		t.Fatalf("a forgotten password: %v; want held back", err)
	}
}
