package imapbackend

import (
	"context"
	"strings"

	"github.com/emersion/go-imap/v2"

	"github.com/directbridge/directbridge/upstream"
)

// Folder commands: CREATE, DELETE, RENAME, SUBSCRIBE and UNSUBSCRIBE, on
// the provider's folder rules (messaging-rest.md, "Folder rules"): names
// start with "INBOX.", and INBOX, INBOX.Sent, INBOX.Templates, INBOX.Drafts
// and INBOX.Spam are reserved. Each command decides on the provider's
// current folder list (one GetFolders), not a cached one, because a stale
// list could let DELETE remove sub-folders another client just made. Each
// then invalidates the shared list, so the next LIST shows the change.

// reservedFolders cannot be created, deleted or renamed at the provider.
var reservedFolders = []string{"INBOX", "INBOX.Sent", "INBOX.Templates", "INBOX.Drafts", "INBOX.Spam"}

func reservedFolder(name string) bool {
	for _, r := range reservedFolders {
		if name == r {
			return true
		}
	}
	return false
}

// Refusals specific to folder commands (RFC 5530 response codes).
var (
	// The provider deletes a folder with all its sub-folders. RFC 9051
	// §6.3.5 forbids that ("DELETE MUST NOT remove inferior hierarchical
	// names") and asks a server that cannot keep the inferiors to refuse
	// with HASCHILDREN.
	errHasChildren = no(imap.ResponseCodeHasChildren,
		"The provider would delete the sub-folders too; delete the sub-folders first")
	// RFC 9051 §6.3.6 defines RENAME INBOX as moving INBOX's messages into
	// a new folder; the provider cannot rename INBOX at all.
	errRenameInbox = no(imap.ResponseCodeCannot,
		"The provider does not allow renaming INBOX; create a folder and move the messages instead")
	// CREATE-SPECIAL-USE (RFC 6154 §3) is not offered: the provider fixes
	// which folders have a special use. USEATTR is RFC 6154's code for it.
	errUseAttr = no(imap.ResponseCode("USEATTR"),
		"Special-use attributes cannot be assigned; the provider's folders INBOX.Sent, INBOX.Drafts, INBOX.Trash and INBOX.Spam have them")
	errBadFolderName = no(imap.ResponseCodeCannot,
		`Folder names must start with "INBOX." and have no empty levels, e.g. INBOX.Projects`)
	// RFC 2180 §3.1 lets a server refuse to delete or rename a mailbox in
	// use. The bridge does so for the connection's own selected folder:
	// go-imap gives a session no way back to the authenticated state, and
	// Thunderbird and mbsync CLOSE a folder before deleting or renaming it.
	errSelectedHere = no(imap.ResponseCodeInUse,
		"This folder (or one below it) is selected on this connection; CLOSE or UNSELECT it first")
	errIntoItself       = no(imap.ResponseCodeCannot, "A folder cannot be moved into itself")
	errTargetHasFolders = no(imap.ResponseCodeAlreadyExists, "Folders already exist below the new name")
	errInboxSubscribed  = no(imap.ResponseCodeCannot, "INBOX is always subscribed")
)

// newFolderName checks a name that CREATE or RENAME is to give a folder. A
// trailing delimiter is dropped: "INBOX.a." asks for INBOX.a (RFC 9051
// §6.3.4). Names outside "INBOX." are refused with a reason rather than
// NONEXISTENT, which would make no sense for a folder being created.
func (s *session) newFolderName(name string) (folder string, viaAlias bool, err error) {
	name = strings.TrimSuffix(name, string(delim))
	bad := s.srv.cfg.Layout.badName()
	if name == "" {
		return "", false, bad
	}
	folder, viaAlias, err = s.resolveName(name)
	if err == errNoSuchMailbox {
		return "", false, bad
	}
	return folder, viaAlias, err
}

// selectedWithin tells whether this connection has folder, or a folder
// below it, selected.
func (s *session) selectedWithin(folder string) bool {
	return s.sel != nil && (s.sel.Name() == folder || strings.HasPrefix(s.sel.Name(), folder+string(delim)))
}

// definiteRefusal tells a provider refusal (the request ran and was turned
// down) from a failure after which it may or may not have run.
func definiteRefusal(err error) bool {
	return upstream.IsRefusal(err)
}

