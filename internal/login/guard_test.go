package login

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"
)

// fakeTime records the delays asked for instead of sleeping, and lets the
// test move the clock.
type fakeTime struct {
	mu     sync.Mutex
	now    time.Time
	slept  time.Duration
	sleeps int
}

func newFake(g *Guard) *fakeTime {
	f := &fakeTime{now: time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)}
	g.now = func() time.Time { f.mu.Lock(); defer f.mu.Unlock(); return f.now }
	g.sleep = func(_ context.Context, d time.Duration) error {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.slept += d
		if d > 0 {
			f.sleeps++
		}
		return nil
	}
	return f
}

// TestGuessingFromOneAddress: 30 wrong passwords from one address cost at
// least 10 s of waiting or are refused, while another address, and the
// real user's correct password there, wait for nothing.
func TestGuessingFromOneAddress(t *testing.T) {
	g := NewGuard(GuardConfig{})
	f := newFake(g)
	ctx := context.Background()
	refused := 0
	var admitted time.Duration
	for i := 0; i < 30; i++ {
		release, d, err := g.Admit(ctx, "198.51.100.7", "alice@direct.example")
		if errors.Is(err, ErrRefused) {
			refused++
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		admitted += d
		release()
		g.Failed(ctx, "198.51.100.7", "alice@direct.example")
	}
	if admitted < 10*time.Second && refused == 0 {
		t.Fatalf("30 guesses waited %v in all and none was refused", admitted)
	}
	if refused != 30-DefaultRefuseAfter {
		t.Errorf("%d guesses refused; want %d (after %d failures)", refused, 30-DefaultRefuseAfter, DefaultRefuseAfter)
	}
	// The real user, from elsewhere, with the right password: no wait.
	f.slept = 0
	release, d, err := g.Admit(ctx, "203.0.113.9", "alice@direct.example")
	if err != nil || d != 0 || f.slept != 0 {
		t.Fatalf("another address: delay %v, slept %v, %v; want none", d, f.slept, err)
	}
	release()
	// After the window the address is welcome again.
	f.now = f.now.Add(DefaultWindow + time.Second)
	if _, d, err := g.Admit(ctx, "198.51.100.7", "alice@direct.example"); err != nil || d != 0 {
		t.Fatalf("after the window: delay %v, %v; want none", d, err)
	}
}

// TestUsernameUnderAttack: failures of one username from many addresses
// delay the failing path only; the user's correct password from a fresh
// address waits for nothing.
func TestUsernameUnderAttack(t *testing.T) {
	g := NewGuard(GuardConfig{})
	f := newFake(g)
	ctx := context.Background()
	for i := 0; i < 10; i++ {
		addr := net.IPv4(192, 0, 2, byte(i)).String()
		release, d, err := g.Admit(ctx, addr, "alice@direct.example")
		if err != nil || d != 0 {
			t.Fatalf("first attempt from %s: delay %v, %v", addr, d, err)
		}
		release()
		g.Failed(ctx, addr, "alice@direct.example")
	}
	if f.slept == 0 {
		t.Fatal("ten failures of one username from ten addresses were never slowed")
	}
	f.slept = 0
	release, d, err := g.Admit(ctx, "203.0.113.9", "alice@direct.example")
	if err != nil || d != 0 || f.slept != 0 {
		t.Fatalf("the real user: delay %v, %v", d, err)
	}
	release()
}

// TestDelayedAddressOneAtATime: parallel attempts from a delayed address
// wait for each other, so connections do not multiply the guesses.
func TestDelayedAddressOneAtATime(t *testing.T) {
	g := NewGuard(GuardConfig{FreeFailures: 1})
	g.sleep = func(ctx context.Context, d time.Duration) error { return sleepCtx(ctx, 20*time.Millisecond) }
	ctx := context.Background()
	for i := 0; i < 3; i++ {
		g.Failed(ctx, "198.51.100.7", "x")
	}
	var mu sync.Mutex
	inside, most := 0, 0
	var wg sync.WaitGroup
	for i := 0; i < 5; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			release, _, err := g.Admit(ctx, "198.51.100.7", "x")
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			inside++
			most = max(most, inside)
			mu.Unlock()
			time.Sleep(5 * time.Millisecond)
			mu.Lock()
			inside--
			mu.Unlock()
			release()
		}()
	}
	wg.Wait()
	if most != 1 {
		t.Fatalf("%d attempts from one delayed address at once; want 1", most)
	}
}

