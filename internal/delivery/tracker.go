// Package delivery follows the messages the bridge sent until the provider
// reports each recipient final, and files an RFC 3464 delivery status
// notification (a bounce) in the sender's INBOX for those that failed, as
// the Direct Project's reference implementation does: a message to an
// unknown address of a hosted domain (Locally Failed), one a remote HISP
// refused (Remotely Failed), one whose recipient never confirmed within
// the provider's hour (NO MDN Received).
//
// What is followed is kept in the state store too (state.Tracking: the
// envelope only, no header or content), so that a restart does not lose
// the bounces of the messages sent before it. The sender's credentials,
// which every status request and the filing of a DSN need, are never
// written anywhere: a message reloaded at start waits until its sender
// logs in or sends again (Resume, WatchLogins), and is followed from then
// on. A DSN filed after a restart lacks the original's header section
// (it held the subject, which the store does not keep); it is threaded to
// the original by In-Reply-To all the same. What was reported is kept in
// the state store (state.Reported), so a recipient is reported once,
// across restarts too.
package delivery

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/directbridge/directbridge/internal/state"
	"github.com/directbridge/directbridge/upstream"
	"github.com/directbridge/directbridge/upstream/directapi"
)

// Notify is what a sender asked to be told of one recipient (ESMTP
// NOTIFY, RFC 3461 §4.1). The zero value is the default: failures only.
type Notify struct {
	Never   bool
	Success bool
	Failure bool
	// Set is true when the client gave NOTIFY at all; otherwise failures
	// are reported (RFC 3461 §4.1: the default is "FAILURE" or
	// "FAILURE,DELAY").
	Set bool
}

func (n Notify) wants(action string) bool {
	if n.Never {
		return false
	}
	if action == "delivered" {
		return n.Success
	}
	return !n.Set || n.Failure
}

// String spells n as the NOTIFY parameter does (RFC 3461 §4.1), for the
// state store: "" when none was given, DELAY alone for a NOTIFY that asked
// for none of the outcomes the bridge reports.
func (n Notify) String() string {
	if !n.Set {
		return ""
	}
	if n.Never {
		return "NEVER"
	}
	var parts []string
	if n.Success {
		parts = append(parts, "SUCCESS")
	}
	if n.Failure {
		parts = append(parts, "FAILURE")
	}
	if len(parts) == 0 {
		return "DELAY"
	}
	return strings.Join(parts, ",")
}

// parseNotify reads what Notify.String wrote.
func parseNotify(s string) Notify {
	if s == "" {
		return Notify{}
	}
	n := Notify{Set: true}
	for _, v := range strings.Split(s, ",") {
		switch strings.ToUpper(strings.TrimSpace(v)) {
		case "NEVER":
			n.Never = true
		case "SUCCESS":
			n.Success = true
		case "FAILURE":
			n.Failure = true
		}
	}
	return n
}

// Message is a sent message to follow.
type Message struct {
	Auth       upstream.Auth
	DirectAddr string // a T-user's send (followed with TuserStatus; no DSN can be filed for it)
	SmtpID     string
	Sender     string    // the address it came from
	MessageID  string    // the original's Message-ID with brackets, for threading
	Raw        []byte    // the original; only its header section is kept
	EnvID      string    // ESMTP ENVID
	At         time.Time // when the bridge took it
	Recipients []string
	Notify     map[string]Notify // by lower-case recipient; missing: the default
	// Recorded: the state store holds its record already, written in
	// the transaction that completed the send's journal entry
	// (state.Submissions.CompleteSubmission, one write per message sent
	// instead of two); Track then only follows it.
	Recorded bool
}

