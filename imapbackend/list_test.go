package imapbackend_test

import (
	"context"
	"database/sql"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/directbridge/directbridge/internal/mailstore"
	"github.com/directbridge/directbridge/sandbox"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"
)

// createFolders makes folders at the provider directly.
func (e *env) createFolders(user string, names ...string) {
	e.t.Helper()
	for _, n := range names {
		if err := e.client.CreateFolder(context.Background(), auth(user), n); err != nil {
			e.t.Fatalf("CreateFolder %s: %v", n, err)
		}
	}
}

func TestListPatternsAndAttributes(t *testing.T) {
	e := newEnv(t, options{})
	e.createFolders(alice, "INBOX.Projects.2025", "INBOX.Projects.2026", "INBOX.Zeta")
	c := e.login(alice, alicePW)

	top := []string{"INBOX.Drafts", "INBOX.Projects", "INBOX.Sent", "INBOX.Spam", "INBOX.Templates", "INBOX.Trash", "INBOX.Zeta"}
	all := []string{"INBOX", "INBOX.Drafts", "INBOX.Projects", "INBOX.Projects.2025", "INBOX.Projects.2026",
		"INBOX.Sent", "INBOX.Spam", "INBOX.Templates", "INBOX.Trash", "INBOX.Zeta"}
	for _, tc := range []struct {
		ref, pattern string
		want         []string
	}{
		{"", "*", all},
		{"", "%", []string{"INBOX"}},
		{"", "INBOX", []string{"INBOX"}},
		{"", "Inbox", []string{"INBOX"}},
		{"", "INBOX.%", top},
		{"", "inbox.%", top},
		{"INBOX.", "%", top},
		{"inbox.", "%", top},
		{"INBOX", "%", top}, // the reference gains the delimiter
		{"INBOX.Projects", "%", []string{"INBOX.Projects.2025", "INBOX.Projects.2026"}},
		{"", "INBOX.Proj*", []string{"INBOX.Projects", "INBOX.Projects.2025", "INBOX.Projects.2026"}},
		{"", "INBOX.%.%", []string{"INBOX.Projects.2025", "INBOX.Projects.2026"}},
		{"", "*.2026", []string{"INBOX.Projects.2026"}},
		{"", "INBOX.sent", nil}, // only INBOX is case-insensitive
		{"", "Nothing*", nil},
	} {
		got := listNames(t, c, tc.ref, tc.pattern, nil)
		if !slices.Equal(got, tc.want) {
			t.Errorf("LIST %q %q = %v; want %v", tc.ref, tc.pattern, got, tc.want)
		}
	}

	l := listMap(t, c, "", "*", nil)
	for name, want := range map[string][]imap.MailboxAttr{
		"INBOX":               {imap.MailboxAttrHasChildren},
		"INBOX.Projects":      {imap.MailboxAttrHasChildren},
		"INBOX.Projects.2025": {imap.MailboxAttrHasNoChildren},
		"INBOX.Sent":          {imap.MailboxAttrHasNoChildren, imap.MailboxAttrSent},
		"INBOX.Trash":         {imap.MailboxAttrHasNoChildren, imap.MailboxAttrTrash},
		"INBOX.Drafts":        {imap.MailboxAttrHasNoChildren, imap.MailboxAttrDrafts},
		"INBOX.Spam":          {imap.MailboxAttrHasNoChildren, imap.MailboxAttrJunk},
		"INBOX.Templates":     {imap.MailboxAttrHasNoChildren},
	} {
		d := l[name]
		if d == nil || !slices.Equal(d.Attrs, want) || d.Delim != '.' {
			t.Errorf("LIST %s: %+v; want attributes %v", name, d, want)
		}
	}

	lc := e.lineLogin(alice, alicePW)
	lines, st := lc.cmd(`LIST "" ""`)
	if !strings.HasPrefix(st, "OK") || len(lines) != 1 || lines[0] != `* LIST (\Noselect) "." ""` {
		t.Errorf(`LIST "" "": %q %s`, lines, st)
	}
	lines, _ = lc.cmd(`LIST "" "inbox.S%"`)
	if strings.Join(lines, "\n") != "* LIST (\\HasNoChildren \\Sent) \".\" \"INBOX.Sent\"\n* LIST (\\HasNoChildren \\Junk) \".\" \"INBOX.Spam\"" {
		t.Errorf(`LIST "" "inbox.S%%": %q`, lines)
	}
	// LIST-EXTENDED with several patterns (RFC 5258 §3).
	lines, st = lc.cmd(`LIST "" ("INBOX.Sent" "INBOX.Trash" "INBOX.Sent")`)
	if !strings.HasPrefix(st, "OK") || len(lines) != 2 {
		t.Errorf("LIST with two patterns: %q %s", lines, st)
	}
}

