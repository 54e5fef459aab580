package restclient

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/directbridge/directbridge/upstream/directapi"
)

func TestIsAuthFailure(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"messaging code 1", &APIError{Op: "GetUIDs", Code: directapi.CodeAuthFailed}, true},
		{"registration 011", &APIError{Op: "Login", RegCode: "011"}, true},
		{"registration 001 is not 011", &APIError{Op: "Login", RegCode: "001"}, false},
		{"registration 1 is not 011", &APIError{Op: "Login", RegCode: "1"}, false},
		{"registration 111", &APIError{Op: "Login", RegCode: "111"}, false},
		{"messaging 11 is not 1", &APIError{Op: "GetUIDs", Code: 11}, false},
		{"messaging 2", &APIError{Op: "Send", Code: directapi.CodeAddressError}, false},
		{"messaging 0", &APIError{Op: "Send"}, false},
		{"registration code with stray messaging 1", &APIError{Op: "X", Code: 1, RegCode: "099"}, false},
		{"registration 999", &APIError{Op: "X", RegCode: directapi.RegCodeOther}, false},
		{"wrapped code 1", fmt.Errorf("mailbox: %w", &APIError{Code: 1}), true},
		{"double wrapped 011", fmt.Errorf("a: %w", fmt.Errorf("b: %w", &APIError{RegCode: "011"})), true},
		{"inside PartialError", &PartialError{Op: "MoveMessagesByUIDs", Done: 3, Err: &APIError{Code: 1}}, true},
		{"joined", errors.Join(io.EOF, &APIError{Code: 1}), true},
		{"temporary", &TemporaryError{Op: "GetUIDs", StatusCode: 401}, false},
		{"protocol 401", &ProtocolError{Op: "GetUIDs", StatusCode: 401, Err: io.EOF}, false},
		{"plain", errors.New("authentication failed"), false},
		{"nil", nil, false},
	}
	for _, tt := range tests {
		if got := IsAuthFailure(tt.err); got != tt.want {
			t.Errorf("%s: IsAuthFailure(%v) = %v; want %v", tt.name, tt.err, got, tt.want)
		}
	}
}

func TestIsAddressError(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"messaging 2", &APIError{Op: "Send", Code: directapi.CodeAddressError}, true},
		{"wrapped messaging 2", fmt.Errorf("smtp: %w", &APIError{Op: "Send", Code: 2}), true},
		{"messaging 1", &APIError{Code: 1}, false},
		{"messaging 3", &APIError{Code: 3}, false},
		{"registration 002", &APIError{RegCode: "002"}, false},
		{"registration with stray code 2", &APIError{Code: 2, RegCode: "002"}, false},
		{"temporary", &TemporaryError{StatusCode: 502}, false},
		{"nil", nil, false},
	}
	for _, tt := range tests {
		if got := IsAddressError(tt.err); got != tt.want {
			t.Errorf("%s: IsAddressError(%v) = %v; want %v", tt.name, tt.err, got, tt.want)
		}
	}
}

func TestIsTemporaryAndOutcomeUnknown(t *testing.T) {
	tests := []struct {
		name           string
		err            error
		temporary      bool
		outcomeUnknown bool
		apiError       bool
	}{
		{"429", &TemporaryError{Op: "Send", StatusCode: 429}, true, false, false},
		{"500 may have reached", &TemporaryError{Op: "Send", StatusCode: 500, MayHaveReached: true}, true, true, false},
		{"refused", &TemporaryError{Op: "Send", Err: errors.New("connection refused")}, true, false, false},
		{"wrapped reset", fmt.Errorf("smtp: %w", &TemporaryError{Op: "Send", MayHaveReached: true, Err: io.ErrUnexpectedEOF}), true, true, false},
		{"partial of temporary", &PartialError{Op: "SaveRawMessages", Done: 2, Err: &TemporaryError{MayHaveReached: true}}, true, true, false},
		{"api error", &APIError{Code: 3}, false, false, true},
		{"protocol error", &ProtocolError{StatusCode: 404, Err: io.EOF}, false, false, false},
		{"context cancelled", fmt.Errorf("restclient: Send: %w", context.Canceled), false, false, false},
		{"plain", errors.New("x"), false, false, false},
		{"nil", nil, false, false, false},
	}
	for _, tt := range tests {
		if got := IsTemporary(tt.err); got != tt.temporary {
			t.Errorf("%s: IsTemporary = %v; want %v", tt.name, got, tt.temporary)
		}
		if got := OutcomeUnknown(tt.err); got != tt.outcomeUnknown {
			t.Errorf("%s: OutcomeUnknown = %v; want %v", tt.name, got, tt.outcomeUnknown)
		}
		if got := IsAPIError(tt.err); got != tt.apiError {
			t.Errorf("%s: IsAPIError = %v; want %v", tt.name, got, tt.apiError)
		}
	}
}

