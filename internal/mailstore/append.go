package mailstore

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/emersion/go-imap/v2"

	"github.com/directbridge/directbridge/internal/mimeconv"
	"github.com/directbridge/directbridge/upstream"
	"github.com/directbridge/directbridge/upstream/directapi"
)

// SentFolder is where the provider files a copy of every message sent.
const SentFolder = "INBOX.Sent"

// sentDedupeWindow is how long after the bridge sent a message a client's
// APPEND of the same Message-ID to INBOX.Sent is taken for the client's
// copy of it. Clients append right after sending; ten minutes covers a
// slow client without catching a deliberate re-filing much later.
const sentDedupeWindow = 10 * time.Minute

// Appended is what an APPEND did: the message's UID (0 when it could not
// be told, RFC 4315 §3 then lets the answer go without APPENDUID) and its
// folder's UIDVALIDITY.
type Appended struct {
	UID      imap.UID
	Validity uint32
}

// Append stores a message in folder (APPEND, RFC 9051 §6.3.12) in one
// engine operation: one SaveRawMessages (under a budget perhaps shared
// with other APPENDs, upstream.WithCoalescing), then a light refresh that finds
// its UID and gives it the flags asked for (Folder.Append, arrivals.go).
// A nil error means the provider holds the message. A folder that does
// not exist is ErrDestMissing ([TRYCREATE]).
//
// Sent copies: the provider files a copy of every message the bridge
// sends in INBOX.Sent itself, and clients (Thunderbird, Outlook) then
// append their own copy. When a client appends to INBOX.Sent a message
// whose Message-ID the bridge sent in the last ten minutes, no second copy
// is saved: the requested flags go to the provider's copy (whose
// Message-ID is the smtpId the provider returned), and its UID is
// returned.
//
// A retry of an APPEND whose answer was lost is answered from the folder
// (attempts.go); a repeat of one answered OK is a new message.
func (st *Store) Append(ctx context.Context, auth upstream.Auth, folder string, raw []byte, seen bool, kept []imap.Flag) (Appended, error) {
	msgID := messageID(raw)
	if folder == SentFolder && msgID != "" {
		a, handled, err := st.appendSent(ctx, auth, msgID, seen, kept)
		if err != nil || handled {
			return a, err
		}
	}
	// The folder's mirror, loaded if need be (and refreshed if older
	// than freshness), to note the arrival in.
	m, err := st.Acquire(ctx, auth, folder)
	if errors.Is(err, ErrFolderGone) {
		m, err = st.Acquire(ctx, auth, folder) // renumbered meanwhile: once more
	}
	if upstream.IsRefusal(err) {
		return Appended{}, ErrDestMissing // the same reading as SELECT's
	}
	if err != nil {
		return Appended{}, err
	}
	defer st.Release(m)
	uid, err := m.Append(ctx, auth, raw, msgID, seen, kept, true)
	if err != nil {
		return Appended{}, err
	}
	return Appended{UID: uid, Validity: m.Validity()}, nil
}

// appendSent handles the APPEND to INBOX.Sent of a message the bridge
// sent recently: it finds the provider's copy in INBOX.Sent, gives it the
// requested flags and returns its UID. handled is false when the message
// was not sent by the bridge lately or its copy is not there (the user
// deleted it, or the provider did not file one): then it is saved as any
// other message. An error here is safe to answer with NO: a client that
// appends again is recognised again.
func (st *Store) appendSent(ctx context.Context, auth upstream.Auth, msgID string, seen bool, kept []imap.Flag) (a Appended, handled bool, err error) {
	log := st.cfg.Logger
	rec, ok, err := st.cfg.State.FindSent(ctx, auth.Username, msgID, time.Now().Add(-sentDedupeWindow))
	if err != nil {
		log.Warn("imap append: looking up sent messages failed", "err", err)
		return Appended{}, false, nil
	}
	if !ok {
		return Appended{}, false, nil
	}
	sm, err := st.Acquire(ctx, auth, SentFolder)
	if err != nil {
		return Appended{}, false, err
	}
	defer st.Release(sm)

	// The provider's copy carries the smtpId as its Message-ID; a
	// provider that kept the client's Message-ID is recognised too.
	providerID := "<" + strings.Trim(strings.TrimSpace(rec.SmtpID), "<>") + ">"
	find := func(details []directapi.MessageDetail) int64 {
		var byProvider, byClient int64
		for _, d := range details {
			switch d.MsgID {
			case providerID:
				byProvider = max(byProvider, d.UID)
			case msgID:
				byClient = max(byClient, d.UID)
			}
		}
		if byProvider != 0 {
			return byProvider
		}
		return byClient
	}
	uid := find(sm.knownMeta())
	if uid == 0 {
		// Not among the messages whose metadata is known: the copy is
		// newer than the mirror's metadata, or not there at all.
		details, err := st.cfg.Provider.Metadata(ctx, auth, SentFolder)
		if err != nil {
			return Appended{}, false, err
		}
		if uid = find(details); uid == 0 {
			log.Info("imap append: the provider's copy of a sent message is not in Sent; saving the client's", "user", sm.user)
			return Appended{}, false, nil
		}
		if uid <= MaxUID && !sm.isLive(imap.UID(uid)) {
			if err := sm.Sync(ctx); err != nil {
				return Appended{}, false, err
			}
		}
		sm.fillMeta(details)
	}
	if uid <= 0 || uid > MaxUID {
		return Appended{}, false, ErrUIDTooLarge
	}
	validity := sm.Validity()
	up := FlagUpdate{UID: imap.UID(uid)}
	if len(kept) > 0 {
		up.Kept = &KeptChange{Add: kept}
	}
	if seen {
		up.Seen = &seen
	}
	if up.Seen != nil || up.Kept != nil {
		done, err := st.ApplyFlags(ctx, auth, SentFolder, validity, sm, []FlagUpdate{up}, nil)
		if err != nil {
			return Appended{}, false, err
		}
		if len(done) == 0 {
			return Appended{}, false, nil // deleted this very moment: save the client's copy
		}
	}
	log.Info("imap append: client's copy of a sent message not saved again", "user", sm.user, "uid", uid)
	return Appended{UID: imap.UID(uid), Validity: validity}, true, nil
}

// messageID is the Message-ID field of a raw message as written, angle
// brackets included (the form the SMTP front records), or "".
func messageID(raw []byte) string {
	p, err := mimeconv.Parse(raw, mimeconv.ParseOptions{SkipBodies: true})
	if err != nil {
		return ""
	}
	return strings.TrimSpace(p.MessageID)
}
