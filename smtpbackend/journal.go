package smtpbackend

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/directbridge/directbridge/directapi"
	"github.com/directbridge/directbridge/mailbox"
	"github.com/directbridge/directbridge/upstream"
)

// Exactly-once submission. A send whose answer is lost (the connection
// broke after the request went out, the provider answered 5xx, the bridge
// timed out or was killed) may or may not have reached the provider. The
// client gets 451, keeps the message and retries; a blind resend would
// deliver it twice. So every send is journalled in the state store before
// it leaves the bridge (mailbox.Submissions: fingerprints only, no
// content), and marked sent, unknown or forgotten when the answer comes.
//
// A retry of the same bytes by the same account is matched against the
// journal:
//   - sent: answered 250 with the smtpId of the first attempt, not sent again;
//   - unknown, or still sending (the bridge was killed in between, or the
//     first attempt still waits): the provider's copy in the sender's
//     INBOX.Sent is looked for (one metadata search narrowed to the minutes
//     since the attempt, and one fetch of the candidates' content; a copy
//     counts only if subject, shown recipients, body and attachments all
//     match). Found: 250 with its id. Not found: 451 again until
//     Config.UndecidedHold has passed since the bridge stopped waiting
//     for the answer (undecidedUntil), since a slow provider may still be
//     processing it; after that the provider is taken not to have it, and
//     the message is sent again. Sent again by one retry only: taking the
//     entry over is a compare-and-set (mailbox.Submissions.BeginSubmission),
//     and a retry that lost it to another one, arriving at the same time
//     on another connection, gets 451 like a retry during the hold.
//
// The bound: a provider that processes a send later than UndecidedHold
// after the bridge gave up on its answer (default 2 minutes, after the
// send timeout of 2 minutes) can still cause a duplicate; one that
// answers 5xx without processing delays the client's retry by as much. A T-user cannot read the mailbox it sends
// for, so its undecided retries wait the whole bound, then are sent again.
//
// The journal's fingerprints (the entry's key and its match) are
// HMAC-SHA256 under the data directory's journal key (WithJournalKey,
// mailbox.LoadJournalKey), not plain hashes: the state store must not let
// whoever holds it confirm a guessed message. The key lives outside the
// database, so a copy of state.db alone tells nothing. A new key (a data
// directory from before the key existed) disowns the entries made under
// the old fingerprints; see mailbox/journalkey.go for what that means.

// WithJournalKey returns st, for Config.Store, carrying the key the send
// journal's fingerprints are made under. Without it (a Store given
// directly, as tests do) they are plain SHA-256.
func WithJournalKey(st mailbox.StateStore, key []byte) mailbox.StateStore {
	if st == nil {
		return nil
	}
	return keyedStore{StateStore: st, key: bytes.Clone(key)}
}

// keyedStore is a state store with the journal key (WithJournalKey). The
// key travels with the store because the entries are valid under it only.
type keyedStore struct {
	mailbox.StateStore
	key []byte
}

// journalKey is the key of the journal's fingerprints, nil for none.
func (s *Server) journalKey() []byte {
	if ks, ok := s.cfg.Store.(keyedStore); ok {
		return ks.key
	}
	return nil
}

// DefaultUndecidedHold is Config.UndecidedHold's default.
const DefaultUndecidedHold = 2 * time.Minute

// sentClockSkew widens the search window around an attempt.
const sentClockSkew = 2 * time.Minute

// errUndecided answers a retry while an earlier attempt's outcome is not known.
var errUndecided = errors.New("smtpbackend: an earlier attempt of this message may have been delivered")

// submissionKey identifies a submission of the same bytes by the same
// account, acting for the same address, under the journal key.
func submissionKey(key []byte, username, directAddr string, raw []byte) string {
	h := mailbox.JournalHash(key)
	fmt.Fprintf(h, "%s\x00%s\x00", strings.ToLower(username), strings.ToLower(directAddr))
	h.Write(raw)
	return hex.EncodeToString(h.Sum(nil))
}

// matchOf is what the provider's Sent copy of sub must hash to: the
// subject, the shown (To and Cc) recipients, and the content fingerprint,
// under the journal key.
func matchOf(key []byte, sub *Submission) string {
	var shown []string
	for _, r := range sub.Message.Recipients {
		if r.Type != directapi.BCC {
			shown = append(shown, r.Email)
		}
	}
	return copyMatch(key, sub.Message.Subject, shown, sub.Message.Message)
}

// copyMatch hashes what a Sent copy shows of a message (see matchOf).
// Only its result is stored: the fingerprint inside it is a plain hash,
// kept in memory only.
func copyMatch(key []byte, subject string, shown []string, content directapi.Message) string {
	lower := make([]string, len(shown))
	for i, a := range shown {
		lower[i] = strings.ToLower(strings.TrimSpace(a))
	}
	slices.Sort(lower)
	h := mailbox.JournalHash(key)
	fp := fingerprint(content)
	fmt.Fprintf(h, "%d:%s\x00%s\x00", len(subject), subject, strings.Join(lower, ","))
	h.Write(fp[:])
	return hex.EncodeToString(h.Sum(nil))
}

