package login_test

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/directbridge/directbridge/internal/login"
	"github.com/directbridge/directbridge/restclient"
	"github.com/directbridge/directbridge/sandbox"
	"github.com/directbridge/directbridge/upstream/directapi"
)

const (
	alice   = "alice@direct.example"
	alicePW = directapi.Secret("alice-password")
	home    = "203.0.113.9" // where alice logs in
	// checkOp is the provider operation a mailbox user's check makes
	// (login.Verifier.ask).
	checkOp = "GetMessageCount"
)

// clock is a fake time for the guard: sleeps are counted, not slept.
type clock struct {
	mu    sync.Mutex
	now   time.Time
	slept time.Duration
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }

func (c *clock) Sleep(_ context.Context, d time.Duration) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.slept += d
	return nil
}

func (c *clock) Advance(d time.Duration) { c.mu.Lock(); c.now = c.now.Add(d); c.mu.Unlock() }

func (c *clock) Slept() time.Duration { c.mu.Lock(); defer c.mu.Unlock(); return c.slept }

// rig is a guard and a verifier wired as the bridge wires them
// (bridge/bridge.go), on a sandbox provider over real HTTP.
type rig struct {
	srv   *sandbox.Server
	up    *restclient.Client
	guard *login.Guard
	v     *login.Verifier
	clock *clock
}

func newRig(t *testing.T, cfg login.GuardConfig, ttl time.Duration) *rig {
	t.Helper()
	srv, err := sandbox.Open(sandbox.Options{Users: []sandbox.Account{{Name: alice, Password: string(alicePW)}}})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(func() { hs.Close(); srv.Close() })
	c, err := restclient.New(restclient.Options{BaseURL: hs.URL, MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	r := &rig{srv: srv, up: c, guard: login.NewGuard(cfg), clock: &clock{now: time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)}}
	login.SetClock(r.guard, r.clock.Now, r.clock.Sleep)
	r.v = login.NewVerifier(restclient.Upstream(c), ttl)
	r.v.SetGate(r.guard)
	return r
}

// login does what the fronts do with a LOGIN or AUTH
// (imapbackend/session.go Login, smtpbackend/session.go login): Admit,
// Verify with the same context, release, Failed on wrong credentials.
// It returns the time the attempt waited and the verifier's answer.
func (r *rig) login(addr, user string, pw directapi.Secret) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	before := r.clock.Slept()
	release, _, err := r.guard.Admit(ctx, addr, user)
	if err != nil {
		return r.clock.Slept() - before, err
	}
	err = r.v.Verify(ctx, user, pw)
	release()
	if errors.Is(err, login.ErrAuthFailed) {
		r.guard.Failed(ctx, addr, user)
	}
	return r.clock.Slept() - before, err
}

func (r *rig) checks() int { return r.srv.Calls(checkOp) }

// attacker is the address of the i-th attacking host.
func attacker(i int) string { return fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255) }

// attack makes n guesses for alice, each from an address of its own and
// with a password of its own, spread over span. Every guess must be
// answered as a wrong password.
func (r *rig) attack(t *testing.T, first, n int, span time.Duration) {
	t.Helper()
	for i := first; i < first+n; i++ {
		if _, err := r.login(attacker(i), alice, directapi.Secret(fmt.Sprint("guess-", i))); !errors.Is(err, login.ErrAuthFailed) {
			t.Fatalf("guess %d: %v; want a wrong password", i, err)
		}
		r.clock.Advance(span / time.Duration(n))
	}
}

// emptyBucket makes attacking guesses, a second apart, until one reaches
// the provider: right after it no rated check is left for an interval.
func (r *rig) emptyBucket(t *testing.T, first int) {
	t.Helper()
	before := r.checks()
	for i := first; r.checks() == before; i++ {
		if i > first+1000 {
			t.Fatal("no guess reached the provider")
		}
		r.clock.Advance(time.Second)
		r.login(attacker(i), alice, directapi.Secret(fmt.Sprint("guess-", i)))
	}
}

// TestSpreadAttackChecksBounded: 1,000 wrong passwords for one username
// from 1,000 addresses over a minute reach the provider at most
// SpreadAddresses+1 times (the guesses that show the spread) plus once
// per configured interval, and each is answered as a wrong password.
// Without the gate all 1,000 reach it.
func TestSpreadAttackChecksBounded(t *testing.T) {
	for _, interval := range []time.Duration{10 * time.Second, 30 * time.Second} {
		t.Run(interval.String(), func(t *testing.T) {
			r := newRig(t, login.GuardConfig{UserCheckInterval: interval}, time.Minute)
			const span = time.Minute
			r.attack(t, 0, 1000, span)
			rated := int(span / interval)
			most := login.DefaultSpreadAddresses + 1 + rated
			if n := r.checks(); n > most || n < rated {
				t.Fatalf("1,000 guesses from 1,000 addresses over %v made %d provider checks; want at most %d (%d to see the spread, one per %v) and at least %d",
					span, n, most, login.DefaultSpreadAddresses+1, interval, rated)
			}
		})
	}
}

