package imapbackend

import (
	"context"
	"errors"
	"io"
	"strings"
	"time"

	"github.com/emersion/go-imap/v2"

	"github.com/directbridge/directbridge/directapi"
	"github.com/directbridge/directbridge/mailstore"
	"github.com/directbridge/directbridge/mimeconv"
)

// sentFolder is where the provider files a copy of every message sent.
const sentFolder = "INBOX.Sent"

// sentDedupeWindow is how long after the bridge sent a message a client's
// APPEND of the same Message-ID to INBOX.Sent is taken for the client's
// copy of it. Clients append right after sending; ten minutes covers a
// slow client without catching a deliberate re-filing much later.
const sentDedupeWindow = 10 * time.Minute

// Append stores a message (APPEND, RFC 9051 §6.3.12) with one
// SaveRawMessages call. The provider answers without a UID, so a light
// refresh of the folder finds it at once (mailstore/arrivals.go; shared
// by concurrent APPENDs) and gives it the flags asked for, and the answer
// carries APPENDUID (RFC 4315 §3), with EXISTS when the folder is the
// selected one. The second call is the price of APPENDUID: without it
// Thunderbird and mbsync look for their message by Message-ID or X-TUID
// with a FETCH, which costs as much, and imaptest's uidplus expects it.
//
// The provider saves messages unread and with the time of saving as their
// date: \Seen is set afterwards when asked for, and the internal date the
// client gives (options.Time) cannot be kept; INTERNALDATE is the time
// the message was saved.
//
// Sent copies: the provider files a copy of every message the bridge
// sends in INBOX.Sent itself, and clients (Thunderbird, Outlook) then
// append their own copy. When a client appends to INBOX.Sent a message
// whose Message-ID the bridge sent in the last ten minutes, no second copy
// is saved: the requested flags go to the provider's copy (whose
// Message-ID is the smtpId the provider returned), and APPENDUID names it.
//
// The size limit is APPENDLIMIT (RFC 7889); go-imap checks the literal's
// size against it before the session sees it, and this checks again.
func (s *session) Append(mailbox string, r imap.LiteralReader, options *imap.AppendOptions) (*imap.AppendData, error) {
	limit := int64(s.srv.cfg.AppendLimit)
	if r.Size() > limit {
		return nil, errTooBig
	}
	folder, err := s.folderName(mailbox)
	if err != nil {
		return nil, err
	}
	var flags []imap.Flag
	if options != nil {
		flags = options.Flags
	}
	seen, kept, err := wantedFlags(flags)
	if err != nil {
		return nil, err
	}
	// The literal's size is known and within APPENDLIMIT: the budget
	// takes it whole (msgbudget), and it is read into one buffer of
	// exactly that size.
	size := r.Size()
	if !s.srv.cfg.Messages.Take(size) {
		s.srv.cfg.Logger.Info("imap append refused: message bytes in flight at the bound", "user", s.auth.Username, "size", size)
		return nil, errMessagesBusy
	}
	defer s.srv.cfg.Messages.Return(size)
	raw := make([]byte, size)
	if _, err := io.ReadFull(r, raw); err != nil {
		return nil, imapError(err)
	}
	// Binary content (RFC 3516) is kept as base64: the provider keeps
	// mail, and BODY[n] must not hand out raw NULs (mimeconv.EncodeBinaryParts).
	// It grows by a third of those parts: past APPENDLIMIT (which the
	// provider's request size sets) it is too big after all.
	raw, _ = mimeconv.EncodeBinaryParts(raw)
	if int64(len(raw)) > limit {
		return nil, errTooBig
	}
	ctx, cancel := s.ctx()
	defer cancel()

	msgID := messageID(raw)
	if folder == sentFolder && msgID != "" {
		data, handled, err := s.appendSent(ctx, msgID, seen, kept)
		if err != nil {
			return nil, imapError(err)
		}
		if handled {
			return data, nil
		}
	}

	// The folder's mirror, loaded if need be (and refreshed if older
	// than freshness), to note the arrival in: its next refresh finds the
	// UID and sets the flags (mailstore/arrivals.go).
	m, err := s.acquireFolder(ctx, folder)
	if err != nil {
		if errors.Is(err, errNoSuchMailbox) {
			return nil, errTryCreate // RFC 9051 §6.3.12
		}
		return nil, err
	}
	defer s.srv.store.Release(m)
	uid, err := m.Append(ctx, s.auth, s.id, raw, msgID, seen, kept, true)
	if err != nil {
		return nil, imapError(err)
	}
	if m != s.sel {
		s.appended = true
	}
	if uid != 0 {
		return &imap.AppendData{UID: uid, UIDValidity: m.Validity()}, nil
	}
	return nil, nil
}

// appendSent handles the APPEND to INBOX.Sent of a message the bridge
// sent recently: it finds the provider's copy in INBOX.Sent, gives it the
// requested flags and returns its APPENDUID. handled is false when the
// message was not sent by the bridge lately or its copy is not there (the
// user deleted it, or the provider did not file one): then it is saved
// as any other message. An error here is safe to answer with NO: a
// client that appends again is recognised again.
func (s *session) appendSent(ctx context.Context, msgID string, seen bool, kept []imap.Flag) (data *imap.AppendData, handled bool, err error) {
	log := s.srv.cfg.Logger
	rec, ok, err := s.srv.cfg.Store.FindSent(ctx, s.auth.Username, msgID, time.Now().Add(-sentDedupeWindow))
	if err != nil {
		log.Warn("imap append: looking up sent messages failed", "err", err)
		return nil, false, nil
	}
	if !ok {
		return nil, false, nil
	}
	sm, err := s.srv.store.Acquire(ctx, s.auth, sentFolder)
	if err != nil {
		return nil, false, err
	}
	defer s.srv.store.Release(sm)

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
	uid := find(sm.KnownMeta())
	if uid == 0 {
		// Not among the messages whose metadata is known: the copy is
		// newer than the mirror's metadata, or not there at all.
		details, err := s.srv.cfg.Provider.Metadata(ctx, s.auth, sentFolder)
		if err != nil {
			return nil, false, err
		}
		if uid = find(details); uid == 0 {
			log.Info("imap append: the provider's copy of a sent message is not in Sent; saving the client's", "user", s.auth.Username)
			return nil, false, nil
		}
		if uid <= mailstore.MaxUID && !sm.Live(imap.UID(uid)) {
			if err := sm.Sync(ctx); err != nil {
				return nil, false, err
			}
		}
		sm.FillMeta(details)
	}
	if uid <= 0 || uid > mailstore.MaxUID {
		return nil, false, mailstore.ErrUIDTooLarge
	}
	validity := sm.Validity()
	up := mailstore.FlagUpdate{UID: imap.UID(uid)}
	if len(kept) > 0 {
		up.Kept = &mailstore.KeptChange{Add: kept}
	}
	if seen {
		up.Seen = &seen
	}
	if up.Seen != nil || up.Kept != nil {
		done, err := s.srv.store.ApplyFlags(ctx, s.auth, sentFolder, validity, sm, []mailstore.FlagUpdate{up}, nil)
		if err != nil {
			return nil, false, err
		}
		if len(done) == 0 {
			return nil, false, nil // deleted this very moment: save the client's copy
		}
	}
	log.Info("imap append: client's copy of a sent message not saved again", "user", s.auth.Username, "uid", uid)
	return &imap.AppendData{UID: imap.UID(uid), UIDValidity: validity}, true, nil
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
