// Package directapi holds the data types of the provider's two JSON REST
// services, the messaging service (messaging-rest.md) and the patient
// registration service (registration-rest.md), with Go names and JSON
// names exactly as the documents write them (hasCvData, attachmentList,
// UserStateType, ...), the result codes and delivery states they define,
// and the paths of the two services.
//
// # Why a package of its own
//
// The types are the contract, not the client. The sandbox (the local
// implementation of both services) and the MIME conversion need the
// provider's types but have no business with an HTTP client, its retries
// and its rate limit; restclient, which does, imports this package. So
// neither side of the wire depends on the other, and a test that runs the
// sandbox does not build the client.
//
// # Secrets
//
// Passwords and session ids are of type Secret, which marshals to JSON as
// its plain text (the provider needs it in request bodies) and prints as
// "[redacted]" under every fmt verb and in log/slog. Every type that holds
// a Secret has a LogValue method that shows its other fields with the
// Secret redacted, because slog's JSON handler would otherwise write the
// struct with encoding/json.
//
// # Choices where the documents say "not shown"
//
//   - Date values: decoded from a JSON number of epoch milliseconds, a
//     string of epoch milliseconds, yyyyMMddHHmmss (UTC), or ISO-8601 /
//     RFC 3339 (with or without fraction and zone; without zone means UTC);
//     null is the zero Date. Encoded as epoch milliseconds, the default of
//     the Java JSON stacks such services are built on. ParseDate accepts
//     the same string forms.
//   - csvData: a base64 string (standard or URL alphabet, padding and line
//     breaks optional) or a JSON array of byte values. Its CSV has the
//     documented ten columns; a header row is skipped, status values lose
//     their trailing asterisk, short rows are padded (ParseStatusCSV;
//     FormatStatusCSV writes the same layout). The records land in the
//     same DirectMessageLog type as messageLogs, and
//     DirectMessageStatusReportResponseType.Logs returns both sources
//     merged, whatever hasCvData says.
//   - RecipientCollection (Forward's recipients): sent as a JSON array of
//     Recipient; decoded from an array or an object wrapping one under
//     "recipients", "recipient", "items" or "list".
//   - MessageDetail attachments: read from "attachmentList", or from
//     "attachments", the name the document's prose uses once.
//   - Unknown JSON fields are ignored everywhere; UIDs are int64, so values
//     beyond 32 bits are kept exactly.
package directapi