// TestListNonExistentParent: a level that does not exist above a folder
// that does (the provider normally prevents it; here it is forced into
// the sandbox's database) is listed so the tree can be drawn, but is not
// selectable.
func TestListNonExistentParent(t *testing.T) {
	dir := t.TempDir()
	e := newEnv(t, options{sandboxDir: dir})
	e.createFolders(alice, "INBOX.a.b", "INBOX.x")
	db, err := sql.Open("sqlite", "file:"+(&url.URL{Path: filepath.Join(dir, "sandbox.db")}).EscapedPath()+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`DELETE FROM folders WHERE name = 'INBOX.a'`); err != nil {
		t.Fatal(err)
	}
	db.Close()

	c := e.login(alice, alicePW)
	l := listMap(t, c, "", "*", nil)
	if d := l["INBOX.a"]; d == nil || !slices.Equal(d.Attrs, []imap.MailboxAttr{imap.MailboxAttrNoSelect, imap.MailboxAttrHasChildren}) {
		t.Fatalf("LIST: phantom parent %+v", d)
	}
	if d := l["INBOX.a.b"]; d == nil || !slices.Equal(d.Attrs, []imap.MailboxAttr{imap.MailboxAttrHasNoChildren}) {
		t.Fatalf("LIST: child %+v", d)
	}
	if d := listMap(t, c, "", "INBOX.%", nil)["INBOX.a"]; d == nil || !hasAttr(d, imap.MailboxAttrNoSelect) {
		t.Fatalf(`LIST "" "INBOX.%%": %+v`, d)
	}
	ext := listMap(t, c, "", "*", &imap.ListOptions{ReturnChildren: true, ReturnStatus: &imap.StatusOptions{NumMessages: true}})
	if d := ext["INBOX.a"]; d == nil || !slices.Equal(d.Attrs, []imap.MailboxAttr{imap.MailboxAttrNonExistent, imap.MailboxAttrHasChildren}) || d.Status != nil {
		t.Fatalf("LIST-EXTENDED: phantom parent %+v", d)
	}
	if d := ext["INBOX.a.b"]; d == nil || d.Status == nil || *d.Status.NumMessages != 0 {
		t.Fatalf("LIST-STATUS: child %+v", d)
	}
	wantCode(t, "SELECT phantom", func() error { _, err := c.Select("INBOX.a", nil).Wait(); return err }(), imap.ResponseCodeNonExistent)
	wantCode(t, "DELETE phantom", c.Delete("INBOX.a").Wait(), imap.ResponseCodeNonExistent)
	wantCode(t, "RENAME onto phantom", c.Rename("INBOX.x", "INBOX.a", nil).Wait(), imap.ResponseCodeAlreadyExists)
	wantOK(t, "CREATE phantom", c.Create("INBOX.a", nil).Wait())
	if d := listMap(t, c, "", "*", nil)["INBOX.a"]; d == nil || !slices.Equal(d.Attrs, []imap.MailboxAttr{imap.MailboxAttrHasChildren}) {
		t.Fatalf("LIST after CREATE: %+v", d)
	}
}