// fingerprint identifies a message's content as the provider reports it
// back: the body with line ends and trailing white space normalised (the
// provider re-encodes it), whether it is HTML, and the decoded bytes of
// every attachment, in any order.
func fingerprint(m directapi.Message) [32]byte {
	h := sha256.New()
	body := strings.TrimRight(strings.ReplaceAll(m.Body, "\r\n", "\n"), " \t\r\n")
	fmt.Fprintf(h, "%t\x00%d:%s\x00", m.HTMLBody, len(body), body)
	var parts []string
	for _, a := range m.AttachmentList {
		parts = append(parts, string(contentSum(a.Content)))
	}
	slices.Sort(parts)
	for _, p := range parts {
		h.Write([]byte(p))
	}
	var k [32]byte
	copy(k[:], h.Sum(nil))
	return k
}

// contentSum is the SHA-256 of an attachment's decoded bytes (of its
// text when it is not base64), decoded as it is hashed: an attachment
// of tens of megabytes is not copied for it.
func contentSum(content string) []byte {
	h := sha256.New()
	if _, err := io.Copy(h, base64.NewDecoder(base64.StdEncoding, strings.NewReader(content))); err != nil {
		h.Reset()
		io.WriteString(h, content)
	}
	return h.Sum(nil)
}

// send makes the provider call, journalled, or recognises a retry of a
// message an earlier attempt delivered.
func (ss *session) send(ctx context.Context, raw []byte, sub *Submission) (string, error) {
	j := ss.s.journal
	jkey := ss.s.journalKey()
	key := submissionKey(jkey, ss.username, ss.directAddr, raw)
	attempt := time.Now()
	claim := mailbox.Submission{Key: key, Username: ss.username, Match: matchOf(jkey, sub), FirstAt: attempt}
	entry, claimed, err := j.ClaimSubmission(ctx, claim)
	if err != nil {
		return "", err // unrecorded, a lost answer could not be resolved: 451
	}
	if !claimed {
		switch entry.State {
		case mailbox.SubmissionSent:
			ss.s.log.Info("smtp retry of a sent message recognised", "user", ss.username, "smtp_id", entry.SmtpID)
			return entry.SmtpID, nil
		default:
			if ss.directAddr == "" {
				id, found, err := ss.findSentCopy(ctx, entry)
				if err != nil {
					return "", err
				}
				if found {
					ss.completed(key, id, sub)
					ss.s.log.Info("smtp retry found delivered", "user", ss.username, "smtp_id", id)
					return id, nil
				}
			}
			if time.Now().Before(undecidedUntil(entry, ss.s.cfg.SendTimeout, ss.s.cfg.UndecidedHold)) {
				return "", errUndecided
			}
			// Past the bound: the provider does not have it. Start over.
		}
		claim.FirstAt = time.Now()
		began, err := j.BeginSubmission(ctx, entry, claim)
		if err != nil {
			return "", err
		}
		if !began {
			// Another retry of the same message, on another connection,
			// read the same entry and took it over first: its attempt is
			// under way, and this one must not send too. Try later, as
			// for any attempt whose outcome is not known yet.
			ss.s.log.Info("smtp retry of a message another retry is sending", "user", ss.username)
			return "", errUndecided
		}
	}
	auth := directapi.Authentication{Username: ss.username, Password: ss.password}
	smtpID, err := ss.s.cfg.Provider.Send(ctx, auth, ss.directAddr, sub.Message, sub.UseHeaders())
	switch {
	case err == nil:
		ss.completed(key, smtpID, sub)
	case errors.Is(err, upstream.ErrUnknownOutcome):
		ss.journalEnd(key, mailbox.SubmissionUnknown, "")
	default:
		// Certainly not taken (refused, or never reached the provider).
		if ferr := j.ForgetSubmission(context.WithoutCancel(ctx), key); ferr != nil {
			ss.s.log.Warn("smtp journal", "err", ferr)
		}
	}
	if errors.Is(err, upstream.ErrAuth) {
		ss.s.cfg.Verifier.Forget(ss.username, ss.password, ss.directAddr)
	}
	return smtpID, err
}

// completed records a send the provider accepted: the journal entry sent
// and the sent record (which the IMAP front and delivery status use), in
// one write of the state store. A failure is logged only: the provider has
// the message, and the answer must be 250.
func (ss *session) completed(key, smtpID string, sub *Submission) {
	rec := mailbox.SentRecord{Username: ss.sender(), SmtpID: smtpID, MessageID: sub.MessageID, SentAt: time.Now()}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := ss.s.journal.CompleteSubmission(ctx, key, rec); err != nil {
		ss.s.log.Error("recording sent message", "err", err)
	}
}

