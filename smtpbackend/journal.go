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
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/directbridge/directbridge/internal/delivery"
	"github.com/directbridge/directbridge/internal/mimeconv"
	"github.com/directbridge/directbridge/internal/state"
	"github.com/directbridge/directbridge/upstream"
	"github.com/directbridge/directbridge/upstream/directapi"
)

// Exactly-once submission. A send whose answer is lost (the connection
// broke after the request went out, the provider answered 5xx, the bridge
// timed out or was killed) may or may not have reached the provider. The
// client gets 451, keeps the message and retries; a blind resend would
// deliver it twice. So every send is journalled in the state store before
// it leaves the bridge (state.Submissions: fingerprints only, no
// content), and marked sent, unknown or forgotten when the answer comes.
//
// Identical bytes submitted again by the same account (the entry's key)
// are a retry when they carry the same Message-ID, or when the earlier
// attempt ended without its 250 being written to the client; otherwise
// they are a second submission, and delivered. A client that got its
// 250 and sends the same bytes again, with nothing in them to say they
// are the same message, means to send twice (a form letter, a monitoring
// probe); one that never saw the 250 cannot tell its retry from a first
// try. "Written" is what the session observes of go-smtp writing the
// reply (replyconn.go, with the limits of that signal); the entry records
// it (Answered) only when it is known, so a crash between the send and
// the reply, or a reply that could not be written, leaves the next
// identical bytes a retry. "The earlier attempt" is the client's own:
// a submission told to try later (a 4xx: its answer was lost, the entry
// was undecided, or a racing retry on another connection took it over)
// never saw a 250, whatever another connection was answered meanwhile.
// So the entry counts those (Deferred), and every identical submission
// without a Message-ID takes one count as it arrives: one that took a
// count is a retry even after a written 250. The counts are anonymous,
// which bounds what they can tell: a client told to try later that never
// comes back leaves its count, and the next deliberate identical
// submission within the entry's 24 hours is taken for its retry (250
// with the first smtpId, not sent); and of two clients interleaving the
// same bytes, one may take the other's count, and the other's retry,
// after the first one's 250, is then sent as a second submission.
//
// A retry is matched against the journal entry:
//   - sent: answered 250 with the smtpId of the first attempt, not sent
//     again (unless, as above, it is a second submission: the entry is
//     then taken over as a new attempt, a compare-and-set like every
//     take-over, and sent);
//   - unknown, or still sending (the bridge was killed in between, or the
//     first attempt still waits): the provider's copy is looked for. For
//     a mailbox user, in its INBOX.Sent (one metadata search narrowed to
//     the minutes since the attempt, and one fetch of the candidates'
//     content; a copy counts only if subject, shown recipients, body and
//     attachments all match). A T-user cannot read the mailbox it sends
//     for, so its attempt is looked up in the provider's delivery status
//     instead (findTuserDelivery). Found: 250 with its id. Not found: 451
//     again until Config.UndecidedHold has passed since the bridge
//     stopped waiting for the answer (undecidedUntil), since a slow
//     provider may still be processing it; after that the provider is
//     taken not to have it, and the message is sent again. Sent again by
//     one retry only: taking the entry over is a compare-and-set
//     (state.Submissions.BeginSubmission), and a retry that lost it to
//     another one, arriving at the same time on another connection, gets
//     451 like a retry during the hold.
//
// The status look-up of a T-user's attempt. The status operations find a
// message by its smtpId only (messaging-rest.md, operations 4, 5 and 34:
// not by time, sender or recipients), and the smtpId is "the Message-ID
// of the message just sent". What the bridge knows of a lost attempt
// without its answer is the Message-ID it went out with, so every T-user
// message carries one: the client's, or, when it has none, one the bridge
// gives it (tuserMessageID: derived under the journal key from the entry
// and the attempt's start, so a retry finds it again without storing it,
// and it tells nobody anything of the content). It travels through
// SendWithHeaderWithTuser. A provider that keeps a client's Message-ID as
// the smtpId (the sandbox does; what a provider does with it is not shown)
// then reports the attempt under it: delivery records from the sender,
// to exactly the message's recipients, from no earlier than the attempt,
// under an smtpId the bridge has not answered 250 for already, are taken
// for the attempt's. This was chosen over holding a T-user's undecided
// retries until the status shows them because without a key the status
// never shows them; and over the bound alone because that delivered
// twice every time the provider had the message. A provider that gives
// its own smtpId instead is logged once (tuserIDsReplaced), and its
// T-users' undecided retries fall back to the bound: 451 for the hold,
// then sent again.
//
// The bound: a provider that processes a send later than UndecidedHold
// after the bridge gave up on its answer (default 2 minutes, after the
// send timeout of 2 minutes) can still cause a duplicate; one that
// answers 5xx without processing delays the client's retry by as much.
// Two identical submissions without a Message-ID at once, on two
// connections, cannot be told from an attempt and its retry: the second
// is answered 451 while the first is under way, and its retry 250 with
// the first's smtpId (as is the second itself once the first's copy
// shows). Within one process, identical bytes that
// arrive while the first's 250 is being written wait for that write
// (Server.answering), so a client that read the 250 and at once submits
// again on another connection is not taken for a retry.
//
// The journal's fingerprints (the entry's key and its match) are
// HMAC-SHA256 under the data directory's journal key (WithJournalKey,
// state.LoadJournalKey), not plain hashes: the state store must not let
// whoever holds it confirm a guessed message. The key lives outside the
// database, so a copy of state.db alone tells nothing. A new key (a data
// directory from before the key existed) disowns the entries made under
// the old fingerprints; see mailbox/journalkey.go for what that means.