// TestSpreadAttackBurstBounded: 1,000 guesses at once from 1,000
// addresses, before any failure is counted, reach the provider at most
// SpreadAddresses+1 times: a check counts its address as failing from
// the moment it is allowed.
func TestSpreadAttackBurstBounded(t *testing.T) {
	r := newRig(t, login.GuardConfig{}, time.Minute)
	var wg sync.WaitGroup
	for i := range 1000 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := r.login(attacker(i), alice, directapi.Secret(fmt.Sprint("guess-", i))); !errors.Is(err, login.ErrAuthFailed) {
				t.Errorf("guess %d: %v; want a wrong password", i, err)
			}
		}()
	}
	wg.Wait()
	if n, most := r.checks(), login.DefaultSpreadAddresses+1; n > most {
		t.Fatalf("1,000 guesses at once made %d provider checks; want at most %d", n, most)
	}
}

// TestRealUserDuringSpreadAttack: while alice's username is guessed from
// many addresses and no rated check is left, she gets in at once from an
// address where she logged in before (even with a new password), and
// with a password that worked before from any address (after its
// success has expired), each with one provider check. With neither she
// shares the rated checks with the attacker: held back while none is
// left, in once one is.
func TestRealUserDuringSpreadAttack(t *testing.T) {
	t.Run("her address, new password", func(t *testing.T) {
		r := newRig(t, login.GuardConfig{}, time.Minute)
		if _, err := r.login(home, alice, alicePW); err != nil {
			t.Fatal(err)
		}
		// She changes her password at the provider: the verifier knows
		// nothing of the new one.
		const newPW = directapi.Secret("alice-new-password")
		if err := r.srv.AddUser(context.Background(), alice, string(newPW)); err != nil {
			t.Fatal(err)
		}
		r.attack(t, 0, 1000, time.Minute)
		r.emptyBucket(t, 1000)
		before := r.checks()
		waited, err := r.login(home, alice, newPW)
		if err != nil || waited != 0 {
			t.Fatalf("alice from her address: %v after %v; want in at once", err, waited)
		}
		if n := r.checks() - before; n != 1 {
			t.Fatalf("%d provider checks for her login; want 1", n)
		}
	})
	t.Run("known password, new address", func(t *testing.T) {
		r := newRig(t, login.GuardConfig{}, 10*time.Millisecond)
		if _, err := r.login(home, alice, alicePW); err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond) // the success is no longer trusted without a check
		r.attack(t, 0, 1000, time.Minute)
		r.emptyBucket(t, 1000)
		before := r.checks()
		waited, err := r.login("198.51.100.77", alice, alicePW)
		if err != nil || waited != 0 {
			t.Fatalf("alice with her password from a new address: %v after %v; want in at once", err, waited)
		}
		if n := r.checks() - before; n != 1 {
			t.Fatalf("%d provider checks for her login; want 1 (the success had expired)", n)
		}
	})
	t.Run("neither", func(t *testing.T) {
		interval := 30 * time.Second
		r := newRig(t, login.GuardConfig{UserCheckInterval: interval}, time.Minute)
		r.attack(t, 0, 1000, time.Minute)
		r.emptyBucket(t, 1000)
		before := r.checks()
		if _, err := r.login("198.51.100.77", alice, alicePW); !errors.Is(err, login.ErrAuthFailed) || !errors.Is(err, login.ErrWithheld) {
			t.Fatalf("alice, unknown to the bridge, while no rated check is left: %v; want held back as a wrong password", err)
		}
		if n := r.checks() - before; n != 0 {
			t.Fatalf("%d provider checks for a held-back login", n)
		}
		r.clock.Advance(interval)
		if _, err := r.login("198.51.100.77", alice, alicePW); err != nil {
			t.Fatalf("alice, first to ask once the interval has passed: %v; want in", err)
		}
	})
}

// TestCachedPasswordUnderSpreadAttack: with her success remembered,
// alice's right password is taken at once, with no provider call and no
// wait, from any address, while 1,000 addresses guess her username and
// no rated check is left.
func TestCachedPasswordUnderSpreadAttack(t *testing.T) {
	r := newRig(t, login.GuardConfig{UserCheckInterval: time.Hour}, time.Minute)
	if _, err := r.login(home, alice, alicePW); err != nil {
		t.Fatal(err)
	}
	r.attack(t, 0, 1000, time.Minute)
	before := r.checks()
	for _, addr := range []string{"198.51.100.77", attacker(5), home} {
		waited, err := r.login(addr, alice, alicePW)
		if err != nil || waited != 0 {
			t.Fatalf("alice's cached password from %s: %v after %v; want in at once", addr, err, waited)
		}
	}
	if n := r.checks() - before; n != 0 {
		t.Fatalf("%d provider checks for a cached password", n)
	}
}
