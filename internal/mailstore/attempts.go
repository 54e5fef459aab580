package mailstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/emersion/go-imap/v2"

	"github.com/directbridge/directbridge/internal/state"
	"github.com/directbridge/directbridge/upstream"
)

// A change asked of the provider whose answer is lost (a timeout, a
// dropped connection, the bridge killed during the call) may have been
// carried out, or may still be: providers finish requests after the
// client stopped waiting (late processing). Answering such a change NO
// and forgetting it makes the client's retry store a second copy. So
// every APPEND is written in the state store's journal of attempts
// (state.Attempts) before its request leaves and dropped when its
// outcome is known; one whose outcome is unknown stays, and a retry of
// the very same change (any connection, after a restart too) is answered
// from what the provider did: the message found in the folder is the
// answer (OK with its UID, no second save); not found, the retry waits
// (NO [UNAVAILABLE], ErrOutcomeUnknown) until Config.AttemptHold has
// passed since the bridge stopped waiting, after which the earlier
// attempt is taken as not done and the retry saves.
//
// A repeat of an APPEND that was answered OK is a new message and is
// saved: the client was told it was done, so the same bytes again are
// the client's wish (two identical APPENDs at once, as imaptest makes,
// are two messages).

// ErrOutcomeUnknown is a change whose outcome at the provider is not
// known yet: an earlier attempt of it, or this one, may still be carried
// out. The client should try again later; the retry is answered from
// what the provider did.
var ErrOutcomeUnknown = errors.New("mailstore: the outcome of the change is not known yet")

// DefaultAttemptHold is Config.AttemptHold's default: as long as the SMTP
// journal holds an undecided send (smtpbackend.DefaultUndecidedHold).
const DefaultAttemptHold = 2 * time.Minute

// newOwner names this process in the journal: entries it began and left
// in state asking are under way here; another process's were cut short.
func newOwner() string {
	var b [8]byte
	rand.Read(b[:]) // never fails (crypto/rand, Go 1.24)
	return hex.EncodeToString(b[:])
}

// appendKey is the journal key of an APPEND of raw to folder: the
// operation, the folder and the exact bytes, under the journal key
// (Config.JournalKey), so that the state store holds no plain hash of a
// message.
func (st *Store) appendKey(folder string, raw []byte) string {
	h := state.JournalHash(st.cfg.JournalKey)
	fmt.Fprintf(h, "append\x00%s\x00", folder)
	h.Write(raw)
	return hex.EncodeToString(h.Sum(nil))
}

// undecided is what the journal holds for a change about to be asked
// again: nothing (go on), or attempts whose outcome must be decided first.
type undecided struct {
	attempts []state.Attempt
	since    time.Time // the earliest attempt's start
	until    time.Time // when the last one may still be carried out
}

// beginAttempt journals an attempt of key with mark, unless the journal
// holds attempts of it whose outcome is undecided: then id is 0 and u
// says what to decide first. One state-store round trip for nearly every
// change (state.Attempts.BeginUnlessUndecided).
func (st *Store) beginAttempt(ctx context.Context, user, key string, mark int64) (id int64, u undecided, err error) {
	if err := st.settleLost(ctx, user, key); err != nil {
		return 0, undecided{}, err
	}
	id, atts, err := st.cfg.State.BeginUnlessUndecided(ctx, user, key, st.owner, mark)
	if err != nil || id != 0 {
		st.watch(ctx, user, key, id)
		return id, undecided{}, err
	}
	if u = st.undecidedFrom(ctx, atts); len(u.attempts) == 0 {
		// Only attempts under way in live replicas: go on.
		id, err = st.beginAgain(ctx, user, key, mark)
	}
	return id, u, err
}

