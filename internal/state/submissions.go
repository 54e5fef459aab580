package state

import (
	"github.com/directbridge/directbridge/internal/sqlstmt"

	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"
)

// A submission is one message a client handed the bridge to send, kept
// from before the provider is asked until its outcome is known, so that
// a client's retry of the same message, even after the bridge was killed
// in between, is never sent twice (see smtpbackend/journal.go). It holds
// fingerprints only: no message content, no subject, no addresses.

// SubmissionState is what the bridge knows of a submission's outcome.
type SubmissionState string

const (
	// SubmissionSending: the request left (or is about to leave) the
	// bridge and no answer came yet. Found on a retry, it means the
	// bridge stopped mid-call, or the first attempt still waits.
	SubmissionSending SubmissionState = "sending"
	// SubmissionUnknown: the request was sent and its answer was lost.
	SubmissionUnknown SubmissionState = "unknown"
	// SubmissionSent: the provider accepted it, under SmtpID.
	SubmissionSent SubmissionState = "sent"
)

// Submission is a journal entry.
type Submission struct {
	Key      string // fingerprint of account, sender and the exact bytes submitted
	Username string
	State    SubmissionState
	SmtpID   string
	// Match is what the provider's copy in Sent must hash to (subject,
	// shown recipients, content; see smtpbackend): it lets a retry find
	// the copy of an attempt whose answer was lost.
	Match   string
	FirstAt time.Time // the latest attempt's start
	// UpdatedAt is when the entry last changed: for an unknown outcome,
	// when the bridge stopped waiting for the answer.
	UpdatedAt time.Time
	// Answered is set once the 250 reply of this attempt (state sent) was
	// written to the client (AnswerSubmission), and cleared by a new
	// attempt. The client then knows the message went: identical bytes
	// that carry nothing to say they are the same message (no Message-ID)
	// are a second submission, not a retry (see smtpbackend/journal.go).
	// Unset, the client may never have seen the 250 (the connection
	// broke, the bridge was killed), so they are a retry.
	Answered bool
	// Deferred counts the submissions of these bytes the bridge told to
	// try again later (4xx) whose retries have not come yet: each
	// submission that comes takes one (TakeDeferred). Such a client never
	// saw a 250, so its retry is one even when another connection's 250
	// was written since. It survives new attempts (BeginSubmission): the
	// clients told to wait still are.
	Deferred int
}

// Submissions is the send journal.
type Submissions interface {
	// BeginSubmission starts the entry prev (as ClaimSubmission found
	// it) over as a new attempt in state sending, at s.FirstAt, after the
	// earlier attempt was decided not sent. It is a compare-and-set: the
	// entry is taken over only if it is still as prev shows it (the same
	// state, FirstAt and UpdatedAt), and began says whether it was. When
	// two retries of one message found the same entry, one begins and may
	// send; the other gets false and must not send (the first one's
	// attempt is under way), nor when the entry was ended or forgotten
	// meanwhile. Entries older than SubmissionTTL are dropped on the way.
	BeginSubmission(ctx context.Context, prev, s Submission) (began bool, err error)
	// ClaimSubmission records a new attempt in state sending, at
	// s.FirstAt, unless an entry of its key younger than SubmissionTTL
	// exists: claimed is true when the caller may send; otherwise prev is
	// the entry found, and the caller decides (BeginSubmission starts it
	// over). Of concurrent claims of a key without an entry, one is
	// claimed. One write for a message never seen, which is nearly every one.
	ClaimSubmission(ctx context.Context, s Submission) (prev Submission, claimed bool, err error)
	// EndSubmission records the outcome: sent (with smtpID) or unknown.
	EndSubmission(ctx context.Context, key string, state SubmissionState, smtpID string) error
	// CompleteSubmission records, in one transaction, that the
	// submission of key was sent (state sent, rec's smtpId), rec in the
	// sent records (RecordSent) and, when track is not nil, the message
	// the delivery tracker follows (Tracking.TrackMessage): one write per
	// message sent.
	CompleteSubmission(ctx context.Context, key string, rec SentRecord, track *TrackedMessage) error
	// AnswerSubmission records that the 250 reply of the submission of
	// key, sent under smtpID, was written to the client (Answered). It
	// changes the entry only while it is still that attempt, in state
	// sent with that smtpId: a later attempt is not marked by an earlier
	// one's reply.
	AnswerSubmission(ctx context.Context, key, smtpID string) error
	// DeferSubmission counts one more submission of key told to try again
	// later (Deferred). It leaves UpdatedAt alone: the hold of an unknown
	// outcome is counted from it.
	DeferSubmission(ctx context.Context, key string) error
	// TakeDeferred takes one of the submissions counted by
	// DeferSubmission, for a submission of key that may be its retry, and
	// reports whether there was one. Of concurrent takers of the last
	// one, one gets it.
	TakeDeferred(ctx context.Context, key string) (bool, error)
	// ForgetSubmission drops an entry: the provider certainly did not
	// take the message.
	ForgetSubmission(ctx context.Context, key string) error
	// FindSubmission returns the entry of key, or ok false.
	FindSubmission(ctx context.Context, key string) (s Submission, ok bool, err error)
}

