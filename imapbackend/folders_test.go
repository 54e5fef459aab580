package imapbackend_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"

	"github.com/directbridge/directbridge/internal/state"
	"github.com/directbridge/directbridge/sandbox"
)

// wantCode fails unless err is a tagged NO with the response code.
func wantCode(t *testing.T, what string, err error, code imap.ResponseCode) {
	t.Helper()
	var ie *imap.Error
	if !errors.As(err, &ie) || ie.Type != imap.StatusResponseTypeNo || ie.Code != code {
		t.Fatalf("%s: %v; want NO [%s]", what, err, code)
	}
}

// wantOK fails on an error.
func wantOK(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// lineClient speaks IMAP line by line, for what imapclient does not show:
// LSUB, CHILDINFO, RECENT, the exact attribute spelling, lower-case INBOX.
type lineClient struct {
	t    testing.TB
	conn net.Conn
	r    *bufio.Reader
	n    int
}

func (e *env) lineLogin(user, pw string) *lineClient {
	e.t.Helper()
	conn, err := net.Dial("tcp", e.addr)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { conn.Close() })
	c := &lineClient{t: e.t, conn: conn, r: bufio.NewReader(conn)}
	if _, err := c.r.ReadString('\n'); err != nil { // greeting
		e.t.Fatal(err)
	}
	if _, st := c.cmd(fmt.Sprintf(`LOGIN %q %q`, user, pw)); !strings.HasPrefix(st, "OK") {
		e.t.Fatalf("LOGIN: %s", st)
	}
	return c
}

// cmd sends one command and returns its untagged replies and the tagged
// status ("OK ...", "NO [CODE] ...").
func (c *lineClient) cmd(command string) (untagged []string, status string) {
	c.t.Helper()
	c.n++
	tag := fmt.Sprintf("L%d", c.n)
	c.conn.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := fmt.Fprintf(c.conn, "%s %s\r\n", tag, command); err != nil {
		c.t.Fatal(err)
	}
	for {
		line, err := c.r.ReadString('\n')
		if err != nil {
			c.t.Fatalf("reading reply to %q: %v (so far %q)", command, err, untagged)
		}
		line = strings.TrimRight(line, "\r\n")
		if rest, ok := strings.CutPrefix(line, tag+" "); ok {
			return untagged, rest
		}
		untagged = append(untagged, line)
	}
}

// listNames returns the mailbox names of a LIST.
func listNames(t *testing.T, c *imapclient.Client, ref, pattern string, o *imap.ListOptions) []string {
	t.Helper()
	l, err := c.List(ref, pattern, o).Collect()
	if err != nil {
		t.Fatalf("LIST %q %q: %v", ref, pattern, err)
	}
	var out []string
	for _, d := range l {
		out = append(out, d.Mailbox)
	}
	return out
}

// listMap returns LIST data by mailbox name.
func listMap(t *testing.T, c *imapclient.Client, ref, pattern string, o *imap.ListOptions) map[string]*imap.ListData {
	t.Helper()
	l, err := c.List(ref, pattern, o).Collect()
	if err != nil {
		t.Fatalf("LIST %q %q: %v", ref, pattern, err)
	}
	out := map[string]*imap.ListData{}
	for _, d := range l {
		out[d.Mailbox] = d
	}
	return out
}

func hasAttr(d *imap.ListData, a imap.MailboxAttr) bool {
	if d == nil {
		return false
	}
	for _, x := range d.Attrs {
		if strings.EqualFold(string(x), string(a)) {
			return true
		}
	}
	return false
}

func mustStatus(t *testing.T, c *imapclient.Client, name string) *imap.StatusData {
	t.Helper()
	st, err := c.Status(name, &imap.StatusOptions{NumMessages: true, UIDNext: true, UIDValidity: true, NumUnseen: true, NumDeleted: true}).Wait()
	if err != nil {
		t.Fatalf("STATUS %s: %v", name, err)
	}
	return st
}

