package imapbackend

import (
	"io"

	"github.com/emersion/go-imap/v2"

	"github.com/directbridge/directbridge/internal/mimeconv"
	"github.com/directbridge/directbridge/restclient"
)

// Append stores a message (APPEND, RFC 9051 §6.3.12) with one
// SaveRawMessages call (shared with other APPENDs to the folder that wait
// for the budget at the same moment, upstream.WithCoalescing). The provider answers without a UID, so a light
// refresh of the folder finds it at once (internal/mailstore/arrivals.go; shared
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
	// takes the size of the request that will carry it (limits.Budget counts
	// encoded bytes: SaveRawMessages writes it base64, a third larger,
	// restclient.SaveSize), and it is read into one buffer of exactly
	// its size.
	size := r.Size()
	encoded, err := restclient.SaveSize(s.auth, size)
	if err != nil {
		return nil, imapError(err)
	}
	if !s.srv.cfg.Messages.Take(encoded) {
		s.srv.cfg.Logger.Info("imap append refused: message bytes in flight at the bound", "user", s.auth.Username, "size", size)
		return nil, errMessagesBusy
	}
	defer s.srv.cfg.Messages.Return(encoded)
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
	a, err := s.srv.store.Append(ctx, s.auth, folder, raw, seen, kept)
	if err != nil {
		return nil, imapError(err)
	}
	if s.sel == nil || folder != s.sel.Name() {
		s.appended = true
	}
	if a.UID != 0 {
		return &imap.AppendData{UID: a.UID, UIDValidity: a.Validity}, nil
	}
	return nil, nil
}
