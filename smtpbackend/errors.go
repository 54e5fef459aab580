package smtpbackend

import (
	"errors"
	"fmt"

	"github.com/emersion/go-smtp"

	"github.com/directbridge/directbridge/internal/limits"
	"github.com/directbridge/directbridge/internal/login"
	"github.com/directbridge/directbridge/internal/mimeconv"
	"github.com/directbridge/directbridge/upstream"
)

// This file is the one place where errors become SMTP replies (RFC 5321
// §4.2, enhanced codes RFC 3463). The rule that matters most: nothing is
// answered 250 unless the provider answered success, and anything that may
// succeed later is 4xx so the client keeps the message and retries.

func reply(code int, enh smtp.EnhancedCode, msg string) *smtp.SMTPError {
	return &smtp.SMTPError{Code: code, EnhancedCode: enh, Message: msg}
}

var (
	errAuthRequired = reply(530, smtp.EnhancedCode{5, 7, 0}, "Authentication required") // RFC 4954 §6
	errAuthFailed   = reply(535, smtp.EnhancedCode{5, 7, 8}, "Authentication credentials invalid")
	errAuthTempFail = reply(454, smtp.EnhancedCode{4, 7, 0}, "Temporary authentication failure: the provider cannot be reached")
	errBadAddress   = reply(501, smtp.EnhancedCode{5, 1, 3}, "Bad recipient address syntax")
	// errStateUnavailable refuses AUTH while the state store, where every
	// message is written down before it leaves, does not answer (RFC
	// 4954 §6: 454, temporary authentication failure).
	errStateUnavailable = reply(454, smtp.EnhancedCode{4, 3, 0}, "The bridge cannot reach its state store; try again later")
)

// senderRefused answers a MAIL FROM or From header that is not the
// authenticated Direct address.
func senderRefused(sender string) *smtp.SMTPError {
	return reply(553, smtp.EnhancedCode{5, 7, 1}, fmt.Sprintf("Sender must be <%s>, the authenticated Direct address", sender))
}

// authReply maps a credential check failure.
// errTooManyFailures refuses AUTH from an address with too many failed
// ones (internal/login): 454 4.7.0, a temporary authentication failure (RFC
// 4954 §6), the same whether or not the user exists.
var errTooManyFailures = reply(454, smtp.EnhancedCode{4, 7, 0}, "Too many failed logins from your address; try again later")

func authReply(err error) *smtp.SMTPError {
	switch {
	case errors.Is(err, login.ErrAuthFailed):
		return errAuthFailed
	case errors.Is(err, login.ErrAddress):
		return reply(535, smtp.EnhancedCode{5, 7, 8}, "Authorization identity is not a Direct address you may act for")
	default:
		return errAuthTempFail
	}
}

// ErrTooBigEncoded is the class of a TooBigError (errors.Is).
var ErrTooBigEncoded = errors.New("smtpbackend: message too big for the provider once encoded")

// TooBigError refuses a message under SIZE whose send request would pass
// the provider's request limit: JSON writes some text larger (a control
// character as six bytes, a quote as two), so SIZE, derived from the
// limit for ordinary mail, cannot promise it. Retrying the same bytes
// fails the same way, so the answer is permanent (552 5.3.4, RFC 3463
// §3.4: message too big for system). It holds sizes only.
type TooBigError struct {
	RequestBytes, MaxRequestBytes int64
}

func (e *TooBigError) Error() string {
	return fmt.Sprintf("the send request would be %d bytes, more than the provider's %d", e.RequestBytes, e.MaxRequestBytes)
}

// Is makes errors.Is(err, ErrTooBigEncoded) true.
func (e *TooBigError) Is(target error) bool { return target == ErrTooBigEncoded }

