package restclient

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
func (Secret) GoString() string { return `restclient.Secret("` + redacted + `")` }

// Format implements fmt.Formatter; fmt prefers it over every other method,
// also for fields nested inside structs.
func (Secret) Format(f fmt.State, verb rune) { fmt.Fprint(f, redacted) }

// LogValue implements slog.LogValuer.
func (Secret) LogValue() slog.Value { return slog.StringValue(redacted) }

// Reveal returns the secret's text. Only code that puts the secret on the
// wire or compares it should call it.
func (s Secret) Reveal() string { return string(s) }
