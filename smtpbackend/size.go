package smtpbackend

import (
	"fmt"

	"github.com/emersion/go-smtp"
)

// The size limit is checked here, not by go-smtp. go-smtp (v0.25)
// advertises SIZE from Server.MaxMessageBytes and its DATA reader
// (data.go, dataReader.Read) refuses a message of exactly that many
// bytes: it counts the limit used up before it reads the terminating dot.
// The number advertised and the reader's limit cannot be set apart, so
// with go-smtp enforcing it one size is always answered wrongly (exactly
// SIZE refused, or SIZE+1 advertised and refused).
//
// So go-smtp is given no limit, EHLO says SIZE without a number (RFC
// 1870 §4: no indication of the fixed maximum is given, which a server
// with one may do), and the bridge refuses exactly what is over its
// limit: a MAIL FROM that announces more (RFC 1870 §6.1: 552, before any
// byte is sent; clients send SIZE= whenever SIZE is offered), and a
// message of more bytes at the end of DATA or BDAT (§6.2, 552 5.3.4),
// reading no more than the limit and one byte. A message of exactly the
// limit is taken.

// sizeRefused answers a MAIL FROM whose announced size is over the limit.
func sizeRefused(limit int64) *smtp.SMTPError {
	return reply(552, smtp.EnhancedCode{5, 3, 4}, fmt.Sprintf("Message size exceeds fixed maximum message size of %d bytes", limit))
}

// tooLarge answers a message found longer than the limit.
func tooLarge(limit int64) *smtp.SMTPError {
	return reply(552, smtp.EnhancedCode{5, 3, 4}, fmt.Sprintf("Message exceeds fixed maximum message size of %d bytes", limit))
}