// Record is what the state store keeps of a message followed
// (state.TrackedMessage); ok is false for one Track does not follow (no
// smtpId, no recipients) and for a T-user's send, which is not recorded:
// no DSN can be filed for it.
func Record(m Message) (rec state.TrackedMessage, ok bool) {
	if m.DirectAddr != "" || m.SmtpID == "" || len(m.Recipients) == 0 {
		return rec, false
	}
	rec = state.TrackedMessage{SmtpID: m.SmtpID, Username: m.Auth.Username, Sender: m.Sender,
		MessageID: m.MessageID, EnvID: m.EnvID, SentAt: m.At}
	for _, r := range m.Recipients {
		rec.Recipients = append(rec.Recipients, state.TrackedRecipient{Address: r, Notify: m.Notify[strings.ToLower(r)].String()})
	}
	return rec, true
}

// Reported is the state the tracker keeps: which recipients were
// reported (state.Reported says how).
type Reported = state.Reported

// Store is the state the tracker keeps: what was reported, and what is
// followed (state.Store implements it).
type Store interface {
	Reported
	state.Tracking
}

// Config configures a Tracker.
type Config struct {
	Provider upstream.Provider
	Store    Store
	// Hostname names the bridge as the Reporting-MTA.
	Hostname string
	Logger   *slog.Logger
	// FirstCheck is how long after the send the status is first asked
	// (default 30 s); the interval doubles up to MaxInterval (default 10
	// min) while recipients are Waiting, and a message is given up
	// GiveUp after it was sent (default 2 h: the provider turns Waiting
	// into NO MDN Received after an hour).
	FirstCheck, MaxInterval, GiveUp time.Duration
	// Tick is how often due messages are looked for (default 1 s).
	Tick time.Duration
	// ResumeWithin is how long after it was sent a message reloaded
	// after a restart waits for its sender's credentials (default 24 h:
	// a Direct mailbox is read at least daily). Once they come it is
	// asked about until it is answered, even past GiveUp; a message
	// whose sender neither logs in nor sends within the time is given
	// up, and its failures are not reported.
	ResumeWithin time.Duration
	// ClaimHold is how long a DSN claimed and not yet filed is taken to
	// be on its way (another tracker's save under way) before it is
	// looked for in the sender's INBOX and, not there, filed again
	// (default 2 min: past any save's time).
	ClaimHold time.Duration
}

// storeTimeout bounds a write of the state store.
const storeTimeout = 10 * time.Second

// Tracker follows sent messages; see the package documentation.
type Tracker struct {
	cfg Config
	log *slog.Logger

	mu      sync.Mutex
	pending map[string]*tracked // by smtpId
	// waiting holds the messages reloaded at start that wait for their
	// account's credentials, by lower-case account.
	waiting map[string][]*tracked
	stop    chan struct{}
	done    chan struct{}
}

type tracked struct {
	msg      Message
	headers  []byte
	final    map[string]bool // recipients that reached a final state
	next     time.Time
	interval time.Duration
	// waiting: reloaded after a restart and without credentials; not
	// asked about until Resume gives them.
	waiting bool
	// resumed: reloaded after a restart, and no status read since; such
	// a message is kept past GiveUp until one is (up to ResumeWithin).
	resumed bool
}

// New returns a running Tracker; Close stops it.
func New(cfg Config) *Tracker {
	if cfg.FirstCheck <= 0 {
		cfg.FirstCheck = 30 * time.Second
	}
	if cfg.MaxInterval <= 0 {
		cfg.MaxInterval = 10 * time.Minute
	}
	if cfg.GiveUp <= 0 {
		cfg.GiveUp = 2 * time.Hour
	}
	if cfg.Tick <= 0 {
		cfg.Tick = time.Second
	}
	if cfg.ResumeWithin <= 0 {
		cfg.ResumeWithin = 24 * time.Hour
	}
	if cfg.ClaimHold <= 0 {
		cfg.ClaimHold = 2 * time.Minute
	}
	if cfg.Hostname == "" {
		cfg.Hostname = "localhost"
	}
	lg := cfg.Logger
	if lg == nil {
		lg = slog.New(slog.DiscardHandler)
	}
	t := &Tracker{cfg: cfg, log: lg, pending: map[string]*tracked{}, waiting: map[string][]*tracked{},
		stop: make(chan struct{}), done: make(chan struct{})}
	t.reload()
	go t.run()
	return t
}