func TestCreateFolder(t *testing.T) {
	e := newEnv(t, options{})
	c := e.login(alice, alicePW)

	wantOK(t, "CREATE INBOX.Projects", c.Create("INBOX.Projects", nil).Wait())
	wantCode(t, "CREATE existing", c.Create("INBOX.Projects", nil).Wait(), imap.ResponseCodeAlreadyExists)
	wantCode(t, "CREATE INBOX", c.Create("INBOX", nil).Wait(), imap.ResponseCodeAlreadyExists)
	wantCode(t, "CREATE inbox.", c.Create("inbox.", nil).Wait(), imap.ResponseCodeAlreadyExists)
	for _, r := range []string{"INBOX.Sent", "INBOX.Templates", "INBOX.Drafts", "INBOX.Spam", "Inbox.Sent"} {
		// The reserved folders exist: ALREADYEXISTS (RFC 5530), as Dovecot.
		wantCode(t, "CREATE "+r, c.Create(r, nil).Wait(), imap.ResponseCodeAlreadyExists)
	}
	wantCode(t, "CREATE outside INBOX.", c.Create("Projects", nil).Wait(), imap.ResponseCodeCannot)
	wantCode(t, "CREATE empty level", c.Create("INBOX..x", nil).Wait(), imap.ResponseCodeCannot)
	wantCode(t, "CREATE (USE (\\Sent))", c.Create("INBOX.MySent", &imap.CreateOptions{SpecialUse: []imap.MailboxAttr{imap.MailboxAttrSent}}).Wait(), "USEATTR")

	// Only the INBOX level is case-insensitive: "Inbox.sent" is a new
	// folder INBOX.sent beside the reserved INBOX.Sent.
	wantOK(t, "CREATE Inbox.sent", c.Create("Inbox.sent", nil).Wait())
	// A trailing delimiter names the folder without it (RFC 9051 §6.3.4);
	// missing parents are created.
	wantOK(t, "CREATE INBOX.a.b.c.", c.Create("INBOX.a.b.c.", nil).Wait())

	// Non-ASCII names travel as modified UTF-7 (RFC 3501 §5.1.3) and
	// reach the provider as UTF-8.
	wantOK(t, "CREATE INBOX.Bücher", c.Create("INBOX.Bücher", nil).Wait())
	lc := e.lineLogin(alice, alicePW)
	if lines, _ := lc.cmd(`LIST "" "INBOX.B*"`); len(lines) != 1 || lines[0] != `* LIST (\HasNoChildren) "." "INBOX.B&APw-cher"` {
		t.Errorf("LIST of a non-ASCII name: %q", lines)
	}

	l := listMap(t, c, "", "*", nil)
	for _, n := range []string{"INBOX.Bücher", "INBOX.Projects", "INBOX.sent", "INBOX.Sent", "INBOX.a", "INBOX.a.b", "INBOX.a.b.c"} {
		if l[n] == nil {
			t.Errorf("LIST lacks %s: %v", n, l)
		} else if hasAttr(l[n], imap.MailboxAttrNoSelect) || hasAttr(l[n], imap.MailboxAttrNonExistent) {
			t.Errorf("%s listed as not selectable: %v", n, l[n].Attrs)
		}
	}
	for _, n := range []string{"INBOX.a.b.c.", "INBOX.MySent", "Projects", "INBOX.Inbox.sent"} {
		if l[n] != nil {
			t.Errorf("LIST has %s", n)
		}
	}
	folders, err := e.client.GetFolders(context.Background(), auth(alice), "INBOX", false)
	wantOK(t, "GetFolders", err)
	if strings.Join(folders, ",") != "INBOX.Bücher,INBOX.Drafts,INBOX.Projects,INBOX.Sent,INBOX.Spam,INBOX.Templates,INBOX.Trash,INBOX.a,INBOX.a.b,INBOX.a.b.c,INBOX.sent" {
		t.Errorf("provider folders: %v", folders)
	}
	if _, err := c.Select("INBOX.a.b.c", nil).Wait(); err != nil {
		t.Errorf("SELECT new folder: %v", err)
	}
}

