package login

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/directbridge/directbridge/upstream"
	"github.com/directbridge/directbridge/upstream/directapi"
)

// Sentinel errors of credential checks. The protocol fronts map them to
// their replies (IMAP NO [AUTHENTICATIONFAILED] / [UNAVAILABLE], SMTP 535 /
// 454); the provider's error is wrapped beside them.
var (
	// ErrAuthFailed means the provider refused the credentials.
	ErrAuthFailed = errors.New("login: authentication failed")
	// ErrUnavailable means the provider could not be asked.
	ErrUnavailable = errors.New("login: provider unavailable")
	// ErrAddress means a T-user's directAddr is not an address the provider accepts.
	ErrAddress = errors.New("login: address refused")
	// ErrWithheld means the CheckGate did not let the credentials be
	// checked with the provider. It always comes wrapped beside
	// ErrAuthFailed, so that the fronts answer it as a wrong password:
	// the client learns nothing of the gate.
	ErrWithheld = errors.New("login: credential check withheld: the username is failing from many addresses")
)

// CheckGate decides which credential checks reach the provider
// (Guard is one). Without a gate an attacker trying one
// username from many addresses turns each address into a provider call,
// and may get the real user locked out at the provider.
type CheckGate interface {
	// AllowCheck is asked before credentials of username that the
	// Verifier neither holds as a recent success nor remembers as good
	// are checked with the provider; false answers them as a wrong
	// password without a call. ctx is the one Verify was called with.
	AllowCheck(ctx context.Context, username string) bool
	// CheckSucceeded is told of every accepted check, whether the
	// provider was asked or not.
	CheckSucceeded(ctx context.Context, username string)
}

// DefaultRememberGood is how long a credential that once succeeded is
// remembered as good: it is never held back by the CheckGate (it is
// still checked with the provider once its success has expired), so the
// real user gets in at once while the username is under attack. A week
// spans weekends; a password changed at the provider is forgotten at its
// first refusal.
const DefaultRememberGood = 7 * 24 * time.Hour

// maxRemembered bounds the credentials remembered as good. Only
// successes add to them, which an attacker cannot make without the
// password.
const maxRemembered = 100000

// DefaultVerifyTTL is how long a successful check is trusted. Thunderbird
// opens up to five connections at once; they share one check, while a
// password changed at the provider takes effect within this time.
const DefaultVerifyTTL = time.Minute

// Verifier checks Direct credentials against the provider with one cheap
// call and remembers a success for a short time, so that concurrent and
// quickly repeated logins of one user (several IMAP connections, an SMTP
// submission right after) cost one REST call. Concurrent checks of the same
// credentials wait for a single call. Failures are not remembered: a user
// who fixes a typo is not locked out.
//
// Credentials stay in memory only, and not even there in plain form: the
// cache key is an HMAC of user, password and T-user address under a key
// made at start, so a memory dump of the cache reveals no password.
//
// With a CheckGate (SetGate), checks of credentials it does not know are
// let through to the provider only as the gate allows. A recent success
// is answered from memory as before, and a credential that succeeded
// within DefaultRememberGood is checked without asking the gate: the
// gate bounds the guesses, never the password already seen to work.
type Verifier struct {
	up    upstream.Provider
	ttl   time.Duration
	now   func() time.Time
	key   []byte
	mu    sync.Mutex
	ok    map[[32]byte]time.Time // expiry of remembered successes
	good  map[[32]byte]time.Time // last success of credentials remembered as good
	calls map[[32]byte]*flight
	gate  CheckGate
}

type flight struct {
	done chan struct{}
	err  error
}

// NewVerifier returns a Verifier using c. ttl 0 means DefaultVerifyTTL.
func NewVerifier(up upstream.Provider, ttl time.Duration) *Verifier {
	if ttl <= 0 {
		ttl = DefaultVerifyTTL
	}
	key := make([]byte, 32)
	rand.Read(key)
	return &Verifier{up: up, ttl: ttl, now: time.Now, key: key, ok: map[[32]byte]time.Time{}, good: map[[32]byte]time.Time{}, calls: map[[32]byte]*flight{}}
}

// SetGate makes g decide which checks of unknown credentials reach the
// provider; nil lets all through. The bridge gives its Guard,
// shared with the fronts, which pass the Verifier the context they gave
// the guard's Admit.
func (v *Verifier) SetGate(g CheckGate) {
	v.mu.Lock()
	v.gate = g
	v.mu.Unlock()
}

// Verify checks a mailbox user's credentials. It returns nil, or an error
// wrapping ErrAuthFailed or ErrUnavailable.
func (v *Verifier) Verify(ctx context.Context, username string, password directapi.Secret) error {
	return v.check(ctx, username, password, "")
}