// reload takes up the messages followed before a restart, from the state
// store. Without them the failures of every message sent shortly before a
// restart (an upgrade, a crash) would never be reported. They wait for
// their sender's credentials (Resume). A failure is logged and the
// tracker runs without them: stopping the bridge over it would stop the
// mail too.
func (t *Tracker) reload() {
	ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	defer cancel()
	ms, err := t.cfg.Store.TrackedMessages(ctx, time.Now().Add(-t.cfg.ResumeWithin))
	if err != nil {
		t.log.Error("delivery: the messages followed before the restart could not be read; their failures will not be reported", "err", err)
		return
	}
	for _, m := range ms {
		msg := Message{Auth: upstream.Auth{Username: m.Username}, SmtpID: m.SmtpID, Sender: m.Sender,
			MessageID: m.MessageID, EnvID: m.EnvID, At: m.SentAt}
		for _, r := range m.Recipients {
			msg.Recipients = append(msg.Recipients, r.Address)
			if r.Notify != "" {
				if msg.Notify == nil {
					msg.Notify = map[string]Notify{}
				}
				msg.Notify[strings.ToLower(r.Address)] = parseNotify(r.Notify)
			}
		}
		if m.SmtpID == "" || len(msg.Recipients) == 0 {
			continue
		}
		tr := &tracked{msg: msg, final: map[string]bool{}, interval: t.cfg.FirstCheck, waiting: true, resumed: true}
		t.pending[m.SmtpID] = tr
		account := accountOf(m.Username)
		t.waiting[account] = append(t.waiting[account], tr)
	}
	if len(t.pending) > 0 {
		t.log.Info("delivery: messages followed before the restart taken up; each is asked about once its sender logs in or sends",
			"messages", len(t.pending), "accounts", len(t.waiting))
	}
}

// accountOf is the key of t.waiting.
func accountOf(username string) string { return strings.ToLower(strings.TrimSpace(username)) }

// Resume gives the tracker an account's credentials, learnt from a login
// or a send: the account's messages reloaded after a restart, which
// cannot be asked about without them (credentials are never stored), are
// followed from now on, the first check at once. Messages already
// followed keep the credentials they have. Empty credentials do nothing.
func (t *Tracker) Resume(auth upstream.Auth) {
	if auth.Username == "" || auth.Password == "" {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.resumeLocked(auth)
}

func (t *Tracker) resumeLocked(auth upstream.Auth) {
	account := accountOf(auth.Username)
	trs, ok := t.waiting[account]
	if !ok {
		return
	}
	delete(t.waiting, account)
	now := time.Now()
	for _, tr := range trs {
		tr.msg.Auth, tr.waiting, tr.next = auth, false, now
	}
	t.log.Info("delivery: following messages sent before the restart again", "user", account, "messages", len(trs))
}

// WatchLogins returns p, telling the tracker of every mailbox login p's
// CheckCredentials accepts (Resume): give it to the Verifier the IMAP and
// SMTP fronts share, and a user who logs in after a restart has the
// bounces of the messages sent before it filed. After a restart the
// Verifier remembers nothing, so a user's first login reaches it.
func (t *Tracker) WatchLogins(p upstream.Provider) upstream.Provider {
	return loginWatcher{Provider: p, t: t}
}

type loginWatcher struct {
	upstream.Provider
	t *Tracker
}

func (w loginWatcher) CheckCredentials(ctx context.Context, auth upstream.Auth) error {
	err := w.Provider.CheckCredentials(ctx, auth)
	if err == nil {
		w.t.Resume(auth)
	}
	return err
}

// Track follows m from now on, and records it in the state store so that
// a restart does not forget it. A mailbox user's send also resumes the
// user's messages reloaded after a restart (Resume).
func (t *Tracker) Track(m Message) {
	if m.SmtpID == "" || len(m.Recipients) == 0 {
		return
	}
	if m.At.IsZero() {
		m.At = time.Now()
	}
	// A copy of the header section: a slice of Raw would keep the whole
	// message (tens of megabytes) for as long as it is followed.
	tr := &tracked{msg: m, headers: bytes.Clone(headerSection(m.Raw)), final: map[string]bool{},
		next: time.Now().Add(t.cfg.FirstCheck), interval: t.cfg.FirstCheck}
	tr.msg.Raw = nil // the body is not kept
	// Recorded before it is followed: once followed, a check may finish
	// it and forget the record, which must not come after.
	t.record(tr)
	t.mu.Lock()
	defer t.mu.Unlock()
	t.pending[m.SmtpID] = tr
	if m.DirectAddr == "" {
		t.resumeLocked(m.Auth)
	}
}

// record writes a message followed into the state store, unless it is
// there already (Message.Recorded). A T-user's send is not recorded: no
// DSN can be filed for it. A failure is logged only:
// the message is followed all the same, until a restart.
func (t *Tracker) record(tr *tracked) {
	m := tr.msg
	rec, ok := Record(m)
	if !ok || m.Recorded {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	defer cancel()
	if err := t.cfg.Store.TrackMessage(ctx, rec); err != nil {
		t.log.Warn("delivery: state store; the message is not followed after a restart", "smtp_id", m.SmtpID, "err", err)
	}
}

// forget drops the state store's record of a message no longer followed;
// a record left behind is taken up at the next start and checked once more
// (Reported keeps it from being reported twice).
func (t *Tracker) forget(ctx context.Context, tr *tracked) {
	if tr.msg.DirectAddr != "" {
		return
	}
	if err := t.cfg.Store.UntrackMessage(ctx, tr.msg.SmtpID); err != nil {
		t.log.Warn("delivery: state store", "smtp_id", tr.msg.SmtpID, "err", err)
	}
}

// Pending reports how many messages are followed.
func (t *Tracker) Pending() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.pending)
}

