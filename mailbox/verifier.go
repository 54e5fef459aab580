package mailbox

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/directbridge/directbridge/directapi"
	"github.com/directbridge/directbridge/upstream"
)

// Sentinel errors of credential checks. The protocol fronts map them to
// their replies (IMAP NO [AUTHENTICATIONFAILED] / [UNAVAILABLE], SMTP 535 /
// 454); the provider's error is wrapped beside them.
var (
	// ErrAuthFailed means the provider refused the credentials.
	ErrAuthFailed = errors.New("mailbox: authentication failed")
	// ErrUnavailable means the provider could not be asked.
	ErrUnavailable = errors.New("mailbox: provider unavailable")
	// ErrAddress means a T-user's directAddr is not an address the provider accepts.
	ErrAddress = errors.New("mailbox: address refused")
)

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
type Verifier struct {
	up    upstream.Provider
	ttl   time.Duration
	now   func() time.Time
	key   []byte
	mu    sync.Mutex
	ok    map[[32]byte]time.Time // expiry of remembered successes
	calls map[[32]byte]*flight
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
	return &Verifier{up: up, ttl: ttl, now: time.Now, key: key, ok: map[[32]byte]time.Time{}, calls: map[[32]byte]*flight{}}
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

// Forget drops remembered successes of a user, e.g. after the provider
// refused their credentials on a later call.
func (v *Verifier) Forget(username string, password directapi.Secret, directAddr string) {
	v.mu.Lock()
	delete(v.ok, v.keyOf(username, password, directAddr))
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
	k := v.keyOf(username, password, directAddr)
	v.mu.Lock()
	if exp, ok := v.ok[k]; ok && v.now().Before(exp) {
		v.mu.Unlock()
		return nil
	}
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
	f.err = v.ask(ctx, username, password, directAddr)
	v.mu.Lock()
	delete(v.calls, k)
	if f.err == nil {
		v.ok[k] = v.now().Add(v.ttl)
		v.prune()
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
}
