package mailstore

import (
	"context"
	"errors"
	"strings"

	"github.com/directbridge/directbridge/upstream"
)

// Folder operations: CreateFolder, DeleteFolder and RenameFolder, one call
// for each of a front's CREATE, DELETE and RENAME. Each decides on the
// provider's current folder list (one GetFolders), not a cached one,
// because a stale list could let DELETE remove sub-folders another client
// just made. Each then invalidates the shared list, so the next LIST shows
// the change, and brings the state store, the mirrors and the
// subscriptions (subscriptions.go) in line with what the provider now
// holds.
//
// A front's own rules on names (reserved folders, aliases of special
// folders) come in as a check, which the operation calls on that fresh
// list before it asks the provider for anything; an error from it is
// returned as it is.

// Refusals of folder operations; a front maps them to its answers.
var (
	// ErrFolderExists: the folder to create, or the new name of a
	// rename, exists.
	ErrFolderExists = errors.New("mailstore: the folder exists")
	// ErrNoSuchFolder: the folder to delete, rename or unsubscribe does
	// not exist (nor, for UNSUBSCRIBE, is the name subscribed).
	ErrNoSuchFolder = errors.New("mailstore: no such folder")
	// ErrHasChildren: the folder to delete has sub-folders. The provider
	// deletes a folder with all its sub-folders; RFC 9051 §6.3.5 forbids
	// that ("DELETE MUST NOT remove inferior hierarchical names") and
	// asks a server that cannot keep the inferiors to refuse.
	ErrHasChildren = errors.New("mailstore: the folder has sub-folders")
	// ErrTargetHasFolders: folders exist below the new name of a rename.
	ErrTargetHasFolders = errors.New("mailstore: folders exist below the new name")
)

// definiteRefusal tells a provider refusal (the request ran and was turned
// down) from a failure after which it may or may not have run.
func definiteRefusal(err error) bool {
	return upstream.IsRefusal(err)
}

// CreateFolder makes a folder; the provider creates missing parent
// levels, as RFC 9051 §6.3.4 wants. An existing folder is ErrFolderExists
// (reserved folders too); check, if not nil, then decides on the folder
// list. A folder of this name the bridge knew before (deleted by another
// client) leaves nothing behind: the new folder gets a new UIDVALIDITY,
// so no old flags can attach to its messages even if the provider were to
// reuse UIDs. The folders it made are not subscribed, unless a name was
// subscribed before it existed (subscriptions.go).
func (st *Store) CreateFolder(ctx context.Context, auth upstream.Auth, folder string, check func(*FolderSet) error) error {
	fs, err := st.Folders(ctx, auth, 0)
	if err != nil {
		return err
	}
	if fs.Exists(folder) {
		return ErrFolderExists
	}
	if check != nil {
		if err := check(fs); err != nil {
			return err
		}
	}
	err = st.cfg.Provider.CreateFolder(ctx, auth, folder)
	st.foldersChanged(auth.Username, false)
	if err != nil {
		// Decide on what the provider now holds: refused because it exists
		// (another client was quicker) is ErrFolderExists; a call that
		// timed out but did create the folder is a success.
		now, ferr := st.Folders(ctx, auth, 0)
		if ferr != nil || !now.Exists(folder) {
			return err
		}
		if definiteRefusal(err) {
			return ErrFolderExists
		}
	}
	st.startAfresh(ctx, auth.Username, folder)
	st.subscribeCreated(ctx, auth, fs.MadeBy(folder))
	return nil
}

// startAfresh forgets what the bridge holds about an earlier folder of
// exactly this name: its mirror (a connection that still has it selected
// gets BYE) and its UIDVALIDITY and kept flags. Folders below the name are
// not touched; they may exist.
func (st *Store) startAfresh(ctx context.Context, user, folder string) {
	user = strings.ToLower(user)
	// The state first, then the mirror: a mirror built in between would
	// carry the old UIDVALIDITY.
	if _, err := st.cfg.State.ResetFolder(ctx, user, folder, 0); err != nil {
		st.cfg.Logger.Warn("mailstore: resetting folder state", "user", user, "err", err)
	}
	st.dropMirror(user, folder)
	st.publish(change{U: user, F: folder, Drop: true})
}

// dropMirror forgets the mirror of exactly this folder, if any, and tells
// connections that have it selected (BYE at their next command). Unlike
// dropFolder it leaves the folders below alone.
func (st *Store) dropMirror(user, folder string) {
	if m := st.peek(user, folder); m != nil {
		m.markGone()
	}
}