func TestKey(t *testing.T) {
	for in, want := range map[string]string{
		"192.0.2.1:1234":             "192.0.2.1",
		"[2001:db8:1:2:3:4:5:6]:993": "2001:db8:1:2::/64",
		"[2001:db8:1:2:ffff::1]:143": "2001:db8:1:2::/64",
		"[::ffff:192.0.2.1]:25":      "192.0.2.1",
	} {
		addr, err := net.ResolveTCPAddr("tcp", in)
		if err != nil {
			t.Fatal(err)
		}
		if got := Key(addr); got != want {
			t.Errorf("Key(%s) = %s; want %s", in, got, want)
		}
	}
}

// TestNATNeighbour: one user's stale password behind a shared address
// gets that user refused there, not the others behind it (who are only
// delayed), until the address as a whole fails far more.
func TestNATNeighbour(t *testing.T) {
	g := NewGuard(GuardConfig{})
	newFake(g)
	ctx := context.Background()
	for i := 0; i < DefaultRefuseAfter; i++ {
		g.Failed(ctx, "198.51.100.7", "stale@direct.example")
	}
	if _, _, err := g.Admit(ctx, "198.51.100.7", "stale@direct.example"); !errors.Is(err, ErrRefused) {
		t.Fatalf("the failing user: %v; want refused", err)
	}
	release, _, err := g.Admit(ctx, "198.51.100.7", "colleague@direct.example")
	if err != nil {
		t.Fatalf("a colleague behind the same address: %v; want admitted (delayed)", err)
	}
	release()
	for i := 0; i < DefaultRefuseAfter*addressRefuseFactor; i++ {
		g.Failed(ctx, "198.51.100.7", fmt.Sprint("user", i, "@direct.example"))
	}
	if _, _, err := g.Admit(ctx, "198.51.100.7", "colleague@direct.example"); !errors.Is(err, ErrRefused) {
		t.Fatalf("an address failing for many users: %v; want refused", err)
	}
}

// attemptCtx is a cancellable context standing for one attempt, as the
// fronts make for each LOGIN or AUTH.
func attemptCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	return ctx
}

// check does what the verifier does for credentials it does not know:
// ask AllowCheck with the context given to Admit. It reports whether
// the check was allowed.
func check(t *testing.T, g *Guard, addr, user string, ok bool) bool {
	t.Helper()
	ctx := attemptCtx(t)
	release, _, err := g.Admit(ctx, addr, user)
	if err != nil {
		t.Fatalf("Admit from %s: %v", addr, err)
	}
	defer release()
	allowed := g.AllowCheck(ctx, user)
	if allowed && ok {
		g.CheckSucceeded(ctx, user)
	}
	return allowed
}

// TestFewAddressesNotRated: failures from up to SpreadAddresses
// addresses (a user's stale password on a phone and a laptop, a typo at
// home) do not rate the checks: a retry after the typo is checked. Once
// there are more, one check per interval is.
func TestFewAddressesNotRated(t *testing.T) {
	g := NewGuard(GuardConfig{})
	f := newFake(g)
	ctx := context.Background()
	for i := range DefaultSpreadAddresses - 1 {
		addr := net.IPv4(192, 0, 2, byte(i)).String()
		if !check(t, g, addr, "alice", false) {
			t.Fatalf("check %d from %s held back", i, addr)
		}
		g.Failed(ctx, addr, "alice")
	}
	// A typo at home, and the right password at once.
	if !check(t, g, "203.0.113.9", "alice", false) {
		t.Fatal("a typo's check held back")
	}
	g.Failed(ctx, "203.0.113.9", "alice")
	if !check(t, g, "203.0.113.9", "alice", true) {
		t.Fatal("the retry after a typo was held back")
	}
	// Another user is not concerned.
	if !check(t, g, "192.0.2.200", "bob", false) {
		t.Fatal("bob held back for alice's failures")
	}
	// Two more addresses (her success took home out): the spread shows.
	g.Failed(ctx, "192.0.2.99", "alice")
	g.Failed(ctx, "192.0.2.100", "alice")
	if check(t, g, "192.0.2.101", "alice", false) {
		t.Fatal("a check from a further address, right after the last, was let through")
	}
	f.now = f.now.Add(DefaultUserCheckInterval)
	if !check(t, g, "192.0.2.102", "alice", false) {
		t.Fatal("no check let through after the interval")
	}
	if check(t, g, "192.0.2.103", "alice", false) {
		t.Fatal("two checks in one interval")
	}
	// After the window, with no further failure, the spread is forgotten.
	f.now = f.now.Add(DefaultWindow + time.Second)
	if !check(t, g, "192.0.2.104", "alice", false) || !check(t, g, "192.0.2.105", "alice", false) {
		t.Fatal("checks still rated after the window")
	}
}

