// Package admin is the bridge's local administration interface: a Unix
// socket that speaks newline-delimited JSON, for the registration
// operations (provisioning patient Direct addresses, address look-ups,
// password resets), the delivery status of sent messages, and health.
// `directbridge admin` is its command-line client; Client is its Go client.
//
// # Access control
//
// The file system is the access control. The socket file is created with
// mode 0600 (it is bound in a private directory and renamed into place, so
// it is never visible with wider permissions) in a directory that should be
// 0700, as the bridge's data directory is. Only the user the bridge runs as,
// and root, can connect. There is no further authentication: whoever can
// connect can provision addresses, which may cost the reseller money, and
// can look patients up by name, date of birth and SSN4.
//
// # Protocol
//
// A client writes one request per line and reads one response line per
// request, in order; a connection may carry any number of requests:
//
//	{"op": "patient-by-username", "args": {"domain": "direct.example", "username": "jane.doe"}}
//	{"ok": true, "result": {"patient": [...]}}
//	{"ok": false, "error": "Direct address not found: nobody@direct.example", "code": "210"}
//
// Code is the provider's own code when the provider refused the request:
// a registration code such as "011" or "210", or a messaging code such as
// "1" (authentication failed) or "2" (address error), written as a string.
// Failures of the bridge itself have the word codes below (CodeBadRequest
// and the rest). A request line may be at most MaxRequestBytes long; a
// longer one is answered with CodeTooLarge and the connection is closed.
//
// Passwords, SSN4, dates of birth and names are never logged: the log
// shows the operation, its result code and its duration only.
package admin

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"github.com/directbridge/directbridge/upstream/directapi"
)

// MaxRequestBytes bounds one request line, newline included.
const MaxRequestBytes = 1 << 20

// The operations.
const (
	OpProvision         = "provision"
	OpPatientByMeta     = "patient-by-meta"
	OpPatientByUsername = "patient-by-username"
	OpSetPasswords      = "set-passwords"
	OpStatus            = "status"
	OpStatusTuser       = "status-tuser"
	OpHealth            = "health"
)

// Codes of failures that are the bridge's, not the provider's.
const (
	CodeBadRequest    = "bad_request"    // not JSON, unknown field, missing or invalid argument
	CodeUnknownOp     = "unknown_op"     // no such operation
	CodeTooLarge      = "too_large"      // request line longer than MaxRequestBytes
	CodeNotConfigured = "not_configured" // no registration account is configured
	CodeTimeout       = "timeout"        // the request took longer than the server's time limit
	CodeUnavailable   = "unavailable"    // provider unreachable, or busy (HTTP 429, 5xx) after retries
	CodeProtocol      = "protocol"       // the provider's answer was not the documented JSON
	CodeBusy          = "busy"           // too many connections; try again
	CodeShuttingDown  = "shutting_down"  // the bridge is stopping
	CodeInternal      = "internal"       // a bug; the message says what
)

// Request is one request line.
type Request struct {
	Op   string          `json:"op"`
	Args json.RawMessage `json:"args,omitempty"`
}

// Response is one response line. Result is set when OK, Error and Code
// otherwise.
type Response struct {
	OK     bool            `json:"ok"`
	Result json.RawMessage `json:"result,omitempty"`
	Error  string          `json:"error,omitempty"`
	Code   string          `json:"code,omitempty"`
}

// Error is a failure answer: the provider's code and message, or one of
// the bridge's own codes.
type Error struct {
	Code    string
	Message string
}

func (e *Error) Error() string { return fmt.Sprintf("%s (code %s)", e.Message, e.Code) }

func errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Identity names an identity-proofed patient: by ID, or by all of
// FirstName, LastName, SSN4 and DOB (registration-rest.md, IDProofedIndividual).
type Identity struct {
	ID        int64  `json:"id,omitempty"`
	FirstName string `json:"firstName,omitempty"`
	LastName  string `json:"lastName,omitempty"`
	SSN4      string `json:"ssn4,omitempty"`
	DOB       string `json:"dob,omitempty"`
}

// LogValue keeps the patient's identity out of logs.
func (p Identity) LogValue() slog.Value { return slog.StringValue("[patient identity]") }

