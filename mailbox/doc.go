// Package mailbox is the layer between the protocol fronts (imapbackend,
// smtpbackend) and the provider's REST API (restclient). What both fronts
// need lives here once: the short-lived credential check shared by every
// connection of a user (Verifier) and the bridge's own state store (Store),
// which keeps what the provider does not, such as the record of messages
// the bridge submitted.
package mailbox
