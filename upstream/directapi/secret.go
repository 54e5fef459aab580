package directapi

import (
	"fmt"
	"log/slog"
)

// Secret is a password or session token. It marshals to JSON as a plain
// string, because the provider needs it in request bodies, but it never shows
// itself anywhere else: every fmt verb (including %#v and %+v on a struct
// that holds one) prints "[redacted]", and log/slog sees the same.
type Secret string

const redacted = "[redacted]"

// String returns a fixed placeholder so a Secret cannot leak through %s.
func (Secret) String() string { return redacted }

// GoString keeps the secret out of %#v output.
func (Secret) GoString() string { return `directapi.Secret("` + redacted + `")` }

// Format implements fmt.Formatter; fmt prefers it over every other method,
// also for fields nested inside structs.
func (Secret) Format(f fmt.State, verb rune) { fmt.Fprint(f, redacted) }

// LogValue implements slog.LogValuer.
func (Secret) LogValue() slog.Value { return slog.StringValue(redacted) }

// Reveal returns the secret's text. Only code that puts the secret on the
// wire or compares it should call it.
func (s Secret) Reveal() string { return string(s) }

// The types below hold a Secret. slog's JSON handler writes a struct value
// with encoding/json, which (as the provider needs) writes a Secret as its
// plain text, so logging one of them with slog.Any would reveal the
// password. Their LogValue methods show the same fields with the Secret
// redacted.

// LogValue implements slog.LogValuer.
func (a Authentication) LogValue() slog.Value {
	return slog.GroupValue(slog.String("username", a.Username), slog.Any("password", a.Password))
}

// LogValue implements slog.LogValuer.
func (a AuthenticationWithTuser) LogValue() slog.Value {
	return slog.GroupValue(slog.String("username", a.Username), slog.Any("password", a.Password),
		slog.String("directAddr", a.DirectAddr))
}

// LogValue implements slog.LogValuer.
func (r LoginRequest) LogValue() slog.Value {
	return slog.GroupValue(slog.String("username", r.Username), slog.Any("password", r.Password))
}

// LogValue implements slog.LogValuer.
func (r LoginResponseType) LogValue() slog.Value {
	return slog.GroupValue(slog.String("code", r.Code), slog.Bool("success", r.Success),
		slog.String("errorMessage", r.ErrorMessage), slog.Any("sessionId", r.SessionID))
}

// LogValue implements slog.LogValuer.
func (u UserPassword) LogValue() slog.Value {
	return slog.GroupValue(slog.String("username", u.Username), slog.Any("password", u.Password))
}

// LogValue implements slog.LogValuer.
func (p IDProofedIndividualRESTful) LogValue() slog.Value {
	return slog.GroupValue(slog.Int64("id", p.ID), slog.String("firstName", p.FirstName),
		slog.String("lastName", p.LastName), slog.String("ssn4", p.SSN4), slog.String("dob", p.DOB),
		slog.String("directUsername", p.DirectUsername), slog.Any("directPassword", p.DirectPassword))
}

// LogValue implements slog.LogValuer.
func (r SendRequest) LogValue() slog.Value {
	return slog.GroupValue(slog.Any("authentication", r.Authentication), slog.Any("message", r.Message))
}

// LogValue implements slog.LogValuer.
func (r SendRequestWithHeader) LogValue() slog.Value {
	return slog.GroupValue(slog.Any("authentication", r.Authentication), slog.Any("message", r.Message))
}

// LogValue implements slog.LogValuer.
func (r SendWithTuserRequest) LogValue() slog.Value {
	return slog.GroupValue(slog.Any("authentication", r.Authentication), slog.Any("message", r.Message))
}

// LogValue implements slog.LogValuer.
func (r SendWithHeaderWithTuserRequest) LogValue() slog.Value {
	return slog.GroupValue(slog.Any("authentication", r.Authentication), slog.Any("message", r.Message))
}

// LogValue implements slog.LogValuer.
func (r UidsRequestType) LogValue() slog.Value {
	return slog.GroupValue(slog.Any("auth", r.Auth), slog.Any("uids", r.UIDs), slog.Any("recipients", r.Recipients))
}

// LogValue implements slog.LogValuer.
func (r SmtpIdsRequestType) LogValue() slog.Value {
	return slog.GroupValue(slog.Any("auth", r.Auth), slog.Any("smtpIds", r.SmtpIDs))
}

// LogValue implements slog.LogValuer.
func (r SetFoldersSubscribedRequestType) LogValue() slog.Value {
	return slog.GroupValue(slog.Any("auth", r.Auth), slog.Any("folders", r.Folders), slog.Bool("subscribed", r.Subscribed))
}

// LogValue implements slog.LogValuer.
func (r RawMessagesRequestType) LogValue() slog.Value {
	return slog.GroupValue(slog.Any("auth", r.Auth), slog.Any("messages", r.Messages))
}