// ProvisionArgs are the arguments of "provision". DirectUsername and
// DirectPassword may be left empty, as the provider allows; the password is
// never part of any answer.
type ProvisionArgs struct {
	Domain string `json:"domain"`
	Identity
	DirectUsername string           `json:"directUsername,omitempty"`
	DirectPassword directapi.Secret `json:"directPassword,omitempty"`
}

// LogValue keeps the patient's identity and password out of logs.
func (a ProvisionArgs) LogValue() slog.Value {
	return slog.GroupValue(slog.String("domain", a.Domain), slog.Any("patient", a.Identity))
}

// ProvisionResult answers "provision": the new users and the order that
// paid for them (AddUsersResponseV2Type without its envelope).
type ProvisionResult struct {
	Users               []directapi.DirectUserDetail   `json:"users"`
	PaymentConfirmation *directapi.PaymentConfirmation `json:"paymentConfirmation,omitempty"`
}

// PatientByMetaArgs are the arguments of "patient-by-meta".
type PatientByMetaArgs struct {
	Domain string `json:"domain"`
	Identity
}

// LogValue keeps the patient's identity out of logs.
func (a PatientByMetaArgs) LogValue() slog.Value {
	return slog.GroupValue(slog.String("domain", a.Domain), slog.Any("patient", a.Identity))
}

// PatientByUsernameArgs are the arguments of "patient-by-username".
// Username is the local part of the Direct address.
type PatientByUsernameArgs struct {
	Domain   string `json:"domain"`
	Username string `json:"username"`
}

// PatientsResult answers both look-ups (GetPatientAddressesResponseType
// without its envelope).
type PatientsResult struct {
	Patient []directapi.DirectUserDetail `json:"patient"`
}

// SetPasswordsArgs are the arguments of "set-passwords".
type SetPasswordsArgs struct {
	Domain    string                   `json:"domain"`
	Passwords []directapi.UserPassword `json:"passwords"`
}

// SetPasswordsResult answers "set-passwords" with the usernames whose
// password was set.
type SetPasswordsResult struct {
	Updated []string `json:"updated"`
}

// StatusArgs are the arguments of "status". User and Password are the
// mailbox's own credentials, which the provider's status operations
// require; the bridge neither keeps nor logs them. Without SmtpIDs the
// status of the mailbox's messages sent through the bridge in the last
// RecentWindow (at most RecentLimit of them) is reported.
type StatusArgs struct {
	User     string           `json:"user"`
	Password directapi.Secret `json:"password"`
	SmtpIDs  []string         `json:"smtpIds,omitempty"`
}

// StatusTuserArgs are the arguments of "status-tuser": User is a T-user
// acting for the mailbox DirectAddr. SmtpIDs are required.
type StatusTuserArgs struct {
	User       string           `json:"user"`
	Password   directapi.Secret `json:"password"`
	DirectAddr string           `json:"directAddr"`
	SmtpIDs    []string         `json:"smtpIds"`
}

// StatusResult answers the status operations: one record per message and
// recipient, whether the provider sent messageLogs or csvData. Sent lists
// the bridge's records of the messages asked about when they were taken
// from its state store (status without smtpIds).
type StatusResult struct {
	MessageLogs []directapi.DirectMessageLog `json:"messageLogs"`
	Sent        []SentMessage                `json:"sent,omitempty"`
}

// SentMessage is a message the bridge submitted for a mailbox.
type SentMessage struct {
	SmtpID    string    `json:"smtpId"`
	MessageID string    `json:"messageId"`
	SentAt    time.Time `json:"sentAt"`
}

// HealthResult answers "health".
type HealthResult struct {
	Provider      ProviderHealth `json:"provider"`
	Registration  bool           `json:"registration"` // a registration account is configured
	Started       time.Time      `json:"started"`
	Uptime        string         `json:"uptime"`
	UptimeSeconds float64        `json:"uptimeSeconds"`
}

// ProviderHealth is the result of one probe of the provider.
type ProviderHealth struct {
	Reachable bool   `json:"reachable"`
	LatencyMS int64  `json:"latencyMs"`
	Error     string `json:"error,omitempty"`
}
