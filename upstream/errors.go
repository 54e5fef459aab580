package upstream

import (
	"errors"
	"fmt"
)

// The classes of provider failures. Every error a Provider returns wraps
// exactly one of them (test with errors.Is), beside the underlying error,
// which keeps the detail for logs. The fronts map classes to protocol
// replies, each in one file of its own.
var (
	// ErrAuth: the provider refused the credentials.
	ErrAuth = errors.New("upstream: authentication failed")
	// ErrAddress: the provider refused an address (a recipient, a
	// T-user's directAddr).
	ErrAddress = errors.New("upstream: address refused")
	// ErrNotFound: the folder or message does not exist. The provider's
	// documents give no code for it; the mail engine concludes it from
	// the folder list after a refusal.
	ErrNotFound = errors.New("upstream: not found")
	// ErrReserved: the folder is one the provider reserves (INBOX,
	// INBOX.Sent, INBOX.Templates, INBOX.Drafts, INBOX.Spam).
	ErrReserved = errors.New("upstream: reserved folder")
	// ErrRefused: the provider answered success=false to a well-formed
	// request (codes 3 and 4: "other error"), or refused it at the HTTP
	// level. Repeating it will not help.
	ErrRefused = errors.New("upstream: refused by the provider")
	// ErrTemporary: the provider could not be asked or did not answer in
	// time, and the request certainly did not take effect. Try later.
	ErrTemporary = errors.New("upstream: provider unavailable")
	// ErrUnknownOutcome: the request may or may not have taken effect (it
	// was sent and no answer came back). A change must not be repeated
	// blindly, and must not be reported as done.
	ErrUnknownOutcome = errors.New("upstream: outcome unknown")
)

// Error is a classified provider failure.
type Error struct {
	Op    string // the operation, e.g. "Save"
	Class error  // one of the sentinels above
	// Message is the provider's own text for refusals, safe to show to
	// the user (it never holds credentials); empty otherwise.
	Message string
	Err     error // the underlying failure
	// Busy: the provider asked the bridge to slow down (HTTP 429).
	Busy bool
	// Unreachable: no answer came at all (connection refused, reset,
	// timed out), as opposed to an answer that said "failed".
	Unreachable bool
}

// Detail returns the classified error err holds, or nil.
func Detail(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return nil
}

func (e *Error) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("%s: %v", e.Op, e.Class)
	}
	return fmt.Sprintf("%s: %v: %v", e.Op, e.Class, e.Err)
}

// Unwrap lets errors.Is find both the class and the underlying error.
func (e *Error) Unwrap() []error { return []error{e.Class, e.Err} }

// Classify wraps err, if not nil, as a failure of class for op.
func Classify(op string, class, err error) error {
	if err == nil {
		return nil
	}
	return &Error{Op: op, Class: class, Err: err}
}

// ProviderMessage returns the provider's own text of a refusal, or "".
func ProviderMessage(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Message
	}
	return ""
}

// IsRefusal reports that the provider answered and turned the request
// down (as opposed to not answering, or refusing the credentials): the
// request did not take effect.
func IsRefusal(err error) bool {
	return errors.Is(err, ErrRefused) || errors.Is(err, ErrAddress) || errors.Is(err, ErrNotFound) || errors.Is(err, ErrReserved)
}