// Create makes a folder. The provider creates missing parent levels, as
// RFC 9051 §6.3.4 wants. A folder of this name the bridge knew before
// (deleted by another client) leaves nothing behind: the new folder gets a
// new UIDVALIDITY, so no old flags can attach to its messages even if the
// provider were to reuse UIDs.
func (s *session) Create(name string, options *imap.CreateOptions) error {
	if options != nil && len(options.SpecialUse) > 0 {
		return errUseAttr
	}
	folder, viaAlias, err := s.newFolderName(name)
	if err != nil {
		return err
	}
	if viaAlias {
		return nil // the special folder is there (layout.go)
	}
	ctx, cancel := s.ctx()
	defer cancel()
	fs, err := s.listFolders(ctx, 0)
	if err != nil {
		return imapError(err)
	}
	if fs.exists[folder] {
		return errExists // RFC 5530 ALREADYEXISTS, reserved folders too
	}
	if reservedFolder(folder) {
		return errReserved
	}
	if err := aliasLevel(fs, folder); err != nil {
		return err
	}
	err = s.srv.cfg.Provider.CreateFolder(ctx, s.auth, folder)
	s.srv.folders.invalidate(s.auth.Username, false)
	if err != nil {
		// Decide on what the provider now holds: refused because it exists
		// (another client was quicker) is ALREADYEXISTS; a call that timed
		// out but did create the folder is a success.
		now, ferr := s.listFolders(ctx, 0)
		if ferr != nil || !now.exists[folder] {
			return imapError(err)
		}
		if definiteRefusal(err) {
			return errExists
		}
	}
	s.startAfresh(ctx, folder)
	s.subscribeCreated(ctx, madeBy(fs, folder))
	return nil
}

// aliasLevel refuses a new folder that would make a level named like a
// special-folder alias ("Sent Items.Old" would make the provider create
// "Sent Items" as its parent): the alias would then name that folder,
// and clients that save to "Sent Items" would fill it instead of Sent.
func aliasLevel(fs *folderSet, folder string) error {
	for _, n := range madeBy(fs, folder) {
		if t := aliasTarget(n); t != "" && fs.exists[t] {
			return no(imap.ResponseCodeCannot, "That name stands for a special folder here; name the folder otherwise")
		}
	}
	return nil
}

// startAfresh forgets what the bridge holds about an earlier folder of
// exactly this name: its mirror (a connection that still has it selected
// gets BYE) and its UIDVALIDITY and kept flags. Folders below the name are
// not touched; they may exist.
func (s *session) startAfresh(ctx context.Context, folder string) {
	user := strings.ToLower(s.auth.Username)
	// The state first, then the mirror: a mirror built in between would
	// carry the old UIDVALIDITY.
	if _, err := s.srv.cfg.Store.ResetFolder(ctx, user, folder, 0); err != nil {
		s.srv.cfg.Logger.Warn("imap: resetting folder state", "user", user, "err", err)
	}
	s.dropMirror(user, folder)
}

// dropMirror forgets the mirror of exactly this folder, if any, and tells
// connections that have it selected (BYE at their next command). Unlike
// mailstore.Store.DropFolder it leaves the folders below alone.
func (s *session) dropMirror(user, folder string) {
	if m := s.srv.store.Peek(user, folder); m != nil {
		m.MarkGone()
	}
}

// Delete removes a folder and its messages. The provider's DeleteFolder is
// recursive (messaging-rest.md, operation 24), which IMAP does not allow
// (RFC 9051 §6.3.5: DELETE MUST NOT remove inferior names), so a folder
// with sub-folders is refused with NO [HASCHILDREN]: the client deletes
// them first, as Thunderbird does anyway. Nothing is deleted silently.
// Other connections with the folder selected get BYE on their next command
// (RFC 9051 §7.1.5) and a folder created later under the name gets a new
// UIDVALIDITY.
func (s *session) Delete(name string) error {
	folder, viaAlias, err := s.resolveName(name)
	if err != nil {
		return err
	}
	if viaAlias || reservedFolder(folder) {
		return errReserved
	}
	if s.selectedWithin(folder) {
		return errSelectedHere
	}
	ctx, cancel := s.ctx()
	defer cancel()
	fs, err := s.listFolders(ctx, 0)
	if err != nil {
		return imapError(err)
	}
	if !fs.exists[folder] {
		return errNoSuchMailbox
	}
	if fs.hasChildren(folder) {
		return errHasChildren
	}
	// Its subscription outlives it (subscriptions.go).
	sub, err := s.subscribedFolders(ctx)
	if err != nil {
		return imapError(err)
	}
	err = s.srv.cfg.Provider.DeleteFolder(ctx, s.auth, folder)
	s.srv.folders.invalidate(s.auth.Username, false)
	if err != nil {
		// A call that failed after the provider deleted the folder still
		// deleted it: say so, and forget it.
		now, ferr := s.listFolders(ctx, 0)
		if ferr != nil || now.exists[folder] {
			return imapError(err)
		}
		if definiteRefusal(err) {
			s.forgetFolder(ctx, folder)
			return errNoSuchMailbox // someone else deleted it first
		}
	}
	s.forgetFolder(ctx, folder)
	s.keepSubscribed(ctx, folder, sub[folder])
	return nil
}

