package fakeprovider

import (
	"context"
	"slices"
	"sort"
	"strings"
	"unicode"

	"github.com/directbridge/directbridge/upstream"
)

// folder is one folder of a mailbox.
type folder struct {
	name       string
	subscribed bool
	nextUID    int64
	msgs       []*message // ascending UID
}

// maxFolderName bounds a folder name in bytes, as the sandbox does.
const maxFolderName = 512

// validateFolderName applies the document's rule that folder names start
// with "INBOX." (the root being INBOX) and refuses what the sandbox
// refuses: empty levels and control characters.
func validateFolderName(name string) error {
	if name == Inbox {
		return nil
	}
	if !strings.HasPrefix(name, Inbox+".") {
		return errInvalid("folder name %q must start with INBOX.", name)
	}
	if len(name) > maxFolderName {
		return errInvalid("folder name longer than %d bytes", maxFolderName)
	}
	for _, seg := range strings.Split(name, ".") {
		if seg == "" {
			return errInvalid("folder name %q has an empty level", name)
		}
	}
	if strings.ContainsFunc(name, unicode.IsControl) {
		return errInvalid("folder name contains a control character")
	}
	return nil
}

func isReserved(name string) bool { return slices.Contains(reservedFolders, name) }

// parentNames lists the ancestors of name below INBOX, outermost first.
func parentNames(name string) []string {
	var out []string
	for i := len(Inbox) + 1; i < len(name); i++ {
		if name[i] == '.' {
			out = append(out, name[:i])
		}
	}
	return out
}

// makeFolder adds a folder whose UIDs continue after the last one any
// earlier folder of that name handed out.
func (a *account) makeFolder(name string) *folder {
	f := &folder{name: name, subscribed: true, nextUID: a.highwater[name] + 1}
	a.folders[name] = f
	return f
}

// forgetFolder removes a folder, remembering its last UID.
func (a *account) forgetFolder(f *folder) {
	a.highwater[f.name] = max(a.highwater[f.name], f.nextUID-1)
	delete(a.folders, f.name)
}

// folder resolves an existing folder; a missing one, or a name the
// provider would not give a folder, is code 3.
func (a *account) folder(name string) (*folder, error) {
	if err := validateFolderName(name); err != nil {
		return nil, err
	}
	return a.lookup(name)
}

// lookup is folder without the check of the name, as the sandbox's
// counts and subscriptions look folders up.
func (a *account) lookup(name string) (*folder, error) {
	f := a.folders[name]
	if f == nil {
		return nil, errInvalid("folder %q does not exist", name)
	}
	return f, nil
}

// ensureFolder returns the folder, making it and its ancestors.
func (a *account) ensureFolder(name string) *folder {
	for _, p := range parentNames(name) {
		if a.folders[p] == nil {
			a.makeFolder(p)
		}
	}
	if f := a.folders[name]; f != nil {
		return f
	}
	return a.makeFolder(name)
}

// subtree lists the folder and its descendants.
func (a *account) subtree(name string) []*folder {
	var out []*folder
	for n, f := range a.folders {
		if n == name || strings.HasPrefix(n, name+".") {
			out = append(out, f)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

// Folders lists every folder below root at all levels, sorted, root
// itself left out (GetFolders as the sandbox answers it by default).
func (p *Provider) Folders(ctx context.Context, auth upstream.Auth, root string, subscribedOnly bool) ([]string, error) {
	var out []string
	err := p.op(ctx, "Folders", "GetFolders", false, auth, func(a *account) error {
		if _, err := a.folder(root); err != nil {
			return err
		}
		out = []string{}
		for _, f := range a.subtree(root) {
			if f.name != root && (!subscribedOnly || f.subscribed) {
				out = append(out, f.name)
			}
		}
		return nil
	})
	return out, err
}

// SetSubscribed changes the subscription of every folder named, or of
// none when one does not exist.
func (p *Provider) SetSubscribed(ctx context.Context, auth upstream.Auth, folders []string, subscribed bool) error {
	return p.op(ctx, "SetSubscribed", "SetFoldersSubscribed", true, auth, func(a *account) error {
		if len(folders) == 0 {
			return errInvalid("folders missing")
		}
		fs := make([]*folder, 0, len(folders))
		for _, n := range folders {
			f, err := a.lookup(n)
			if err != nil {
				return err
			}
			fs = append(fs, f)
		}
		for _, f := range fs {
			f.subscribed = subscribed
		}
		p.record(Event{Op: "SetSubscribed", User: a.address, Folder: strings.Join(folders, ","), Read: subscribed})
		return nil
	})
}

// CreateFolder makes a folder and any missing ancestors, as IMAP CREATE
// does; reserved or existing names are refused.
func (p *Provider) CreateFolder(ctx context.Context, auth upstream.Auth, name string) error {
	return p.op(ctx, "CreateFolder", "CreateFolder", true, auth, func(a *account) error {
		if err := validateFolderName(name); err != nil {
			return err
		}
		if isReserved(name) {
			return errInvalid("folder %q is reserved", name)
		}
		if a.folders[name] != nil {
			return errInvalid("folder %q already exists", name)
		}
		a.ensureFolder(name)
		p.record(Event{Op: "CreateFolder", User: a.address, Folder: name})
		return nil
	})
}

// RenameFolder renames a non-reserved folder with its sub-folders
// (MoveFolder). Messages keep their UIDs; the new names hand out UIDs
// above both the old and the new name's last ones.
func (p *Provider) RenameFolder(ctx context.Context, auth upstream.Auth, from, to string) error {
	return p.op(ctx, "RenameFolder", "MoveFolder", true, auth, func(a *account) error {
		for _, n := range []string{from, to} {
			if err := validateFolderName(n); err != nil {
				return err
			}
			if isReserved(n) {
				return errInvalid("folder %q is reserved", n)
			}
		}
		if to == from || strings.HasPrefix(to, from+".") {
			return errInvalid("cannot move folder %q into itself", from)
		}
		if a.folders[from] == nil {
			return errInvalid("folder %q does not exist", from)
		}
		if a.folders[to] != nil {
			return errInvalid("folder %q already exists", to)
		}
		tree := a.subtree(from)
		for _, f := range tree {
			if err := validateFolderName(to + strings.TrimPrefix(f.name, from)); err != nil {
				return err
			}
		}
		for _, parent := range parentNames(to) {
			a.ensureFolder(parent)
		}
		for _, f := range tree {
			newName := to + strings.TrimPrefix(f.name, from)
			a.forgetFolder(f)
			f.name = newName
			f.nextUID = max(f.nextUID, a.highwater[newName]+1)
			a.folders[newName] = f
		}
		p.record(Event{Op: "RenameFolder", User: a.address, Folder: from, Dest: to})
		return nil
	})
}

// DeleteFolder removes a non-reserved folder with its sub-folders and
// their messages, for good.
func (p *Provider) DeleteFolder(ctx context.Context, auth upstream.Auth, name string) error {
	return p.op(ctx, "DeleteFolder", "DeleteFolder", true, auth, func(a *account) error {
		if err := validateFolderName(name); err != nil {
			return err
		}
		if isReserved(name) {
			return errInvalid("folder %q is reserved", name)
		}
		if a.folders[name] == nil {
			return errInvalid("folder %q does not exist", name)
		}
		for _, f := range a.subtree(name) {
			a.forgetFolder(f)
		}
		p.record(Event{Op: "DeleteFolder", User: a.address, Folder: name})
		return nil
	})
}
