package imapbackend

import (
	"context"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapserver"
)

// folderListTTL is how long a user's folder list is reused. Clients list
// folders in bursts: Thunderbird sends LIST and LSUB (or LIST (SUBSCRIBED))
// on several connections at start-up, and LIST again after every folder
// operation. A few seconds turn such a burst into one GetFolders call while
// a folder made elsewhere (the web UI, another bridge) still shows up
// almost at once. The bridge's own CREATE, DELETE, RENAME, SUBSCRIBE and
// UNSUBSCRIBE invalidate the list, so a client always sees its own changes.
const folderListTTL = 5 * time.Second

// folderCache holds the folder lists of every user, shared by all of a
// user's connections. Its zero value is ready to use.
type folderCache struct {
	mu      sync.Mutex
	entries map[folderKey]*folderEntry
}

type folderKey struct {
	user       string // lower-case Direct address
	subscribed bool   // Folders(INBOX, true) rather than (INBOX, false)
}

// folderEntry is one cached list. fetch is held while a GetFolders call is
// under way, so that connections asking at the same moment wait for that
// call and share its answer instead of each making their own.
type folderEntry struct {
	fetch sync.Mutex

	mu    sync.Mutex
	names []string // as GetFolders answered: below INBOX, all levels
	at    time.Time
	gen   uint64 // bumped by invalidate: an answer fetched before is not stored
}

func (c *folderCache) entry(user string, subscribed bool) *folderEntry {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.entries == nil {
		c.entries = map[folderKey]*folderEntry{}
	}
	k := folderKey{strings.ToLower(user), subscribed}
	e := c.entries[k]
	if e == nil {
		e = &folderEntry{}
		c.entries[k] = e
	}
	return e
}

// cached returns the entry's list if it is younger than maxAge.
func (e *folderEntry) cached(maxAge time.Duration) ([]string, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.at.IsZero() || time.Since(e.at) >= maxAge {
		return nil, false
	}
	return e.names, true
}

// get returns a folder list no older than maxAge, calling fetch when the
// cached one is older. maxAge 0 always calls fetch: commands that change
// folders decide on the provider's current list, never on a cached one.
func (c *folderCache) get(ctx context.Context, user string, subscribed bool, maxAge time.Duration,
	fetch func(context.Context) ([]string, error)) ([]string, error) {
	e := c.entry(user, subscribed)
	if names, ok := e.cached(maxAge); ok {
		return names, nil
	}
	e.fetch.Lock()
	defer e.fetch.Unlock()
	if names, ok := e.cached(maxAge); ok {
		return names, nil // another connection fetched it while this one waited
	}
	e.mu.Lock()
	gen := e.gen
	e.mu.Unlock()
	names, err := fetch(ctx)
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	if e.gen == gen {
		e.names, e.at = names, time.Now()
	}
	e.mu.Unlock()
	return names, nil
}

// invalidate forgets a user's folder lists after the bridge changed the
// folders; subscribed-only forgets just the subscription list.
func (c *folderCache) invalidate(user string, subscribedOnly bool) {
	for _, sub := range []bool{true, false} {
		if !sub && subscribedOnly {
			continue
		}
		e := c.entry(user, sub)
		e.mu.Lock()
		e.gen++
		e.names, e.at = nil, time.Time{}
		e.mu.Unlock()
	}
}

// folderSet is a user's folders: INBOX and every folder below it.
type folderSet struct {
	names  []string // sorted, INBOX first
	exists map[string]bool
}

// newFolderSet builds a folderSet from a GetFolders answer. Names IMAP
// cannot address (outside "INBOX.", empty levels) are left out: no command
// could name them anyway.
func newFolderSet(provider []string) *folderSet {
	fs := &folderSet{names: []string{"INBOX"}, exists: map[string]bool{"INBOX": true}}
	for _, n := range provider {
		if !validFolderName(n) || fs.exists[n] {
			continue
		}
		fs.exists[n] = true
		fs.names = append(fs.names, n)
	}
	sort.Strings(fs.names)
	return fs
}

