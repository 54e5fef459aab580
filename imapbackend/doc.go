// Package imapbackend is the IMAP front (IMAP4rev1 and IMAP4rev2, RFC
// 3501 and RFC 9051, on go-imap v2's imapserver): it adapts each client
// command to one operation of the mail engine (internal/mailstore) and
// each engine error to its IMAP reply, in one place (errors.go).
//
// It is built by package bridge, which gives it the engine, the
// credential check and the connection limits. It makes no provider call
// and no state-store call of its own, holds no lock across one, and keeps
// no message on disk; a session's view of a folder (sequence numbers,
// pending updates) lives in internal/seqview.
package imapbackend