// dataReply maps a failure to take a message: its size once encoded, the
// budget of message bytes in flight, conversion, or the provider.
func dataReply(err error) *smtp.SMTPError {
	var se *smtp.SMTPError
	var ce *ConvertError
	var tb *TooBigError
	switch {
	case errors.As(err, &se):
		return se
	case errors.As(err, &tb):
		return reply(552, smtp.EnhancedCode{5, 3, 4}, fmt.Sprintf("Message too big for the provider once encoded: its request would be %d bytes, the provider takes at most %d", tb.RequestBytes, tb.MaxRequestBytes))
	case errors.Is(err, mimeconv.ErrTextTooLong):
		return reply(552, smtp.EnhancedCode{5, 3, 4}, "Message too big for the provider once encoded: its text alone, decoded to UTF-8, is longer than the provider's request limit")
	case errors.Is(err, limits.ErrSpent):
		return reply(452, smtp.EnhancedCode{4, 3, 1}, "Too many messages in progress; try again later")
	case errors.Is(err, errUndecided):
		return reply(451, smtp.EnhancedCode{4, 4, 0}, "An earlier attempt of this message may have been delivered and its outcome is not known yet; try again in a few minutes")
	case errors.Is(err, ErrFromMismatch):
		return reply(553, smtp.EnhancedCode{5, 7, 1}, ce0(err).Reason)
	case errors.Is(err, ErrBareLineEnding):
		return reply(550, smtp.EnhancedCode{5, 6, 0}, "Message contains a bare CR or LF; lines must end with CRLF (RFC 5321 section 2.3.8)")
	case errors.Is(err, ErrNotCarriable):
		return reply(554, smtp.EnhancedCode{5, 6, 3}, ce0(err).Reason) // RFC 3463 §3.7: conversion not supported
	case errors.Is(err, mimeconv.ErrTooComplex):
		return reply(554, smtp.EnhancedCode{5, 6, 0}, "Message structure too complex (too deeply nested or too many parts)")
	case errors.Is(err, mimeconv.ErrUndecodableText):
		return undecodableReply(err)
	case errors.As(err, &ce):
		return reply(554, smtp.EnhancedCode{5, 6, 0}, "Message cannot be converted: "+ce.Reason)
	case errors.Is(err, upstream.ErrAuth):
		return errAuthFailed
	case errors.Is(err, upstream.ErrAddress):
		return reply(550, smtp.EnhancedCode{5, 1, 1}, "The provider refused an address: "+upstream.ProviderMessage(err))
	case errors.Is(err, upstream.ErrRefused):
		return reply(554, smtp.EnhancedCode{5, 0, 0}, "The provider refused the message: "+upstream.ProviderMessage(err))
	}
	if d := upstream.Detail(err); d != nil && (errors.Is(err, upstream.ErrTemporary) || errors.Is(err, upstream.ErrUnknownOutcome)) {
		switch {
		case d.Busy:
			return reply(451, smtp.EnhancedCode{4, 4, 5}, "The provider is busy; try again later")
		case d.Unreachable:
			return reply(451, smtp.EnhancedCode{4, 4, 1}, "The provider cannot be reached; try again later")
		default:
			return reply(451, smtp.EnhancedCode{4, 3, 0}, "The provider failed; try again later")
		}
	}
	// Protocol errors, cancellation, anything unforeseen: the message is
	// not lost if the client keeps it and tries again.
	return reply(451, smtp.EnhancedCode{4, 3, 0}, "Message not accepted now; try again later")
}

// undecodableReply refuses text that cannot be decoded to UTF-8 without
// loss (Convert, mimeconv.ErrUndecodableText) with a permanent 554: the
// same bytes fail the same way every time, and a 4xx would only make the
// client retry them for days. The enhanced codes are those of RFC 3463
// §3.7, "Message Content or Media Status": the provider's JSON carries
// text as Unicode, so a conversion to UTF-8 is required, and
//   - 5.6.3 "Conversion required but not supported" when the declared
//     charset is one the bridge has no decoder for;
//   - 5.6.5 "Conversion failed" when the bytes are not valid in the
//     declared charset, so the conversion was tried and cannot be done
//     without loss.
//
// Either way the text says what and why (ConvertError.Reason), never U+FFFD
// in place of what the sender wrote under a 250.
func undecodableReply(err error) *smtp.SMTPError {
	enh := smtp.EnhancedCode{5, 6, 5}
	var cse *mimeconv.CharsetError
	if errors.As(err, &cse) && cse.Unknown {
		enh = smtp.EnhancedCode{5, 6, 3}
	}
	return reply(554, enh, "Message text cannot be converted without loss: "+ce0(err).Reason)
}

func ce0(err error) *ConvertError {
	var ce *ConvertError
	if errors.As(err, &ce) {
		return ce
	}
	return &ConvertError{Reason: err.Error()}
}
