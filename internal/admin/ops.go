package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/directbridge/directbridge/restclient"
	"github.com/directbridge/directbridge/upstream"
	"github.com/directbridge/directbridge/upstream/directapi"
)

// Bounds of the status operations.
const (
	// RecentWindow and RecentLimit choose the messages "status" reports
	// when no smtpIds are given.
	RecentWindow = 7 * 24 * time.Hour
	RecentLimit  = 100
	// maxSmtpIDs bounds the smtpIds of one "status" request (the client
	// batches them); maxTuserSmtpIDs those of "status-tuser", which costs
	// one provider call per smtpId.
	maxSmtpIDs      = 5000
	maxTuserSmtpIDs = 100
	// maxPasswords bounds the entries of one "set-passwords" request.
	maxPasswords = 1000
)

// handler runs one operation with its raw arguments.
type handler func(ctx context.Context, args json.RawMessage) (any, error)

func (s *Server) handlers() map[string]handler {
	return map[string]handler{
		OpProvision:         s.provision,
		OpPatientByMeta:     s.patientByMeta,
		OpPatientByUsername: s.patientByUsername,
		OpSetPasswords:      s.setPasswords,
		OpStatus:            s.status,
		OpStatusTuser:       s.statusTuser,
		OpHealth:            s.health,
		OpForward:           s.forward,
		OpStats:             s.stats,
		OpMessages:          s.messages,
	}
}

// handle answers one request line. It never panics and never takes longer
// than the request time limit (plus the time to notice it).
func (s *Server) handle(line []byte) (resp Response) {
	start := time.Now()
	op := "?"
	defer func() {
		if v := recover(); v != nil {
			s.log.Error("admin request panicked", "op", op, "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
			resp = failure(errorf(CodeInternal, "internal error in %s", op))
		}
		level := slog.LevelInfo
		if op == OpHealth {
			level = slog.LevelDebug // probes may ask every few seconds
		}
		// Only the operation and the outcome: arguments hold passwords,
		// names, dates of birth and SSN4.
		s.log.LogAttrs(context.Background(), level, "admin request", slog.String("op", op),
			slog.Bool("ok", resp.OK), slog.String("code", resp.Code), slog.Duration("duration", time.Since(start)))
	}()

	var req Request
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	err := dec.Decode(&req)
	if err == nil {
		if _, terr := dec.Token(); !errors.Is(terr, io.EOF) {
			err = errTrailing
		}
	}
	if err != nil {
		return failure(errorf(CodeBadRequest, "a request is one JSON object {\"op\": ..., \"args\": {...}} per line: %v", jsonProblem(err)))
	}
	h, ok := s.ops[req.Op]
	if !ok {
		if len(req.Op) > 64 {
			req.Op = req.Op[:64] + "..."
		}
		return failure(errorf(CodeUnknownOp, "unknown op %q", req.Op))
	}
	op = req.Op
	ctx, cancel := context.WithTimeout(s.ctx, s.cfg.RequestTimeout)
	defer cancel()
	// Every provider request the operation makes, through the Client or
	// the Registrar, waits for the budget (restclient paces what its
	// context carries); a wait that outlasts the time limit is a timeout.
	result, err := h(upstream.Charge(ctx, s.cfg.Budget, BudgetUser), req.Args)
	if err != nil {
		return failure(s.classify(ctx, op, err))
	}
	b, err := marshal(result)
	if err != nil {
		return failure(errorf(CodeInternal, "encoding the result: %v", err))
	}
	return Response{OK: true, Result: b}
}

var errTrailing = errors.New("more than one JSON value on the line")

// jsonProblem describes a decoding error without quoting the input, which
// may hold a password.
func jsonProblem(err error) string {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return fmt.Sprintf("syntax error at byte %d", se.Offset)
	case errors.As(err, &te):
		return fmt.Sprintf("field %q must be %s", te.Field, te.Type)
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return strings.TrimPrefix(err.Error(), "json: ")
	case errors.Is(err, errTrailing):
		return err.Error()
	default:
		return "not JSON"
	}
}