// validFolderName is the provider's naming rule as the bridge sees it: INBOX
// or "INBOX." followed by non-empty levels.
func validFolderName(n string) bool {
	if n == "INBOX" {
		return true
	}
	return strings.HasPrefix(n, "INBOX.") && !strings.Contains(n, "..") && !strings.HasSuffix(n, ".")
}

// descendants returns the existing folders below name, all levels. Names
// sharing a prefix are contiguous in sorted order, so this is a binary
// search and a short scan.
func (fs *folderSet) descendants(name string) []string {
	prefix := name + string(delim)
	i := sort.SearchStrings(fs.names, prefix)
	j := i
	for j < len(fs.names) && strings.HasPrefix(fs.names[j], prefix) {
		j++
	}
	return fs.names[i:j]
}

func (fs *folderSet) hasChildren(name string) bool { return len(fs.descendants(name)) > 0 }

// ancestors lists the levels above name, INBOX first: "INBOX.a.b" gives
// "INBOX" and "INBOX.a".
func ancestors(name string) []string {
	var out []string
	for i := 0; i < len(name); i++ {
		if name[i] == byte(delim) {
			out = append(out, name[:i])
		}
	}
	return out
}

// listFolders returns the user's folders: "INBOX" plus Folders(INBOX,
// false), reused for up to maxAge.
func (s *session) listFolders(ctx context.Context, maxAge time.Duration) (*folderSet, error) {
	names, err := s.srv.folders.get(ctx, s.auth.Username, false, maxAge, func(ctx context.Context) ([]string, error) {
		return folderTree(ctx, s.srv.cfg.Provider, s.auth, s.srv.shape(), false, nil)
	})
	if err != nil {
		return nil, err
	}
	return newFolderSet(names), nil
}

// subscribedFolders returns the subscription list (subscriptions.go),
// INBOX always among it: it is the one folder every client must see, and
// the provider has no subscription state for its root.
func (s *session) subscribedFolders(ctx context.Context) (map[string]bool, error) {
	names, err := s.srv.folders.get(ctx, s.auth.Username, true, folderListTTL, func(ctx context.Context) ([]string, error) {
		return folderTree(ctx, s.srv.cfg.Provider, s.auth, s.srv.shape(), true, func(ctx context.Context) ([]string, error) {
			all, err := s.listFolders(ctx, folderListTTL)
			if err != nil {
				return nil, err
			}
			return slices.DeleteFunc(slices.Clone(all.names), func(n string) bool { return n == "INBOX" }), nil
		})
	})
	if err != nil {
		return nil, err
	}
	if names, err = s.subscribedNames(ctx, names); err != nil {
		return nil, err
	}
	sub := make(map[string]bool, len(names)+1)
	sub["INBOX"] = true
	for _, n := range names {
		if validFolderName(n) {
			sub[n] = true
		}
	}
	return sub, nil
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
	fs, err := s.listFolders(ctx, folderListTTL)
	if err != nil {
		return imapError(err)
	}
	var sub map[string]bool
	if options.SelectSubscribed || options.ReturnSubscribed {
		if sub, err = s.subscribedFolders(ctx); err != nil {
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
		a := ancestors(name)
		if flat && len(a) > 0 && a[0] == "INBOX" {
			a = a[1:]
		}
		return a
	}
	hasChildren := func(name string) bool { return !(flat && name == "INBOX") && fs.hasChildren(name) }
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
	for _, n := range fs.names {
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
		exists := fs.exists[name]
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
func (s *session) listAliases(ctx context.Context, w *imapserver.ListWriter, fs *folderSet, ref string, pats []string, status *imap.StatusOptions) error {
	for _, p := range pats {
		if strings.ContainsAny(p, "*%") {
			continue
		}
		name := listName(ref, p)
		folder, err := s.srv.cfg.Layout.providerName(name)
		if err != nil || fs.exists[folder] {
			continue
		}
		target := aliasTarget(folder)
		if !fs.exists[target] {
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

// shape is what folderTree needs to know of the provider's GetFolders:
// nil when it lists whole trees for certain.
func (s *Server) shape() *folderShape {
	if !s.cfg.FolderWalk {
		return nil
	}
	return &s.folderShape
}
