// Package login is how a user gets in: the credential check against the
// provider (Verifier: one check shared by concurrent logins, a short
// cache, passwords that worked remembered as keyed hashes in memory only)
// and the guessing slowdown in front of it (Guard). It never stores a
// password, never logs one, and never lets the number of addresses an
// attacker uses turn into provider calls.
//
// Guard slows down password guessing against the IMAP and SMTP
// fronts, in the way of mox and Dovecot's auth penalty. Without it every
// guess costs an attacker a round trip and passes on to the provider,
// which may lock the real user out.
//
//   - Failures are counted per client address (an IPv4 address, or the
//     /64 of an IPv6 one) and per username, over GuardConfig.Window.
//   - From an address with more than GuardConfig.FreeFailures failures, every
//     attempt waits first, twice as long for each further failure up to
//     GuardConfig.MaxDelay, and attempts from it go one at a time, so that
//     parallel connections do not multiply the guesses. With
//     GuardConfig.RefuseAfter failures of one username from one address,
//     attempts for it from there are refused outright (the fronts answer
//     "try later") until the window has passed; an address refused for
//     every username takes addressRefuseFactor times as many failures, so
//     that one user's stale password behind a clinic's NAT address does
//     not lock out the others there.
//   - A username that fails from many addresses gets the same growing
//     delay on the failing path only: its replies of failure come late,
//     while a correct password is answered at once.
//   - A username that fails from many addresses is also checked with the
//     provider at a bounded rate (AllowCheck, asked by Verifier),
//     because the delay alone does not bound the checks: an attacker with
//     many addresses would turn each address into a provider call, and
//     may get the real user locked out at the provider. Once the username
//     has failed, or has a check under way, from more than
//     GuardConfig.SpreadAddresses addresses within GuardConfig.Window, its
//     credentials reach the provider at most once per
//     GuardConfig.UserCheckInterval (a token bucket of one, spent by whichever
//     attempt asks first); the other attempts are answered as a wrong
//     password, after the same delay, without asking the provider. Not
//     rated: a password the verifier remembers as good (it keeps that
//     only as a keyed hash), and an attempt from one of the last
//     goodAddressesPerUser addresses where the user logged in within
//     goodAddressFor, so the real user gets in at once with the password
//     and from the places the bridge has seen. Those addresses are few per
//     user and each is held by the per-address limits, so no number of
//     addresses becomes provider calls. A user whom the bridge has seen
//     neither way (first login since a start, or a new password) from a
//     new address shares the rated checks with the attacker: the first
//     attempt after each interval is checked, whoever makes it.
//   - The real user logging in from another address is never delayed or
//     refused by failures elsewhere (only held back as just said, when
//     the bridge knows neither their password nor their address), and a
//     refusal looks the same whether or not the user exists.
//
// Only counters, address keys and usernames live here, in memory: no
// passwords.
package login

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"
)

// GuardConfig sets the thresholds; zero values take the defaults.
type GuardConfig struct {
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
	// UserCheckInterval is how often the credentials of a username under
	// a spread attack may be checked with the provider (default 30 s:
	// about as many guesses per Window as one address gets before it is
	// refused).
	UserCheckInterval time.Duration
	// SpreadAddresses is how many addresses a username may fail from
	// within Window before its checks are rated (default 3: a user's
	// stale password on a phone, a laptop and at home is not an attack).
	SpreadAddresses int
}

// Defaults.
const (
	DefaultFreeFailures = 3
	DefaultMaxDelay     = 15 * time.Second
	DefaultRefuseAfter  = 20
	DefaultWindow       = 15 * time.Minute
	// DefaultUserCheckInterval and DefaultSpreadAddresses: see GuardConfig.
	DefaultUserCheckInterval = 30 * time.Second
	DefaultSpreadAddresses   = 3
	// goodAddressesPerUser and goodAddressFor bound the addresses
	// remembered as the user's own (where a check of theirs succeeded),
	// whose checks are not rated: few, so that an attacker who shares
	// one of them (a clinic's NAT) gains no more than that address's own
	// limits allow.
	goodAddressesPerUser = 8
	goodAddressFor       = 30 * 24 * time.Hour
	// firstDelay is the delay of the first failure over the free ones.
	firstDelay = time.Second
	// maxTracked bounds the addresses and usernames tracked; past it the
	// oldest records go (an attacker with that many addresses gets no
	// memory growth, only the per-username delay).
	maxTracked = 100000
)

