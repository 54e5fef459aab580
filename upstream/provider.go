// Package upstream is the narrow interface between the bridge's mail
// engine and a Direct provider, in the shape of ProtonMail gluon's
// connector.Connector: every operation the protocol fronts need, with
// provider-neutral sentinel errors. The REST client implements it through
// a thin adapter (restclient.Upstream); tests may implement it with a fake.
//
// Nothing above this interface knows about HTTP, JSON or the provider's
// result codes: errors are classified once, by the adapter, into the
// sentinels of errors.go, which callers test with errors.Is.
package upstream

import (
	"context"
	"time"

	"github.com/directbridge/directbridge/upstream/directapi"
)

// Auth is the credentials of one mailbox user, sent with every request.
type Auth = directapi.Authentication

// Provider is everything the bridge asks of a Direct provider. Folder
// names are the provider's ("INBOX", "INBOX.Sent", ...). UIDs are the
// provider's: unique within a folder, never reused, growing in the order
// messages arrive (the document: "received order within a folder").
//
// Methods that change something (Save, Copy, Move, Delete, SetRead, the
// folder operations, Send) are never repeated by the implementation once
// the request may have reached the provider: a failure after that point
// is ErrUnknownOutcome, and the caller decides.
type Provider interface {
	// CheckCredentials authenticates a mailbox user with the cheapest
	// read there is.
	CheckCredentials(ctx context.Context, auth Auth) error
	// CheckTuser authenticates a T-user acting for directAddr.
	CheckTuser(ctx context.Context, auth directapi.AuthenticationWithTuser) error

	// Folders lists the folders under root (root itself excluded).
	Folders(ctx context.Context, auth Auth, root string, subscribedOnly bool) ([]string, error)
	// SetSubscribed marks folders subscribed or not.
	SetSubscribed(ctx context.Context, auth Auth, folders []string, subscribed bool) error
	// CreateFolder, RenameFolder and DeleteFolder change the folder tree;
	// DeleteFolder removes sub-folders and messages too.
	CreateFolder(ctx context.Context, auth Auth, folder string) error
	RenameFolder(ctx context.Context, auth Auth, folder, newName string) error
	DeleteFolder(ctx context.Context, auth Auth, folder string) error

	// UIDs lists every UID of a folder.
	UIDs(ctx context.Context, auth Auth, folder string) ([]int64, error)
	// Count and UnreadCount count a folder's messages.
	Count(ctx context.Context, auth Auth, folder string) (int, error)
	UnreadCount(ctx context.Context, auth Auth, folder string) (int, error)
	// Unread returns the unread messages of a folder, whole: use it only
	// when the read state cannot be inferred otherwise.
	Unread(ctx context.Context, auth Auth, folder string) ([]directapi.MessageDetail, error)
	// Metadata returns the metadata of every message of a folder.
	Metadata(ctx context.Context, auth Auth, folder string) ([]directapi.MessageDetail, error)
	// MetadataReceived returns the metadata of the messages received in
	// [begin, end].
	MetadataReceived(ctx context.Context, auth Auth, folder string, begin, end time.Time) ([]directapi.MessageDetail, error)
	// Messages returns whole messages by UID; UIDs that do not exist are
	// left out of the answer.
	Messages(ctx context.Context, auth Auth, folder string, uids []int64) ([]directapi.MessageDetail, error)
	// Raw returns the raw RFC 5322 bytes of messages by UID; UIDs that do
	// not exist are left out of the answer.
	Raw(ctx context.Context, auth Auth, folder string, uids []int64) (map[int64][]byte, error)

	// SetRead marks messages read or unread.
	SetRead(ctx context.Context, auth Auth, folder string, uids []int64, read bool) error
	// Copy and Move file messages into dest; the provider reports no new
	// UIDs.
	Copy(ctx context.Context, auth Auth, folder, dest string, uids []int64) error
	Move(ctx context.Context, auth Auth, folder, dest string, uids []int64) error
	// Delete moves messages to INBOX.Trash, or removes them for good.
	Delete(ctx context.Context, auth Auth, folder string, uids []int64, forever bool) error
	// Save stores raw messages in a folder; the provider reports no new
	// UIDs.
	Save(ctx context.Context, auth Auth, folder string, raws [][]byte) error

	// Send sends a message and returns its smtpId. withHeaders chooses
	// SendWithHeader; tuser, when not empty, sends as a T-user for that
	// Direct address.
	Send(ctx context.Context, auth Auth, tuser string, msg directapi.MessageWithHeader, withHeaders bool) (smtpID string, err error)
	// Forward forwards stored messages; several are sent as attachments.
	Forward(ctx context.Context, auth Auth, folder string, uids []int64, recipients []directapi.Recipient) (smtpID string, err error)
	// Status returns the delivery records of sent messages by smtpId.
	Status(ctx context.Context, auth Auth, smtpIDs []string) ([]directapi.DirectMessageLog, error)
	// TuserStatus returns the delivery records of one message sent by a
	// T-user.
	TuserStatus(ctx context.Context, auth directapi.AuthenticationWithTuser, smtpID string) ([]directapi.DirectMessageLog, error)
}
