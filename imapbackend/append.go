package imapbackend

import (
	"context"
	"io"
	"strings"
	"time"

	"github.com/emersion/go-imap/v2"

	"github.com/directbridge/directbridge/directapi"
	"github.com/directbridge/directbridge/mimeconv"
)

// sentFolder is where the provider files a copy of every message sent.
const sentFolder = "INBOX.Sent"

// sentDedupeWindow is how long after the bridge sent a message a client's
// APPEND of the same Message-ID to INBOX.Sent is taken for the client's
// copy of it. Clients append right after sending; ten minutes covers a
// slow client without catching a deliberate re-filing much later.
const sentDedupeWindow = 10 * time.Minute

// Append stores a message (APPEND, RFC 9051 §6.3.12) with SaveRawMessages,
// then sets its flags, and answers APPENDUID (RFC 4315 §3) when the new
// UID is certain.
//
// The provider answers SaveRawMessages without a UID, so the bridge reads
// the folder's UIDs before and after: one new UID above the previous
// maximum is the message (UIDs grow and are never reused). When another
// message arrived at the same moment, the Message-ID decides; when that
// cannot either, the answer is a plain OK, without APPENDUID and without
// the flags: a wrong UID would be worse than none.
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

	prev, err := s.folderMax(ctx, folder)
	if err != nil {
		return nil, err
	}
	c := s.srv.cfg.Provider
	if err := c.Save(ctx, s.auth, folder, [][]byte{raw}); err != nil {
		if uidMissing(err) {
			if _, gerr := c.UIDs(ctx, s.auth, folder); noFolder(gerr) {
				return nil, errTryCreate
			}
		}
		return nil, imapError(err)
	}
	return s.placeAppended(ctx, folder, prev, msgID, seen, kept), nil
}

// placeAppended finds the UID of a message just saved to folder (whose
// largest UID was prev before), sets its flags and returns the APPENDUID
// data, or nil when the UID is not certain. The message is saved already:
// failures are logged, never answered as NO (the client would append it
// again).
func (s *session) placeAppended(ctx context.Context, folder string, prev int64, msgID string, seen bool, kept []imap.Flag) *imap.AppendData {
	log := s.srv.cfg.Logger
	newUIDs, dm, err := s.uidsAbove(ctx, folder, prev)
	if err != nil {
		log.Warn("imap append: reading the new UID failed", "user", s.auth.Username, "err", err)
		return nil
	}
	var uid int64
	switch {
	case len(newUIDs) == 1:
		uid = newUIDs[0]
	case len(newUIDs) > 1 && msgID != "":
		details, err := s.srv.cfg.Provider.Metadata(ctx, s.auth, folder)
		if err != nil {
			log.Warn("imap append: reading metadata failed", "user", s.auth.Username, "err", err)
			return nil
		}
		if dm != nil {
			dm.fillMeta(details)
		}
		for _, d := range details {
			if d.UID > prev && d.MsgID == msgID {
				if uid != 0 {
					return nil // two new messages with this Message-ID
				}
				uid = d.UID
			}
		}
	}
	if uid <= 0 || uid > maxUID {
		log.Info("imap append: new UID not determined", "user", s.auth.Username, "new", len(newUIDs))
		return nil
	}
	validity, err := s.folderValidity(ctx, folder, dm)
	if err != nil {
		log.Warn("imap append: state store", "err", err)
		return nil
	}
	up := flagUpdate{uid: imap.UID(uid)}
	if seen {
		up.seen = &seen
	}
	if len(kept) > 0 {
		up.kept, up.setKept = kept, true
	}
	if up.seen != nil || up.setKept {
		_, err := s.applyFlags(ctx, folder, validity, dm, []flagUpdate{up}, nil)
		if err != nil {
			log.Warn("imap append: setting flags failed", "user", s.auth.Username, "err", err)
		}
	}
	return &imap.AppendData{UID: imap.UID(uid), UIDValidity: validity}
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
