package seqview

import (
	"slices"
	"strings"

	"github.com/emersion/go-imap/v2"
)

// FlagRecent is IMAP4rev1's \Recent (RFC 3501 §2.3.2), which go-imap v2 does
// not name because IMAP4rev2 dropped it. It is never stored: a View adds it
// to the flags it shows.
const FlagRecent imap.Flag = `\Recent`

// baseFlags are the system flags every folder's FLAGS lists (RFC 9051
// §2.3.2), whether or not a message carries them.
var baseFlags = []imap.Flag{imap.FlagSeen, imap.FlagAnswered, imap.FlagFlagged, imap.FlagDeleted, imap.FlagDraft}

// canonicalSpellings are the flags whose spelling the RFCs fix: the system
// flags (RFC 9051 §2.3.2) and the registered keywords (RFC 9051 §2.3.2,
// RFC 5788, RFC 8457). mbsync and offlineimap undo a flag that comes back in
// another case than they wrote, so these are always given in this spelling.
var canonicalSpellings = []imap.Flag{imap.FlagSeen, imap.FlagAnswered, imap.FlagFlagged, imap.FlagDeleted,
	imap.FlagDraft, imap.FlagForwarded, imap.FlagMDNSent, imap.FlagJunk, imap.FlagNotJunk, imap.FlagPhishing,
	imap.FlagImportant}

// CanonicalFlag spells the system flags and registered keywords as the RFCs
// do; any other flag is returned as written.
func CanonicalFlag(f imap.Flag) imap.Flag {
	for _, s := range canonicalSpellings {
		if strings.EqualFold(string(s), string(f)) {
			return s
		}
	}
	return f
}

// CanonicalFlags returns the flags a message is stored with: canonical
// spelling (CanonicalFlag), sorted, without duplicates (flags compare
// case-insensitively, RFC 9051 §9 note 1; the first spelling is kept),
// without \Recent (the server's, never stored, RFC 3501 §2.3.2), \* and
// empty names. The input is not changed.
func CanonicalFlags(in []imap.Flag) []imap.Flag {
	out := make([]imap.Flag, 0, len(in))
	for _, f := range in {
		c := CanonicalFlag(f)
		if c == "" || c == imap.FlagWildcard || strings.EqualFold(string(c), string(FlagRecent)) {
			continue
		}
		if slices.ContainsFunc(out, func(g imap.Flag) bool { return strings.EqualFold(string(g), string(c)) }) {
			continue
		}
		out = append(out, c)
	}
	slices.Sort(out)
	return slices.Clip(out)
}

// applyOp returns cur changed by a STORE operation (RFC 9051 §6.4.6). cur
// and fl are canonical; so is the result. Flags compare case-insensitively:
// adding a keyword a message has in another spelling keeps its spelling.
func applyOp(cur []imap.Flag, op imap.StoreFlagsOp, fl []imap.Flag) []imap.Flag {
	switch op {
	case imap.StoreFlagsAdd:
		return CanonicalFlags(append(slices.Clone(cur), fl...))
	case imap.StoreFlagsDel:
		return slices.DeleteFunc(slices.Clone(cur), func(g imap.Flag) bool {
			return slices.ContainsFunc(fl, func(f imap.Flag) bool { return strings.EqualFold(string(f), string(g)) })
		})
	default:
		return CanonicalFlags(fl)
	}
}

// isBase reports one of the flags FLAGS always lists.
func isBase(f imap.Flag) bool { return slices.Contains(baseFlags, f) }

// keywords is an immutable set of the flags a folder's messages use beyond
// the base flags, sorted. A Mailbox replaces its set when it grows; a View
// holds the set it last announced in FLAGS, so a pointer comparison tells
// whether FLAGS must go out again.
type keywords struct {
	list []imap.Flag
}

func (k *keywords) has(f imap.Flag) bool {
	_, ok := slices.BinarySearch(k.list, f)
	return ok
}

// with returns k, or a new set when fl has keywords k lacks.
func (k *keywords) with(fl []imap.Flag) *keywords {
	var add []imap.Flag
	for _, f := range fl {
		if !isBase(f) && !k.has(f) && !slices.Contains(add, f) {
			add = append(add, f)
		}
	}
	if len(add) == 0 {
		return k
	}
	list := append(slices.Clone(k.list), add...)
	slices.Sort(list)
	return &keywords{list: slices.Clip(list)}
}

// covers reports whether every flag of fl is a base flag or in k.
func (k *keywords) covers(fl []imap.Flag) bool {
	for _, f := range fl {
		if !isBase(f) && !k.has(f) {
			return false
		}
	}
	return true
}

// mailboxFlags is the FLAGS response for keyword set k (RFC 9051 §7.3.5).
func (k *keywords) mailboxFlags() []imap.Flag {
	return slices.Concat(baseFlags, k.list)
}