func TestErrorsAsThroughWrapping(t *testing.T) {
	api := &APIError{Op: "GetUIDs", Code: 3, Message: "boom"}
	err := fmt.Errorf("mailbox: sync INBOX: %w", fmt.Errorf("poll: %w", api))
	var ae *APIError
	if !errors.As(err, &ae) || ae != api {
		t.Fatalf("errors.As(*APIError) through %%w failed: %v", err)
	}

	temp := &TemporaryError{Op: "Send", StatusCode: 503, RetryAfter: 30 * time.Second, MayHaveReached: true, Err: errors.New("HTTP 503")}
	err = fmt.Errorf("smtp: %w", temp)
	var te *TemporaryError
	if !errors.As(err, &te) || te.StatusCode != 503 || te.RetryAfter != 30*time.Second {
		t.Fatalf("errors.As(*TemporaryError) = %+v", te)
	}
	// Callers may test with an interface rather than the type.
	var tmp interface{ Temporary() bool }
	if !errors.As(err, &tmp) || !tmp.Temporary() {
		t.Fatal("TemporaryError does not satisfy interface{ Temporary() bool } through wrapping")
	}
	// TemporaryError unwraps to its cause.
	cause := io.ErrUnexpectedEOF
	if !errors.Is(fmt.Errorf("x: %w", &TemporaryError{Op: "Send", Err: cause}), cause) {
		t.Fatal("errors.Is does not reach the cause of a TemporaryError")
	}

	proto := &ProtocolError{Op: "GetUIDs", StatusCode: 404, Err: io.ErrUnexpectedEOF}
	err = fmt.Errorf("x: %w", proto)
	var pe *ProtocolError
	if !errors.As(err, &pe) || pe.StatusCode != 404 {
		t.Fatalf("errors.As(*ProtocolError) = %+v", pe)
	}
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatal("errors.Is does not reach the cause of a ProtocolError")
	}
}

func TestPartialErrorUnwrap(t *testing.T) {
	inner := &APIError{Op: "MoveMessagesByUIDs", Code: 3, Message: "folder gone"}
	p := &PartialError{Op: "MoveMessagesByUIDs", Done: 500, Err: inner}
	if errors.Unwrap(p) != inner {
		t.Fatal("PartialError.Unwrap does not return the cause")
	}
	wrapped := fmt.Errorf("imap: MOVE: %w", p)
	var pe *PartialError
	if !errors.As(wrapped, &pe) || pe.Done != 500 {
		t.Fatalf("errors.As(*PartialError) = %+v", pe)
	}
	var ae *APIError
	if !errors.As(wrapped, &ae) || ae.Code != 3 {
		t.Fatal("errors.As does not reach the APIError inside a PartialError")
	}
	sentinel := errors.New("sentinel")
	if !errors.Is(&PartialError{Err: fmt.Errorf("x: %w", sentinel)}, sentinel) {
		t.Fatal("errors.Is does not reach through PartialError")
	}
	msg := p.Error()
	for _, want := range []string{"MoveMessagesByUIDs", "500", "folder gone"} {
		if !strings.Contains(msg, want) {
			t.Errorf("PartialError.Error() = %q; want it to contain %q", msg, want)
		}
	}
}