// Close stops following messages.
func (t *Tracker) Close() {
	select {
	case <-t.stop:
	default:
		close(t.stop)
	}
	<-t.done
}

func (t *Tracker) run() {
	defer close(t.done)
	tick := time.NewTicker(t.cfg.Tick)
	defer tick.Stop()
	for {
		select {
		case <-t.stop:
			return
		case <-tick.C:
			t.checkDue()
		}
	}
}

// checkDue asks the status of the messages due, one request per sender
// for all its due messages (T-user sends one each), and reports.
func (t *Tracker) checkDue() {
	now := time.Now()
	t.mu.Lock()
	bySender := map[upstream.Auth][]*tracked{}
	var tusers, dropped []*tracked
	for id, tr := range t.pending {
		age := now.Sub(tr.msg.At)
		if tr.waiting {
			if age > t.cfg.ResumeWithin {
				t.log.Info("delivery: no login of the sender since the restart; a message is no longer followed", "user", tr.msg.Auth.Username, "smtp_id", id)
				t.dropWaitingLocked(tr)
				delete(t.pending, id)
				dropped = append(dropped, tr)
			}
			continue
		}
		if age > t.cfg.GiveUp && (!tr.resumed || age > t.cfg.ResumeWithin) {
			delete(t.pending, id)
			dropped = append(dropped, tr)
			continue
		}
		if now.Before(tr.next) {
			continue
		}
		tr.next = now.Add(tr.interval)
		tr.interval = min(2*tr.interval, t.cfg.MaxInterval)
		if tr.msg.DirectAddr != "" {
			tusers = append(tusers, tr)
		} else {
			bySender[tr.msg.Auth] = append(bySender[tr.msg.Auth], tr)
		}
	}
	t.mu.Unlock()

	ctx, cancel := context.WithTimeout(upstream.WithPriority(context.Background(), upstream.Poll), time.Minute)
	defer cancel()
	for _, tr := range dropped {
		t.forget(ctx, tr)
	}
	for auth, trs := range bySender {
		ids := make([]string, len(trs))
		for i, tr := range trs {
			ids[i] = tr.msg.SmtpID
		}
		logs, err := t.cfg.Provider.Status(ctx, auth, ids)
		if err != nil {
			t.log.Warn("delivery status failed", "user", auth.Username, "err", err)
			continue
		}
		for _, tr := range trs {
			t.apply(ctx, tr, logsOf(logs, tr.msg.SmtpID))
		}
	}
	for _, tr := range tusers {
		logs, err := t.cfg.Provider.TuserStatus(ctx, directapi.AuthenticationWithTuser{
			Username: tr.msg.Auth.Username, Password: tr.msg.Auth.Password, DirectAddr: tr.msg.DirectAddr}, tr.msg.SmtpID)
		if err != nil {
			t.log.Warn("delivery status failed", "user", tr.msg.Auth.Username, "err", err)
			continue
		}
		t.apply(ctx, tr, logs)
	}
}

