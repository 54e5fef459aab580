package mailstore

import (
	"context"
	"slices"

	"github.com/emersion/go-imap/v2"

	"github.com/directbridge/directbridge/upstream"
)

// TrashFolder is the provider's trash folder, where DeleteMessagesByUIDs
// without deleteForever puts messages.
const TrashFolder = "INBOX.Trash"

// Expunge removes messages of the folder, in one engine operation (EXPUNGE
// and UID EXPUNGE, RFC 9051 §6.4.3, RFC 4315 §2.1): forever are removed
// for good, toTrash go to INBOX.Trash (the provider's Delete without
// deleteForever), one provider call each (or none, for messages another
// command is removing the same way). Messages that vanished at the
// provider meanwhile are taken as expunged (mutateExisting), and so are
// those another command is removing the same way at the same moment: it
// is waited for, not raced (removals.go). The removed messages leave the
// mirror before Expunge returns, and every view gets their EXPUNGE; a
// mirror of the Trash is refreshed so that its watchers see the arrivals.
//
// It returns the UIDs removed. When the removal for good fails, failed
// holds those of forever that may still be there, for the caller to try
// again the same way (a message a connection copied to the Trash must not
// be moved there a second time). On failure the mirror is refreshed:
// part of a batched request may have gone through.
func (m *Folder) Expunge(ctx context.Context, auth upstream.Auth, forever, toTrash []imap.UID) (removed, failed []imap.UID, err error) {
	if err := m.Gone(); err != nil {
		return nil, nil, err
	}
	if len(forever) > 0 {
		gone, err := m.removeAtProvider(ctx, auth, forever, true)
		removed = gone
		if err != nil {
			m.resync(ctx, "after a failed expunge")
			failed = slices.DeleteFunc(slices.Clone(forever), func(u imap.UID) bool { return slices.Contains(gone, u) })
			return removed, failed, err
		}
	}
	if len(toTrash) > 0 {
		// The Trash's copy keeps the read state: an appended message
		// asked \Seen is marked read before it goes (arrivals.go).
		m.markAppendedReadOf(ctx, toTrash)
		moved, err := m.removeAtProvider(ctx, auth, toTrash, false)
		removed = append(removed, moved...)
		if err != nil {
			m.resync(ctx, "after a failed expunge")
			return removed, nil, err
		}
		if len(moved) > 0 {
			// Connections watching the Trash see the messages arrive.
			if tm := m.store.peek(m.user, TrashFolder); tm != nil {
				tm.resync(ctx, "of the Trash after an expunge")
			}
		}
	}
	return removed, nil, nil
}
