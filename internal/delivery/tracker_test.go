package delivery_test

import (
	"bytes"
	"context"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/directbridge/directbridge/internal/delivery"
	"github.com/directbridge/directbridge/internal/state"
	"github.com/directbridge/directbridge/restclient"
	"github.com/directbridge/directbridge/sandbox"
	"github.com/directbridge/directbridge/upstream"
	"github.com/directbridge/directbridge/upstream/directapi"
)

const (
	aliceAddr = "alice@direct.example"
	alicePass = "alice-pw-3c9e1f"
	bobAddr   = "bob@direct.example"
	// Addresses of another provider: Waiting until the test says
	// otherwise (sandbox.Server.SetDeliveryStatus).
	doctorAddr = "doctor@remote-hisp.example"
	silentAddr = "silent@remote-hisp.example"
)

var aliceAuth = upstream.Auth{Username: aliceAddr, Password: directapi.Secret(alicePass)}

// env is a sandbox provider and a data directory for state stores that
// are opened and closed as a bridge's would be across restarts.
type env struct {
	sb  *sandbox.Server
	p   upstream.Provider
	dir string
}

func newEnv(t *testing.T) *env {
	t.Helper()
	sb, err := sandbox.Open(sandbox.Options{Users: []sandbox.Account{
		{Name: aliceAddr, Password: alicePass},
		{Name: bobAddr, Password: "bob-pw-51d0aa"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sb.Close() })
	hs := httptest.NewServer(sb)
	t.Cleanup(hs.Close)
	rc, err := restclient.New(restclient.Options{BaseURL: hs.URL})
	if err != nil {
		t.Fatal(err)
	}
	return &env{sb: sb, p: restclient.Upstream(rc), dir: t.TempDir()}
}

// open opens the state store, as a bridge does at start.
func (e *env) open(t *testing.T) *state.Store {
	t.Helper()
	st, err := state.OpenStore(e.dir)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// tracker starts a tracker on st that checks often.
func (e *env) tracker(st *state.Store, tweak ...func(*delivery.Config)) *delivery.Tracker {
	cfg := delivery.Config{Provider: e.p, Store: st, Hostname: "bridge.test",
		FirstCheck: 20 * time.Millisecond, MaxInterval: 50 * time.Millisecond, Tick: 10 * time.Millisecond}
	for _, f := range tweak {
		f(&cfg)
	}
	return delivery.New(cfg)
}

// statusCalls counts the status requests the provider saw.
// searchCalls counts the provider's metadata searches: the look-up of a
// DSN whose claim was left unfiled.
func (e *env) searchCalls() int { return e.sb.Calls("SearchMessagesMetadataByReceivedDate") }

func (e *env) statusCalls() int {
	return e.sb.Calls("GetMessageStatus") + e.sb.Calls("GetMessageStatuses")
}

// original is the header section of the message the tests send; its
// subject must never reach the state store.
const (
	origSubject = "Potassium 6.8 mmol/L for patient 4711"
	origMsgID   = "<orig-1@client.example>"
)

// send sends a message from alice to rcpts through the provider and
// returns the Message the SMTP front would give the tracker: ENVID set,
// NOTIFY=NEVER for silentAddr.
func (e *env) send(t *testing.T, rcpts ...string) delivery.Message {
	t.Helper()
	msg := directapi.MessageWithHeader{Message: directapi.Message{Sender: aliceAddr, Subject: origSubject, Body: "see attached"}}
	for _, r := range rcpts {
		msg.Recipients = append(msg.Recipients, directapi.Recipient{Email: r, Type: directapi.TO})
	}
	id, err := e.p.Send(context.Background(), aliceAuth, "", msg, false)
	if err != nil {
		t.Fatalf("Send: %v", err)
	}
	raw := "From: " + aliceAddr + "\r\nTo: " + strings.Join(rcpts, ", ") + "\r\nSubject: " + origSubject +
		"\r\nMessage-ID: " + origMsgID + "\r\n\r\nsee attached\r\n"
	return delivery.Message{Auth: aliceAuth, SmtpID: id, Sender: aliceAddr, MessageID: origMsgID, Raw: []byte(raw),
		EnvID: "env-4711", Recipients: rcpts, Notify: map[string]delivery.Notify{silentAddr: {Set: true, Never: true}}}
}

// dsns returns the raw DSNs in alice's INBOX.
func (e *env) dsns(t *testing.T) []string {
	t.Helper()
	ctx := context.Background()
	md, err := e.p.Metadata(ctx, aliceAuth, "INBOX")
	if err != nil {
		t.Fatal(err)
	}
	var uids []int64
	for _, m := range md {
		if strings.Contains(m.Subject, "Undelivered Mail") || strings.Contains(m.Subject, "Delivery Status Notification") {
			uids = append(uids, m.UID)
		}
	}
	if len(uids) == 0 {
		return nil
	}
	raws, err := e.p.Raw(ctx, aliceAuth, "INBOX", uids)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range raws {
		out = append(out, string(r))
	}
	return out
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// TestBounceFiledAfterRestart: a message followed when the bridge stops
// is taken up from the state store at the next start; its recipient
// fails after the restart, and once the sender logs in (the tracker needs
// the credentials, which are never stored) exactly one DSN reaches the
// sender's INBOX, naming that recipient with the ENVID and threading of
// the original, and not the recipient who asked NOTIFY=NEVER. Another
// restart files nothing more. The state store never holds the subject.
//
// Broken on purpose: without the reload (New not reading
// TrackedMessages) no DSN comes; without the NOTIFY in the record the
// NOTIFY=NEVER recipient is reported.
func TestBounceFiledAfterRestart(t *testing.T) {
	e := newEnv(t)
	st := e.open(t)
	tr := e.tracker(st)
	m := e.send(t, doctorAddr, silentAddr, bobAddr)
	tr.Track(m)
	// Followed before the restart: asked about, still Waiting.
	waitFor(t, "a status check before the restart", func() bool { return e.statusCalls() > 0 })
	tr.Close()
	st.Close()

	// The restart. GiveUp has long passed by the time the sender logs
	// in: a message taken up after a restart is asked about all the same.
	st = e.open(t)
	tr = e.tracker(st, func(c *delivery.Config) { c.GiveUp = time.Millisecond })
	if n := tr.Pending(); n != 1 {
		t.Fatalf("%d messages followed after the restart; want 1", n)
	}
	for _, r := range []string{doctorAddr, silentAddr} {
		if err := e.sb.SetDeliveryStatus(context.Background(), m.SmtpID, r, directapi.StatusRemotelyFailed, "refused by the remote HISP"); err != nil {
			t.Fatal(err)
		}
	}
	calls := e.statusCalls()
	time.Sleep(150 * time.Millisecond)
	if n := e.statusCalls(); n != calls || len(e.dsns(t)) != 0 {
		t.Fatalf("before the sender's credentials came back: %d status calls, %d DSNs; want none", n-calls, len(e.dsns(t)))
	}
	if tr.Pending() != 1 {
		t.Fatal("the message waiting for its sender's credentials was given up (GiveUp holds once it is asked about)")
	}

	// alice logs in (IMAP or SMTP, through the shared Verifier).
	if err := tr.WatchLogins(e.p).CheckCredentials(context.Background(), aliceAuth); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a DSN", func() bool { return len(e.dsns(t)) > 0 })
	waitFor(t, "the message to be finished", func() bool { return tr.Pending() == 0 })
	time.Sleep(100 * time.Millisecond) // more checks would come and go
	got := e.dsns(t)
	if len(got) != 1 {
		t.Fatalf("%d DSNs; want exactly 1", len(got))
	}
	dsn := got[0]
	for _, want := range []string{
		"Final-Recipient: rfc822; " + doctorAddr,
		"Action: failed",
		"Status: 5.0.0",
		"Original-Envelope-Id: env-4711",
		"In-Reply-To: " + origMsgID,
	} {
		if !strings.Contains(dsn, want) {
			t.Errorf("DSN lacks %q:\n%s", want, dsn)
		}
	}
	if strings.Contains(dsn, silentAddr) || strings.Contains(dsn, "Final-Recipient: rfc822; "+bobAddr) {
		t.Errorf("the DSN reports a recipient it must not (NOTIFY=NEVER, or delivered):\n%s", dsn)
	}
	if left, err := st.TrackedMessages(context.Background(), time.Time{}); err != nil || len(left) != 0 {
		t.Errorf("the state store still follows %d messages (%v); want none once every recipient is final", len(left), err)
	}

	// Another restart and login: nothing more is filed.
	tr.Close()
	st.Close()
	st = e.open(t)
	tr = e.tracker(st)
	tr.Resume(aliceAuth)
	time.Sleep(150 * time.Millisecond)
	tr.Close()
	st.Close()
	if n := len(e.dsns(t)); n != 1 {
		t.Fatalf("%d DSNs after another restart; want still 1", n)
	}
	for _, name := range []string{"state.db", "state.db-wal"} {
		b, err := os.ReadFile(filepath.Join(e.dir, name))
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		if bytes.Contains(b, []byte(origSubject)) {
			t.Errorf("%s holds the message's subject", name)
		}
	}
}

// TestNoSecondBounceAfterRestart: the bridge stopped after it filed a
// DSN but before it forgot the message (its record is still in the state
// store). Taken up again after the restart, the message is asked about,
// and the recipient already reported is not reported again: the state
// store's record of DSNs filed (Reported) holds across restarts.
//
// Broken on purpose: with ClaimReport answering first every time, a
// second DSN is filed.
func TestNoSecondBounceAfterRestart(t *testing.T) {
	e := newEnv(t)
	st := e.open(t)
	tr := e.tracker(st)
	m := e.send(t, doctorAddr)
	if err := e.sb.SetDeliveryStatus(context.Background(), m.SmtpID, doctorAddr, directapi.StatusRemotelyFailed, "refused"); err != nil {
		t.Fatal(err)
	}
	tr.Track(m)
	waitFor(t, "a DSN", func() bool { return len(e.dsns(t)) > 0 })
	waitFor(t, "the message to be finished", func() bool { return tr.Pending() == 0 })
	tr.Close()
	// What a stop between filing and forgetting leaves.
	if err := st.TrackMessage(context.Background(), state.TrackedMessage{SmtpID: m.SmtpID, Username: aliceAddr, Sender: aliceAddr,
		SentAt: time.Now(), Recipients: []state.TrackedRecipient{{Address: doctorAddr}}}); err != nil {
		t.Fatal(err)
	}
	st.Close()

	st = e.open(t)
	defer st.Close()
	tr = e.tracker(st)
	defer tr.Close()
	if tr.Pending() != 1 {
		t.Fatalf("%d messages taken up; want the one left in the store", tr.Pending())
	}
	calls := e.statusCalls()
	tr.Resume(aliceAuth)
	waitFor(t, "the message to be asked about and finished", func() bool { return e.statusCalls() > calls && tr.Pending() == 0 })
	time.Sleep(100 * time.Millisecond)
	if n := len(e.dsns(t)); n != 1 {
		t.Fatalf("%d DSNs; want still 1", n)
	}
}

// TestWaitingMessageGivenUp: a message taken up after a restart whose
// sender neither logs in nor sends within ResumeWithin is given up, and
// its record leaves the state store; another account's login does not
// resume it.
func TestWaitingMessageGivenUp(t *testing.T) {
	e := newEnv(t)
	st := e.open(t)
	defer st.Close()
	ctx := context.Background()
	if err := st.TrackMessage(ctx, state.TrackedMessage{SmtpID: "gone-1", Username: aliceAddr, Sender: aliceAddr,
		SentAt: time.Now(), Recipients: []state.TrackedRecipient{{Address: doctorAddr}}}); err != nil {
		t.Fatal(err)
	}
	tr := e.tracker(st, func(c *delivery.Config) { c.ResumeWithin = 300 * time.Millisecond })
	defer tr.Close()
	tr.Resume(upstream.Auth{Username: bobAddr, Password: "bob-pw-51d0aa"})
	time.Sleep(100 * time.Millisecond)
	if tr.Pending() != 1 || e.statusCalls() != 0 {
		t.Fatalf("after another account's login: %d followed, %d status calls; want 1 waiting, none", tr.Pending(), e.statusCalls())
	}
	waitFor(t, "the message to be given up", func() bool { return tr.Pending() == 0 })
	waitFor(t, "its record to leave the store", func() bool {
		left, err := st.TrackedMessages(ctx, time.Time{})
		return err == nil && len(left) == 0
	})
	if e.statusCalls() != 0 {
		t.Errorf("%d status calls without credentials", e.statusCalls())
	}
}

// TestBounceFiledAfterStopBetweenClaimAndSave: the bridge stopped after
// it claimed a recipient's DSN and before the provider took the DSN.
// Once the claim is older than ClaimHold, the tracker looks for the DSN
// in the INBOX by its Message-ID, does not find it, and files it: a
// failure is not lost because the bridge stopped at the wrong moment
// (before, the claim alone counted as reported and nothing was filed).
func TestBounceFiledAfterStopBetweenClaimAndSave(t *testing.T) {
	e := newEnv(t)
	st := e.open(t)
	defer st.Close()
	m := e.refusedClaimed(t, st, "dsn-claimed-1@direct.example") // a stop between claim and save
	time.Sleep(60 * time.Millisecond)
	tr := e.tracker(st, func(c *delivery.Config) { c.ClaimHold = 50 * time.Millisecond })
	defer tr.Close()
	searches := e.searchCalls()
	tr.Track(m)
	waitFor(t, "a DSN", func() bool { return len(e.dsns(t)) > 0 })
	waitFor(t, "the message to be finished", func() bool { return tr.Pending() == 0 })
	if n := e.searchCalls() - searches; n != 1 {
		t.Errorf("%d metadata searches to settle one stale claim; want 1", n)
	}
	got := e.dsns(t)
	if len(got) != 1 || !strings.Contains(got[0], "Message-ID: <dsn-claimed-1@direct.example>") {
		t.Fatalf("%d DSNs (want 1, with the claim's Message-ID): %q", len(got), got)
	}
	claimFiled(t, st, m)
}

// TestNoSecondBounceWhenSavedBeforeStop: the bridge stopped after the
// provider took the DSN and before the claim was marked filed. The
// tracker finds the DSN in the INBOX by its Message-ID and files no
// second one.
func TestNoSecondBounceWhenSavedBeforeStop(t *testing.T) {
	e := newEnv(t)
	st := e.open(t)
	defer st.Close()
	ctx := context.Background()
	m := e.refusedClaimed(t, st, "dsn-saved-1@direct.example")
	saved := "From: Mail Delivery System <MAILER-DAEMON@direct.example>\r\nTo: <" + aliceAddr + ">\r\n" +
		"Subject: Undelivered Mail Returned to Sender\r\nMessage-ID: <dsn-saved-1@direct.example>\r\n\r\nfiled before the stop\r\n"
	if err := e.p.Save(ctx, aliceAuth, "INBOX", [][]byte{[]byte(saved)}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(60 * time.Millisecond)
	tr := e.tracker(st, func(c *delivery.Config) { c.ClaimHold = 50 * time.Millisecond })
	defer tr.Close()
	searches := e.searchCalls()
	tr.Track(m)
	waitFor(t, "the message to be finished", func() bool { return tr.Pending() == 0 })
	time.Sleep(100 * time.Millisecond)
	if n := e.searchCalls() - searches; n != 1 {
		t.Errorf("%d metadata searches to settle one stale claim; want 1", n)
	}
	if n := len(e.dsns(t)); n != 1 {
		t.Fatalf("%d DSNs; want the one filed before the stop only", n)
	}
	claimFiled(t, st, m)
}

// TestClaimOnItsWayNotFiledTwice: a claim younger than ClaimHold is
// another filing on its way: nothing is filed beside it, and the
// recipient is looked at again later.
func TestClaimOnItsWayNotFiledTwice(t *testing.T) {
	e := newEnv(t)
	st := e.open(t)
	defer st.Close()
	m := e.refusedClaimed(t, st, "dsn-elsewhere@direct.example")
	tr := e.tracker(st, func(c *delivery.Config) { c.ClaimHold = time.Hour })
	defer tr.Close()
	calls, searches := e.statusCalls(), e.searchCalls()
	tr.Track(m)
	waitFor(t, "two status checks", func() bool { return e.statusCalls() >= calls+2 })
	if n := e.searchCalls() - searches; n != 0 {
		t.Errorf("%d metadata searches for a claim on its way; want none (nothing to settle yet)", n)
	}
	if n := len(e.dsns(t)); n != 0 {
		t.Fatalf("%d DSNs filed beside a filing on its way; want none", n)
	}
	if tr.Pending() != 1 {
		t.Fatalf("%d messages followed; want the one whose DSN is on its way elsewhere", tr.Pending())
	}
}

// refusedClaimed sends a message from alice to doctorAddr that the remote
// side refused, with the DSN about it claimed under dsnID (what a
// stop during its filing leaves): the Message to track.
func (e *env) refusedClaimed(t *testing.T, st *state.Store, dsnID string) delivery.Message {
	t.Helper()
	ctx := context.Background()
	m := e.send(t, doctorAddr)
	if err := e.sb.SetDeliveryStatus(ctx, m.SmtpID, doctorAddr, directapi.StatusRemotelyFailed, "refused"); err != nil {
		t.Fatal(err)
	}
	if c, err := st.ClaimReport(ctx, m.SmtpID, doctorAddr, dsnID); err != nil || !c.First {
		t.Fatalf("ClaimReport = %+v, %v", c, err)
	}
	return m
}

// claimFiled fails t unless the claim of m's DSN is marked filed.
func claimFiled(t *testing.T, st *state.Store, m delivery.Message) {
	t.Helper()
	if c, err := st.ClaimReport(context.Background(), m.SmtpID, doctorAddr, "other"); err != nil || !c.Filed {
		t.Fatalf("the claim is %+v, %v; want it marked filed", c, err)
	}
}