// undecidedFrom is what the attempts atts found in the journal leave
// undecided.
func (st *Store) undecidedFrom(ctx context.Context, atts []state.Attempt) undecided {
	if st.shared() {
		// An attempt still asking in another replica that is alive is
		// under way there, as one of this process's own would be: two
		// identical APPENDs through two replicas at once are two
		// messages. Its owner's death (at once, not a heartbeat later:
		// a retry through another replica right after a kill must find
		// it undecided) makes it undecided. Left open: a retry that
		// reaches another replica before PostgreSQL has seen the killed
		// one's connection close (milliseconds; asking twice with a
		// pause cost imaptest's identical APPENDs across replicas nine
		// tenths of their speed) takes its attempt for one under way.
		// Its owner's life comes with the attempt when the state store
		// read it in the same statement (PostgreSQL), else is asked.
		atts = slices.DeleteFunc(atts, func(a state.Attempt) bool {
			if a.State != state.AttemptAsking {
				return false
			}
			if a.OwnerLive != state.LivenessUnknown {
				return a.OwnerLive == state.OwnerAlive
			}
			return st.cfg.Peers.Live(ctx, a.Owner)
		})
	}
	if len(atts) == 0 {
		return undecided{}
	}
	u := undecided{attempts: atts, since: atts[0].Created}
	for _, a := range atts {
		if a.Created.Before(u.since) {
			u.since = a.Created
		}
		// An attempt still asking (its process stopped mid-call) waited
		// at most CallTimeout from its start, and no longer than its
		// replica lived; an unknown one stopped waiting at Updated.
		last := a.Updated
		if a.State == state.AttemptAsking {
			last = a.Created.Add(st.cfg.CallTimeout)
			if st.shared() && a.Owner != st.owner {
				if died, ok := st.cfg.Peers.DiedBy(ctx, a.Owner); ok && died.Before(last) {
					last = died
					if last.Before(a.Created) {
						last = a.Created
					}
				}
			}
		}
		if t := last.Add(st.cfg.AttemptHold); t.After(u.until) {
			u.until = t
		}
	}
	return u
}

// endAttempts forgets attempts whose outcome is decided; a failure is
// logged (the next retry decides again).
func (st *Store) endAttempts(ctx context.Context, atts []state.Attempt) {
	ids := make([]int64, len(atts))
	for i, a := range atts {
		ids[i] = a.ID
	}
	st.unwatch(ids...)
	for _, id := range ids {
		st.answered.forget(id)
	}
	if err := st.cfg.State.EndAttempts(ctx, ids...); err != nil {
		st.cfg.Logger.Warn("imap: attempts journal", "err", err)
	}
}

// decideAttempt records in the journal what a change's provider call
// err tells: an unknown outcome stays (and is returned as
// ErrOutcomeUnknown wrapping err), anything else is decided and dropped.
// The journal is written without the command's context, which may be
// spent: it is what a retry is answered from.
func (st *Store) decideAttempt(ctx context.Context, id int64, err error) error {
	jctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), st.cfg.CallTimeout)
	defer cancel()
	if errors.Is(err, upstream.ErrUnknownOutcome) {
		st.markUnknown(jctx, id)
		return fmt.Errorf("%w: %w", ErrOutcomeUnknown, err)
	}
	st.endAttempts(jctx, []state.Attempt{{ID: id}})
	return err
}

