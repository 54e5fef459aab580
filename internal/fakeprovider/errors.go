package fakeprovider

import (
	"errors"
	"fmt"

	"github.com/directbridge/directbridge/upstream"
)

// refusal is the provider's success=false answer with its code, before
// it is classified the way restclient.Upstream classifies it.
type refusal struct {
	code int // 1 authentication, 2 address, 3 other error
	msg  string
}

func (r *refusal) Error() string { return r.msg }

// errAuth is code 1.
var errAuth = &refusal{code: 1, msg: "authentication failed"}

// errInvalid is code 3, which the sandbox gives every request it turns
// down (unknown folder or UID, reserved folder, bad input).
func errInvalid(format string, args ...any) error {
	return &refusal{code: 3, msg: fmt.Sprintf(format, args...)}
}

// errAddress is code 2.
func errAddress(format string, args ...any) error {
	return &refusal{code: 2, msg: fmt.Sprintf(format, args...)}
}

// The underlying errors of injected faults, for logs.
var (
	errInjected = errors.New("fakeprovider: injected fault: the provider did not answer")
	errLost     = errors.New("fakeprovider: injected fault: the change was made and its answer lost")
)

// classify maps a refusal as restclient.Upstream does: code 1 is ErrAuth,
// code 2 ErrAddress, code 3 ErrRefused, all with the provider's text. The
// adapter never answers ErrNotFound or ErrReserved: the provider has no
// code for them.
func classify(restOp string, err error) error {
	var r *refusal
	if !errors.As(err, &r) {
		return classified(restOp, upstream.ErrTemporary, "", err)
	}
	switch r.code {
	case 1:
		return classified(restOp, upstream.ErrAuth, "", err)
	case 2:
		return classified(restOp, upstream.ErrAddress, r.msg, err)
	}
	return classified(restOp, upstream.ErrRefused, r.msg, err)
}

func classified(restOp string, class error, msg string, err error) error {
	return &upstream.Error{Op: restOp, Class: class, Message: msg, Err: err}
}
