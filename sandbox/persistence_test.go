package sandbox_test

// Persistence: everything the sandbox stores survives Close and a new Open
// on the same directory; only registration sessions (in memory, like a
// provider's) are gone.

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/directbridge/directbridge/restclient"
	"github.com/directbridge/directbridge/sandbox"
	"github.com/directbridge/directbridge/upstream/directapi"
)

type persClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *persClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *persClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

var (
	persAlice = directapi.Authentication{Username: "alice@direct.example", Password: "alice-secret-1"}
	persBob   = directapi.Authentication{Username: "bob@direct.example", Password: "bob-secret-1"}
	persJane  = directapi.Authentication{Username: "jane.doe@direct.example", Password: "jane-secret-1"}
)

// persStart opens a sandbox on dir behind an HTTP server.
func persStart(t *testing.T, opts sandbox.Options) (*sandbox.Server, *httptest.Server, *restclient.Client) {
	t.Helper()
	srv, err := sandbox.Open(opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	ts := httptest.NewServer(srv)
	c, err := restclient.New(restclient.Options{BaseURL: ts.URL, RateLimit: -1})
	if err != nil {
		t.Fatal(err)
	}
	return srv, ts, c
}

// persState is everything the test reads back.
type persState struct {
	folders, subscribed []string
	uids                map[string][]int64
	unread              map[string]int
	raw                 map[string][]string
	logs                []string
}

func persSnapshot(t *testing.T, c *restclient.Client, a directapi.Authentication, smtpIDs []string) persState {
	t.Helper()
	ctx := context.Background()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	var s persState
	var err error
	s.folders, err = c.GetFolders(ctx, a, "INBOX", false)
	must(err)
	s.subscribed, err = c.GetFolders(ctx, a, "INBOX", true)
	must(err)
	s.uids, s.unread, s.raw = map[string][]int64{}, map[string]int{}, map[string][]string{}
	for _, f := range append([]string{"INBOX"}, s.folders...) {
		s.uids[f], err = c.GetUIDs(ctx, a, f)
		must(err)
		s.unread[f], err = c.GetUnreadMessageCount(ctx, a, f)
		must(err)
		if len(s.uids[f]) > 0 {
			rs, err := c.GetRawMessagesByUIDs(ctx, a, f, s.uids[f])
			must(err)
			for _, r := range rs {
				b, err := r.Bytes()
				must(err)
				s.raw[f] = append(s.raw[f], fmt.Sprintf("%d:%s", r.UID, b))
			}
		}
	}
	if len(smtpIDs) > 0 {
		logs, err := c.GetMessageStatuses(ctx, a, smtpIDs)
		must(err)
		for _, l := range logs {
			s.logs = append(s.logs, fmt.Sprintf("%s %s>%s %d %s %d", l.MessageID, l.From, l.To, l.MessageSize, l.Status, l.TS.UnixMilli()))
		}
	}
	return s
}

func TestPersistenceAcrossReopen(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	clock := &persClock{t: time.Date(2025, 3, 10, 12, 0, 0, 0, time.UTC)}
	srv, ts, c := persStart(t, sandbox.Options{
		Dir:       dir,
		Users:     []sandbox.Account{{Name: persAlice.Username, Password: "alice-secret-1"}, {Name: persBob.Username, Password: "bob-secret-1"}},
		Resellers: []sandbox.Account{{Name: "reseller", Password: "reseller-secret-1"}},
		Clock:     clock.Now,
	})
	step := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}

	// Folders, subscriptions.
	step("create", c.CreateFolder(ctx, persAlice, "INBOX.Projects.2025"))
	step("create", c.CreateFolder(ctx, persAlice, "INBOX.Tmp"))
	_, err := c.SetFoldersSubscribed(ctx, persAlice, []string{"INBOX.Projects", "INBOX.Spam"}, false)
	step("unsubscribe", err)
	// Sends (a delivery, a local failure, one waiting for an MDN).
	id1, err := c.Send(ctx, persAlice, directapi.Message{Sender: persAlice.Username, Subject: "one", Body: "first",
		Recipients: []directapi.Recipient{{Email: persBob.Username, Type: directapi.TO}, {Email: "far@other.example", Type: directapi.CC}}})
	step("send", err)
	clock.Advance(time.Minute)
	id2, err := c.Send(ctx, persAlice, directapi.Message{Sender: persAlice.Username, Subject: "two", Body: "second",
		Recipients: []directapi.Recipient{{Email: "ghost@direct.example", Type: directapi.TO}, {Email: persBob.Username, Type: directapi.TO}}})
	step("send", err)
	// Raw messages saved, one marked read.
	raw := func(n int) directapi.RawMessage {
		return directapi.NewRawMessage([]byte(fmt.Sprintf("From: x@other.example\r\nSubject: saved %d\r\n\r\nbody %d\r\n", n, n)))
	}
	step("save", c.SaveRawMessages(ctx, persAlice, "INBOX.Projects.2025", []directapi.RawMessage{raw(1), raw(2), raw(3)}))
	saved, err := c.GetUIDs(ctx, persAlice, "INBOX.Projects.2025")
	step("uids", err)
	step("mark", c.MarkMessagesAsReadByUIDs(ctx, persAlice, "INBOX.Projects.2025", saved[1:2]))
	step("delete", c.DeleteMessagesByUIDs(ctx, persAlice, "INBOX.Projects.2025", saved[2:], false))
	// A folder with UIDs handed out, then deleted: its high-water mark must persist.
	step("save tmp", c.SaveRawMessages(ctx, persAlice, "INBOX.Tmp", []directapi.RawMessage{raw(4), raw(5)}))
	tmpUIDs, err := c.GetUIDs(ctx, persAlice, "INBOX.Tmp")
	step("tmp uids", err)
	step("delete tmp", c.DeleteFolder(ctx, persAlice, "INBOX.Tmp"))
	// A patient provisioned through the registration service.
	session, err := c.Login(ctx, directapi.LoginRequest{Username: "reseller", Password: "reseller-secret-1"})
	step("login", err)
	_, err = c.ProvisionIDProofedPatient(ctx, session, "direct.example", directapi.IDProofedIndividualRESTful{
		IDProofedIndividual: directapi.IDProofedIndividual{FirstName: "Jane", LastName: "Doe", SSN4: "1234", DOB: "1980-03-07"},
		DirectUsername:      "jane.doe", DirectPassword: "jane-secret-1"})
	step("provision", err)
	_, err = c.Send(ctx, persBob, directapi.Message{Sender: persBob.Username, Subject: "to jane", Body: "hi",
		Recipients: []directapi.Recipient{{Email: persJane.Username, Type: directapi.TO}}})
	step("send to jane", err)

	ids := []string{id1, id2}
	beforeAlice := persSnapshot(t, c, persAlice, ids)
	beforeBob := persSnapshot(t, c, persBob, nil)
	beforeJane := persSnapshot(t, c, persJane, nil)
	if len(beforeAlice.logs) != 4 || len(beforeAlice.uids["INBOX.Projects.2025"]) != 2 || beforeAlice.unread["INBOX.Projects.2025"] != 1 ||
		len(beforeAlice.uids["INBOX.Trash"]) != 1 || len(beforeBob.uids["INBOX"]) != 2 || len(beforeJane.uids["INBOX"]) != 1 {
		t.Fatalf("unexpected state before closing: alice %+v bob %+v jane %+v", beforeAlice, beforeBob, beforeJane)
	}

	ts.Close()
	if err := srv.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("Close removed the caller's directory: %v", err)
	}

	// Reopen without seeding anything: the data alone must carry the accounts.
	srv2, ts2, c2 := persStart(t, sandbox.Options{Dir: dir, Clock: clock.Now})
	defer srv2.Close()
	defer ts2.Close()

	for _, cmp := range []struct {
		who    string
		a      directapi.Authentication
		ids    []string
		before persState
	}{{"alice", persAlice, ids, beforeAlice}, {"bob", persBob, nil, beforeBob}, {"jane", persJane, nil, beforeJane}} {
		after := persSnapshot(t, c2, cmp.a, cmp.ids)
		if !slices.Equal(after.folders, cmp.before.folders) || !slices.Equal(after.subscribed, cmp.before.subscribed) {
			t.Errorf("%s folders: before %q/%q after %q/%q", cmp.who, cmp.before.folders, cmp.before.subscribed, after.folders, after.subscribed)
		}
		if fmt.Sprint(after.uids) != fmt.Sprint(cmp.before.uids) || fmt.Sprint(after.unread) != fmt.Sprint(cmp.before.unread) {
			t.Errorf("%s uids/unread: before %v %v after %v %v", cmp.who, cmp.before.uids, cmp.before.unread, after.uids, after.unread)
		}
		if fmt.Sprint(after.raw) != fmt.Sprint(cmp.before.raw) {
			t.Errorf("%s: stored messages differ after reopening", cmp.who)
		}
		if !slices.Equal(after.logs, cmp.before.logs) {
			t.Errorf("%s delivery logs: before %q after %q", cmp.who, cmp.before.logs, after.logs)
		}
	}
	if n, err := c2.GetDeletedMessageCount(ctx, persAlice, "INBOX.Projects.2025"); err != nil || n != 1 {
		t.Errorf("deleted count after reopen: %d, %v", n, err)
	}

	// Passwords are checked against the stored hashes.
	if _, err := c2.GetMessageCount(ctx, directapi.Authentication{Username: persAlice.Username, Password: "wrong"}, "INBOX"); !restclient.IsAuthFailure(err) {
		t.Errorf("wrong password after reopen: %v", err)
	}
	// The delivery logs keep their time: the waiting one times out an hour after it was sent.
	clock.Advance(time.Hour)
	logs, err := c2.GetMessageStatus(ctx, persAlice, id1)
	step("status", err)
	for _, l := range logs {
		if l.To == "far@other.example" && l.Status != directapi.StatusNoMDNReceived {
			t.Errorf("far@other.example after an hour: %q", l.Status)
		}
	}

	// UIDs continue after the old ones, also for a folder deleted before the restart.
	step("save after reopen", c2.SaveRawMessages(ctx, persAlice, "INBOX.Projects.2025", []directapi.RawMessage{raw(6)}))
	now, err := c2.GetUIDs(ctx, persAlice, "INBOX.Projects.2025")
	step("uids", err)
	if last := now[len(now)-1]; last <= slices.Max(saved) {
		t.Errorf("uid %d after reopen, UIDs up to %d were handed out before", last, slices.Max(saved))
	}
	step("recreate tmp", c2.CreateFolder(ctx, persAlice, "INBOX.Tmp"))
	step("save tmp", c2.SaveRawMessages(ctx, persAlice, "INBOX.Tmp", []directapi.RawMessage{raw(7)}))
	tmp, err := c2.GetUIDs(ctx, persAlice, "INBOX.Tmp")
	step("tmp uids", err)
	if len(tmp) != 1 || tmp[0] <= slices.Max(tmpUIDs) {
		t.Errorf("re-created INBOX.Tmp uids %v, the deleted one had %v", tmp, tmpUIDs)
	}
	if _, err := c2.Send(ctx, persJane, directapi.Message{Sender: persJane.Username, Subject: "reply", Body: "thanks",
		Recipients: []directapi.Recipient{{Email: persBob.Username, Type: directapi.TO}}}); err != nil {
		t.Errorf("the provisioned patient cannot send after reopen: %v", err)
	}

	// Registration: the patient record and the account persist, the session does not.
	_, err = c2.GetPatientAddressByUsername(ctx, session, "direct.example", "jane.doe")
	if !restclient.IsAuthFailure(err) {
		t.Errorf("old session after reopen: %v, want 011", err)
	}
	session2, err := c2.Login(ctx, directapi.LoginRequest{Username: "reseller", Password: "reseller-secret-1"})
	step("login after reopen", err)
	users, err := c2.GetPatientAddressByMeta(ctx, session2, "direct.example",
		directapi.IDProofedIndividual{FirstName: "Jane", LastName: "Doe", SSN4: "1234", DOB: "1980-03-07"})
	step("by meta after reopen", err)
	if len(users) != 1 || users[0].Username != "jane.doe" || users[0].UserStateType != directapi.UserStateActivated {
		t.Errorf("patient after reopen: %+v", users)
	}
}

func TestOpenWithoutDirRemovesTempDir(t *testing.T) {
	t.Parallel()
	srv, err := sandbox.Open(sandbox.Options{Users: []sandbox.Account{{Name: "alice@direct.example", Password: "alice-secret-1"}}})
	if err != nil {
		t.Fatal(err)
	}
	dir := srv.Dir()
	if dir == "" {
		t.Fatal("Dir() is empty")
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		t.Fatalf("temporary directory %q: %v", dir, err)
	}
	// It is a working sandbox.
	ts := httptest.NewServer(srv)
	c, err := restclient.New(restclient.Options{BaseURL: ts.URL, RateLimit: -1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetMessageCount(context.Background(), persAlice, "INBOX"); err != nil {
		t.Fatalf("GetMessageCount: %v", err)
	}
	ts.Close()
	if err := srv.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("Close left the temporary directory %q behind (stat: %v)", dir, err)
	}
}