// decodeArgs decodes args strictly: an unknown field is a mistake worth
// reporting (smtpID for smtpIds), not something to ignore.
func decodeArgs(raw json.RawMessage, v any) error {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return errorf(CodeBadRequest, "args: %s", jsonProblem(err))
	}
	return nil
}

// classify turns an error into the answer's code and message: the
// provider's code when it refused, else one of the bridge's own.
func (s *Server) classify(ctx context.Context, op string, err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	var ae *restclient.APIError
	if errors.As(err, &ae) {
		code := ae.RegCode
		if code == "" {
			code = strconv.Itoa(ae.Code)
		}
		msg := ae.Message
		if msg == "" {
			msg = "the provider refused " + ae.Op
		}
		return &Error{Code: code, Message: msg}
	}
	var out *Error
	var pe *restclient.ProtocolError
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded) || errors.Is(err, context.DeadlineExceeded):
		out = errorf(CodeTimeout, "no answer within %s", s.cfg.RequestTimeout)
	case errors.Is(err, context.Canceled):
		out = errorf(CodeShuttingDown, "the bridge is stopping")
	case restclient.IsTemporary(err):
		out = errorf(CodeUnavailable, "provider unavailable: %v", err)
	case errors.As(err, &pe):
		out = errorf(CodeProtocol, "%v", err)
	default:
		out = errorf(CodeInternal, "%v", err)
	}
	if op == OpProvision && (restclient.OutcomeUnknown(err) || out.Code == CodeTimeout) {
		out.Message += "; the address may have been provisioned all the same: look it up (patient-by-username) before trying again"
	}
	return out
}

// registrationArgs are the arguments of a registration operation.
type registrationArgs interface {
	validate() error
}

// registrar decodes and checks the arguments of a registration operation
// and returns the registration account to run it with.
func (s *Server) registrar(raw json.RawMessage, a registrationArgs) (*restclient.Registrar, error) {
	if err := decodeArgs(raw, a); err != nil {
		return nil, err
	}
	if err := a.validate(); err != nil {
		return nil, err
	}
	if s.cfg.Registrar == nil {
		return nil, errorf(CodeNotConfigured,
			"no registration account: set DIRECTBRIDGE_RESELLER_USER and DIRECTBRIDGE_RESELLER_PASSWORD")
	}
	return s.cfg.Registrar, nil
}

func required(field, value string) error {
	if strings.TrimSpace(value) == "" {
		return errorf(CodeBadRequest, "args: %s is required", field)
	}
	return nil
}

// check requires an id or all four identifying fields, as the document
// does ("only if id absent").
func (p Identity) check() error {
	if p.ID < 0 {
		return errorf(CodeBadRequest, "args: id must be positive")
	}
	if p.ID > 0 {
		return nil
	}
	for _, f := range []struct{ name, value string }{
		{"firstName", p.FirstName}, {"lastName", p.LastName}, {"ssn4", p.SSN4}, {"dob", p.DOB},
	} {
		if strings.TrimSpace(f.value) == "" {
			return errorf(CodeBadRequest, "args: id, or firstName, lastName, ssn4 and dob, are required (%s is missing)", f.name)
		}
	}
	return nil
}

func (p Identity) individual() directapi.IDProofedIndividual {
	return directapi.IDProofedIndividual{ID: p.ID, FirstName: p.FirstName, LastName: p.LastName, SSN4: p.SSN4, DOB: p.DOB}
}

func (a *ProvisionArgs) validate() error {
	if err := required("domain", a.Domain); err != nil {
		return err
	}
	return a.check()
}

func (a *PatientByMetaArgs) validate() error {
	if err := required("domain", a.Domain); err != nil {
		return err
	}
	return a.check()
}