// ErrRefused is returned for an address over GuardConfig.RefuseAfter.
var ErrRefused = errors.New("login: too many failed logins from this address")

// Guard counts failures and hands out delays. Safe for concurrent use.
type Guard struct {
	cfg   GuardConfig
	sleep func(ctx context.Context, d time.Duration) error
	now   func() time.Time
	share func([]byte) // tells the other replicas a failure (ShareFailures)

	mu    sync.Mutex
	addrs map[string]*record
	users map[string]*record
	pairs map[string]*record // address and username

	spread   map[string]*spreadRecord // by username: addresses it is tried from
	good     map[string][]goodAddr    // by username: addresses where it logged in
	attempts map[<-chan struct{}]*attempt
	unlinked uint64 // numbers checks whose address is not known
}

// spreadRecord is what the guard knows of the addresses a username is
// tried from within the window, for rating its provider checks.
type spreadRecord struct {
	// addrs are addresses with a failure or a check not known to have
	// succeeded; at most SpreadAddresses+1 are kept, which is enough to
	// tell a spread attack.
	addrs map[string]struct{}
	last  time.Time
	next  time.Time // when the next rated check may go
}

// goodAddr is an address where a check of the user succeeded, and when.
type goodAddr struct {
	addr string
	at   time.Time
}

// attempt links the context of an admitted attempt to its address, so
// that AllowCheck and CheckSucceeded, which the verifier calls with that
// context and no address, know where the attempt comes from.
type attempt struct{ addr, user string }

// addressRefuseFactor: an address is refused for every username after
// this many times GuardConfig.RefuseAfter failures.
const addressRefuseFactor = 5

func pairKey(addr, user string) string {
	return addr + "\x00" + normUser(user)
}

// normUser is the form a username is counted under.
func normUser(user string) string { return strings.ToLower(strings.TrimSpace(user)) }

// record is the failures of one address or username.
type record struct {
	n    int
	last time.Time
	turn chan struct{} // one attempt at a time from a delayed address
}

