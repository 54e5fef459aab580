package authguard

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
	g := New(Config{})
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
	g := New(Config{})
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
	g := New(Config{FreeFailures: 1})
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
	g := New(Config{})
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