// DeleteFolder removes a folder and its messages. The provider's
// DeleteFolder is recursive (messaging-rest.md, operation 24), which IMAP
// does not allow (RFC 9051 §6.3.5: DELETE MUST NOT remove inferior
// names), so a folder with sub-folders is refused with ErrHasChildren:
// the client deletes them first, as Thunderbird does anyway. Nothing is
// deleted silently. A folder that does not exist is ErrNoSuchFolder.
// Connections with the folder selected get BYE on their next command
// (RFC 9051 §7.1.5) and a folder created later under the name gets a new
// UIDVALIDITY. Its subscription outlives it (subscriptions.go).
func (st *Store) DeleteFolder(ctx context.Context, auth upstream.Auth, folder string) error {
	fs, err := st.Folders(ctx, auth, 0)
	if err != nil {
		return err
	}
	if !fs.Exists(folder) {
		return ErrNoSuchFolder
	}
	if fs.HasChildren(folder) {
		return ErrHasChildren
	}
	sub, err := st.Subscribed(ctx, auth)
	if err != nil {
		return err
	}
	err = st.cfg.Provider.DeleteFolder(ctx, auth, folder)
	st.foldersChanged(auth.Username, false)
	if err != nil {
		// A call that failed after the provider deleted the folder still
		// deleted it: say so, and forget it.
		now, ferr := st.Folders(ctx, auth, 0)
		if ferr != nil || now.Exists(folder) {
			return err
		}
		if definiteRefusal(err) {
			st.forgetFolder(ctx, auth.Username, folder)
			return ErrNoSuchFolder // someone else deleted it first
		}
	}
	st.forgetFolder(ctx, auth.Username, folder)
	st.keepSubscribed(ctx, auth.Username, folder, sub[folder])
	return nil
}

// forgetFolder drops the mirrors and the state of a deleted folder.
func (st *Store) forgetFolder(ctx context.Context, user, folder string) {
	user = strings.ToLower(user)
	st.dropFolder(user, folder)
	if err := st.cfg.State.ForgetFolder(ctx, user, folder); err != nil {
		st.cfg.Logger.Warn("mailstore: forgetting folder state", "user", user, "err", err)
	}
	st.publish(change{U: user, F: folder, Drop: true, Tree: true})
}

// RenameFolder renames a folder with its sub-folders (MoveFolder; the
// provider creates missing parents of the new name, as RFC 9051 §6.3.6
// wants). A from that does not exist is ErrNoSuchFolder, an existing to
// ErrFolderExists; check, if not nil, then decides on the folder list;
// folders below to are ErrTargetHasFolders. The provider keeps the
// messages' UIDs, so the bridge moves the folders' UIDVALIDITY and kept
// flags to the new names: a client that renames a folder does not
// download it again. Connections with the old folder selected get BYE on
// their next command.
func (st *Store) RenameFolder(ctx context.Context, auth upstream.Auth, from, to string, check func(*FolderSet) error) error {
	fs, err := st.Folders(ctx, auth, 0)
	if err != nil {
		return err
	}
	if !fs.Exists(from) {
		return ErrNoSuchFolder
	}
	if fs.Exists(to) {
		return ErrFolderExists
	}
	if check != nil {
		if err := check(fs); err != nil {
			return err
		}
	}
	// The provider always creates parents, so folders below a name that
	// does not exist should not occur; if they do, the moved folders could
	// collide with them, and the state store would drop their state (it
	// clears everything below the new name). Refuse instead.
	if fs.HasChildren(to) {
		return ErrTargetHasFolders
	}
	// The read marking of messages just appended names the old folder.
	st.markAppendedReadIn(ctx, auth.Username, from)
	err = st.cfg.Provider.RenameFolder(ctx, auth, from, to)
	st.foldersChanged(auth.Username, false)
	if err != nil {
		now, ferr := st.Folders(ctx, auth, 0)
		switch {
		case ferr != nil:
			return err
		case !definiteRefusal(err) && !now.Exists(from) && now.Exists(to):
			// The move happened although the call failed: finish it.
		case definiteRefusal(err) && !now.Exists(from):
			return ErrNoSuchFolder
		case definiteRefusal(err) && now.Exists(to):
			return ErrFolderExists
		default:
			return err
		}
	}
	// The state moves first, then the mirrors go: a mirror of the new name
	// built in between (a STATUS from another connection) would carry a
	// UIDVALIDITY of its own and is dropped with the rest.
	user := strings.ToLower(auth.Username)
	if err := st.cfg.State.RenameFolder(ctx, user, from, to); err != nil {
		// The folders keep their messages and UIDs; without their state
		// they get a new UIDVALIDITY, which clients handle by resyncing.
		st.cfg.Logger.Warn("mailstore: moving folder state", "user", user, "err", err)
	}
	for _, n := range append([]string{to}, renamedNames(fs, from, to)...) {
		st.dropMirror(user, n)
		st.publish(change{U: user, F: n, Drop: true})
	}
	st.dropFolder(user, from)
	st.publish(change{U: user, F: from, Drop: true, Tree: true})
	if parents := fs.MadeBy(to); len(parents) > 1 {
		st.subscribeCreated(ctx, auth, parents[:len(parents)-1])
	}
	return nil
}

// renamedNames lists the new names of the folders below from.
func renamedNames(fs *FolderSet, from, to string) []string {
	var out []string
	for _, d := range fs.descendants(from) {
		out = append(out, to+strings.TrimPrefix(d, from))
	}
	return out
}
