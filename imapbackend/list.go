package imapbackend

import (
	"context"
	"reflect"
	"sort"
	"strings"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapserver"

	"github.com/directbridge/directbridge/internal/mailstore"
)

// folderListTTL is how long a user's folder list is reused for a listing
// (mailstore.FolderListTTL says why).
const folderListTTL = mailstore.FolderListTTL

// folderSet is the engine's folder list with its names as a set, as
// resolveName (session.go) reads it.
type folderSet struct {
	*mailstore.FolderSet
	exists map[string]bool
}

// listFolders returns the user's folders (mailstore.Store.Folders),
// reused for up to maxAge.
func (s *session) listFolders(ctx context.Context, maxAge time.Duration) (*folderSet, error) {
	fs, err := s.srv.store.Folders(ctx, s.auth, maxAge)
	if err != nil {
		return nil, err
	}
	exists := make(map[string]bool, len(fs.Names()))
	for _, n := range fs.Names() {
		exists[n] = true
	}
	return &folderSet{fs, exists}, nil
}

// specialUseAttr is the RFC 6154 special-use attribute of a provider
// folder, or "" for none. INBOX.Templates has no registered attribute.
func specialUseAttr(name string) imap.MailboxAttr {
	switch name {
	case "INBOX.Sent":
		return imap.MailboxAttrSent
	case "INBOX.Trash":
		return imap.MailboxAttrTrash
	case "INBOX.Drafts":
		return imap.MailboxAttrDrafts
	case "INBOX.Spam":
		return imap.MailboxAttrJunk
	}
	return ""
}

// inboxCase spells a leading INBOX of a LIST reference or pattern in
// capitals, so that "inbox.%" finds "INBOX.Sent": INBOX is case-insensitive
// (RFC 9051 §5.1), every other level is not. MatchList itself compares
// exactly.
func inboxCase(s string) string {
	if len(s) >= 5 && strings.EqualFold(s[:5], "INBOX") && (len(s) == 5 || strings.ContainsRune(".*%", rune(s[5]))) {
		return "INBOX" + s[5:]
	}
	return s
}

// isLSUB tells LSUB from LIST (SUBSCRIBED). go-imap hands both to List as
// SelectSubscribed and keeps the difference in an unexported field of the
// ListWriter, yet the two must answer differently: LSUB "" "%" returns a
// non-subscribed parent of a subscribed folder with \Noselect (RFC 3501
// §6.3.9), while LIST (SUBSCRIBED) "" "%" must return exactly the
// subscribed names that match (RFC 5258 §3.1). If a later go-imap renames
// the field this answers false and LSUB behaves as LIST (SUBSCRIBED); the
// LSUB test notices.
func isLSUB(w *imapserver.ListWriter) bool {
	if w == nil {
		return false
	}
	f := reflect.ValueOf(w).Elem().FieldByName("lsub")
	return f.IsValid() && f.Kind() == reflect.Bool && f.Bool()
}

