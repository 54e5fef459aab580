// Package smtpbackend is the SMTP submission front (RFC 6409 on
// go-smtp): it authenticates a Direct user, converts the submitted
// message to the provider's Message (convert.go), sends it exactly once
// through the send journal (journal.go), and answers 250 only when the
// provider accepted it; every other outcome is mapped to its reply in one
// place (errors.go).
//
// It is built by package bridge, which gives it the provider, the state
// store, the credential check and the limits. It never writes a message
// to disk and never logs one: the journal keeps keyed fingerprints only.
package smtpbackend
