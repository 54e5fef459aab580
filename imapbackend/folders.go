package imapbackend

import (
	"errors"
	"strings"

	"github.com/emersion/go-imap/v2"

	"github.com/directbridge/directbridge/internal/mailstore"
)

// Folder commands: CREATE, DELETE, RENAME, SUBSCRIBE and UNSUBSCRIBE, on
// the provider's folder rules (messaging-rest.md, "Folder rules"): names
// start with "INBOX.", and INBOX, INBOX.Sent, INBOX.Templates, INBOX.Drafts
// and INBOX.Spam are reserved. Each is one mailstore operation
// (internal/mailstore/folderops.go, internal/mailstore/subscriptions.go), which decides on
// the provider's current folder list; the front checks the names and
// passes its own rules on that list (reserved names, aliases) as the
// operation's check, and maps the engine's refusals (folderError).

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

// folderError is imapError for the folder operations' refusals
// (internal/mailstore/folderops.go): the one place they become IMAP answers.
func folderError(err error) error {
	switch {
	case errors.Is(err, mailstore.ErrFolderExists):
		return errExists // RFC 5530 ALREADYEXISTS
	case errors.Is(err, mailstore.ErrNoSuchFolder):
		return errNoSuchMailbox
	case errors.Is(err, mailstore.ErrHasChildren):
		return errHasChildren
	case errors.Is(err, mailstore.ErrTargetHasFolders):
		return errTargetHasFolders
	}
	return imapError(err)
}

// Create makes a folder (mailstore.Store.CreateFolder): a name that
// exists is ALREADYEXISTS, reserved folders too; the special-folder
// aliases make nothing (layout.go).
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
	return folderError(s.srv.store.CreateFolder(ctx, s.auth, folder, func(fs *mailstore.FolderSet) error {
		if reservedFolder(folder) {
			return errReserved
		}
		return aliasLevel(fs, folder)
	}))
}

// aliasLevel refuses a new folder that would make a level named like a
// special-folder alias ("Sent Items.Old" would make the provider create
// "Sent Items" as its parent): the alias would then name that folder,
// and clients that save to "Sent Items" would fill it instead of Sent.
func aliasLevel(fs *mailstore.FolderSet, folder string) error {
	for _, n := range fs.MadeBy(folder) {
		if t := aliasTarget(n); t != "" && fs.Exists(t) {
			return no(imap.ResponseCodeCannot, "That name stands for a special folder here; name the folder otherwise")
		}
	}
	return nil
}

// Delete removes a folder and its messages (mailstore.Store.DeleteFolder).
// The provider's delete is recursive, which IMAP does not allow, so a
// folder with sub-folders is NO [HASCHILDREN] (errHasChildren). The
// reserved folders and this connection's selected one are refused here.
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
	return folderError(s.srv.store.DeleteFolder(ctx, s.auth, folder))
}

// Rename renames a folder with its sub-folders
// (mailstore.Store.RenameFolder), keeping their UIDVALIDITY and flags:
// a client that renames a folder does not download it again. INBOX, the
// reserved folders, the aliases and this connection's selected folder
// are refused here.
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
	return folderError(s.srv.store.RenameFolder(ctx, s.auth, from, to, func(fs *mailstore.FolderSet) error {
		return aliasLevel(fs, to)
	}))
}
