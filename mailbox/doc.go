// Package mailbox is the layer between the protocol fronts (imapbackend,
// smtpbackend) and the provider's REST API (restclient). What both fronts
// need lives here once: the short-lived credential check shared by every
// connection of a user (Verifier) and the bridge's own state store, which
// keeps what the provider does not, such as UIDVALIDITY, kept flags and
// the record of messages the bridge submitted. The fronts hold the store
// through the StateStore interface; Store is its SQLite implementation,
// whose schema is versioned by numbered migrations (schema.go).
package mailbox