// List answers LIST, LSUB and their extensions from one folder list:
//
//   - LIST "" "" returns the hierarchy delimiter (RFC 9051 §6.3.9). go-imap
//     drops empty patterns, so it arrives as no pattern at all.
//   - Every listed folder carries \HasChildren or \HasNoChildren (CHILDREN,
//     RFC 3348; RFC 5258 §4) and, always, its RFC 6154 special-use
//     attribute: Thunderbird and Apple Mail look for them in plain LIST, and
//     RFC 6154 §2 allows them without the SPECIAL-USE return option.
//   - A level that does not exist but has folders below it (INBOX.a.b
//     exists, INBOX.a does not) is listed so that clients can draw the tree:
//     \Noselect in plain LIST (RFC 9051 §6.3.9), \NonExistent when the
//     client used LIST-EXTENDED syntax (RFC 5258 §3, which implies
//     \Noselect), as Dovecot does.
//   - Selection options SUBSCRIBED, RECURSIVEMATCH (with CHILDINFO) and
//     SPECIAL-USE, and return options SUBSCRIBED, CHILDREN, SPECIAL-USE and
//     STATUS (LIST-STATUS, RFC 5819) follow RFC 5258 §3.
//
// The folder list costs one GetFolders per user every folderListTTL; the
// subscription list one more, asked only when the command needs it.
func (s *session) List(w *imapserver.ListWriter, ref string, patterns []string, options *imap.ListOptions) error {
	lsub := isLSUB(w)
	if options == nil {
		options = &imap.ListOptions{}
	}
	if len(patterns) == 0 {
		if lsub {
			return nil // LSUB "" "" names nothing
		}
		// The root of every name is "" here: the namespace has no rooted
		// references (RFC 9051 §6.3.9 allows the empty root then).
		return w.WriteList(&imap.ListData{Attrs: []imap.MailboxAttr{imap.MailboxAttrNoSelect}, Delim: delim})
	}
	ctx, cancel := s.ctx()
	defer cancel()
	fs, err := s.srv.store.Folders(ctx, s.auth, folderListTTL)
	if err != nil {
		return imapError(err)
	}
	var sub map[string]bool
	if options.SelectSubscribed || options.ReturnSubscribed {
		if sub, err = s.srv.store.Subscribed(ctx, s.auth); err != nil {
			return imapError(err)
		}
	}

	rawRef := ref
	ref = inboxCase(ref)
	pats := make([]string, len(patterns))
	for i, p := range patterns {
		pats[i] = inboxCase(p)
	}
	// Names are the provider's until written; the layout decides what
	// the client sees and matches (layout.go). In the flat layout INBOX
	// is no one's parent.
	layout := s.srv.cfg.Layout
	flat := layout == LayoutFlat
	// INBOX is the one name whose case does not matter (RFC 9051 §5.1):
	// in the INBOX layout it begins every name, so patterns are matched
	// with a leading INBOX in capitals (inboxCase); in the flat layout
	// only INBOX itself is matched that way, and "Inbox*" still finds
	// "Inboxes" as written.
	match := func(name string) bool {
		name, ok := layout.imapName(name)
		if !ok {
			return false
		}
		r, ps := ref, pats
		if flat && name != "INBOX" {
			r, ps = rawRef, patterns
		}
		for _, p := range ps {
			if imapserver.MatchList(name, delim, r, p) {
				return true
			}
		}
		return false
	}
	parentsOf := func(name string) []string {
		a := mailstore.Ancestors(name)
		if flat && len(a) > 0 && a[0] == "INBOX" {
			a = a[1:]
		}
		return a
	}
	hasChildren := func(name string) bool { return !(flat && name == "INBOX") && fs.HasChildren(name) }
	// A subscribed folder below name that the patterns do not reach: LSUB
	// then lists name with \Noselect, RECURSIVEMATCH with CHILDINFO.
	subscribedBelow := func(name string) bool {
		if flat && name == "INBOX" {
			return false
		}
		prefix := name + string(delim)
		for n := range sub {
			if strings.HasPrefix(n, prefix) && !match(n) {
				return true
			}
		}
		return false
	}
	extended := !lsub && (options.SelectSubscribed || options.SelectRemote || options.SelectSpecialUse ||
		options.ReturnSubscribed || options.ReturnChildren || options.ReturnSpecialUse || options.ReturnStatus != nil ||
		len(patterns) > 1)

	// Candidates: every folder, every level above one, and with a
	// subscription selection every subscribed name.
	cand := map[string]bool{}
	for _, n := range fs.Names() {
		cand[n] = true
		for _, a := range parentsOf(n) {
			cand[a] = true
		}
	}
	if options.SelectSubscribed {
		for n := range sub {
			cand[n] = true
			for _, a := range parentsOf(n) {
				cand[a] = true
			}
		}
	}
	names := make([]string, 0, len(cand))
	for n := range cand {
		names = append(names, n)
	}
	sort.Strings(names)

	for _, name := range names {
		if !match(name) {
			continue
		}
		exists := fs.Exists(name)
		shown, _ := layout.imapName(name) // match said it can be shown
		data := &imap.ListData{Mailbox: shown, Delim: delim}
		switch {
		case lsub:
			// RFC 3501 §6.3.9: subscribed names, and a non-subscribed
			// level the pattern stops at above a subscribed one, marked
			// \Noselect.
			if !sub[name] && !subscribedBelow(name) {
				continue
			}
			if !sub[name] || !exists {
				data.Attrs = append(data.Attrs, imap.MailboxAttrNoSelect)
			}
		case options.SelectSubscribed:
			childInfo := options.SelectRecursiveMatch && subscribedBelow(name)
			selected := sub[name] && (!options.SelectSpecialUse || specialUseAttr(name) != "")
			if !selected && !childInfo {
				continue
			}
			if !exists {
				data.Attrs = append(data.Attrs, imap.MailboxAttrNonExistent)
			}
			if sub[name] {
				data.Attrs = append(data.Attrs, imap.MailboxAttrSubscribed)
			}
			if childInfo {
				data.ChildInfo = &imap.ListDataChildInfo{Subscribed: true}
			}
		default:
			if options.SelectSpecialUse && (!exists || specialUseAttr(name) == "") {
				continue
			}
			if !exists {
				if extended {
					data.Attrs = append(data.Attrs, imap.MailboxAttrNonExistent)
				} else {
					data.Attrs = append(data.Attrs, imap.MailboxAttrNoSelect)
				}
			}
			if options.ReturnSubscribed && sub[name] {
				data.Attrs = append(data.Attrs, imap.MailboxAttrSubscribed)
			}
		}
		if hasChildren(name) {
			data.Attrs = append(data.Attrs, imap.MailboxAttrHasChildren)
		} else if exists {
			data.Attrs = append(data.Attrs, imap.MailboxAttrHasNoChildren)
		}
		if su := specialUseAttr(name); su != "" && exists {
			data.Attrs = append(data.Attrs, su)
		}
		if options.ReturnStatus != nil && exists && !lsub {
			// RFC 5819 §2: STATUS only for selectable mailboxes; one that
			// vanished since the folder list was made is left without.
			st, err := s.statusOf(ctx, name, options.ReturnStatus)
			if err != nil && err != errNoSuchMailbox {
				return err
			}
			data.Status = st
		}
		if err := w.WriteList(data); err != nil {
			return err
		}
	}
	if lsub || options.SelectSubscribed || options.SelectSpecialUse {
		return nil
	}
	return s.listAliases(ctx, w, fs, ref, pats, options.ReturnStatus)
}

