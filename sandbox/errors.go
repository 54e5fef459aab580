package sandbox

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/directbridge/directbridge/upstream/directapi"
)

// Messaging result codes as the sandbox uses them. The document gives
// 1 (authentication failed), 2 (address error) and "3 and 4: other error".
// The sandbox gives 3 to requests it refuses (bad input, unknown folder or
// UID, reserved folder) and 4 to its own failures, so a client can tell
// "your request is wrong" from "try later".
const (
	CodeAuthFailed   = directapi.CodeAuthFailed
	CodeAddressError = directapi.CodeAddressError
	CodeBadRequest   = 3
	CodeServerError  = 4
)

// msgError is a messaging failure answered with success=false.
type msgError struct {
	code   int
	status int // HTTP status; 200 for application answers
	msg    string
}

func (e *msgError) Error() string { return e.msg }

func errAuth() error {
	return &msgError{code: CodeAuthFailed, status: http.StatusOK, msg: "authentication failed"}
}

func errAddress(format string, args ...any) error {
	return &msgError{code: CodeAddressError, status: http.StatusOK, msg: fmt.Sprintf(format, args...)}
}

func errInvalid(format string, args ...any) error {
	return &msgError{code: CodeBadRequest, status: http.StatusOK, msg: fmt.Sprintf(format, args...)}
}

// regError is a registration failure answered with success=false.
type regError struct {
	code string
	msg  string
}

func (e *regError) Error() string { return e.code + " " + e.msg }

func regErr(code, format string, args ...any) error {
	return &regError{code: code, msg: fmt.Sprintf(format, args...)}
}

// badBody is a request body the sandbox cannot read at all: malformed
// JSON, not UTF-8, or too large. It is answered with an HTTP error status
// and the service's usual envelope.
type badBody struct {
	status int
	msg    string
}

func (e *badBody) Error() string { return e.msg }

// msgEnvelope maps any error to the messaging envelope and HTTP status.
func msgEnvelope(err error) (int, directapi.APIResponse) {
	var me *msgError
	var bb *badBody
	switch {
	case errors.As(err, &me):
		return me.status, directapi.APIResponse{Success: false, Code: me.code, Message: me.msg}
	case errors.As(err, &bb):
		return bb.status, directapi.APIResponse{Success: false, Code: CodeBadRequest, Message: bb.msg}
	default:
		return http.StatusInternalServerError, directapi.APIResponse{Success: false, Code: CodeServerError, Message: "internal error"}
	}
}

// regEnvelope maps any error to the registration envelope and HTTP status.
func regEnvelope(err error) (int, directapi.ResellerAPIResponseType) {
	var re *regError
	var bb *badBody
	switch {
	case errors.As(err, &re):
		return http.StatusOK, directapi.ResellerAPIResponseType{Code: re.code, Success: false, ErrorMessage: re.msg}
	case errors.As(err, &bb):
		return bb.status, directapi.ResellerAPIResponseType{Code: directapi.RegCodeInvalidArgument, Success: false, ErrorMessage: bb.msg}
	default:
		return http.StatusInternalServerError, directapi.ResellerAPIResponseType{Code: directapi.RegCodeOther, Success: false, ErrorMessage: "internal error"}
	}
}

func ok() directapi.APIResponse {
	return directapi.APIResponse{Success: true, Code: 0, Message: "OK"}
}

func regOK() directapi.ResellerAPIResponseType {
	return directapi.ResellerAPIResponseType{Code: directapi.RegCodeSuccess, Success: true}
}
