// Package sandbox is a faithful local implementation of the provider's two
// REST services, the messaging service (messaging-rest.md) and the patient
// registration service (registration-rest.md), on an embedded SQLite
// database (modernc.org/sqlite, pure Go).
//
// It is three things at once: the bridge's embedded default, so that the
// bridge runs out of the box with no provider account; the provider that
// integrators develop against; and the REST peer of every test, with call
// counters, recorded requests and fault injection (faults.go) that are Go
// methods only and never reachable over HTTP.
//
// Each operation is one database transaction: a request that fails leaves
// nothing half-written. Where the documents say "not shown", the sandbox's
// choices are written next to the code that makes them and summarised in
// README.md ("How the sandbox behaves where the documents are silent").
package sandbox
