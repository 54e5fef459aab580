// Package authguard slows down password guessing against the IMAP and SMTP
// fronts, in the way of mox and Dovecot's auth penalty. Without it every
// guess costs an attacker a round trip and passes on to the provider,
// which may lock the real user out.
//
//   - Failures are counted per client address (an IPv4 address, or the
//     /64 of an IPv6 one) and per username, over Config.Window.
//   - From an address with more than Config.FreeFailures failures, every
//     attempt waits first, twice as long for each further failure up to
//     Config.MaxDelay, and attempts from it go one at a time, so that
//     parallel connections do not multiply the guesses. With
//     Config.RefuseAfter failures of one username from one address,
//     attempts for it from there are refused outright (the fronts answer
//     "try later") until the window has passed; an address refused for
//     every username takes addressRefuseFactor times as many failures, so
//     that one user's stale password behind a clinic's NAT address does
//     not lock out the others there.
//   - A username that fails from many addresses gets the same growing
//     delay on the failing path only: its replies of failure come late,
//     while a correct password is answered at once.
//   - The real user logging in from another address is never delayed or
//     refused by failures elsewhere, and a refusal looks the same whether
//     or not the user exists.
//
// Only counters live here, in memory: no passwords.
package authguard

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"time"
)

// Config sets the thresholds; zero values take the defaults.
type Config struct {
	// FreeFailures are failures an address may have before its attempts
	// are delayed (default 3).
	FreeFailures int
	// MaxDelay caps the delay (default 15 s).
	MaxDelay time.Duration
	// RefuseAfter is the failures after which an address is refused
	// until Window passes (default 20).
	RefuseAfter int
	// Window is how long a failure counts (default 15 minutes).
	Window time.Duration
}

// Defaults.
const (
	DefaultFreeFailures = 3
	DefaultMaxDelay     = 15 * time.Second
	DefaultRefuseAfter  = 20
	DefaultWindow       = 15 * time.Minute
	// firstDelay is the delay of the first failure over the free ones.
	firstDelay = time.Second
	// maxTracked bounds the addresses and usernames tracked; past it the
	// oldest records go (an attacker with that many addresses gets no
	// memory growth, only the per-username delay).
	maxTracked = 100000
)

// ErrRefused is returned for an address over Config.RefuseAfter.
var ErrRefused = errors.New("authguard: too many failed logins from this address")

// Guard counts failures and hands out delays. Safe for concurrent use.
type Guard struct {
	cfg   Config
	sleep func(ctx context.Context, d time.Duration) error
	now   func() time.Time

	mu    sync.Mutex
	addrs map[string]*record
	users map[string]*record
	pairs map[string]*record // address and username
}

// addressRefuseFactor: an address is refused for every username after
// this many times Config.RefuseAfter failures.
const addressRefuseFactor = 5

func pairKey(addr, user string) string {
	return addr + "\x00" + strings.ToLower(strings.TrimSpace(user))
}

// record is the failures of one address or username.
type record struct {
	n    int
	last time.Time
	turn chan struct{} // one attempt at a time from a delayed address
}

// New returns a Guard.
func New(cfg Config) *Guard {
	if cfg.FreeFailures <= 0 {
		cfg.FreeFailures = DefaultFreeFailures
	}
	if cfg.MaxDelay <= 0 {
		cfg.MaxDelay = DefaultMaxDelay
	}
	if cfg.RefuseAfter <= 0 {
		cfg.RefuseAfter = DefaultRefuseAfter
	}
	if cfg.Window <= 0 {
		cfg.Window = DefaultWindow
	}
	return &Guard{cfg: cfg, sleep: sleepCtx, now: time.Now, addrs: map[string]*record{}, users: map[string]*record{}, pairs: map[string]*record{}}
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Key is the address failures are counted under: the IP of an IPv4
// client, the /64 of an IPv6 one (one host usually holds a whole /64).
func Key(remote net.Addr) string {
	host := remote.String()
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	ip := net.ParseIP(host)
	if ip == nil {
		return host
	}
	if v4 := ip.To4(); v4 != nil {
		return v4.String()
	}
	return ip.Mask(net.CIDRMask(64, 128)).String() + "/64"
}

// delayFor is the delay n failures earn.
func (g *Guard) delayFor(n int) time.Duration {
	over := n - g.cfg.FreeFailures
	if over <= 0 {
		return 0
	}
	d := firstDelay
	for i := 1; i < over && d < g.cfg.MaxDelay; i++ {
		d *= 2
	}
	return min(d, g.cfg.MaxDelay)
}

// current returns the record of key with failures older than the window
// forgotten, or nil. Called with g.mu held.
func (g *Guard) current(m map[string]*record, key string) *record {
	r := m[key]
	if r != nil && g.now().Sub(r.last) > g.cfg.Window {
		r.n = 0
	}
	return r
}

// Admit is called before the credentials of username from addr are
// checked. It refuses (ErrRefused) a username over RefuseAfter failures
// from the address, or an address over addressRefuseFactor times that,
// and otherwise waits the delay the address has earned, one attempt at a
// time for a delayed address. The caller calls release once the check is
// done; ctx bounds the wait.
func (g *Guard) Admit(ctx context.Context, addr, username string) (release func(), delayed time.Duration, err error) {
	g.mu.Lock()
	if p := g.current(g.pairs, pairKey(addr, username)); p != nil && p.n >= g.cfg.RefuseAfter {
		g.mu.Unlock()
		return nil, 0, ErrRefused
	}
	r := g.current(g.addrs, addr)
	if r == nil || r.n <= g.cfg.FreeFailures {
		g.mu.Unlock()
		return func() {}, 0, nil
	}
	if r.n >= g.cfg.RefuseAfter*addressRefuseFactor {
		g.mu.Unlock()
		return nil, 0, ErrRefused
	}
	if r.turn == nil {
		r.turn = make(chan struct{}, 1)
	}
	turn := r.turn
	g.mu.Unlock()
	select {
	case turn <- struct{}{}:
	case <-ctx.Done():
		return nil, 0, ctx.Err()
	}
	g.mu.Lock()
	var d time.Duration
	if r := g.current(g.addrs, addr); r != nil { // pruned meanwhile: no delay
		d = g.delayFor(r.n)
	}
	g.mu.Unlock()
	if err := g.sleep(ctx, d); err != nil {
		<-turn
		return nil, d, err
	}
	return func() { <-turn }, d, nil
}

// Failed records a failed attempt of username from addr and waits the
// delay the username has earned across all addresses (the failing path
// only: a correct password never waits for it).
func (g *Guard) Failed(ctx context.Context, addr, username string) {
	user := strings.ToLower(strings.TrimSpace(username))
	g.mu.Lock()
	now := g.now()
	bump := func(m map[string]*record, key string) int {
		r := g.current(m, key)
		if r == nil {
			if len(m) >= maxTracked {
				g.pruneLocked(m)
			}
			r = &record{}
			m[key] = r
		}
		r.n++
		r.last = now
		return r.n
	}
	bump(g.addrs, addr)
	bump(g.pairs, pairKey(addr, user))
	n := bump(g.users, user)
	g.mu.Unlock()
	g.sleep(ctx, g.delayFor(n))
}

// pruneLocked drops records whose window has passed, and if that frees
// nothing, all of them.
func (g *Guard) pruneLocked(m map[string]*record) {
	for k, r := range m {
		if g.now().Sub(r.last) > g.cfg.Window {
			delete(m, k)
		}
	}
	if len(m) >= maxTracked {
		clear(m)
	}
}