func TestListExtendedAndLSUB(t *testing.T) {
	e := newEnv(t, options{})
	e.createFolders(alice, "INBOX.Projects.2025", "INBOX.Projects.2026")
	if _, err := e.client.SetFoldersSubscribed(context.Background(), auth(alice), []string{"INBOX.Projects", "INBOX.Projects.2025"}, false); err != nil {
		t.Fatal(err)
	}
	c := e.login(alice, alicePW)

	sub := listMap(t, c, "", "*", &imap.ListOptions{SelectSubscribed: true})
	if sub["INBOX.Projects"] != nil || sub["INBOX.Projects.2025"] != nil || sub["INBOX.Projects.2026"] == nil || sub["INBOX"] == nil {
		t.Fatalf("LIST (SUBSCRIBED): %v", sub)
	}
	for n, d := range sub {
		if !hasAttr(d, imap.MailboxAttrSubscribed) {
			t.Errorf("LIST (SUBSCRIBED) %s without \\Subscribed: %v", n, d.Attrs)
		}
	}
	// Without RECURSIVEMATCH the non-subscribed parent is not listed
	// (RFC 5258 §3.1); with it, it is, with CHILDINFO.
	if sub := listMap(t, c, "", "INBOX.%", &imap.ListOptions{SelectSubscribed: true}); sub["INBOX.Projects"] != nil {
		t.Errorf("LIST (SUBSCRIBED) %%: lists the non-subscribed parent")
	}
	rm := listMap(t, c, "", "INBOX.%", &imap.ListOptions{SelectSubscribed: true, SelectRecursiveMatch: true})
	if d := rm["INBOX.Projects"]; d == nil || d.ChildInfo == nil || !d.ChildInfo.Subscribed || hasAttr(d, imap.MailboxAttrSubscribed) {
		t.Errorf("LIST (SUBSCRIBED RECURSIVEMATCH): parent %+v", d)
	}
	if d := rm["INBOX.Sent"]; d == nil || d.ChildInfo != nil {
		t.Errorf("LIST (SUBSCRIBED RECURSIVEMATCH): INBOX.Sent %+v", d)
	}

	ret := listMap(t, c, "", "*", &imap.ListOptions{ReturnSubscribed: true, ReturnSpecialUse: true, ReturnChildren: true})
	if len(ret) != 9 || hasAttr(ret["INBOX.Projects"], imap.MailboxAttrSubscribed) || !hasAttr(ret["INBOX.Projects.2026"], imap.MailboxAttrSubscribed) ||
		!hasAttr(ret["INBOX"], imap.MailboxAttrSubscribed) || !hasAttr(ret["INBOX.Sent"], imap.MailboxAttrSent) {
		t.Errorf("LIST RETURN (SUBSCRIBED SPECIAL-USE CHILDREN): %v", ret)
	}
	special := listNames(t, c, "", "*", &imap.ListOptions{SelectSpecialUse: true})
	if !slices.Equal(special, []string{"INBOX.Drafts", "INBOX.Sent", "INBOX.Spam", "INBOX.Trash"}) {
		t.Errorf("LIST (SPECIAL-USE): %v", special)
	}

	lc := e.lineLogin(alice, alicePW)
	lines, st := lc.cmd(`LSUB "" "INBOX.%"`)
	got := strings.Join(lines, "\n")
	// RFC 3501 §6.3.9: the level % stops at, above a subscribed folder,
	// is returned with \Noselect.
	if !strings.HasPrefix(st, "OK") || !strings.Contains(got, `* LSUB (\Noselect \HasChildren) "." "INBOX.Projects"`) ||
		!strings.Contains(got, `* LSUB (\HasNoChildren \Sent) "." "INBOX.Sent"`) {
		t.Errorf(`LSUB "" "INBOX.%%": %s %s`, got, st)
	}
	lines, _ = lc.cmd(`LSUB "" "*"`)
	got = strings.Join(lines, "\n")
	if strings.Contains(got, `"INBOX.Projects"`) || strings.Contains(got, "INBOX.Projects.2025") || !strings.Contains(got, "INBOX.Projects.2026") ||
		!strings.Contains(got, `"." INBOX`) {
		t.Errorf(`LSUB "" "*": %s`, got)
	}
	if lines, st := lc.cmd(`LSUB "" ""`); len(lines) != 0 || !strings.HasPrefix(st, "OK") {
		t.Errorf(`LSUB "" "": %q %s`, lines, st)
	}
	lines, _ = lc.cmd(`LIST (SUBSCRIBED RECURSIVEMATCH) "" "INBOX.%"`)
	if got := strings.Join(lines, "\n"); !strings.Contains(got, `* LIST (\HasChildren) "." "INBOX.Projects" (CHILDINFO ("SUBSCRIBED"))`) {
		t.Errorf("LIST (SUBSCRIBED RECURSIVEMATCH) on the wire: %s", got)
	}
}

func TestListStatus(t *testing.T) {
	e := newEnv(t, options{})
	e.deliver(alice, "INBOX", testMessage("s1"))
	e.deliver(alice, "INBOX", testMessage("s2"))
	e.deliver(alice, "INBOX.Sent", testMessage("s3"))
	c := e.login(alice, alicePW)
	l := listMap(t, c, "", "*", &imap.ListOptions{ReturnStatus: &imap.StatusOptions{NumMessages: true, NumUnseen: true, UIDValidity: true, UIDNext: true}})
	if len(l) != 6 {
		t.Fatalf("LIST-STATUS: %v", l)
	}
	for name, d := range l {
		if d.Status == nil || d.Status.NumMessages == nil || d.Status.NumUnseen == nil || d.Status.UIDValidity == 0 {
			t.Fatalf("LIST-STATUS %s: %+v", name, d.Status)
		}
	}
	if st := l["INBOX"].Status; *st.NumMessages != 2 || *st.NumUnseen != 2 || st.UIDNext != 3 {
		t.Errorf("LIST-STATUS INBOX: %+v", st)
	}
	if st := l["INBOX.Sent"].Status; *st.NumMessages != 1 {
		t.Errorf("LIST-STATUS INBOX.Sent: %+v", st)
	}
	// The statuses agree with STATUS, which is now served from the
	// mirrors LIST-STATUS loaded.
	before := e.sandbox.TotalCalls()
	if st := mustStatus(t, c, "INBOX"); st.UIDValidity != l["INBOX"].Status.UIDValidity || *st.NumMessages != 2 {
		t.Errorf("STATUS INBOX: %+v", st)
	}
	if n := e.sandbox.TotalCalls() - before; n != 0 {
		t.Errorf("STATUS right after LIST-STATUS cost %d calls", n)
	}
}

