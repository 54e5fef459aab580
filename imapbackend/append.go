package imapbackend

import (
	"context"
	"errors"
	"io"
	"strings"
	"time"

	"github.com/emersion/go-imap/v2"

	"github.com/directbridge/directbridge/directapi"
	"github.com/directbridge/directbridge/mimeconv"
	"github.com/directbridge/directbridge/upstream"
)

// sentFolder is where the provider files a copy of every message sent.
const sentFolder = "INBOX.Sent"

// sentDedupeWindow is how long after the bridge sent a message a client's
// APPEND of the same Message-ID to INBOX.Sent is taken for the client's
// copy of it. Clients append right after sending; ten minutes covers a
// slow client without catching a deliberate re-filing much later.
const sentDedupeWindow = 10 * time.Minute

// Append stores a message (APPEND, RFC 9051 §6.3.12) with one
// SaveRawMessages call. The provider answers without a UID: the folder's
// next refresh finds it and gives it the flags asked for (arrivals.go),
// shared by every APPEND made meanwhile. An APPEND to the folder this
// connection has selected makes that refresh at once and answers
// APPENDUID (RFC 4315 §3) and EXISTS; another one answers a plain OK,
// which UIDPLUS allows, rather than pay a second call per message.
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
	raw, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, imapError(err)
	}
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
	// UID and sets the flags (arrivals.go).
	m, err := s.acquireFolder(ctx, folder)
	if err != nil {
		if errors.Is(err, errNoSuchMailbox) {
			return nil, errTryCreate // RFC 9051 §6.3.12
		}
		return nil, err
	}
	defer s.srv.hub.release(m)
	a := &arrival{sent: time.Now(), msgID: msgID, size: len(raw), seen: seen, kept: kept, raw: raw}
	m.saving(a)
	err = s.srv.cfg.Provider.Save(ctx, s.auth, folder, [][]byte{raw})
	unknown := errors.Is(err, upstream.ErrUnknownOutcome)
	a.uncertain = unknown
	m.saveEnded(a, err == nil || unknown)
	if unknown {
		// The answer was lost, and the provider may have stored the
		// message. Answering NO would make the client append it again,
		// twice if it was stored: look in the folder first, for these
		// very bytes (content pairing only, see placeArrivals).
		lctx, lcancel := s.ctx()
		defer lcancel()
		if derr := m.discover(lctx); derr != nil || m.placed(a) == 0 {
			m.abandon(a)
			s.srv.cfg.Logger.Warn("imap append: outcome unknown and the message not found", "user", s.auth.Username, "err", err)
			return nil, imapError(err)
		}
		s.srv.cfg.Logger.Info("imap append: answer lost, message found in the folder", "user", s.auth.Username)
		err = nil
	}
	if err != nil {
		return nil, imapError(err)
	}
	if m != s.sel {
		s.appended = true
		return nil, nil
	}
	// The selected folder: the answer brings the EXISTS and APPENDUID,
	// found with the folder's UIDs alone, by the refresh under way when
	// it read the folder after the save (concurrent APPENDs share it),
	// else by a refresh of its own.
	m.awaitFlight(ctx)
	if m.placed(a) == 0 {
		if err := m.discover(ctx); err != nil {
			s.srv.cfg.Logger.Warn("imap refresh after append failed", "user", s.auth.Username, "err", err)
			return nil, nil // saved: never NO, or the client saves it again
		}
	}
	m.mu.Lock()
	validity := m.validity
	m.mu.Unlock()
	if uid := m.placed(a); uid != 0 {
		return &imap.AppendData{UID: uid, UIDValidity: validity}, nil
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
	sm, err := s.srv.hub.acquire(ctx, s.auth, sentFolder)
	if err != nil {
		return nil, false, err
	}
	defer s.srv.hub.release(sm)

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
	sm.mu.Lock()
	var known []directapi.MessageDetail
	for _, msg := range sm.byUID {
		if msg.meta != nil && !msg.expunged {
			known = append(known, *msg.meta)
		}
	}
	sm.mu.Unlock()
	uid := find(known)
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
		sm.mu.Lock()
		missing := uid <= maxUID && !sm.live(imap.UID(uid))
		sm.mu.Unlock()
		if missing {
			if err := sm.sync(ctx); err != nil {
				return nil, false, err
			}
		}
		sm.fillMeta(details)
	}
	if uid <= 0 || uid > maxUID {
		return nil, false, errUIDTooLarge
	}
	sm.mu.Lock()
	validity := sm.validity
	up := flagUpdate{uid: imap.UID(uid)}
	mb := sm.mb
	sm.mu.Unlock()
	if fl, ok := mb.Flags(imap.UID(uid)); ok {
		up.kept = addFlags(keptOf(fl), kept...)
	} else {
		up.kept = kept
	}
	up.setKept = len(up.kept) > 0
	if seen {
		up.seen = &seen
	}
	if up.seen != nil || up.setKept {
		done, err := s.applyFlags(ctx, sentFolder, validity, sm, []flagUpdate{up}, nil)
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
