package mailstore

import (
	"context"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/directbridge/directbridge/upstream"
)

// The folder tree: every user's folder list and subscription list, read
// from the provider and kept for FolderListTTL, shared by all of a user's
// connections. The engine's own folder operations (folderops.go,
// subscriptions.go) invalidate them, so a client always sees its own
// changes.

// FolderListTTL is how long a user's folder list is reused. Clients list
// folders in bursts: Thunderbird sends LIST and LSUB (or LIST (SUBSCRIBED))
// on several connections at start-up, and LIST again after every folder
// operation. A few seconds turn such a burst into one GetFolders call while
// a folder made elsewhere (the web UI, another bridge) still shows up
// almost at once. The bridge's own CREATE, DELETE, RENAME, SUBSCRIBE and
// UNSUBSCRIBE invalidate the list, so a client always sees its own changes.
const FolderListTTL = 5 * time.Second

// delim is the hierarchy delimiter of the provider's folder names.
const delim = "."

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
// call and share its answer instead of each making their own; it is a
// channel of one slot, not a mutex, so that the wait ends with the
// waiter's context (internal/mailstore/doc.go: every wait has a deadline).
type folderEntry struct {
	fetch chan struct{}

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
		e = &folderEntry{fetch: make(chan struct{}, 1)}
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
	select {
	case e.fetch <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-e.fetch }()
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

// invalidateAll forgets every user's folder lists.
func (c *folderCache) invalidateAll() {
	c.mu.Lock()
	entries := make([]*folderEntry, 0, len(c.entries))
	for _, e := range c.entries {
		entries = append(entries, e)
	}
	c.mu.Unlock()
	for _, e := range entries {
		e.mu.Lock()
		e.gen++
		e.names, e.at = nil, time.Time{}
		e.mu.Unlock()
	}
}

// FolderSet is a user's folders: INBOX and every folder below it, by the
// provider's names. Each call of Store.Folders builds its own.
type FolderSet struct {
	names  []string // sorted, INBOX first
	exists map[string]bool
}

// newFolderSet builds a FolderSet from a GetFolders answer. Names IMAP
// cannot address (outside "INBOX.", empty levels) are left out: no command
// could name them anyway.
func newFolderSet(provider []string) *FolderSet {
	fs := &FolderSet{names: []string{"INBOX"}, exists: map[string]bool{"INBOX": true}}
	for _, n := range provider {
		if !ValidFolderName(n) || fs.exists[n] {
			continue
		}
		fs.exists[n] = true
		fs.names = append(fs.names, n)
	}
	sort.Strings(fs.names)
	return fs
}

// Names are the folders, sorted (INBOX first). The slice is the set's
// own: read it, do not change it.
func (fs *FolderSet) Names() []string { return fs.names }

// Exists tells whether a folder of exactly this name exists.
func (fs *FolderSet) Exists(name string) bool { return fs.exists[name] }

// ValidFolderName is the provider's naming rule as the bridge sees it: INBOX
// or "INBOX." followed by non-empty levels.
func ValidFolderName(n string) bool {
	if n == "INBOX" {
		return true
	}
	return strings.HasPrefix(n, "INBOX.") && !strings.Contains(n, "..") && !strings.HasSuffix(n, ".")
}

// descendants returns the existing folders below name, all levels. Names
// sharing a prefix are contiguous in sorted order, so this is a binary
// search and a short scan.
func (fs *FolderSet) descendants(name string) []string {
	prefix := name + delim
	i := sort.SearchStrings(fs.names, prefix)
	j := i
	for j < len(fs.names) && strings.HasPrefix(fs.names[j], prefix) {
		j++
	}
	return fs.names[i:j]
}

// HasChildren tells whether any folder exists below name.
func (fs *FolderSet) HasChildren(name string) bool { return len(fs.descendants(name)) > 0 }

// MadeBy lists what creating folder adds to the set: folder and each
// level above it that does not exist (the provider creates missing
// parents).
func (fs *FolderSet) MadeBy(folder string) []string {
	var made []string
	for _, a := range Ancestors(folder) {
		if a != "INBOX" && !fs.exists[a] {
			made = append(made, a)
		}
	}
	return append(made, folder)
}

// Ancestors lists the levels above name, INBOX first: "INBOX.a.b" gives
// "INBOX" and "INBOX.a".
func Ancestors(name string) []string {
	var out []string
	for i := 0; i < len(name); i++ {
		if name[i] == delim[0] {
			out = append(out, name[:i])
		}
	}
	return out
}

// Folders returns the user's folders: "INBOX" plus Folders(INBOX,
// false), reused for up to maxAge (FolderListTTL for listings; 0 for a
// decision that must see the provider's current list).
func (st *Store) Folders(ctx context.Context, auth upstream.Auth, maxAge time.Duration) (*FolderSet, error) {
	names, err := st.folders.get(ctx, auth.Username, false, maxAge, func(ctx context.Context) ([]string, error) {
		return folderTree(ctx, st.cfg.Provider, auth, st.treeShape(), false, nil)
	})
	if err != nil {
		return nil, err
	}
	return newFolderSet(names), nil
}

// Subscribed returns the subscription list (subscriptions.go), INBOX
// always among it: it is the one folder every client must see, and the
// provider has no subscription state for its root. The map is the
// caller's own.
func (st *Store) Subscribed(ctx context.Context, auth upstream.Auth) (map[string]bool, error) {
	names, err := st.folders.get(ctx, auth.Username, true, FolderListTTL, func(ctx context.Context) ([]string, error) {
		return folderTree(ctx, st.cfg.Provider, auth, st.treeShape(), true, func(ctx context.Context) ([]string, error) {
			all, err := st.Folders(ctx, auth, FolderListTTL)
			if err != nil {
				return nil, err
			}
			return slices.DeleteFunc(slices.Clone(all.names), func(n string) bool { return n == "INBOX" }), nil
		})
	})
	if err != nil {
		return nil, err
	}
	if names, err = st.subscribedNames(ctx, auth.Username, names); err != nil {
		return nil, err
	}
	sub := make(map[string]bool, len(names)+1)
	sub["INBOX"] = true
	for _, n := range names {
		if ValidFolderName(n) {
			sub[n] = true
		}
	}
	return sub, nil
}

// GetFolders returns "sub-folders of a folder" (messaging-rest.md,
// operation 20): whether that is the whole tree below it or its direct
// children only is not shown, and providers differ (JavaMail's
// Folder.list() is one level). A bridge that took a children-only answer
// for the whole tree would lose every nested folder from LIST.
//
// So the tree is read as follows. When the root's answer holds a folder
// two levels down (INBOX.a.b), the provider lists whole trees, and the
// bridge remembers that for the process's lifetime: one call per listing.
// Otherwise each listed folder is asked for its own sub-folders, level by
// level, and what comes back beyond the root's answer proves the provider
// lists children only (remembered too). A tree that is flat in fact
// (INBOX.Sent, INBOX.Trash, ...) cannot tell the two apart, and costs one
// call per folder per listing (listings are cached for FolderListTTL).
// The walk is on only with Config.FolderWalk (the bridge sets it for a
// real provider, and for a sandbox set to list children only).

// treeShape is what the bridge learned of the provider's GetFolders.
type treeShape int

const (
	shapeUnknown treeShape = iota
	shapeWholeTree
	shapeChildrenOnly
)

// maxTreeFolders bounds a walk of a children-only provider's tree.
const maxTreeFolders = 2000

// folderShape is the provider's GetFolders behaviour, as learned; a nil
// *folderShape means the provider is known to list whole trees.
type folderShape struct {
	mu    sync.Mutex
	shape treeShape
}

func (f *folderShape) get() treeShape {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.shape
}

func (f *folderShape) learn(s treeShape) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.shape == shapeUnknown {
		f.shape = s
	}
}