// dropWaitingLocked takes tr out of t.waiting.
func (t *Tracker) dropWaitingLocked(tr *tracked) {
	account := accountOf(tr.msg.Auth.Username)
	trs := t.waiting[account]
	for i, w := range trs {
		if w == tr {
			trs = append(trs[:i], trs[i+1:]...)
			break
		}
	}
	if len(trs) == 0 {
		delete(t.waiting, account)
	} else {
		t.waiting[account] = trs
	}
}

// logsOf picks the records of one message.
func logsOf(logs []directapi.DirectMessageLog, smtpID string) []directapi.DirectMessageLog {
	var out []directapi.DirectMessageLog
	for _, l := range logs {
		if strings.Trim(strings.TrimSpace(l.MessageID), "<>") == smtpID {
			out = append(out, l)
		}
	}
	return out
}

// apply takes a message's delivery records: recipients that became final
// are reported as the sender asked, and the message is dropped once every
// recipient is final.
func (t *Tracker) apply(ctx context.Context, tr *tracked, logs []directapi.DirectMessageLog) {
	tr.resumed = false // answered: GiveUp holds from now on
	var report []outcome
	for _, l := range logs {
		o, final := outcomeOf(l)
		if !final || tr.final[o.recipient] {
			continue
		}
		tr.final[o.recipient] = true
		if tr.msg.Notify[o.recipient].wants(o.action) {
			report = append(report, o)
		}
	}
	if len(report) > 0 {
		t.file(ctx, tr, report)
	}
	done := true
	for _, r := range tr.msg.Recipients {
		done = done && tr.final[strings.ToLower(r)]
	}
	if done {
		t.mu.Lock()
		delete(t.pending, tr.msg.SmtpID)
		t.mu.Unlock()
		t.forget(ctx, tr)
	}
}

// file saves a DSN about outcomes into the sender's INBOX, each recipient
// once across restarts (Reported). Each recipient is claimed before the
// save and marked filed after it. A claim found unfiled is another
// filing's: on its way while younger than ClaimHold (looked at again at
// the next check), else interrupted (the bridge stopped, or the save's
// answer was lost), and then the DSN is looked for in the INBOX by its
// Message-ID, and filed again only when it is not there.
func (t *Tracker) file(ctx context.Context, tr *tracked, outcomes []outcome) {
	if tr.msg.DirectAddr != "" {
		// A T-user may not write into the mailbox it sends for; the
		// admin socket's status shows the outcome.
		t.log.Info("delivery failed for a T-user send; no DSN filed", "smtp_id", tr.msg.SmtpID, "recipients", len(outcomes))
		return
	}
	base := report{sender: tr.msg.Sender, reportingMTA: t.cfg.Hostname, envID: tr.msg.EnvID, arrival: tr.msg.At,
		origMsgID: tr.msg.MessageID, headers: tr.headers}
	recipients := make([]string, len(outcomes))
	for i, o := range outcomes {
		recipients[i] = o.recipient
	}
	id := base.messageID(tr.msg.SmtpID, recipients)
	var claimed []outcome
	interrupted := map[string][]outcome{} // by the DSN's Message-ID
	since := map[string]time.Time{}
	for _, o := range outcomes {
		c, err := t.cfg.Store.ClaimReport(ctx, tr.msg.SmtpID, o.recipient, id)
		switch {
		case err != nil:
			t.log.Warn("delivery: state store", "err", err)
			tr.final[o.recipient] = false // try again at the next check
		case c.First:
			claimed = append(claimed, o)
		case c.Filed:
			// Reported before.
		case time.Since(c.At) < t.cfg.ClaimHold:
			tr.final[o.recipient] = false // another filing on its way: look again later
		default:
			interrupted[c.DSNID] = append(interrupted[c.DSNID], o)
			if s, ok := since[c.DSNID]; !ok || c.At.Before(s) {
				since[c.DSNID] = c.At
			}
		}
	}
	for dsnID, group := range interrupted {
		there, err := t.inInbox(ctx, tr, dsnID, since[dsnID])
		switch {
		case err != nil:
			t.log.Warn("delivery: looking for a DSN whose filing was interrupted failed", "user", tr.msg.Auth.Username, "smtp_id", tr.msg.SmtpID, "err", err)
			for _, o := range group {
				tr.final[o.recipient] = false
			}
		case there:
			t.markFiled(ctx, tr, group)
		default:
			t.save(ctx, tr, base, group, dsnID)
		}
	}
	if len(claimed) > 0 {
		t.save(ctx, tr, base, claimed, id)
	}
}