func (a *PatientByUsernameArgs) validate() error {
	if err := required("domain", a.Domain); err != nil {
		return err
	}
	return required("username", a.Username)
}

func (a *SetPasswordsArgs) validate() error {
	if err := required("domain", a.Domain); err != nil {
		return err
	}
	if len(a.Passwords) == 0 {
		return errorf(CodeBadRequest, "args: passwords must list at least one {username, password}")
	}
	if len(a.Passwords) > maxPasswords {
		return errorf(CodeBadRequest, "args: at most %d passwords per request", maxPasswords)
	}
	for i, up := range a.Passwords {
		if strings.TrimSpace(up.Username) == "" || up.Password == "" {
			return errorf(CodeBadRequest, "args: passwords[%d] needs a username and a password", i)
		}
	}
	return nil
}

// scrub blanks the one secret a DirectUserDetail can carry, should a
// provider ever send it back.
func scrub(users []directapi.DirectUserDetail) []directapi.DirectUserDetail {
	if users == nil {
		return []directapi.DirectUserDetail{}
	}
	for i := range users {
		users[i].EndpointPassword = ""
	}
	return users
}

func (s *Server) provision(ctx context.Context, raw json.RawMessage) (any, error) {
	var a ProvisionArgs
	reg, err := s.registrar(raw, &a)
	if err != nil {
		return nil, err
	}
	resp, err := reg.ProvisionIDProofedPatient(ctx, a.Domain, directapi.IDProofedIndividualRESTful{
		IDProofedIndividual: a.individual(),
		DirectUsername:      a.DirectUsername,
		DirectPassword:      a.DirectPassword,
	})
	if err != nil {
		return nil, err
	}
	return ProvisionResult{Users: scrub(resp.Users), PaymentConfirmation: resp.PaymentConfirmation}, nil
}

func (s *Server) patientByMeta(ctx context.Context, raw json.RawMessage) (any, error) {
	var a PatientByMetaArgs
	reg, err := s.registrar(raw, &a)
	if err != nil {
		return nil, err
	}
	users, err := reg.GetPatientAddressByMeta(ctx, a.Domain, a.individual())
	if err != nil {
		return nil, err
	}
	return PatientsResult{Patient: scrub(users)}, nil
}

func (s *Server) patientByUsername(ctx context.Context, raw json.RawMessage) (any, error) {
	var a PatientByUsernameArgs
	reg, err := s.registrar(raw, &a)
	if err != nil {
		return nil, err
	}
	users, err := reg.GetPatientAddressByUsername(ctx, a.Domain, a.Username)
	if err != nil {
		return nil, err
	}
	return PatientsResult{Patient: scrub(users)}, nil
}

func (s *Server) setPasswords(ctx context.Context, raw json.RawMessage) (any, error) {
	var a SetPasswordsArgs
	reg, err := s.registrar(raw, &a)
	if err != nil {
		return nil, err
	}
	if err := reg.SetPatientsPasswords(ctx, a.Domain, a.Passwords); err != nil {
		return nil, err
	}
	updated := make([]string, len(a.Passwords))
	for i, up := range a.Passwords {
		updated[i] = up.Username
	}
	return SetPasswordsResult{Updated: updated}, nil
}

func checkSmtpIDs(ids []string, limit int) error {
	if len(ids) > limit {
		return errorf(CodeBadRequest, "args: at most %d smtpIds per request", limit)
	}
	for i, id := range ids {
		if strings.TrimSpace(id) == "" {
			return errorf(CodeBadRequest, "args: smtpIds[%d] is empty", i)
		}
	}
	return nil
}

