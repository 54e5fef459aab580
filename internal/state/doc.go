// Package state is the bridge's own state store: what the provider does
// not keep, such as UIDVALIDITY and UIDNEXT of every folder, kept flags and
// keywords, subscriptions, the send journal and the record of messages the
// bridge submitted, bounce tracking. The engine and the fronts hold it
// through the StateStore interface. Store implements it in SQLite
// (OpenStore, a file in the data directory) or in PostgreSQL
// (OpenPostgres, postgres.go), with one schema history for both, versioned
// by numbered migrations (schema.go). It holds
// no message content and no password; the credential check lives in
// internal/login.
package state