// journalEnd records an outcome; the send's own context may have expired.
func (ss *session) journalEnd(key string, state mailbox.SubmissionState, smtpID string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := ss.s.journal.EndSubmission(ctx, key, state, smtpID); err != nil {
		// A retry then finds the entry still sending, and looks in Sent.
		ss.s.log.Warn("smtp journal", "err", err)
	}
}

// findSentCopy looks for the provider's copy of an undecided attempt in
// the sender's INBOX.Sent and returns its smtpId (the copy's Message-ID).
// A failed look-up is an error: the retry must wait rather than risk a
// duplicate.
func (ss *session) findSentCopy(ctx context.Context, entry mailbox.Submission) (string, bool, error) {
	auth := directapi.Authentication{Username: ss.username, Password: ss.password}
	from := entry.FirstAt.Add(-sentClockSkew)
	msgs, err := ss.s.cfg.Provider.MetadataReceived(ctx, auth, "INBOX.Sent", from, time.Now().Add(sentClockSkew))
	if err != nil {
		return "", false, err
	}
	// Candidates: the sender's, received no earlier than the attempt
	// (less clock skew), and not a message whose send the bridge already
	// answered 250 for.
	var candidates []int64
	for _, m := range msgs {
		if !strings.EqualFold(m.Sender, ss.username) || !m.ReceivedDate.IsZero() && m.ReceivedDate.Before(from) {
			continue
		}
		if st := ss.s.cfg.Store; st != nil {
			if known, err := st.KnownSmtpID(ctx, strings.Trim(m.MsgID, "<> ")); err != nil {
				return "", false, err
			} else if known {
				continue
			}
		}
		candidates = append(candidates, m.UID)
	}
	if len(candidates) == 0 {
		return "", false, nil
	}
	// Only now the content: the metadata has no body.
	full, err := ss.s.cfg.Provider.Messages(ctx, auth, "INBOX.Sent", candidates)
	if err != nil {
		return "", false, err
	}
	for _, m := range full {
		var shown []string
		for _, r := range m.Recipients {
			if r.Type != directapi.BCC {
				shown = append(shown, r.Email)
			}
		}
		if copyMatch(ss.s.journalKey(), m.Subject, shown, m.Message) == entry.Match {
			return strings.Trim(m.MsgID, "<> "), true, nil
		}
	}
	return "", false, nil
}

// undecidedUntil is when an undecided attempt is taken not to have
// reached the provider: hold after the bridge stopped waiting for its
// answer (an unknown outcome), or, for one still marked sending (the
// bridge was killed during the call, or the call is under way), hold
// after the call would have timed out.
func undecidedUntil(e mailbox.Submission, sendTimeout, hold time.Duration) time.Time {
	if e.State == mailbox.SubmissionUnknown {
		return e.UpdatedAt.Add(hold)
	}
	return e.FirstAt.Add(sendTimeout + hold)
}

// memJournal keeps the submission journal in memory, for a server
// configured without a state store (it then does not survive a restart).
type memJournal struct {
	mu sync.Mutex
	m  map[string]mailbox.Submission
}

func (j *memJournal) ClaimSubmission(_ context.Context, s mailbox.Submission) (mailbox.Submission, bool, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if prev, ok := j.m[s.Key]; ok && time.Since(prev.FirstAt) <= mailbox.SubmissionTTL {
		return prev, false, nil
	}
	j.beginLocked(s)
	return mailbox.Submission{}, true, nil
}

func (j *memJournal) BeginSubmission(_ context.Context, prev, s mailbox.Submission) (bool, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	cur, ok := j.m[s.Key]
	if !ok || cur.State != prev.State || !cur.FirstAt.Equal(prev.FirstAt) || !cur.UpdatedAt.Equal(prev.UpdatedAt) {
		return false, nil // taken over, ended or forgotten since prev was read
	}
	j.beginLocked(s)
	return true, nil
}

func (j *memJournal) beginLocked(s mailbox.Submission) {
	for k, v := range j.m {
		if time.Since(v.FirstAt) > mailbox.SubmissionTTL {
			delete(j.m, k)
		}
	}
	s.State, s.SmtpID, s.UpdatedAt = mailbox.SubmissionSending, "", time.Now()
	j.m[s.Key] = s
}

func (j *memJournal) EndSubmission(_ context.Context, key string, state mailbox.SubmissionState, smtpID string) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if s, ok := j.m[key]; ok {
		s.State, s.SmtpID, s.UpdatedAt = state, smtpID, time.Now()
		j.m[key] = s
	}
	return nil
}

func (j *memJournal) ForgetSubmission(_ context.Context, key string) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	delete(j.m, key)
	return nil
}

func (j *memJournal) FindSubmission(_ context.Context, key string) (mailbox.Submission, bool, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	s, ok := j.m[key]
	return s, ok, nil
}

// CompleteSubmission marks the entry sent; there are no sent records
// without a state store.
func (j *memJournal) CompleteSubmission(ctx context.Context, key string, rec mailbox.SentRecord) error {
	return j.EndSubmission(ctx, key, mailbox.SubmissionSent, rec.SmtpID)
}