func (s *Server) status(ctx context.Context, raw json.RawMessage) (any, error) {
	var a StatusArgs
	if err := decodeArgs(raw, &a); err != nil {
		return nil, err
	}
	if err := required("user", a.User); err != nil {
		return nil, err
	}
	if a.Password == "" {
		return nil, errorf(CodeBadRequest, "args: password is required (the provider asks for the mailbox's own credentials)")
	}
	if err := checkSmtpIDs(a.SmtpIDs, maxSmtpIDs); err != nil {
		return nil, err
	}
	auth := directapi.Authentication{Username: a.User, Password: a.Password}
	ids := a.SmtpIDs
	var result StatusResult
	if len(ids) == 0 {
		if s.cfg.Store == nil {
			return nil, errorf(CodeBadRequest, "args: smtpIds are required (this bridge keeps no sent records)")
		}
		recs, err := s.cfg.Store.RecentSent(ctx, a.User, time.Now().Add(-RecentWindow), RecentLimit)
		if err != nil {
			return nil, err
		}
		result.Sent = []SentMessage{}
		for _, r := range recs {
			result.Sent = append(result.Sent, SentMessage{SmtpID: r.SmtpID, MessageID: r.MessageID, SentAt: r.SentAt})
			ids = append(ids, r.SmtpID)
		}
	}
	var logs []directapi.DirectMessageLog
	var err error
	switch len(ids) {
	case 0:
		// Nothing to ask about, but a wrong password must not pass for
		// "no messages": one cheap authenticated call checks it.
		_, err = s.cfg.Client.GetMessageCount(ctx, auth, "INBOX")
	case 1:
		logs, err = s.cfg.Client.GetMessageStatus(ctx, auth, ids[0])
	default:
		logs, err = s.cfg.Client.GetMessageStatuses(ctx, auth, ids)
	}
	if err != nil {
		return nil, err
	}
	result.MessageLogs = logs
	if result.MessageLogs == nil {
		result.MessageLogs = []directapi.DirectMessageLog{}
	}
	return result, nil
}

func (s *Server) statusTuser(ctx context.Context, raw json.RawMessage) (any, error) {
	var a StatusTuserArgs
	if err := decodeArgs(raw, &a); err != nil {
		return nil, err
	}
	if err := required("user", a.User); err != nil {
		return nil, err
	}
	if a.Password == "" {
		return nil, errorf(CodeBadRequest, "args: password is required")
	}
	if err := required("directAddr", a.DirectAddr); err != nil {
		return nil, err
	}
	if len(a.SmtpIDs) == 0 {
		return nil, errorf(CodeBadRequest, "args: smtpIds are required")
	}
	if err := checkSmtpIDs(a.SmtpIDs, maxTuserSmtpIDs); err != nil {
		return nil, err
	}
	auth := directapi.AuthenticationWithTuser{Username: a.User, Password: a.Password, DirectAddr: a.DirectAddr}
	result := StatusResult{MessageLogs: []directapi.DirectMessageLog{}}
	for _, id := range a.SmtpIDs {
		logs, err := s.cfg.Client.GetMessageStatusWithTuser(ctx, auth, id)
		if err != nil {
			return nil, err
		}
		result.MessageLogs = append(result.MessageLogs, logs...)
	}
	return result, nil
}

// errNoProbe is the health of a server given no Probe.
var errNoProbe = errors.New("not checked: no provider probe configured")

func (s *Server) health(ctx context.Context, raw json.RawMessage) (any, error) {
	if err := decodeArgs(raw, &struct{}{}); err != nil {
		return nil, err
	}
	pctx, cancel := context.WithTimeout(ctx, s.cfg.HealthTimeout)
	defer cancel()
	var latency time.Duration
	err := errNoProbe
	if s.cfg.Probe != nil {
		latency, err = s.cfg.Probe(pctx)
	}
	res := HealthResult{
		Provider:     ProviderHealth{Reachable: err == nil, LatencyMS: latency.Milliseconds()},
		Registration: s.cfg.Registrar != nil,
		Started:      s.started.UTC().Truncate(time.Second),
	}
	if err != nil {
		res.Provider.Error = err.Error()
	}
	up := time.Since(s.started)
	res.Uptime = up.Truncate(time.Second).String()
	res.UptimeSeconds = up.Seconds()
	return res, nil
}
