package imapbackend

import (
	"strings"

	"github.com/emersion/go-imap/v2"

	"github.com/directbridge/directbridge/internal/mailstore"
)

// Layout is how the provider's folder names appear to IMAP clients. The
// provider keeps every folder below INBOX ("INBOX.Sent", "INBOX.Work.Q3";
// messaging-rest.md, "Folder rules").
type Layout string

const (
	// LayoutInbox shows the provider's names as they are: one personal
	// namespace "INBOX." (RFC 2342), the layout of Courier and Cyrus.
	// Clients that create folders at the top level (Outlook by default)
	// are refused and need their root folder path set to "INBOX".
	LayoutInbox Layout = "inbox"
	// LayoutFlat shows the folders below INBOX at the top level, as
	// Dovecot, Gmail and Exchange do: INBOX.Sent is "Sent", INBOX.Work.Q3
	// is "Work.Q3", and a top-level CREATE makes the folder below the
	// provider's INBOX. The delimiter stays ".": every provider name then
	// has exactly one IMAP name and back, whereas with "/" a provider
	// level containing "/" could not be named. INBOX has no sub-folders
	// in this layout (an "INBOX.x" name would be the provider's
	// INBOX.INBOX.x, whose parent would collide with INBOX itself);
	// provider folders named INBOX.INBOX... are not shown.
	LayoutFlat Layout = "flat"
)

// ParseLayout reads a layout name; "" is LayoutInbox.
func ParseLayout(s string) (Layout, bool) {
	switch l := Layout(strings.ToLower(s)); l {
	case "", LayoutInbox:
		return LayoutInbox, true
	case LayoutFlat:
		return LayoutFlat, true
	}
	return "", false
}

// nsPrefix is the prefix of the personal namespace.
func (l Layout) nsPrefix() string {
	if l == LayoutFlat {
		return ""
	}
	return "INBOX."
}

// imapName is the IMAP name of a provider folder; false if the layout
// cannot show it.
func (l Layout) imapName(provider string) (string, bool) {
	if l != LayoutFlat || provider == "INBOX" {
		return provider, true
	}
	rest := strings.TrimPrefix(provider, "INBOX.")
	if isInboxPath(rest) {
		return "", false
	}
	return rest, true
}

// providerName is the provider folder an IMAP name names (before
// aliases), or errNoSuchMailbox. INBOX in any case is INBOX (RFC 9051
// §5.1), also as the first level of a longer name in the INBOX layout.
func (l Layout) providerName(name string) (string, error) {
	if strings.EqualFold(name, "INBOX") {
		return "INBOX", nil
	}
	if l == LayoutFlat {
		if name == "" || isInboxPath(name) {
			return "", errNoSuchMailbox
		}
		name = "INBOX." + name
	} else if len(name) > 6 && strings.EqualFold(name[:6], "INBOX.") {
		name = "INBOX." + name[6:]
	} else if specialAliases[strings.ToLower(name)] != "" {
		// Outlook creates "Sent Items" at the top level even here: the
		// alias is taken outside the namespace too (specialAliases).
		name = "INBOX." + name
	}
	if !mailstore.ValidFolderName(name) {
		return "", errNoSuchMailbox
	}
	return name, nil
}

// badName is the refusal of a name CREATE or RENAME cannot give.
func (l Layout) badName() error {
	if l == LayoutFlat {
		return errBadFlatName
	}
	return errBadFolderName
}

// isInboxPath tells "INBOX" and "INBOX.x" (any case) from other names.
func isInboxPath(name string) bool {
	return len(name) >= 5 && strings.EqualFold(name[:5], "INBOX") && (len(name) == 5 || name[5] == byte(delim))
}

// specialAliases are names clients create for the special folders when
// they do not find them (Outlook: "Sent Items", "Deleted Items", "Junk
// Email"; Apple Mail: "Sent Messages", "Deleted Messages"; others
// "Junk"), relative to the namespace prefix and compared without regard
// to case; in the INBOX layout also at the top level, where Outlook
// makes them whatever the namespace says. Such a name that no folder has stands for the provider's
// reserved folder: CREATE answers OK and makes nothing, SELECT, APPEND,
// COPY, STATUS and SUBSCRIBE act on the reserved folder, and LIST shows
// the name only to a pattern that names it exactly. So a client's first
// run makes no duplicate special folders, and a message it saves as
// "sent" lands where the provider files sent mail.
var specialAliases = map[string]string{
	"sent items":       "INBOX.Sent",
	"sent messages":    "INBOX.Sent",
	"sent mail":        "INBOX.Sent",
	"deleted items":    "INBOX.Trash",
	"deleted messages": "INBOX.Trash",
	"junk":             "INBOX.Spam",
	"junk email":       "INBOX.Spam",
	"junk e-mail":      "INBOX.Spam",
}

// aliasTarget is the reserved folder a provider name stands for when no
// folder has it, or "".
func aliasTarget(provider string) string {
	rest, ok := strings.CutPrefix(provider, "INBOX.")
	if !ok {
		return ""
	}
	return specialAliases[strings.ToLower(rest)]
}

// errBadFlatName is errBadFolderName for the flat layout.
var errBadFlatName = no(imap.ResponseCodeCannot,
	`Folder names have no empty levels, and INBOX has no sub-folders: create folders at the top level, e.g. Projects`)