// SubmissionTTL is how long a submission is remembered: clients retry
// within minutes to hours.
const SubmissionTTL = 24 * time.Hour

// DefaultSentRetention is how long sent records are kept by default: the
// APPEND-to-Sent recognition needs ten minutes, delivery status follows a
// message for hours; a week leaves room for a bridge stopped over a
// weekend.
const DefaultSentRetention = 7 * 24 * time.Hour

// SetSentRetention sets how long sent records are kept (0: the default).
// They hold addresses, smtpIds and Message-IDs, no content.
func (s *Store) SetSentRetention(d time.Duration) {
	if d <= 0 {
		d = DefaultSentRetention
	}
	s.sentRetention.Store(int64(d))
}

// purgeSubmissions drops expired journal entries, sent records older than
// the retention and reported-DSN records as old, at most once a minute
// rather than at every send.
func (s *Store) purgeSubmissions(ctx context.Context, now time.Time) error {
	if last := s.purgedAt.Load(); now.UnixMilli()-last > time.Minute.Milliseconds() && s.purgedAt.CompareAndSwap(last, now.UnixMilli()) {
		if _, err := s.stmts.Exec(ctx, `DELETE FROM submissions WHERE first_at < ?`, now.Add(-SubmissionTTL).UnixMilli()); err != nil {
			return fmt.Errorf("state: journal: %w", err)
		}
		retention := time.Duration(s.sentRetention.Load())
		if retention <= 0 {
			retention = DefaultSentRetention
		}
		if _, err := s.stmts.Exec(ctx, `DELETE FROM sent WHERE sent_at < ?`, now.Add(-retention).UnixMilli()); err != nil {
			return fmt.Errorf("state: sent records: %w", err)
		}
		if _, err := s.stmts.Exec(ctx, `DELETE FROM reported WHERE at < ?`, now.Add(-retention).UnixMilli()); err != nil {
			return fmt.Errorf("state: reported: %w", err)
		}
	}
	return nil
}

// claimAttempts bounds ClaimSubmission's tries: an entry is found
// missing only when it was forgotten between the insert and the look-up.
const claimAttempts = 3

func (s *Store) ClaimSubmission(ctx context.Context, sub Submission) (Submission, bool, error) {
	now := time.Now()
	if err := s.purgeSubmissions(ctx, now); err != nil {
		return Submission{}, false, err
	}
	for range claimAttempts {
		// A live entry is left alone; an expired one not purged yet is
		// taken over, as a new entry would be.
		res, err := s.durableExec(ctx, `INSERT INTO submissions (key, username, state, smtp_id, match, first_at, updated_at, answered, deferred)
			VALUES (?, ?, ?, '', ?, ?, ?, 0, 0)
			ON CONFLICT (key) DO UPDATE SET state = excluded.state, smtp_id = '', match = excluded.match,
				first_at = excluded.first_at, updated_at = excluded.updated_at, answered = 0, deferred = 0
			WHERE submissions.first_at < ?`, sub.Key, strings.ToLower(sub.Username), SubmissionSending, sub.Match,
			sub.FirstAt.UnixMilli(), now.UnixMilli(), now.Add(-SubmissionTTL).UnixMilli())
		if err != nil {
			return Submission{}, false, fmt.Errorf("state: journal: %w", err)
		}
		if n, err := res.RowsAffected(); err != nil {
			return Submission{}, false, fmt.Errorf("state: journal: %w", err)
		} else if n == 1 {
			return Submission{}, true, nil
		}
		prev, ok, err := s.FindSubmission(ctx, sub.Key)
		if err != nil || ok {
			return prev, false, err
		}
		// Forgotten in between (its attempt was refused), or expired:
		// claim it again, through the insert, which decides between
		// concurrent claims (writing it unconditionally here would let
		// two of them send).
		now = time.Now()
	}
	return Submission{}, false, fmt.Errorf("state: journal: the entry of submission %.12s keeps changing", sub.Key)
}