func TestDeleteFolder(t *testing.T) {
	e := newEnv(t, options{})
	c := e.login(alice, alicePW)
	for _, n := range []string{"INBOX.Old", "INBOX.Parent.Child"} {
		wantOK(t, "CREATE "+n, c.Create(n, nil).Wait())
	}
	e.deliver(alice, "INBOX.Old", testMessage("old1"))
	e.deliver(alice, "INBOX.Old", testMessage("old2"))
	before := mustStatus(t, c, "INBOX.Old")
	if *before.NumMessages != 2 {
		t.Fatalf("STATUS before: %+v", before)
	}

	wantCode(t, "DELETE missing", c.Delete("INBOX.Nope").Wait(), imap.ResponseCodeNonExistent)
	wantCode(t, "DELETE outside INBOX.", c.Delete("Nope").Wait(), imap.ResponseCodeNonExistent)
	for _, r := range []string{"INBOX", "inbox", "INBOX.Sent", "INBOX.Templates", "INBOX.Drafts", "INBOX.Spam"} {
		wantCode(t, "DELETE "+r, c.Delete(r).Wait(), imap.ResponseCodeCannot)
	}
	// The provider's delete is recursive; IMAP's must not be: refused, and
	// the child is still there.
	wantCode(t, "DELETE parent", c.Delete("INBOX.Parent").Wait(), imap.ResponseCodeHasChildren)
	if l := listMap(t, c, "", "INBOX.Parent*", nil); l["INBOX.Parent.Child"] == nil || l["INBOX.Parent"] == nil {
		t.Fatalf("after refused DELETE: %v", l)
	}
	wantOK(t, "DELETE child", c.Delete("INBOX.Parent.Child").Wait())
	wantOK(t, "DELETE parent", c.Delete("INBOX.Parent").Wait())
	wantOK(t, "DELETE INBOX.Old", c.Delete("inbox.Old").Wait())
	if names := listNames(t, c, "", "INBOX.*", nil); strings.Contains(strings.Join(names, ","), "Old") || strings.Contains(strings.Join(names, ","), "Parent") {
		t.Fatalf("LIST after DELETE: %v", names)
	}
	if _, err := c.Status("INBOX.Old", &imap.StatusOptions{NumMessages: true}).Wait(); err == nil {
		t.Fatal("STATUS of deleted folder succeeded")
	} else {
		wantCode(t, "STATUS deleted", err, imap.ResponseCodeNonExistent)
	}
	wantCode(t, "SELECT deleted", func() error { _, err := c.Select("INBOX.Old", nil).Wait(); return err }(), imap.ResponseCodeNonExistent)

	// Created again, it is a new folder: new UIDVALIDITY, no messages.
	wantOK(t, "CREATE again", c.Create("INBOX.Old", nil).Wait())
	after := mustStatus(t, c, "INBOX.Old")
	if after.UIDValidity == before.UIDValidity || *after.NumMessages != 0 {
		t.Fatalf("re-created folder: UIDVALIDITY %d (was %d), %d messages", after.UIDValidity, before.UIDValidity, *after.NumMessages)
	}
	if after.UIDNext < before.UIDNext && after.UIDValidity == before.UIDValidity {
		t.Fatalf("UIDNEXT went down under one UIDVALIDITY")
	}
}

// TestDeleteSelectedFolder: another connection with the folder selected
// is told BYE (or NO) at its next command; the deleting connection itself
// must leave the folder first.
func TestDeleteSelectedFolder(t *testing.T) {
	e := newEnv(t, options{})
	a := e.login(alice, alicePW)
	b := e.login(alice, alicePW)
	wantOK(t, "CREATE", a.Create("INBOX.Doomed", nil).Wait())
	e.deliver(alice, "INBOX.Doomed", testMessage("doomed"))
	if _, err := a.Select("INBOX.Doomed", nil).Wait(); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Select("INBOX.Doomed", nil).Wait(); err != nil {
		t.Fatal(err)
	}
	wantCode(t, "DELETE own selected", b.Delete("INBOX.Doomed").Wait(), imap.ResponseCodeInUse)
	wantCode(t, "RENAME own selected", b.Rename("INBOX.Doomed", "INBOX.Saved", nil).Wait(), imap.ResponseCodeInUse)
	wantOK(t, "UNSELECT", b.Unselect().Wait())
	wantOK(t, "DELETE", b.Delete("INBOX.Doomed").Wait())
	if err := a.Noop().Wait(); err == nil {
		t.Fatal("NOOP on a deleted selected folder succeeded")
	}
	// b goes on normally.
	if _, err := b.Select("INBOX", nil).Wait(); err != nil {
		t.Fatalf("SELECT after DELETE: %v", err)
	}
}