func TestErrorMessages(t *testing.T) {
	tests := []struct {
		err  error
		want []string
	}{
		{&APIError{Op: "GetUIDs", Code: 1, Message: "bad credentials"}, []string{"GetUIDs", "code 1", "bad credentials"}},
		{&APIError{Op: "Login", RegCode: "011", Message: "login failed"}, []string{"Login", "011", "login failed"}},
		{&TemporaryError{Op: "Send", StatusCode: 503}, []string{"Send", "HTTP 503"}},
		{&TemporaryError{Op: "Send", Err: errors.New("connection reset")}, []string{"Send", "connection reset"}},
		{&ProtocolError{Op: "GetUIDs", StatusCode: 404, Err: errors.New("decoding response")}, []string{"GetUIDs", "404", "decoding response"}},
	}
	for _, tt := range tests {
		msg := tt.err.Error()
		for _, w := range tt.want {
			if !strings.Contains(msg, w) {
				t.Errorf("%T.Error() = %q; want it to contain %q", tt.err, msg, w)
			}
		}
	}
	// A registration error reads as a registration code, not "code 0".
	if msg := (&APIError{Op: "Login", RegCode: "011"}).Error(); strings.Contains(msg, "code 0") {
		t.Errorf("registration APIError.Error() = %q mentions messaging code 0", msg)
	}
}

func TestEnvelopeAPIError(t *testing.T) {
	if e := mustAPIError(t, &directapi.APIResponse{Success: true, Code: 3}, "X"); e != nil {
		t.Fatalf("success=true gave %v", e)
	}
	e := mustAPIError(t, &directapi.APIResponse{Success: false, Code: 2, Message: "no such address"}, "Send")
	if e == nil || e.Op != "Send" || e.Code != 2 || e.RegCode != "" || e.Message != "no such address" {
		t.Fatalf("apiError = %+v", e)
	}
	if e := mustAPIError(t, &directapi.ResellerAPIResponseType{Success: true, Code: "000"}, "Login"); e != nil {
		t.Fatalf("registration success gave %v", e)
	}
	e = mustAPIError(t, &directapi.ResellerAPIResponseType{Success: false, Code: "011", ErrorMessage: "auth"}, "Login")
	if e == nil || e.RegCode != "011" || e.Code != 0 || e.Message != "auth" || !IsAuthFailure(e) {
		t.Fatalf("registration apiError = %+v", e)
	}
	// A failure without a code still reads as a registration error.
	e = mustAPIError(t, &directapi.ResellerAPIResponseType{Success: false}, "Login")
	if e == nil || e.RegCode != directapi.RegCodeOther {
		t.Fatalf("registration apiError without code = %+v; want RegCode %q", e, directapi.RegCodeOther)
	}
}

// mustAPIError is apiError on a response type, which must hold an envelope.
func mustAPIError(t *testing.T, out envelope, op string) *APIError {
	t.Helper()
	ae, ok := apiError(op, out)
	if !ok {
		t.Fatalf("%T holds no envelope", out)
	}
	return ae
}

func TestEnvelopeOfEveryResponseType(t *testing.T) {
	for _, out := range []envelope{
		&directapi.APIResponse{}, &directapi.SendMessageResponseType{}, &directapi.DirectMessageStatusReportResponseType{},
		&directapi.GetFoldersResponseType{}, &directapi.GetCountResponse{}, &directapi.GetMessageResponse{},
		&directapi.GetUIDResponseType{}, &directapi.GetRawMessageResponse{},
		&directapi.ResellerAPIResponseType{}, &directapi.LoginResponseType{}, &directapi.AddUsersResponseV2Type{},
		&directapi.GetPatientAddressesResponseType{},
	} {
		if ae, ok := apiError("X", out); !ok || ae == nil {
			t.Errorf("%T: apiError of a zero (success=false) response = %v, %v; want an APIError", out, ae, ok)
		}
	}
	if _, ok := apiError("X", &struct{}{}); ok {
		t.Error("a type without an envelope was accepted")
	}
}