// save files the DSN with Message-ID dsnID about outcomes, claimed.
func (t *Tracker) save(ctx context.Context, tr *tracked, r report, outcomes []outcome, dsnID string) {
	r.outcomes, r.id = outcomes, dsnID
	raw, err := r.compose(time.Now())
	if err == nil {
		err = t.cfg.Provider.Save(ctx, tr.msg.Auth, "INBOX", [][]byte{raw})
	}
	switch {
	case errors.Is(err, upstream.ErrUnknownOutcome):
		// The provider may have filed it: the claims stay, and a later
		// check looks for it before filing it again.
		t.log.Warn("delivery: filing the DSN: outcome unknown; looked for later", "user", tr.msg.Auth.Username, "smtp_id", tr.msg.SmtpID, "err", err)
		for _, o := range outcomes {
			tr.final[o.recipient] = false
		}
	case err != nil:
		t.log.Warn("delivery: filing the DSN failed", "user", tr.msg.Auth.Username, "smtp_id", tr.msg.SmtpID, "err", err)
		for _, o := range outcomes {
			if uerr := t.cfg.Store.UnmarkReported(ctx, tr.msg.SmtpID, o.recipient); uerr != nil {
				t.log.Warn("delivery: state store", "err", uerr)
			}
			tr.final[o.recipient] = false // try again at the next check
		}
	default:
		t.markFiled(ctx, tr, outcomes)
		t.log.Info("delivery status notification filed", "user", tr.msg.Auth.Username, "smtp_id", tr.msg.SmtpID, "recipients", len(outcomes))
	}
}

// markFiled records the DSN about outcomes filed. A failure is logged:
// the claim stays, and should the message be checked again (a restart)
// the DSN is found in the INBOX by its Message-ID.
func (t *Tracker) markFiled(ctx context.Context, tr *tracked, outcomes []outcome) {
	rs := make([]string, len(outcomes))
	for i, o := range outcomes {
		rs[i] = o.recipient
	}
	if err := t.cfg.Store.MarkFiled(ctx, tr.msg.SmtpID, rs); err != nil {
		t.log.Warn("delivery: state store", "err", err)
	}
}

// inInbox reports whether the DSN with Message-ID dsnID is in the
// sender's INBOX, received since its claim (one
// SearchMessagesMetadataByReceivedDate, with a minute's slack for the
// two clocks).
func (t *Tracker) inInbox(ctx context.Context, tr *tracked, dsnID string, since time.Time) (bool, error) {
	details, err := t.cfg.Provider.MetadataReceived(ctx, tr.msg.Auth, "INBOX", since.Add(-time.Minute), time.Now().Add(time.Minute))
	if err != nil {
		return false, err
	}
	for _, d := range details {
		if strings.Trim(strings.TrimSpace(d.MsgID), "<>") == dsnID {
			return true, nil
		}
	}
	return false, nil
}