// VerifyTuser checks a T-user's credentials and the Direct address it
// acts for. It returns nil, or an error wrapping ErrAuthFailed, ErrAddress
// or ErrUnavailable.
func (v *Verifier) VerifyTuser(ctx context.Context, username string, password directapi.Secret, directAddr string) error {
	return v.check(ctx, username, password, directAddr)
}

// Forget drops remembered successes of a user, recent and remembered as
// good, e.g. after the provider refused their credentials on a later call.
func (v *Verifier) Forget(username string, password directapi.Secret, directAddr string) {
	k := v.keyOf(username, password, directAddr)
	v.mu.Lock()
	delete(v.ok, k)
	delete(v.good, k)
	v.mu.Unlock()
}

func (v *Verifier) keyOf(username string, password directapi.Secret, directAddr string) [32]byte {
	m := hmac.New(sha256.New, v.key)
	for _, s := range []string{username, password.Reveal(), directAddr} {
		fmt.Fprintf(m, "%d:%s", len(s), s)
	}
	var k [32]byte
	copy(k[:], m.Sum(nil))
	return k
}

func (v *Verifier) check(ctx context.Context, username string, password directapi.Secret, directAddr string) error {
	if username == "" || password == "" {
		return ErrAuthFailed
	}
	v.mu.Lock()
	gate := v.gate
	v.mu.Unlock()
	err := v.checkOnce(ctx, gate, username, password, directAddr)
	if err == nil && gate != nil {
		gate.CheckSucceeded(ctx, username)
	}
	return err
}

// checkOnce answers from a recent success, waits for a check of the same
// credentials under way, or makes the check if gate, when there is one,
// lets it.
func (v *Verifier) checkOnce(ctx context.Context, gate CheckGate, username string, password directapi.Secret, directAddr string) error {
	k := v.keyOf(username, password, directAddr)
	v.mu.Lock()
	now := v.now()
	if exp, ok := v.ok[k]; ok && now.Before(exp) {
		v.mu.Unlock()
		return nil
	}
	last, good := v.good[k]
	good = good && now.Sub(last) <= DefaultRememberGood
	f, running := v.calls[k]
	if !running {
		f = &flight{done: make(chan struct{})}
		v.calls[k] = f
	}
	v.mu.Unlock()

	if running {
		select {
		case <-f.done:
			return f.err
		case <-ctx.Done():
			return fmt.Errorf("%w: %w", ErrUnavailable, ctx.Err())
		}
	}
	if gate != nil && !good && !gate.AllowCheck(ctx, username) {
		f.err = fmt.Errorf("%w: %w", ErrAuthFailed, ErrWithheld)
	} else {
		f.err = v.ask(ctx, username, password, directAddr)
	}
	v.mu.Lock()
	delete(v.calls, k)
	switch {
	case f.err == nil:
		v.ok[k] = v.now().Add(v.ttl)
		v.good[k] = v.now()
		v.prune()
	case errors.Is(f.err, ErrAuthFailed) && !errors.Is(f.err, ErrWithheld):
		delete(v.good, k) // changed at the provider
	}
	v.mu.Unlock()
	close(f.done)
	return f.err
}

// ask makes the one REST call. A mailbox user is checked with
// GetMessageCount(INBOX), the cheapest read there is. A T-user need not
// have a mailbox of its own, so it is checked with
// GetMessageStatusWithTuser for an smtpId that cannot exist: a read that
// authenticates both the account and directAddr and returns no records.
func (v *Verifier) ask(ctx context.Context, username string, password directapi.Secret, directAddr string) error {
	var err error
	if directAddr == "" {
		err = v.up.CheckCredentials(ctx, directapi.Authentication{Username: username, Password: password})
	} else {
		err = v.up.CheckTuser(ctx, directapi.AuthenticationWithTuser{Username: username, Password: password, DirectAddr: directAddr})
	}
	switch {
	case err == nil:
		return nil
	case errors.Is(err, upstream.ErrAuth):
		return fmt.Errorf("%w: %w", ErrAuthFailed, err)
	case errors.Is(err, upstream.ErrAddress):
		return fmt.Errorf("%w: %w", ErrAddress, err)
	default:
		// Transport failures, 5xx, malformed answers: never a false success,
		// never a false "wrong password" either.
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
}

// prune drops expired entries; called with mu held.
func (v *Verifier) prune() {
	now := v.now()
	for k, exp := range v.ok {
		if !now.Before(exp) {
			delete(v.ok, k)
		}
	}
	for k, last := range v.good {
		if now.Sub(last) > DefaultRememberGood {
			delete(v.good, k)
		}
	}
	if len(v.good) >= maxRemembered {
		clear(v.good) // they are checked by the provider again, under the gate
	}
}