// WithJournalKey returns st, for Config.Store, carrying the key the send
// journal's fingerprints are made under. Without it (a Store given
// directly, as tests do) they are plain SHA-256.
func WithJournalKey(st state.StateStore, key []byte) state.StateStore {
	if st == nil {
		return nil
	}
	return keyedStore{StateStore: st, key: bytes.Clone(key)}
}

// keyedStore is a state store with the journal key (WithJournalKey). The
// key travels with the store because the entries are valid under it only.
type keyedStore struct {
	state.StateStore
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
	h := state.JournalHash(key)
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
	h := state.JournalHash(key)
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
	fmt.Fprintf(h, "%t\x00%d:", m.HTMLBody, len(body))
	for len(body) > 0 { // in pieces: h.Write([]byte(body)) would copy it whole
		n := min(len(body), 32<<10)
		h.Write([]byte(body[:n]))
		body = body[n:]
	}
	h.Write([]byte{0})
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

// attempt is a submission as the journal knows it, computed once, in
// Data, before the send request is sized: a T-user's message may gain
// its Message-ID from it.
type attempt struct {
	key   string    // submissionKey: the journal entry's key
	match string    // matchOf: what its Sent copy hashes to
	at    time.Time // its start: the entry's FirstAt if it is sent
}

// prepare makes sub's attempt, and gives a T-user's message without a
// Message-ID the one its delivery status will be looked up by
// (tuserMessageID).
func (ss *session) prepare(raw []byte, sub *Submission) attempt {
	jkey := ss.s.journalKey()
	a := attempt{key: submissionKey(jkey, ss.username, ss.directAddr, raw), match: matchOf(jkey, sub), at: time.Now()}
	if ss.directAddr != "" && sub.MessageID == "" {
		sub.Message.Headers = append(sub.Message.Headers, directapi.MessageHeader{
			Name: "Message-ID", Value: "<" + tuserMessageID(jkey, a.key, a.at, ss.directAddr) + ">"})
	}
	return a
}

// tuserMessageID is the Message-ID (without angle brackets) the bridge
// gives the attempt of a T-user's message that has none, starting at at:
// the same for a retry that reads the entry (FirstAt, kept to the
// millisecond), another for every attempt, so a second submission is not
// found under the first's. Keyed like the journal, it says nothing of the
// message to its recipients.
func tuserMessageID(jkey []byte, key string, at time.Time, sender string) string {
	h := state.JournalHash(jkey)
	fmt.Fprintf(h, "message-id\x00%s\x00%d", key, at.UnixMilli())
	domain := "directbridge.invalid"
	if _, d, ok := strings.Cut(sender, "@"); ok && d != "" {
		domain = d
	}
	return "db." + hex.EncodeToString(h.Sum(nil)[:16]) + "@" + domain
}

// send makes the provider call, journalled, or recognises a retry of a
// message an earlier attempt delivered.
func (ss *session) send(ctx context.Context, a attempt, sub *Submission) (_ string, err error) {
	j := ss.s.journal
	if sub.MessageID == "" {
		defer func() {
			if err != nil && dataReply(err).Code/100 == 4 {
				ss.deferred(a.key) // told to try later: a retry is owed
			}
		}()
	}
	claim := state.Submission{Key: a.key, Username: ss.username, Match: a.match, FirstAt: a.at}
	entry, claimed, err := j.ClaimSubmission(ctx, claim)
	if err != nil {
		return "", err // unrecorded, a lost answer could not be resolved: 451
	}
	if !claimed {
		id, again, err := ss.again(ctx, claim, entry, sub)
		if err != nil || !again {
			return id, err
		}
	}
	auth := directapi.Authentication{Username: ss.username, Password: ss.password}
	smtpID, err := ss.s.cfg.Provider.Send(ctx, auth, ss.directAddr, sub.Message, sub.UseHeaders())
	switch {
	case err == nil:
		ss.completed(a.key, smtpID, sub)
		ss.checkTuserID(smtpID, sub)
	case errors.Is(err, upstream.ErrUnknownOutcome):
		ss.journalEnd(a.key, state.SubmissionUnknown, "")
	default:
		// Certainly not taken (refused, or never reached the provider).
		if ferr := j.ForgetSubmission(context.WithoutCancel(ctx), a.key); ferr != nil {
			ss.s.log.Warn("smtp journal", "err", ferr)
		}
	}
	if errors.Is(err, upstream.ErrAuth) {
		ss.s.cfg.Verifier.Forget(ss.username, ss.password, ss.directAddr)
	}
	return smtpID, err
}

// again decides what a submission whose bytes have a journal entry is:
// a retry answered from the entry (the smtpId, again false), one told to
// try later (errUndecided), or an attempt to send, the entry taken over
// for it (again true). See the top of this file.
func (ss *session) again(ctx context.Context, claim, entry state.Submission, sub *Submission) (id string, again bool, err error) {
	j := ss.s.journal
	// Only bytes without a Message-ID can be a second submission, so
	// only theirs are counted: every submission told to try later owes a
	// retry (send counts it), and this one may be it.
	counted := sub.MessageID == ""
	owed := false
	if counted {
		if owed, err = j.TakeDeferred(ctx, claim.Key); err != nil {
			return "", false, err
		}
	}
	if counted && !owed && entry.State == state.SubmissionSent && !entry.Answered {
		// The first attempt's 250 may be being written on another
		// connection: whether it was decides what these bytes are.
		waited, err := ss.s.answering.wait(ctx, claim.Key)
		if err != nil {
			return "", false, fmt.Errorf("smtpbackend: waiting for the reply of an identical submission: %w", errors.Join(errUndecided, err))
		}
		if waited {
			e, ok, err := j.FindSubmission(ctx, claim.Key)
			if err != nil {
				return "", false, err
			}
			if !ok {
				return "", false, errUndecided // forgotten meanwhile: try again
			}
			entry = e
		}
	}
	switch {
	case entry.State == state.SubmissionSent && (!counted || owed || !entry.Answered):
		ss.s.log.Info("smtp retry of a sent message recognised", "user", ss.username, "smtp_id", entry.SmtpID)
		return entry.SmtpID, false, nil
	case entry.State == state.SubmissionSent:
		// Its 250 was written and nothing in the bytes says they are the
		// same message: the client sends it again on purpose.
		ss.s.log.Info("smtp second submission of a sent message", "user", ss.username, "first_smtp_id", entry.SmtpID)
	default:
		id, found, err := ss.findDelivered(ctx, entry, sub)
		if err != nil {
			return "", false, err
		}
		if found {
			ss.completed(claim.Key, id, sub)
			ss.s.log.Info("smtp retry found delivered", "user", ss.username, "smtp_id", id)
			return id, false, nil
		}
		if time.Now().Before(undecidedUntil(entry, ss.s.cfg.SendTimeout, ss.s.cfg.UndecidedHold)) {
			return "", false, errUndecided
		}
		// Past the bound: the provider does not have it. Start over.
	}
	began, err := j.BeginSubmission(ctx, entry, claim)
	if err != nil {
		return "", false, err
	}
	if !began {
		// Another retry of the same message, on another connection,
		// read the same entry and took it over first: its attempt is
		// under way, and this one must not send too. Try later, as for
		// any attempt whose outcome is not known yet.
		ss.s.log.Info("smtp retry of a message another retry is sending", "user", ss.username)
		return "", false, errUndecided
	}
	return "", true, nil
}

// deferred counts a submission told to try later (a 4xx reply) in the
// entry of key, if it has one (state.Submissions.DeferSubmission): its
// retry is owed.
func (ss *session) deferred(key string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := ss.s.journal.DeferSubmission(ctx, key); err != nil {
		// Its retry may then be taken for a second submission.
		ss.s.log.Warn("smtp journal", "err", err)
	}
}

// findDelivered looks for the provider's copy of an undecided attempt:
// in the sender's INBOX.Sent, or for a T-user, whose mailbox it cannot
// read, in the delivery status.
func (ss *session) findDelivered(ctx context.Context, entry state.Submission, sub *Submission) (string, bool, error) {
	if ss.directAddr != "" {
		return ss.findTuserDelivery(ctx, entry, sub)
	}
	return ss.findSentCopy(ctx, entry)
}

// completed records a send the provider accepted: the journal entry sent,
// the sent record (which the IMAP front and delivery status use) and the
// delivery tracker's record of the message (ss.follow), in one write of
// the state store. A failure is logged only: the provider has the
// message, and the answer must be 250; the tracker then writes its
// record itself.
func (ss *session) completed(key, smtpID string, sub *Submission) {
	rec := state.SentRecord{Username: ss.sender(), SmtpID: smtpID, MessageID: sub.MessageID, SentAt: time.Now()}
	var track *state.TrackedMessage
	if f := ss.follow; f != nil && ss.s.cfg.Store != nil {
		m := *f
		m.SmtpID = smtpID
		if tm, ok := delivery.Record(m); ok {
			track = &tm
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := ss.s.journal.CompleteSubmission(ctx, key, rec, track); err != nil {
		ss.s.log.Error("recording sent message", "err", err)
		return
	}
	if track != nil {
		ss.follow.Recorded = true
	}
}

// journalEnd records an outcome; the send's own context may have expired.
func (ss *session) journalEnd(key string, state state.SubmissionState, smtpID string) {
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
func (ss *session) findSentCopy(ctx context.Context, entry state.Submission) (string, bool, error) {
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

// findTuserDelivery looks up an undecided attempt of a T-user in the
// provider's delivery status (GetMessageStatusWithTuser), under the
// Message-ID it went out with: the client's, or the bridge's
// (tuserMessageID of the entry). It returns the smtpId when the records
// are the attempt's: from the sender, to exactly the message's
// recipients, none from before the attempt (less clock skew), under an
// smtpId no 250 of the bridge named (a client's Message-ID used again on
// another message finds that one). A failed look-up is an error, as for
// the Sent copy.
func (ss *session) findTuserDelivery(ctx context.Context, entry state.Submission, sub *Submission) (string, bool, error) {
	id := strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(sub.MessageID), "<"), ">")
	if sub.MessageID == "" {
		id = tuserMessageID(ss.s.journalKey(), entry.Key, entry.FirstAt, ss.directAddr)
	}
	if !mimeconv.ValidMessageID(id) {
		return "", false, nil // the provider cannot have kept it
	}
	auth := directapi.AuthenticationWithTuser{Username: ss.username, Password: ss.password, DirectAddr: ss.directAddr}
	logs, err := ss.s.cfg.Provider.TuserStatus(ctx, auth, id)
	if err != nil {
		return "", false, err
	}
	if len(logs) == 0 {
		return "", false, nil
	}
	want := map[string]bool{}
	for _, r := range sub.Message.Recipients {
		want[strings.ToLower(strings.TrimSpace(r.Email))] = true
	}
	got := map[string]bool{}
	from := entry.FirstAt.Add(-sentClockSkew)
	for _, l := range logs {
		if !strings.EqualFold(strings.TrimSpace(l.From), ss.directAddr) || !l.TS.IsZero() && l.TS.Before(from) {
			return "", false, nil
		}
		got[strings.ToLower(strings.TrimSpace(l.To))] = true
	}
	if !maps.Equal(got, want) {
		return "", false, nil
	}
	if st := ss.s.cfg.Store; st != nil {
		if known, err := st.KnownSmtpID(ctx, id); err != nil || known {
			return "", false, err
		}
	}
	return id, true, nil
}

// checkTuserID notes a provider that sent a T-user's message under
// another smtpId than the Message-ID the bridge gave it: the status
// look-up of the T-user's lost answers cannot work, so their retries wait
// out the bound (findTuserDelivery). Logged once. Only the bridge's own
// Message-IDs tell: a client's may be malformed or used before, and a
// provider may rightly give such a message another.
func (ss *session) checkTuserID(smtpID string, sub *Submission) {
	if ss.directAddr == "" || sub.MessageID != "" {
		return
	}
	for _, h := range sub.Message.Headers {
		if !strings.EqualFold(h.Name, "Message-ID") {
			continue
		}
		sent := strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(h.Value), "<"), ">")
		if !strings.EqualFold(sent, strings.Trim(smtpID, "<> ")) && ss.s.tuserIDsReplaced.CompareAndSwap(false, true) {
			ss.s.log.Warn("the provider gives T-user messages its own smtpId, not their Message-ID: a T-user's retry whose answer was lost cannot be looked up, and is sent again after the undecided hold")
		}
		return
	}
}

// undecidedUntil is when an undecided attempt is taken not to have
// reached the provider: hold after the bridge stopped waiting for its
// answer (an unknown outcome), or, for one still marked sending (the
// bridge was killed during the call, or the call is under way), hold
// after the call would have timed out.
func undecidedUntil(e state.Submission, sendTimeout, hold time.Duration) time.Time {
	if e.State == state.SubmissionUnknown {
		return e.UpdatedAt.Add(hold)
	}
	return e.FirstAt.Add(sendTimeout + hold)
}

// memJournal keeps the submission journal in memory, for a server
// configured without a state store (it then does not survive a restart).
type memJournal struct {
	mu sync.Mutex
	m  map[string]state.Submission
}

func (j *memJournal) ClaimSubmission(_ context.Context, s state.Submission) (state.Submission, bool, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if prev, ok := j.m[s.Key]; ok && time.Since(prev.FirstAt) <= state.SubmissionTTL {
		return prev, false, nil
	}
	j.beginLocked(s)
	return state.Submission{}, true, nil
}

func (j *memJournal) BeginSubmission(_ context.Context, prev, s state.Submission) (bool, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	cur, ok := j.m[s.Key]
	if !ok || cur.State != prev.State || !cur.FirstAt.Equal(prev.FirstAt) || !cur.UpdatedAt.Equal(prev.UpdatedAt) {
		return false, nil // taken over, ended or forgotten since prev was read
	}
	s.Deferred = cur.Deferred // the clients told to wait still are
	j.beginLocked(s)
	return true, nil
}

func (j *memJournal) beginLocked(s state.Submission) {
	for k, v := range j.m {
		if time.Since(v.FirstAt) > state.SubmissionTTL {
			delete(j.m, k)
		}
	}
	s.State, s.SmtpID, s.UpdatedAt, s.Answered = state.SubmissionSending, "", time.Now(), false
	j.m[s.Key] = s
}

func (j *memJournal) DeferSubmission(_ context.Context, key string) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if s, ok := j.m[key]; ok {
		s.Deferred++
		j.m[key] = s
	}
	return nil
}

func (j *memJournal) TakeDeferred(_ context.Context, key string) (bool, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if s, ok := j.m[key]; ok && s.Deferred > 0 {
		s.Deferred--
		j.m[key] = s
		return true, nil
	}
	return false, nil
}

func (j *memJournal) AnswerSubmission(_ context.Context, key, smtpID string) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if s, ok := j.m[key]; ok && s.State == state.SubmissionSent && s.SmtpID == smtpID {
		s.Answered, s.UpdatedAt = true, time.Now()
		j.m[key] = s
	}
	return nil
}

func (j *memJournal) EndSubmission(_ context.Context, key string, state state.SubmissionState, smtpID string) error {
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

func (j *memJournal) FindSubmission(_ context.Context, key string) (state.Submission, bool, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	s, ok := j.m[key]
	return s, ok, nil
}

// CompleteSubmission marks the entry sent; there are no sent records,
// nor tracked messages, without a state store.
func (j *memJournal) CompleteSubmission(ctx context.Context, key string, rec state.SentRecord, _ *state.TrackedMessage) error {
	return j.EndSubmission(ctx, key, state.SubmissionSent, rec.SmtpID)
}