// forgetFolder drops the mirrors and the state of a deleted folder.
func (s *session) forgetFolder(ctx context.Context, folder string) {
	user := strings.ToLower(s.auth.Username)
	s.srv.store.DropFolder(user, folder)
	if err := s.srv.cfg.Store.ForgetFolder(ctx, user, folder); err != nil {
		s.srv.cfg.Logger.Warn("imap: forgetting folder state", "user", user, "err", err)
	}
}

// Rename renames a folder with its sub-folders (MoveFolder; the provider
// creates missing parents of the new name, as RFC 9051 §6.3.6 wants). The
// provider keeps the messages' UIDs, so the bridge moves the folders'
// UIDVALIDITY and kept flags to the new names: a client that renames a
// folder does not download it again. Connections with the old folder
// selected get BYE on their next command.
func (s *session) Rename(oldName, newName string, _ *imap.RenameOptions) error {
	from, fromAlias, err := s.resolveName(oldName)
	if err != nil {
		return err
	}
	if from == "INBOX" {
		return errRenameInbox
	}
	if fromAlias || reservedFolder(from) {
		return errReserved
	}
	to, toAlias, err := s.newFolderName(newName)
	if err != nil {
		return err
	}
	if toAlias || reservedFolder(to) {
		return errReserved
	}
	if to == from {
		return errExists
	}
	if strings.HasPrefix(to, from+string(delim)) {
		return errIntoItself
	}
	if s.selectedWithin(from) {
		return errSelectedHere
	}
	ctx, cancel := s.ctx()
	defer cancel()
	fs, err := s.listFolders(ctx, 0)
	if err != nil {
		return imapError(err)
	}
	if !fs.exists[from] {
		return errNoSuchMailbox
	}
	if fs.exists[to] {
		return errExists
	}
	if err := aliasLevel(fs, to); err != nil {
		return err
	}
	// The provider always creates parents, so folders below a name that
	// does not exist should not occur; if they do, the moved folders could
	// collide with them, and the state store would drop their state (it
	// clears everything below the new name). Refuse instead.
	if fs.hasChildren(to) {
		return errTargetHasFolders
	}
	// The read marking of messages just appended names the old folder.
	s.srv.store.MarkAppendedReadIn(ctx, s.auth.Username, from)
	err = s.srv.cfg.Provider.RenameFolder(ctx, s.auth, from, to)
	s.srv.folders.invalidate(s.auth.Username, false)
	if err != nil {
		now, ferr := s.listFolders(ctx, 0)
		switch {
		case ferr != nil:
			return imapError(err)
		case !definiteRefusal(err) && !now.exists[from] && now.exists[to]:
			// The move happened although the call failed: finish it.
		case definiteRefusal(err) && !now.exists[from]:
			return errNoSuchMailbox
		case definiteRefusal(err) && now.exists[to]:
			return errExists
		default:
			return imapError(err)
		}
	}
	// The state moves first, then the mirrors go: a mirror of the new name
	// built in between (a STATUS from another connection) would carry a
	// UIDVALIDITY of its own and is dropped with the rest.
	user := strings.ToLower(s.auth.Username)
	if err := s.srv.cfg.Store.RenameFolder(ctx, user, from, to); err != nil {
		// The folders keep their messages and UIDs; without their state
		// they get a new UIDVALIDITY, which clients handle by resyncing.
		s.srv.cfg.Logger.Warn("imap: moving folder state", "user", user, "err", err)
	}
	for _, n := range append([]string{to}, renamedNames(fs, from, to)...) {
		s.dropMirror(user, n)
	}
	s.srv.store.DropFolder(user, from)
	if parents := madeBy(fs, to); len(parents) > 1 {
		s.subscribeCreated(ctx, parents[:len(parents)-1])
	}
	return nil
}

// renamedNames lists the new names of the folders below from.
func renamedNames(fs *folderSet, from, to string) []string {
	var out []string
	for _, d := range fs.descendants(from) {
		out = append(out, to+strings.TrimPrefix(d, from))
	}
	return out
}
