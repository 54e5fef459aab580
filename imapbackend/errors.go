package imapbackend

import (
	"context"
	"errors"

	"github.com/emersion/go-imap/v2"

	"github.com/directbridge/directbridge/mailbox"
	"github.com/directbridge/directbridge/restclient"
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
	errNoCondStore   = bad(imap.ResponseCodeClientBug, "UNCHANGEDSINCE needs CONDSTORE, which this server does not offer")
	errTooBig        = no(imap.ResponseCodeTooBig, "Message is larger than the APPENDLIMIT")
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
	case errors.Is(err, mailbox.ErrAuthFailed), restclient.IsAuthFailure(err):
		return no(imap.ResponseCodeAuthenticationFailed, "The provider refused the credentials")
	case errors.Is(err, mailbox.ErrUnavailable), restclient.IsTemporary(err), errors.Is(err, context.DeadlineExceeded):
		return errUnavailable
	case errors.Is(err, errUIDTooLarge):
		return no(imap.ResponseCodeLimit, "This folder has message UIDs beyond 32 bits, which IMAP cannot carry")
	case errors.Is(err, errFolderGone):
		return no(imap.ResponseCodeNonExistent, "The mailbox was deleted or renumbered; select it again")
	case restclient.IsAddressError(err):
		return no(imap.ResponseCodeCannot, "The provider refused an address: "+apiMessage(err))
	case restclient.IsAPIError(err):
		return no(imap.ResponseCodeCannot, "The provider refused the operation: "+apiMessage(err))
	}
	var pe *restclient.ProtocolError
	if errors.As(err, &pe) {
		return no(imap.ResponseCodeUnavailable, "The provider gave an unexpected answer; try again later")
	}
	return no(imap.ResponseCodeUnavailable, "The operation failed; try again later")
}

func apiMessage(err error) string {
	var ae *restclient.APIError
	if errors.As(err, &ae) {
		return ae.Message
	}
	return ""
}
