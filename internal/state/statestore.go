package state

import (
	"context"
	"time"
)

// StateStore is the bridge's own state: what the provider does not keep
// but mail clients need. The protocol fronts and the admin socket hold it
// through this interface, so the SQLite implementation (Store) can later
// be joined by one shared among several bridge replicas. It holds no
// message content: no bodies, subjects or attachment names.
//
// Every method is safe for concurrent use. User names (Direct addresses)
// compare without regard to ASCII case; folder names are the provider's,
// compared exactly.
type StateStore interface {
	FolderStates
	SentJournal
	Submissions
	Reported
	Tracking
	PendingFlags
	Subscriptions
	Attempts
	// Ping reports whether the store answers a query now: readiness, and
	// the logins that would only fail without it.
	Ping(ctx context.Context) error
	// Close releases the store. No method may be called after it.
	Close() error
}

// FolderStates keeps, per user and folder, what IMAP needs and the
// provider lacks: UIDVALIDITY, the UIDNEXT high-water mark and every flag
// other than \Seen (see FolderState).
type FolderStates interface {
	// Folder returns the state of a folder, creating it with a fresh
	// UIDVALIDITY on first use, and UIDNEXT 1, or the high-water mark a
	// deleted or renamed folder of the name left. UIDVALIDITY values are never
	// handed out twice, across folders and users, even after a clock step
	// back (RFC 9051 §2.3.1.1).
	Folder(ctx context.Context, username, folder string) (FolderState, error)
	// SeenUIDs raises the folder's UIDNEXT to maxUID+1 if it is lower; it
	// never lowers it. maxUID 0 does nothing. A folder without state is
	// left without state.
	SeenUIDs(ctx context.Context, username, folder string, maxUID uint32) error
	// ResetFolder gives a folder a new UIDVALIDITY and forgets its kept
	// flags, because its UIDs no longer name the messages they named.
	// uidNext is the new high-water mark; 0 keeps the one the name has
	// (1 for a name without state).
	ResetFolder(ctx context.Context, username, folder string, uidNext uint32) (FolderState, error)
	// ForgetFolder removes the UIDVALIDITY and flags of a folder and of
	// its sub-folders ("folder." prefix), after the provider deleted them;
	// a folder created later under the name gets a new UIDVALIDITY and
	// the name's UIDNEXT high-water mark.
	ForgetFolder(ctx context.Context, username, folder string) error
	// RenameFolder moves the state and flags of a folder and its
	// sub-folders to a new name, replacing any state held under the new
	// name. The provider keeps UIDs across a rename, so flags survive it.
	// The old names keep their UIDNEXT high-water marks, as after
	// ForgetFolder.
	RenameFolder(ctx context.Context, username, from, to string) error
	// Flags returns the kept flags of a folder's messages by UID, for the
	// given UIDVALIDITY only; flags kept under another one are not
	// returned. Each list is sorted.
	Flags(ctx context.Context, username, folder string, validity uint32) (map[uint32][]string, error)
	// FlagsFrom is Flags for the UIDs from from on only: a refresh that
	// found new messages reads theirs, not the whole folder's.
	FlagsFrom(ctx context.Context, username, folder string, validity, from uint32) (map[uint32][]string, error)
	// FlagsBetween is Flags for the UIDs from lo to hi only: another
	// replica's change names the messages it changed.
	FlagsBetween(ctx context.Context, username, folder string, validity, lo, hi uint32) (map[uint32][]string, error)
	// SetFlags replaces the kept flags of some messages, all in one
	// transaction; an empty list removes the message's entry.
	SetFlags(ctx context.Context, username, folder string, validity uint32, flags map[uint32][]string) error
	// ChangeFlags applies changes to the kept flags of some messages,
	// each to the set kept at that moment, all in one transaction, and
	// returns the resulting sets (ApplyFlagChange says how a change
	// applies). Concurrent changes of one message never lose one another.
	ChangeFlags(ctx context.Context, username, folder string, validity uint32, changes []FlagChange) (map[uint32][]string, error)
	// WriteRefresh writes what one refresh of a folder learnt (kept
	// flags of its new messages, pending-flag entries used, the UIDNEXT
	// high-water mark) in one transaction. uidNextBefore is the mark as
	// this write found it: UIDs from it on were seen first by the caller,
	// among every process sharing the store (\Recent, RFC 3501 §2.3.2);
	// 0 when the write left the mark alone or the store cannot tell
	// (SQLite, which one process uses).
	WriteRefresh(ctx context.Context, username, folder string, validity uint32, w RefreshWrite) (uidNextBefore uint32, err error)
}

// SentJournal records the messages the bridge submitted and what the
// provider made of them.
type SentJournal interface {
	// RecordSent remembers a submitted message. The IMAP front uses the
	// record to recognise a client's APPEND of its own copy to Sent (the
	// provider files one already); delivery status builds on it.
	RecordSent(ctx context.Context, r SentRecord) error
	// FindSent returns the latest record of user's message with messageID
	// sent at or after since, or ok false when there is none.
	FindSent(ctx context.Context, username, messageID string, since time.Time) (rec SentRecord, ok bool, err error)
	// KnownSmtpID reports whether a record holds smtpID, that is whether
	// the bridge answered 250 for that message.
	KnownSmtpID(ctx context.Context, smtpID string) (bool, error)
	// RecentSent returns user's records sent at or after since, newest
	// first, at most limit of them.
	RecentSent(ctx context.Context, username string, since time.Time, limit int) ([]SentRecord, error)
}

var _ StateStore = (*Store)(nil)