// treeShape is what folderTree needs to know of the provider's
// GetFolders: nil when it lists whole trees for certain.
func (st *Store) treeShape() *folderShape {
	if !st.cfg.FolderWalk {
		return nil
	}
	return &st.shape
}

// folderTree returns every folder below INBOX (subscribed ones only when
// subscribed), whichever way the provider lists them. parents, when not
// nil, are the folders to ask for their subscribed children (the whole
// tree: a subscribed folder may sit below an unsubscribed one).
func folderTree(ctx context.Context, p upstream.Provider, auth upstream.Auth, shape *folderShape, subscribed bool, parents func(context.Context) ([]string, error)) ([]string, error) {
	names, err := p.Folders(ctx, auth, "INBOX", subscribed)
	if err != nil || shape == nil {
		return names, err
	}
	for _, n := range names {
		if strings.Count(n, delim) >= 2 {
			shape.learn(shapeWholeTree)
		}
	}
	if shape.get() == shapeWholeTree {
		return names, nil
	}
	seen := make(map[string]bool, len(names))
	for _, n := range names {
		seen[n] = true
	}
	out := append([]string(nil), names...)
	var queue []string
	if subscribed && parents != nil {
		all, err := parents(ctx)
		if err != nil {
			return nil, err
		}
		queue = all
	} else {
		queue = append(queue, names...)
	}
	asked := map[string]bool{}
	for len(queue) > 0 && len(asked) < maxTreeFolders {
		parent := queue[0]
		queue = queue[1:]
		if asked[parent] {
			continue
		}
		asked[parent] = true
		kids, err := p.Folders(ctx, auth, parent, subscribed)
		if err != nil {
			if upstream.IsRefusal(err) {
				continue // deleted meanwhile
			}
			return nil, err
		}
		for _, k := range kids {
			if !strings.HasPrefix(k, parent+delim) || seen[k] {
				continue
			}
			seen[k] = true
			out = append(out, k)
			shape.learn(shapeChildrenOnly)
			if !subscribed || parents == nil {
				queue = append(queue, k)
			}
		}
	}
	return out, nil
}