// NewGuard returns a Guard.
func NewGuard(cfg GuardConfig) *Guard {
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
	if cfg.UserCheckInterval <= 0 {
		cfg.UserCheckInterval = DefaultUserCheckInterval
	}
	if cfg.SpreadAddresses <= 0 {
		cfg.SpreadAddresses = DefaultSpreadAddresses
	}
	return &Guard{cfg: cfg, sleep: sleepCtx, now: time.Now, addrs: map[string]*record{}, users: map[string]*record{}, pairs: map[string]*record{},
		spread: map[string]*spreadRecord{}, good: map[string][]goodAddr{}, attempts: map[<-chan struct{}]*attempt{}}
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
//
// Until release, ctx stands for this attempt: the caller passes the same
// ctx (or one derived from it without a cancellation of its own) to the
// verifier, whose AllowCheck and CheckSucceeded calls thereby tell the
// guard the attempt's address. A ctx that can never be cancelled
// (context.Background) links nothing, and such checks are treated as
// coming from an address seen for nothing else.
func (g *Guard) Admit(ctx context.Context, addr, username string) (release func(), delayed time.Duration, err error) {
	g.mu.Lock()
	if p := g.current(g.pairs, pairKey(addr, username)); p != nil && p.n >= g.cfg.RefuseAfter {
		g.mu.Unlock()
		return nil, 0, ErrRefused
	}
	r := g.current(g.addrs, addr)
	if r == nil || r.n <= g.cfg.FreeFailures {
		unlink := g.linkLocked(ctx, addr, username)
		g.mu.Unlock()
		return unlink, 0, nil
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
	g.mu.Lock()
	unlink := g.linkLocked(ctx, addr, username)
	g.mu.Unlock()
	return func() { unlink(); <-turn }, d, nil
}

// linkLocked remembers that ctx stands for an attempt of username from
// addr, until the returned func is called. The key is ctx's Done
// channel: unique to each cancellable context, comparable whatever the
// context's type, and shared by contexts derived only to carry values.
// Called with g.mu held.
func (g *Guard) linkLocked(ctx context.Context, addr, username string) (unlink func()) {
	done := ctx.Done()
	if done == nil {
		return func() {}
	}
	if len(g.attempts) >= maxTracked {
		// Only callers that never release get here; their attempts
		// become unlinked, which rates them as strangers.
		clear(g.attempts)
	}
	a := &attempt{addr: addr, user: normUser(username)}
	g.attempts[done] = a
	return func() {
		g.mu.Lock()
		if g.attempts[done] == a {
			delete(g.attempts, done)
		}
		g.mu.Unlock()
	}
}

// attemptLocked returns the address of the attempt ctx stands for, if it
// is one of user. Called with g.mu held.
func (g *Guard) attemptLocked(ctx context.Context, user string) (addr string, ok bool) {
	done := ctx.Done()
	if done == nil {
		return "", false
	}
	a := g.attempts[done]
	if a == nil || a.user != user {
		return "", false
	}
	return a.addr, true
}

// AllowCheck tells a credential verifier (Verifier) whether
// credentials of username that it does not remember as good may be
// checked with the provider now; if not, it answers as for a wrong
// password without asking. ctx is the one given to Admit for the attempt.
//
// The check is allowed from an address where the user logged in (see
// CheckSucceeded), and while the username has failed, or has checks not
// known to have succeeded, from at most GuardConfig.SpreadAddresses addresses
// within GuardConfig.Window. Beyond that one check per
// GuardConfig.UserCheckInterval is allowed, to whichever attempt asks first.
// Every allowed check starts the interval anew and counts its address as
// failing until it succeeds, so that many attempts at once, before any
// failure is counted, cannot all pass: guesses from ever new addresses
// reach the provider within a span D at most SpreadAddresses+1 times
// (the ones that show the spread) plus D/UserCheckInterval. Guesses from
// up to SpreadAddresses addresses, and from the user's own, are held by
// the per-address limits of Admit alone.
func (g *Guard) AllowCheck(ctx context.Context, username string) bool {
	user := normUser(username)
	g.mu.Lock()
	defer g.mu.Unlock()
	now := g.now()
	addr, linked := g.attemptLocked(ctx, user)
	if linked && g.isGoodLocked(user, addr, now) {
		return true
	}
	s := g.spreadLocked(user, now)
	if len(s.addrs) > g.cfg.SpreadAddresses && now.Before(s.next) {
		return false
	}
	if !linked {
		// An address of its own: it cannot be told apart from others.
		g.unlinked++
		addr = fmt.Sprintf("\x00unlinked %d", g.unlinked)
	}
	s.note(addr, g.cfg.SpreadAddresses)
	s.last = now
	s.next = now.Add(g.cfg.UserCheckInterval)
	return true
}

// CheckSucceeded tells the guard that the credentials of username were
// accepted (by the provider, or from the verifier's memory of an earlier
// check) for the attempt ctx stands for. Its address becomes one of the
// user's own: attempts from there are not rated for goodAddressFor.
func (g *Guard) CheckSucceeded(ctx context.Context, username string) {
	user := normUser(username)
	g.mu.Lock()
	defer g.mu.Unlock()
	addr, linked := g.attemptLocked(ctx, user)
	if !linked {
		return
	}
	now := g.now()
	if s := g.spread[user]; s != nil && len(s.addrs) <= g.cfg.SpreadAddresses {
		// Not failing after all. Under a spread attack the set stays as
		// it is: taking one out would give the attacker a free check.
		delete(s.addrs, addr)
	}
	list := g.good[user]
	kept := list[:0]
	for _, a := range list {
		if a.addr != addr && now.Sub(a.at) <= goodAddressFor {
			kept = append(kept, a)
		}
	}
	if len(kept) >= goodAddressesPerUser {
		kept = kept[len(kept)-goodAddressesPerUser+1:] // the oldest go
	}
	if _, known := g.good[user]; !known && len(g.good) >= maxTracked {
		g.pruneGoodLocked(now)
	}
	g.good[user] = append(kept, goodAddr{addr: addr, at: now})
}

// isGoodLocked reports whether addr is one of user's own addresses.
// Called with g.mu held.
func (g *Guard) isGoodLocked(user, addr string, now time.Time) bool {
	for _, a := range g.good[user] {
		if a.addr == addr && now.Sub(a.at) <= goodAddressFor {
			return true
		}
	}
	return false
}

// spreadLocked returns the spread record of user, made if need be, with
// addresses older than the window forgotten. Called with g.mu held.
func (g *Guard) spreadLocked(user string, now time.Time) *spreadRecord {
	s := g.spread[user]
	if s == nil {
		if len(g.spread) >= maxTracked {
			for k, old := range g.spread {
				if now.Sub(old.last) > g.cfg.Window {
					delete(g.spread, k)
				}
			}
			if len(g.spread) >= maxTracked {
				clear(g.spread)
			}
		}
		s = &spreadRecord{addrs: map[string]struct{}{}}
		g.spread[user] = s
	} else if now.Sub(s.last) > g.cfg.Window {
		clear(s.addrs)
	}
	return s
}

// note adds addr to the record's addresses, keeping at most limit+1.
func (s *spreadRecord) note(addr string, limit int) {
	if len(s.addrs) <= limit {
		s.addrs[addr] = struct{}{}
	}
}

// pruneGoodLocked drops addresses remembered longer than goodAddressFor,
// and if that frees nothing, all of them. Called with g.mu held.
func (g *Guard) pruneGoodLocked(now time.Time) {
	for user, list := range g.good {
		if len(list) == 0 || now.Sub(list[len(list)-1].at) > goodAddressFor {
			delete(g.good, user)
		}
	}
	if len(g.good) >= maxTracked {
		clear(g.good)
	}
}

// Failed records a failed attempt of username from addr and waits the
// delay the username has earned across all addresses (the failing path
// only: a correct password never waits for it).
//
// The failure also counts addr among the addresses the username fails
// from, which rates its provider checks once there are many (AllowCheck).
func (g *Guard) Failed(ctx context.Context, addr, username string) {
	n := g.count(addr, username)
	if g.share != nil {
		b, _ := json.Marshal(sharedFailure{Addr: addr, User: normUser(username)})
		g.share(b)
	}
	g.sleep(ctx, g.delayFor(n))
}

// Topic is the cluster topic of the failures replicas share.
const Topic = "login"

// sharedFailure is one failure told to the other replicas.
type sharedFailure struct {
	Addr string `json:"a"`
	User string `json:"u"`
}

// ShareFailures makes every failure counted here go to the other
// replicas of the bridge through publish (internal/cluster), so that the
// slowdown holds for the whole cluster, not per replica: an attacker
// spread over replicas by a balancer guesses no faster. Set it before the
// guard is used.
func (g *Guard) ShareFailures(publish func([]byte)) { g.share = publish }

// Receive counts a failure another replica told (ShareFailures): the same
// counters as Failed, without its delay, which was that replica's client's.
func (g *Guard) Receive(payload []byte) {
	var f sharedFailure
	if json.Unmarshal(payload, &f) != nil || f.Addr == "" || f.User == "" {
		return
	}
	g.count(f.Addr, f.User)
}

// count counts a failure of username from addr and returns the
// username's failures.
func (g *Guard) count(addr, username string) int {
	user := normUser(username)
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
	s := g.spreadLocked(user, now)
	s.note(addr, g.cfg.SpreadAddresses)
	s.last = now
	g.mu.Unlock()
	return n
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
