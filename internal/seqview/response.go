package seqview

import (
	"fmt"
	"strings"

	"github.com/emersion/go-imap/v2"
)

// Kind says which untagged response a Response is.
type Kind uint8

const (
	// Expunge is "* n EXPUNGE" (RFC 9051 §7.5.1); Num is n.
	Expunge Kind = iota + 1
	// Exists is "* n EXISTS" (RFC 9051 §7.4.1); Num is n.
	Exists
	// Recent is IMAP4rev1's "* n RECENT" (RFC 3501 §7.3.2); Num is n. A
	// view opened with Rev2 never produces it.
	Recent
	// Fetch is "* n FETCH (UID u FLAGS (...))" (RFC 9051 §7.5.2); Num is n,
	// UID is u, Flags the message's flags as this session shows them.
	Fetch
	// MailboxFlags is "* FLAGS (...)" (RFC 9051 §7.3.5); Flags is the list.
	MailboxFlags
)

// Response is one untagged response for a session to write, in the order
// View.Updates returns them.
type Response struct {
	Kind  Kind
	Num   uint32
	UID   imap.UID
	Flags []imap.Flag
}

// String renders the response roughly as on the wire, for logs and tests.
func (r Response) String() string {
	flags := func() string {
		s := make([]string, len(r.Flags))
		for i, f := range r.Flags {
			s[i] = string(f)
		}
		return strings.Join(s, " ")
	}
	switch r.Kind {
	case Expunge:
		return fmt.Sprintf("* %d EXPUNGE", r.Num)
	case Exists:
		return fmt.Sprintf("* %d EXISTS", r.Num)
	case Recent:
		return fmt.Sprintf("* %d RECENT", r.Num)
	case Fetch:
		return fmt.Sprintf("* %d FETCH (UID %d FLAGS (%s))", r.Num, r.UID, flags())
	case MailboxFlags:
		return fmt.Sprintf("* FLAGS (%s)", flags())
	}
	return fmt.Sprintf("* unknown response kind %d", r.Kind)
}
