// Package delivery follows the messages the bridge sent until the provider
// reports each recipient final, and files an RFC 3464 delivery status
// notification (a bounce) in the sender's INBOX for those that failed, as
// the Direct Project's reference implementation does: a message to an
// unknown address of a hosted domain (Locally Failed), one a remote HISP
// refused (Remotely Failed), one whose recipient never confirmed within
// the provider's hour (NO MDN Received).
//
// What is tracked lives in memory with the sender's credentials (which
// are never written anywhere): after a restart the messages sent before
// it are no longer followed. What was reported is kept in the state store,
// so a recipient is reported once.
package delivery

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/directbridge/directbridge/directapi"
	"github.com/directbridge/directbridge/upstream"
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
}

// Reported is the state the tracker keeps: which recipients were reported.
type Reported interface {
	// MarkReported records that a DSN about smtpID's recipient is being
	// filed; first is false when it was recorded before.
	MarkReported(ctx context.Context, smtpID, recipient string) (first bool, err error)
	// UnmarkReported takes a record back (the DSN could not be filed).
	UnmarkReported(ctx context.Context, smtpID, recipient string) error
}

// Config configures a Tracker.
type Config struct {
	Provider upstream.Provider
	Store    Reported
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
}

// Tracker follows sent messages; see the package documentation.
type Tracker struct {
	cfg Config
	log *slog.Logger

	mu      sync.Mutex
	pending map[string]*tracked // by smtpId
	stop    chan struct{}
	done    chan struct{}
}

type tracked struct {
	msg      Message
	headers  []byte
	final    map[string]bool // recipients that reached a final state
	next     time.Time
	interval time.Duration
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
	if cfg.Hostname == "" {
		cfg.Hostname = "localhost"
	}
	lg := cfg.Logger
	if lg == nil {
		lg = slog.New(slog.DiscardHandler)
	}
	t := &Tracker{cfg: cfg, log: lg, pending: map[string]*tracked{}, stop: make(chan struct{}), done: make(chan struct{})}
	go t.run()
	return t
}

// Track follows m from now on.
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
	t.mu.Lock()
	defer t.mu.Unlock()
	t.pending[m.SmtpID] = tr
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
	var tusers []*tracked
	for id, tr := range t.pending {
		if now.Sub(tr.msg.At) > t.cfg.GiveUp {
			delete(t.pending, id)
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
	}
}

// file saves a DSN about outcomes into the sender's INBOX, each recipient
// once across restarts (Reported).
func (t *Tracker) file(ctx context.Context, tr *tracked, outcomes []outcome) {
	if tr.msg.DirectAddr != "" {
		// A T-user may not write into the mailbox it sends for; the
		// admin socket's status shows the outcome.
		t.log.Info("delivery failed for a T-user send; no DSN filed", "smtp_id", tr.msg.SmtpID, "recipients", len(outcomes))
		return
	}
	var marked []outcome
	for _, o := range outcomes {
		first, err := t.cfg.Store.MarkReported(ctx, tr.msg.SmtpID, o.recipient)
		if err != nil {
			t.log.Warn("delivery: state store", "err", err)
			continue
		}
		if first {
			marked = append(marked, o)
		}
	}
	if len(marked) == 0 {
		return
	}
	r := report{sender: tr.msg.Sender, reportingMTA: t.cfg.Hostname, envID: tr.msg.EnvID, arrival: tr.msg.At,
		origMsgID: tr.msg.MessageID, headers: tr.headers, outcomes: marked}
	raw, err := r.compose(time.Now())
	if err == nil {
		err = t.cfg.Provider.Save(ctx, tr.msg.Auth, "INBOX", [][]byte{raw})
	}
	if err != nil {
		t.log.Warn("delivery: filing the DSN failed", "user", tr.msg.Auth.Username, "smtp_id", tr.msg.SmtpID, "err", err)
		for _, o := range marked {
			if uerr := t.cfg.Store.UnmarkReported(ctx, tr.msg.SmtpID, o.recipient); uerr != nil {
				t.log.Warn("delivery: state store", "err", uerr)
			}
			tr.final[o.recipient] = false // try again at the next check
		}
		return
	}
	t.log.Info("delivery status notification filed", "user", tr.msg.Auth.Username, "smtp_id", tr.msg.SmtpID, "recipients", len(marked))
}