func (s *Store) BeginSubmission(ctx context.Context, prev, sub Submission) (bool, error) {
	now := time.Now()
	if err := s.purgeSubmissions(ctx, now); err != nil {
		return false, err
	}
	// The entry's state and times are its version: every write of an
	// entry sets updated_at (in milliseconds) and a new attempt a new
	// first_at, so an entry that changed since prev was read does not
	// match, and of two retries that read the same entry the second
	// finds it changed by the first.
	res, err := s.durableExec(ctx, `UPDATE submissions SET state = ?, smtp_id = '', match = ?, first_at = ?, updated_at = ?, answered = 0
		WHERE key = ? AND state = ? AND first_at = ? AND updated_at = ?`,
		SubmissionSending, sub.Match, sub.FirstAt.UnixMilli(), now.UnixMilli(),
		sub.Key, prev.State, prev.FirstAt.UnixMilli(), prev.UpdatedAt.UnixMilli())
	if err != nil {
		return false, fmt.Errorf("state: journal: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("state: journal: %w", err)
	}
	return n == 1, nil
}

func (s *Store) EndSubmission(ctx context.Context, key string, state SubmissionState, smtpID string) error {
	_, err := s.stmts.Exec(ctx, `UPDATE submissions SET state = ?, smtp_id = ?, updated_at = ? WHERE key = ?`,
		state, smtpID, time.Now().UnixMilli(), key)
	if err != nil {
		return fmt.Errorf("state: journal: %w", err)
	}
	return nil
}

func (s *Store) CompleteSubmission(ctx context.Context, key string, rec SentRecord, track *TrackedMessage) error {
	err := s.tx(ctx, func(tx *sqlstmt.Tx) error {
		// Writes only, none read back: on PostgreSQL they go with the
		// COMMIT's round trip (Later), on SQLite at once.
		later := func(_ context.Context, q string, args ...any) (sql.Result, error) { return nil, tx.Later(q, args...) }
		if _, err := later(ctx, `UPDATE submissions SET state = ?, smtp_id = ?, updated_at = ? WHERE key = ?`, SubmissionSent, rec.SmtpID, time.Now().UnixMilli(), key); err != nil {
			return err
		}
		if _, err := later(ctx, `INSERT INTO sent (username, smtp_id, message_id, sent_at) VALUES (?, ?, ?, ?)`,
			strings.ToLower(rec.Username), rec.SmtpID, rec.MessageID, rec.SentAt.UnixMilli()); err != nil {
			return err
		}
		if track == nil {
			return nil
		}
		return trackIn(ctx, later, *track)
	})
	if err != nil {
		return fmt.Errorf("state: journal: completing the entry and recording the sent message: %w", err)
	}
	return nil
}

func (s *Store) AnswerSubmission(ctx context.Context, key, smtpID string) error {
	// updated_at changes too: it is part of the entry's version, which
	// BeginSubmission compares.
	_, err := s.stmts.Exec(ctx, `UPDATE submissions SET answered = 1, updated_at = ? WHERE key = ? AND state = ? AND smtp_id = ?`,
		time.Now().UnixMilli(), key, SubmissionSent, smtpID)
	if err != nil {
		return fmt.Errorf("state: journal: %w", err)
	}
	return nil
}

func (s *Store) DeferSubmission(ctx context.Context, key string) error {
	if _, err := s.stmts.Exec(ctx, `UPDATE submissions SET deferred = deferred + 1 WHERE key = ?`, key); err != nil {
		return fmt.Errorf("state: journal: %w", err)
	}
	return nil
}

func (s *Store) TakeDeferred(ctx context.Context, key string) (bool, error) {
	res, err := s.stmts.Exec(ctx, `UPDATE submissions SET deferred = deferred - 1 WHERE key = ? AND deferred > 0`, key)
	if err != nil {
		return false, fmt.Errorf("state: journal: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("state: journal: %w", err)
	}
	return n == 1, nil
}

func (s *Store) ForgetSubmission(ctx context.Context, key string) error {
	if _, err := s.stmts.Exec(ctx, `DELETE FROM submissions WHERE key = ?`, key); err != nil {
		return fmt.Errorf("state: journal: %w", err)
	}
	return nil
}

func (s *Store) FindSubmission(ctx context.Context, key string) (Submission, bool, error) {
	var sub Submission
	var first, updated int64
	err := s.stmts.QueryRow(ctx, `SELECT key, username, state, smtp_id, match, first_at, updated_at, answered, deferred FROM submissions
		WHERE key = ? AND first_at >= ?`, key, time.Now().Add(-SubmissionTTL).UnixMilli()).
		Scan(&sub.Key, &sub.Username, &sub.State, &sub.SmtpID, &sub.Match, &first, &updated, &sub.Answered, &sub.Deferred)
	if errors.Is(err, sql.ErrNoRows) {
		return Submission{}, false, nil
	}
	if err != nil {
		return Submission{}, false, fmt.Errorf("state: journal: %w", err)
	}
	sub.FirstAt = time.UnixMilli(first).UTC()
	sub.UpdatedAt = time.UnixMilli(updated).UTC()
	return sub, true, nil
}