// listName is the name a LIST reference and a pattern without wildcards
// make, the way imapserver.MatchList puts them together: a pattern that
// starts with the delimiter ignores the reference, and a reference
// without a trailing delimiter gets one.
func listName(ref, pattern string) string {
	if strings.HasPrefix(pattern, string(delim)) {
		return pattern[1:]
	}
	if ref != "" && !strings.HasSuffix(ref, string(delim)) {
		ref += string(delim)
	}
	return ref + pattern
}

// listAliases lists a special-folder alias (layout.go) that a pattern
// names exactly, with its folder's attributes but its own name: a client
// that made it with CREATE and looks for it by name finds it. Patterns
// with wildcards never show aliases, so a full listing has each special
// folder once.
func (s *session) listAliases(ctx context.Context, w *imapserver.ListWriter, fs *mailstore.FolderSet, ref string, pats []string, status *imap.StatusOptions) error {
	for _, p := range pats {
		if strings.ContainsAny(p, "*%") {
			continue
		}
		name := listName(ref, p)
		folder, err := s.srv.cfg.Layout.providerName(name)
		if err != nil || fs.Exists(folder) {
			continue
		}
		target := aliasTarget(folder)
		if !fs.Exists(target) {
			continue
		}
		attrs := []imap.MailboxAttr{imap.MailboxAttrHasNoChildren}
		if su := specialUseAttr(target); su != "" {
			attrs = append(attrs, su)
		}
		data := &imap.ListData{Mailbox: name, Delim: delim, Attrs: attrs}
		if status != nil {
			st, err := s.statusOf(ctx, target, status)
			if err != nil && err != errNoSuchMailbox {
				return err
			}
			if st != nil {
				st.Mailbox = name
			}
			data.Status = st
		}
		if err := w.WriteList(data); err != nil {
			return err
		}
	}
	return nil
}
