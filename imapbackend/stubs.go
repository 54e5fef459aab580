package imapbackend

import "github.com/emersion/go-imap/v2"

// errNotYet answers commands whose implementation has not landed.
var errNotYet = no(imap.ResponseCodeCannot, "not implemented yet")