// TestConcurrentChecksCounted: checks allowed but not yet failed count
// as failing addresses, so that attempts at once from many addresses
// cannot all pass before the first failure is counted.
func TestConcurrentChecksCounted(t *testing.T) {
	g := NewGuard(GuardConfig{})
	newFake(g)
	allowed := 0
	for i := range 100 {
		ctx := attemptCtx(t)
		if _, _, err := g.Admit(ctx, net.IPv4(192, 0, 2, byte(i)).String(), "alice"); err != nil {
			t.Fatal(err)
		}
		if g.AllowCheck(ctx, "alice") {
			allowed++
		}
	}
	if allowed != DefaultSpreadAddresses+1 {
		t.Fatalf("%d of 100 checks under way at once allowed; want %d", allowed, DefaultSpreadAddresses+1)
	}
}

// TestSuccessesAreNotSpread: a user whose checks succeed from many
// addresses (devices on their way, new passwords) is never rated.
func TestSuccessesAreNotSpread(t *testing.T) {
	g := NewGuard(GuardConfig{})
	newFake(g)
	for i := range 3 * DefaultSpreadAddresses {
		if !check(t, g, net.IPv4(192, 0, 2, byte(i)).String(), "alice", true) {
			t.Fatalf("the %d-th successful address was held back", i+1)
		}
	}
}

// TestOwnAddressNeedsItsAttempt: an address where the user logged in is
// not rated, but only for the attempt the context stands for: the
// context of Admit, for the same username, until release.
func TestOwnAddressNeedsItsAttempt(t *testing.T) {
	g := NewGuard(GuardConfig{})
	f := newFake(g)
	bg := context.Background()
	check(t, g, "203.0.113.9", "alice", true)
	for i := range 10 {
		g.Failed(bg, net.IPv4(192, 0, 2, byte(i)).String(), "alice")
	}
	check(t, g, "192.0.2.50", "alice", false) // the rated check of this interval
	ctx := attemptCtx(t)
	release, _, err := g.Admit(ctx, "203.0.113.9", "alice")
	if err != nil {
		t.Fatal(err)
	}
	if !g.AllowCheck(ctx, "Alice ") {
		t.Fatal("alice from her address held back")
	}
	if g.AllowCheck(bg, "alice") {
		t.Fatal("a check with no attempt's context was let through")
	}
	other := attemptCtx(t)
	if r, _, err := g.Admit(other, "203.0.113.9", "mallory"); err != nil {
		t.Fatal(err)
	} else {
		defer r()
	}
	if g.AllowCheck(other, "alice") {
		t.Fatal("another username's attempt from her address let alice's check through")
	}
	release()
	if g.AllowCheck(ctx, "alice") {
		t.Fatal("a released attempt's context still let a check through")
	}
	// Her address is forgotten after goodAddressFor.
	f.now = f.now.Add(goodAddressFor + time.Hour)
	for i := range 10 {
		g.Failed(bg, net.IPv4(192, 0, 2, byte(i)).String(), "alice")
	}
	check(t, g, "192.0.2.50", "alice", false)
	if check(t, g, "203.0.113.9", "alice", false) {
		t.Fatal("an address remembered longer than goodAddressFor let a check through")
	}
}