// copyKey is the journal key of a COPY of the messages uids (ascending)
// of folder (under validity) to dest, under the journal key as appendKey.
func (st *Store) copyKey(folder string, validity uint32, dest string, uids []imap.UID) string {
	h := state.JournalHash(st.cfg.JournalKey)
	fmt.Fprintf(h, "copy\x00%s\x00%d\x00%s\x00", folder, validity, dest)
	for _, u := range uids {
		fmt.Fprintf(h, "%d,", u)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// resolveCopy decides a retried COPY of msgs (uids) to dest (journal key
// key) whose earlier attempts' outcome is unknown: the copies found in
// dest above the largest UID it had before an attempt (the attempt's
// mark) answer it, with COPYUID and the sources' flags carried (done);
// ErrOutcomeUnknown while they may still come; or nothing (not done:
// copy). leave ends the retry's own claim on dest's new UIDs (transferInto)
// before the copies' refresh, so that it shows them.
func (m *Folder) resolveCopy(ctx context.Context, auth upstream.Auth, u undecided, dest string, dm *Folder, msgs []*Message, uids []imap.UID, leave func(), self *intoMark) (Transferred, bool, error) {
	st := m.store
	for _, a := range u.attempts {
		src := m.copiedOf(msgs, uids, m.flagsOf(uids))
		if newUIDs, _ := st.findCopies(ctx, auth, dest, a.Mark, src, a.Created, dm, self, false); newUIDs != nil {
			st.cfg.Logger.Info("imap copy: an earlier attempt whose answer was lost made the copies; not copied again", "user", m.user)
			data := st.placeCopies(ctx, auth, dest, a.Mark, dm, src, a.Created, nil, leave, self, false)
			st.endAttempts(ctx, u.attempts)
			return Transferred{Done: uids, Data: data}, true, nil
		}
	}
	if len(u.attempts) == 0 {
		return Transferred{}, false, nil
	}
	if time.Now().Before(u.until) {
		return Transferred{}, true, ErrOutcomeUnknown
	}
	st.endAttempts(ctx, u.attempts)
	return Transferred{}, false, nil
}

// resolveAppend decides a retried APPEND of raw (journal key key) whose
// earlier attempts' outcome is unknown: the UID of the message found in
// the folder (done), ErrOutcomeUnknown while it may still come, or
// nothing to do (not done: save).
func (m *Folder) resolveAppend(ctx context.Context, auth upstream.Auth, u undecided, raw []byte, msgID string) (uid imap.UID, done bool, err error) {
	st := m.store
	if len(u.attempts) == 0 {
		return 0, false, nil
	}
	uid, err = m.findSaved(ctx, auth, raw, msgID, u.since)
	switch {
	case err != nil:
		return 0, true, err
	case uid != 0:
		st.cfg.Logger.Info("imap append: an earlier attempt whose answer was lost is in the folder; not saved again", "user", m.user, "uid", uid)
		st.endAttempts(ctx, u.attempts)
		return uid, true, nil
	case time.Now().Before(u.until):
		return 0, true, ErrOutcomeUnknown
	}
	st.endAttempts(ctx, u.attempts)
	return 0, false, nil
}

// findSaved looks in the folder for a message with the bytes raw received
// since since: the metadata of what arrived since then (one
// SearchMessagesMetadataByReceivedDate), and the bytes of those of raw's
// size and Message-ID (one download). The mirror is refreshed if it does
// not show the message yet. 0 when none is there.
func (m *Folder) findSaved(ctx context.Context, auth upstream.Auth, raw []byte, msgID string, since time.Time) (imap.UID, error) {
	st := m.store
	details, err := st.cfg.Provider.MetadataReceived(ctx, auth, m.name, since.Add(-metaSkew), time.Now().Add(metaSkew))
	if err != nil {
		return 0, err
	}
	var cands []imap.UID
	for _, d := range details {
		if d.UID > 0 && d.UID <= MaxUID && (d.Size < 0 || d.Size == len(raw)) && (msgID == "" || d.MsgID == msgID) {
			cands = append(cands, imap.UID(d.UID))
		}
	}
	if len(cands) == 0 {
		return 0, nil
	}
	m.mu.Lock()
	ref := m.ref()
	m.mu.Unlock()
	got, err := st.bodies.Get(ctx, auth, ref, cands, nil)
	if err != nil {
		return 0, err
	}
	var found imap.UID
	for _, u := range cands {
		if b, ok := got[u]; ok && string(b) == string(raw) && (found == 0 || u < found) {
			found = u
		}
	}
	if found != 0 && !m.isLive(found) {
		if err := m.Sync(ctx); err != nil {
			return 0, err
		}
	}
	return found, nil
}
