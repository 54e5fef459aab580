// Package restclient is a typed client of the provider's two JSON REST
// services: the messaging service (messaging-rest.md, 34 operations) and
// the patient registration service (registration-rest.md, 5 operations).
// It knows nothing of IMAP or SMTP; the protocol fronts call it.
//
// # Shape
//
// One method per operation, named after it, each taking a context.Context.
// The resources of the two documents, with JSON names exactly as written
// there, are the types of package directapi, which also holds the choices
// made where the documents leave a type's wire form "not shown" (Date,
// csvData, RecipientCollection).
// Path parameters (folder names, sender, subject, smtpId, sessionId,
// domain, username) are escaped as path segments, so "/" inside a folder
// name or subject travels as %2F; a segment made only of dots is escaped
// too, and an empty one is refused before any request is made.
//
// # Errors
//
// A response with success=false is an *APIError carrying the code and the
// provider's message; IsAuthFailure (messaging code 1, registration
// "011"), IsAddressError (code 2) tell the classes apart. Transport
// failures, timeouts, HTTP 429 and 5xx are a *TemporaryError (IsTemporary);
// OutcomeUnknown says whether the request may have been carried out.
// Anything else unexpected (a 4xx without the documented envelope, a body
// that is not JSON) is a *ProtocolError. Passwords and session ids are of
// type directapi.Secret, which prints as "[redacted]" under every fmt verb
// and in log/slog; errors never include URLs (which hold session ids) or
// bodies.
//
// # Courtesy built in
//
// The documents publish no usage limits: rate limits, size limits and the
// most UIDs per request are "not shown" (messaging-rest.md and
// registration-rest.md, "Limits"), and they say nothing of connections,
// back-off or retries. The client therefore chooses for itself what any
// provider should find reasonable: a token-bucket rate limiter
// (Options.RateLimit, default 100 requests/s, the client's own courtesy
// default, not a published limit; Unlimited lifts it and no bucket is
// kept at all), a pooled transport with Options.MaxConnsPerHost (default
// 10) keep-alive connections, UID, smtpId and raw-message lists split into
// batches of Options.BatchSize (default 500), and up to Options.MaxRetries
// (default 3) retries: 1 s, 2 s, 4 s after 429, transport failures and
// 5xx other than 503, 30 to 60 s after 503, honouring Retry-After. A retry that would outlast the caller's
// context deadline is not attempted, nor a 503 pause that would make the
// request, its waits included, outlast Options.RequestTimeout (a provider
// down for maintenance fails an IMAP SELECT within it). The bridge spends its requests
// through upstream.Budget (DIRECTBRIDGE_API_RATE_LIMIT) and runs this
// client Unlimited: a context that carries a budget (upstream.Charge, as
// upstream.WithBudget and the admin socket give it) makes every request
// made with it wait for a token first, each retry and each batch
// included (upstream.Pace).
//
// Only operations that are safe to repeat are retried after a request may
// have reached the provider: reads, counts, status, folder listing,
// subscription, read/unread marking, login, password reset. Send,
// SendWithHeader, the WithTuser sends, Forward, SaveRawMessages, Copy,
// Move, Delete, folder creation, renaming and deletion, and provisioning
// are retried only when the provider surely did not process them: the
// connection could not be opened, or it answered 429. Batched operations
// that fail part-way return a *PartialError with the number of items done.
// An operation on an empty UID list makes no request at all.
//
// # Choices where the documents say "not shown"
//
// Those about the wire form of types are in package directapi; these are
// the client's:
//
//   - HTTP status codes of failures: the body decides. A documented
//     envelope with success=false is an APIError whatever the status; 429
//     and 5xx are temporary whatever the body; a success envelope with an
//     error status is believed (and logged).
//   - MarkMessagesAsUnreadByUIDs and GetRawMessagesByUIDs bodies: sent as
//     UidsRequestType, like the neighbouring UID operations.
//   - subscribedFolderOnly and deleteForever path values: "true"/"false".
//
// # Registration sessions
//
// A Registrar logs in on first use, reuses the sessionId, logs in again a
// minute before the session's 10 minutes run out, and when the provider
// answers "011" anyway it logs in afresh and retries the call once.
package restclient