// setKeptFlags writes flags into the bridge's state store directly, as
// STORE would, before the bridge first reads the folder.
func (e *env) setKeptFlags(user, folder string, flags map[uint32][]string) uint32 {
	e.t.Helper()
	st, err := state.OpenStore(e.stateDir)
	if err != nil {
		e.t.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	fs, err := st.Folder(ctx, user, folder)
	if err != nil {
		e.t.Fatal(err)
	}
	if err := st.SetFlags(ctx, user, folder, fs.UIDValidity, flags); err != nil {
		e.t.Fatal(err)
	}
	return fs.UIDValidity
}

func TestRenameFolder(t *testing.T) {
	e := newEnv(t, options{})
	c := e.login(alice, alicePW)
	wantOK(t, "CREATE", c.Create("INBOX.Old.Kid", nil).Wait())
	u1 := e.deliver(alice, "INBOX.Old", testMessage("r1"))
	e.deliver(alice, "INBOX.Old", testMessage("r2"))
	e.deliver(alice, "INBOX.Old.Kid", testMessage("kid"))
	validity := e.setKeptFlags(alice, "INBOX.Old", map[uint32][]string{uint32(u1): {`\Deleted`, `\Flagged`, "$Label1"}})

	before := mustStatus(t, c, "INBOX.Old")
	kidBefore := mustStatus(t, c, "INBOX.Old.Kid")
	if before.UIDValidity != validity || *before.NumMessages != 2 || *before.NumDeleted != 1 {
		t.Fatalf("STATUS before: validity %d (stored %d), %d messages, %d deleted", before.UIDValidity, validity, *before.NumMessages, *before.NumDeleted)
	}
	watcher := e.login(alice, alicePW)
	if _, err := watcher.Select("INBOX.Old", nil).Wait(); err != nil {
		t.Fatal(err)
	}

	wantCode(t, "RENAME INBOX", c.Rename("INBOX", "INBOX.Archive", nil).Wait(), imap.ResponseCodeCannot)
	wantCode(t, "RENAME inbox", c.Rename("inbox", "INBOX.Archive", nil).Wait(), imap.ResponseCodeCannot)
	wantCode(t, "RENAME reserved", c.Rename("INBOX.Sent", "INBOX.Sent2", nil).Wait(), imap.ResponseCodeCannot)
	wantCode(t, "RENAME to reserved", c.Rename("INBOX.Old", "INBOX.Drafts", nil).Wait(), imap.ResponseCodeCannot)
	wantCode(t, "RENAME to INBOX", c.Rename("INBOX.Old", "INBOX", nil).Wait(), imap.ResponseCodeCannot)
	wantCode(t, "RENAME missing", c.Rename("INBOX.Nope", "INBOX.New", nil).Wait(), imap.ResponseCodeNonExistent)
	wantCode(t, "RENAME onto existing", c.Rename("INBOX.Old", "INBOX.Trash", nil).Wait(), imap.ResponseCodeAlreadyExists)
	wantCode(t, "RENAME into itself", c.Rename("INBOX.Old", "INBOX.Old.Kid.Deeper", nil).Wait(), imap.ResponseCodeCannot)
	wantCode(t, "RENAME outside INBOX.", c.Rename("INBOX.Old", "Elsewhere", nil).Wait(), imap.ResponseCodeCannot)

	// Renamed with its sub-folder into a parent that does not exist yet.
	wantOK(t, "RENAME", c.Rename("Inbox.Old", "INBOX.Archive.2025", nil).Wait())
	l := listMap(t, c, "", "*", nil)
	for _, n := range []string{"INBOX.Archive", "INBOX.Archive.2025", "INBOX.Archive.2025.Kid"} {
		if l[n] == nil || hasAttr(l[n], imap.MailboxAttrNoSelect) {
			t.Errorf("after RENAME, LIST: %s missing or not selectable (%v)", n, l[n])
		}
	}
	if l["INBOX.Old"] != nil || l["INBOX.Old.Kid"] != nil {
		t.Errorf("after RENAME, old names still listed")
	}
	after := mustStatus(t, c, "INBOX.Archive.2025")
	if after.UIDValidity != before.UIDValidity || *after.NumMessages != 2 || *after.NumDeleted != 1 || after.UIDNext != before.UIDNext {
		t.Fatalf("renamed STATUS: %+v (validity %d, uidnext %d before)", after, before.UIDValidity, before.UIDNext)
	}
	if kid := mustStatus(t, c, "INBOX.Archive.2025.Kid"); kid.UIDValidity != kidBefore.UIDValidity || *kid.NumMessages != 1 {
		t.Fatalf("renamed sub-folder STATUS: %+v (validity %d before)", kid, kidBefore.UIDValidity)
	}
	sel, err := c.Select("INBOX.Archive.2025", nil).Wait()
	if err != nil {
		t.Fatal(err)
	}
	if sel.UIDValidity != before.UIDValidity || sel.NumMessages != 2 {
		t.Fatalf("SELECT renamed: %+v", sel)
	}
	flags := map[imap.Flag]bool{}
	for _, f := range sel.Flags {
		flags[f] = true
	}
	if !flags["$Label1"] {
		t.Errorf("kept keyword lost in RENAME: FLAGS %v", sel.Flags)
	}
	wantCode(t, "STATUS old name", func() error {
		_, err := c.Status("INBOX.Old", &imap.StatusOptions{NumMessages: true}).Wait()
		return err
	}(), imap.ResponseCodeNonExistent)
	if err := watcher.Noop().Wait(); err == nil {
		t.Error("NOOP on a renamed selected folder succeeded")
	}
}

func TestSubscribeUnsubscribe(t *testing.T) {
	e := newEnv(t, options{})
	c := e.login(alice, alicePW)
	wantOK(t, "CREATE", c.Create("INBOX.Lists", nil).Wait())
	lc := e.lineLogin(alice, alicePW)

	lsub := func() string {
		t.Helper()
		lines, st := lc.cmd(`LSUB "" "*"`)
		if !strings.HasPrefix(st, "OK") {
			t.Fatalf("LSUB: %s", st)
		}
		return strings.Join(lines, "\n")
	}
	// The provider subscribes new folders; IMAP's CREATE does not, so the
	// bridge clears the flag, and the provider agrees.
	if got := lsub(); strings.Contains(got, "INBOX.Lists") || !strings.Contains(got, `"." INBOX`) {
		t.Fatalf("LSUB after CREATE: %s", got)
	}
	if e.sandbox.Calls("SetFoldersSubscribed") == 0 {
		t.Fatal("CREATE left the provider's subscription of the new folder set")
	}
	wantOK(t, "SUBSCRIBE", c.Subscribe("INBOX.Lists").Wait())
	if got := lsub(); !strings.Contains(got, `"." "INBOX.Lists"`) {
		t.Fatalf("LSUB after SUBSCRIBE: %s", got)
	}
	wantOK(t, "UNSUBSCRIBE", c.Unsubscribe("INBOX.Lists").Wait())
	if got := lsub(); strings.Contains(got, "INBOX.Lists") {
		t.Fatalf("LSUB after UNSUBSCRIBE: %s", got)
	}
	if got := lsub(); !strings.Contains(got, `"." INBOX`) {
		t.Fatalf("INBOX not subscribed: %s", got)
	}
	sub := listMap(t, c, "", "*", &imap.ListOptions{SelectSubscribed: true})
	if sub["INBOX.Lists"] != nil || sub["INBOX"] == nil || !hasAttr(sub["INBOX"], imap.MailboxAttrSubscribed) {
		t.Fatalf("LIST (SUBSCRIBED) after UNSUBSCRIBE: %v", sub)
	}
	wantOK(t, "SUBSCRIBE", c.Subscribe("inbox.Lists").Wait())
	if got := lsub(); !strings.Contains(got, "INBOX.Lists") {
		t.Fatalf("LSUB after SUBSCRIBE: %s", got)
	}
	// A name without a folder: kept by the bridge, not sent to the provider.
	calls := e.sandbox.Calls("SetFoldersSubscribed")
	wantOK(t, "SUBSCRIBE missing", c.Subscribe("INBOX.Nope").Wait())
	if got := lsub(); !strings.Contains(got, `(\Noselect) "." "INBOX.Nope"`) {
		t.Fatalf("LSUB of a subscribed name without a folder: %s", got)
	}
	wantOK(t, "UNSUBSCRIBE missing", c.Unsubscribe("INBOX.Nope").Wait())
	if n := e.sandbox.Calls("SetFoldersSubscribed") - calls; n != 0 {
		t.Errorf("names without a folder cost %d SetFoldersSubscribed; want 0", n)
	}
	wantCode(t, "UNSUBSCRIBE not subscribed", c.Unsubscribe("INBOX.Nope").Wait(), imap.ResponseCodeNonExistent)
	wantCode(t, "SUBSCRIBE outside INBOX", c.Subscribe("Elsewhere").Wait(), imap.ResponseCodeNonExistent)
	wantOK(t, "SUBSCRIBE INBOX", c.Subscribe("INBOX").Wait())
	wantCode(t, "UNSUBSCRIBE INBOX", c.Unsubscribe("INBOX").Wait(), imap.ResponseCodeCannot)
}

// TestFolderCommandsProviderFaults: a provider that is down gives a clear
// NO [UNAVAILABLE]; a change the provider made although its answer was
// lost is reported as done (the folder list says so), never as failed.
func TestFolderCommandsProviderFaults(t *testing.T) {
	e := newEnv(t, options{})
	c := e.login(alice, alicePW)
	wantOK(t, "CREATE", c.Create("INBOX.Keep", nil).Wait())

	down := sandbox.Fault{Status: 503}
	for _, tc := range []struct {
		op  string
		run func() error
	}{
		// First, while CREATE has left the folder list uncached.
		{"GetFolders", func() error { _, err := c.List("", "*", nil).Collect(); return err }},
		{"GetUIDs", func() error {
			_, err := c.Status("INBOX.Keep", &imap.StatusOptions{NumMessages: true}).Wait()
			return err
		}},
		{"SetFoldersSubscribed", func() error { return c.Subscribe("INBOX.Keep").Wait() }},
		{"CreateFolder", func() error { return c.Create("INBOX.New", nil).Wait() }},
	} {
		e.sandbox.InjectFault(tc.op, down)
		wantCode(t, tc.op+" down", tc.run(), imap.ResponseCodeUnavailable)
		e.sandbox.ClearFaults()
		if tc.op != "CreateFolder" {
			wantOK(t, tc.op+" back", tc.run())
		}
	}
	if l := listMap(t, c, "", "INBOX.%", nil); l["INBOX.New"] != nil {
		t.Fatal("CREATE that failed left a folder")
	}

	lost := sandbox.Fault{Status: 503, After: true, Times: 1}
	e.sandbox.InjectFault("CreateFolder", lost)
	wantOK(t, "CREATE with the answer lost", c.Create("INBOX.New", nil).Wait())
	e.deliver(alice, "INBOX.New", testMessage("n1"))
	before := mustStatus(t, c, "INBOX.New")
	e.sandbox.InjectFault("MoveFolder", lost)
	wantOK(t, "RENAME with the answer lost", c.Rename("INBOX.New", "INBOX.Newer", nil).Wait())
	if after := mustStatus(t, c, "INBOX.Newer"); after.UIDValidity != before.UIDValidity || *after.NumMessages != 1 {
		t.Fatalf("after RENAME: %+v; before %+v", after, before)
	}
	e.sandbox.InjectFault("DeleteFolder", lost)
	wantOK(t, "DELETE with the answer lost", c.Delete("INBOX.Newer").Wait())
	if l := listMap(t, c, "", "INBOX.%", nil); l["INBOX.Newer"] != nil || l["INBOX.New"] != nil || l["INBOX.Keep"] == nil {
		t.Fatalf("LIST at the end: %v", l)
	}
}
