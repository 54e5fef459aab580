package imapbackend

import (
	"context"
	"errors"

	"github.com/directbridge/directbridge/internal/login"
	"github.com/directbridge/directbridge/internal/mailstore"
	"github.com/directbridge/directbridge/upstream"
	"github.com/emersion/go-imap/v2"
)

// This file is the one place where errors become IMAP responses. Every
// session method returns either nil or an *imap.Error from here: go-imap
// answers any other error with a generic server failure, which clients
// cannot act on. Response codes are RFC 5530's.

func no(code imap.ResponseCode, text string) *imap.Error {
	return &imap.Error{Type: imap.StatusResponseTypeNo, Code: code, Text: text}
}

func bad(code imap.ResponseCode, text string) *imap.Error {
	return &imap.Error{Type: imap.StatusResponseTypeBad, Code: code, Text: text}
}

var (
	errNoSuchMailbox = no(imap.ResponseCodeNonExistent, "No such mailbox")
	errTryCreate     = no(imap.ResponseCodeTryCreate, "No such mailbox; create it first")
	errExists        = no(imap.ResponseCodeAlreadyExists, "Mailbox already exists")
	errReserved      = no(imap.ResponseCodeCannot, "This mailbox is reserved by the provider and cannot be created, deleted or renamed")
	errReadOnly      = no(imap.ResponseCodeCannot, "Mailbox is read-only (EXAMINE)")
	errTooManyConns  = no(imap.ResponseCodeLimit, "Too many connections for this user")
	errUnavailable   = no(imap.ResponseCodeUnavailable, "The provider cannot be reached; try again later")
	// errStateUnavailable refuses a login while the bridge's state store
	// does not answer (mailstore.StateReady).
	errStateUnavailable = no(imap.ResponseCodeUnavailable, "The bridge cannot reach its state store; try again later")
	// errTooManyFailures refuses a login from an address with too many
	// failed ones (internal/login); the same whether or not the user exists.
	errTooManyFailures = no(imap.ResponseCodeUnavailable, "Too many failed logins from your address; try again later")
	errNoCondStore     = bad(imap.ResponseCodeClientBug, "UNCHANGEDSINCE needs CONDSTORE, which this server does not offer")
	errTooBig          = no(imap.ResponseCodeTooBig, "Message is larger than the APPENDLIMIT")
	errMessagesBusy    = no(imap.ResponseCodeLimit, "Too many messages being stored at once; try again later")
	// errBadSeqNum answers a sequence number the client has not been
	// given (RFC 3501 §9, seq-number: "BAD").
	errBadSeqNum = bad(imap.ResponseCodeClientBug, "Invalid message sequence number: beyond the number of messages (EXISTS)")
	// errBadPart answers a section part number 0 (RFC 3501 §9,
	// section-part: nz-number).
	errBadPart = bad(imap.ResponseCodeClientBug, "Section part numbers start at 1")
)

// errBadFlag answers a STORE or APPEND of a system flag RFC 9051 §2.3.2
// does not know.
func errBadFlag(f imap.Flag) error {
	return bad(imap.ResponseCodeClientBug, "Unknown system flag "+string(f)+" (keywords must not start with a backslash)")
}

// imapError maps an error from the provider or the bridge to a response.
// Already mapped errors pass through.
func imapError(err error) error {
	if err == nil {
		return nil
	}
	var ie *imap.Error
	switch {
	case errors.As(err, &ie):
		return ie
	case errors.Is(err, mailstore.ErrOutcomeUnknown):
		// Before the classes it may wrap (a timeout). RFC 9051 §7.1:
		// UNAVAILABLE is temporary; the retry is answered from what the
		// provider did (internal/mailstore/attempts.go).
		return no(imap.ResponseCodeUnavailable, "The provider did not confirm the change and may still carry it out; try again in a few minutes, the retry is answered from what it did")
	case errors.Is(err, login.ErrAuthFailed), errors.Is(err, upstream.ErrAuth):
		return no(imap.ResponseCodeAuthenticationFailed, "The provider refused the credentials")
	case errors.Is(err, login.ErrUnavailable), errors.Is(err, upstream.ErrTemporary), errors.Is(err, context.DeadlineExceeded):
		return errUnavailable
	case errors.Is(err, mailstore.ErrUIDTooLarge):
		return no(imap.ResponseCodeLimit, "This folder has message UIDs beyond 32 bits, which IMAP cannot carry")
	case errors.Is(err, mailstore.ErrDestMissing):
		return errTryCreate // RFC 9051 §6.4.7
	case errors.Is(err, mailstore.ErrFolderGone):
		return no(imap.ResponseCodeNonExistent, "The mailbox was deleted or renumbered; select it again")
	case errors.Is(err, upstream.ErrAddress):
		return no(imap.ResponseCodeCannot, "The provider refused an address: "+upstream.ProviderMessage(err))
	case errors.Is(err, upstream.ErrNotFound):
		return errNoSuchMailbox
	case errors.Is(err, upstream.ErrReserved):
		return errReserved
	case errors.Is(err, upstream.ErrRefused):
		if msg := upstream.ProviderMessage(err); msg != "" {
			return no(imap.ResponseCodeCannot, "The provider refused the operation: "+msg)
		}
		return no(imap.ResponseCodeCannot, "The provider refused the operation")
	case errors.Is(err, upstream.ErrUnknownOutcome):
		return no(imap.ResponseCodeUnavailable, "The provider did not confirm the operation; check the mailbox and try again")
	}
	return no(imap.ResponseCodeUnavailable, "The operation failed; try again later")
}