// TestListSharesFolderList: the connections of a user share one folder
// list for a few seconds; the bridge's own changes show at once.
func TestListSharesFolderList(t *testing.T) {
	e := newEnv(t, options{})
	var conns []*imapclient.Client
	for range 5 {
		conns = append(conns, e.login(alice, alicePW))
	}
	before := e.sandbox.Calls("GetFolders")
	var wg sync.WaitGroup
	for _, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := c.List("", "*", nil).Collect(); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	listNames(t, conns[0], "", "*", nil)
	if n := e.sandbox.Calls("GetFolders") - before; n != 1 {
		t.Errorf("6 LISTs on 5 connections cost %d GetFolders; want 1", n)
	}
	// LSUB needs the subscription list: one more call, shared as well.
	lsubBefore := e.sandbox.Calls("GetFolders")
	listNames(t, conns[1], "", "*", &imap.ListOptions{SelectSubscribed: true})
	listNames(t, conns[2], "", "*", &imap.ListOptions{SelectSubscribed: true})
	if n := e.sandbox.Calls("GetFolders") - lsubBefore; n != 1 {
		t.Errorf("two LIST (SUBSCRIBED) cost %d GetFolders; want 1", n)
	}
	// A folder created on one connection is listed on another at once.
	wantOK(t, "CREATE", conns[3].Create("INBOX.Fresh", nil).Wait())
	if l := listMap(t, conns[4], "", "INBOX.%", nil); l["INBOX.Fresh"] == nil {
		t.Errorf("new folder not listed on another connection: %v", l)
	}
	wantOK(t, "SUBSCRIBE", conns[3].Subscribe("INBOX.Fresh").Wait())
	if l := listMap(t, conns[4], "", "INBOX.%", &imap.ListOptions{SelectSubscribed: true}); l["INBOX.Fresh"] == nil {
		t.Errorf("newly subscribed folder not in LIST (SUBSCRIBED) on another connection: %v", l)
	}
	// Another user has a list of their own.
	b := e.login(bob, bobPW)
	wantCode(t, "bob SELECT alice's folder", func() error { _, err := b.Select("INBOX.Fresh", nil).Wait(); return err }(), imap.ResponseCodeNonExistent)
	if l := listMap(t, b, "", "INBOX.%", nil); l["INBOX.Fresh"] != nil {
		t.Errorf("bob sees alice's folder")
	}
}

// TestListChildrenOnlyProvider: with a provider whose GetFolders lists
// direct children only, LIST still shows every nested folder and LSUB
// the subscribed ones however deep, and a whole-tree provider costs one
// GetFolders per listing once the bridge has seen it list a nested folder.
func TestListChildrenOnlyProvider(t *testing.T) {
	for _, childrenOnly := range []bool{true, false} {
		t.Run(map[bool]string{true: "children-only", false: "whole-tree"}[childrenOnly], func(t *testing.T) {
			e := newEnv(t, options{
				sandbox: func(o *sandbox.Options) { o.FoldersChildrenOnly = childrenOnly },
				engine:  func(c *mailstore.Config) { c.FolderWalk = true },
			})
			c := e.login(alice, alicePW)
			// Subscribed before it exists: CREATE then sets the
			// provider's flag (subscriptions.go).
			if err := c.Subscribe("INBOX.a.b.c").Wait(); err != nil {
				t.Fatal(err)
			}
			for _, f := range []string{"INBOX.a", "INBOX.a.b", "INBOX.a.b.c", "INBOX.z"} {
				if err := c.Create(f, nil).Wait(); err != nil {
					t.Fatalf("CREATE %s: %v", f, err)
				}
			}
			e.sandbox.ResetCalls()
			list, err := c.List("", "*", nil).Collect()
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]bool{}
			for _, l := range list {
				got[l.Mailbox] = true
			}
			if n := e.sandbox.Calls("GetFolders"); !childrenOnly && n != 1 {
				t.Errorf("a whole-tree provider's listing cost %d GetFolders; want 1 (a nested folder in the answer shows its shape)", n)
			}
			for _, want := range []string{"INBOX", "INBOX.a", "INBOX.a.b", "INBOX.a.b.c", "INBOX.z", "INBOX.Sent"} {
				if !got[want] {
					t.Errorf("LIST lacks %s: %v", want, got)
				}
			}
			sub, err := c.List("", "*", &imap.ListOptions{SelectSubscribed: true}).Collect()
			if err != nil {
				t.Fatal(err)
			}
			found := false
			for _, l := range sub {
				found = found || l.Mailbox == "INBOX.a.b.c"
			}
			if !found {
				t.Errorf("LIST (SUBSCRIBED) lacks INBOX.a.b.c: %+v", sub)
			}
		})
	}
}
