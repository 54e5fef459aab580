package restclient

import (
	"errors"
	"fmt"
	"time"

	"github.com/directbridge/directbridge/upstream/directapi"
)

// APIError is an application failure: the provider answered with
// success=false. Messaging responses carry an integer Code; registration
// responses carry a string RegCode. Message is the provider's text (it never
// holds our password: the provider does not echo it, and we build no error
// text from request bodies).
type APIError struct {
	Op      string // operation name, e.g. "GetUIDs"
	Code    int    // messaging code (1 auth, 2 address, 3 and 4 other); 0 for registration
	RegCode string // registration code such as "011"; empty for messaging
	Message string
}

func (e *APIError) Error() string {
	if e.RegCode != "" {
		return fmt.Sprintf("restclient: %s: provider error %s: %s", e.Op, e.RegCode, e.Message)
	}
	return fmt.Sprintf("restclient: %s: provider error code %d: %s", e.Op, e.Code, e.Message)
}

// TemporaryError is a failure that may succeed later: a transport failure, a
// timeout, HTTP 429 or 5xx. The operation's retries, if it had any, are
// already spent when a caller sees it.
type TemporaryError struct {
	Op         string
	StatusCode int           // HTTP status, 0 for transport failures
	RetryAfter time.Duration // the server's Retry-After, if it sent one
	// MayHaveReached is true when the request may have been processed (it
	// was sent and no answer, or a 5xx, came back). For Send and the other
	// non-repeatable operations the outcome is then unknown.
	MayHaveReached bool
	Err            error
}

func (e *TemporaryError) Error() string {
	switch {
	case e.StatusCode != 0:
		return fmt.Sprintf("restclient: %s: temporary failure: HTTP %d", e.Op, e.StatusCode)
	default:
		return fmt.Sprintf("restclient: %s: temporary failure: %v", e.Op, e.Err)
	}
}

func (e *TemporaryError) Unwrap() error { return e.Err }

// Temporary reports true; it lets callers test with an interface too.
func (e *TemporaryError) Temporary() bool { return true }

// ProtocolError is a permanent failure that is not an application answer:
// an HTTP 4xx other than 429 without a provider envelope, or a body that is
// not the documented JSON.
type ProtocolError struct {
	Op         string
	StatusCode int
	Err        error
}

func (e *ProtocolError) Error() string {
	return fmt.Sprintf("restclient: %s: unexpected answer (HTTP %d): %v", e.Op, e.StatusCode, e.Err)
}

func (e *ProtocolError) Unwrap() error { return e.Err }

// PartialError reports a batched operation that failed after some batches
// had been carried out. Done UIDs (or items) were processed; the rest were not.
type PartialError struct {
	Op   string
	Done int // items processed before the failure
	Err  error
}

func (e *PartialError) Error() string {
	return fmt.Sprintf("restclient: %s: failed after %d items: %v", e.Op, e.Done, e.Err)
}

func (e *PartialError) Unwrap() error { return e.Err }

// CanceledError reports that the caller's context ended while a request
// was under way. It unwraps to context.Canceled or DeadlineExceeded.
type CanceledError struct {
	Op string
	// MayHaveReached is true when the request had been sent: the
	// provider may have carried it out.
	MayHaveReached bool
	Err            error
}

func (e *CanceledError) Error() string { return fmt.Sprintf("restclient: %s: %v", e.Op, e.Err) }

func (e *CanceledError) Unwrap() error { return e.Err }

// IsAuthFailure reports an authentication failure: messaging code 1 or
// registration code "011".
func IsAuthFailure(err error) bool {
	var ae *APIError
	return errors.As(err, &ae) && (ae.Code == directapi.CodeAuthFailed && ae.RegCode == "" || ae.RegCode == directapi.RegCodeAuthFailed)
}

// IsAddressError reports messaging code 2 (address error).
func IsAddressError(err error) bool {
	var ae *APIError
	return errors.As(err, &ae) && ae.RegCode == "" && ae.Code == directapi.CodeAddressError
}

// IsTemporary reports a failure worth retrying later: transport, timeout,
// HTTP 429 or 5xx.
func IsTemporary(err error) bool {
	var te *TemporaryError
	return errors.As(err, &te)
}

// IsAPIError reports any application failure (success=false).
func IsAPIError(err error) bool {
	var ae *APIError
	return errors.As(err, &ae)
}

// OutcomeUnknown reports a failure after which the provider may or may not
// have carried out the request. For Send this means the message may have
// gone out; callers must not claim either result.
func OutcomeUnknown(err error) bool {
	var te *TemporaryError
	var ce *CanceledError
	return errors.As(err, &te) && te.MayHaveReached || errors.As(err, &ce) && ce.MayHaveReached
}
