package imapbackend_test

import (
	"context"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/emersion/go-imap/v2"

	"github.com/directbridge/directbridge/imapbackend"
)

func flatEnv(t *testing.T) *env {
	return newEnv(t, options{cfg: func(c *imapbackend.Config) { c.Layout = imapbackend.LayoutFlat }})
}

// providerFolders is the user's folder list at the provider.
func (e *env) providerFolders(user string) []string {
	e.t.Helper()
	names, err := e.client.GetFolders(context.Background(), auth(user), "INBOX", false)
	if err != nil {
		e.t.Fatal(err)
	}
	slices.Sort(names)
	return names
}

// TestFlatLayout: the provider's folders below INBOX appear at the top
// level, folders created at the top level land below the provider's
// INBOX, and INBOX has no sub-folders.
func TestFlatLayout(t *testing.T) {
	e := flatEnv(t)
	e.deliver(alice, "INBOX.Sent", testMessage("sent"))
	c := e.login(alice, alicePW)

	ns, err := c.Namespace().Wait()
	if err != nil {
		t.Fatal(err)
	}
	if len(ns.Personal) != 1 || ns.Personal[0].Prefix != "" || ns.Personal[0].Delim != '.' {
		t.Fatalf("NAMESPACE personal %+v; want prefix \"\" delimiter \".\"", ns.Personal)
	}
	all := listMap(t, c, "", "*", nil)
	for name, attr := range map[string]imap.MailboxAttr{"Sent": imap.MailboxAttrSent, "Trash": imap.MailboxAttrTrash,
		"Drafts": imap.MailboxAttrDrafts, "Spam": imap.MailboxAttrJunk, "Templates": imap.MailboxAttrHasNoChildren,
		"INBOX": imap.MailboxAttrHasNoChildren} {
		if d := all[name]; d == nil || !hasAttr(d, attr) {
			t.Errorf("LIST * entry %q = %+v; want it with %s", name, d, attr)
		}
	}
	for name := range all {
		if strings.HasPrefix(strings.ToUpper(name), "INBOX.") {
			t.Errorf("LIST * shows %q in the flat layout", name)
		}
	}

	wantOK(t, "CREATE Work.Q3", c.Create("Work.Q3", nil).Wait())
	if f := e.providerFolders(alice); !slices.Contains(f, "INBOX.Work.Q3") || !slices.Contains(f, "INBOX.Work") {
		t.Fatalf("provider folders after CREATE Work.Q3: %v", f)
	}
	if top := listMap(t, c, "", "%", nil); top["Work"] == nil || !hasAttr(top["Work"], imap.MailboxAttrHasChildren) || top["Work.Q3"] != nil {
		t.Fatalf(`LIST "" %% = %v; want Work with \HasChildren, not Work.Q3`, top)
	}
	if sub := listMap(t, c, "Work.", "%", nil); sub["Work.Q3"] == nil || len(sub) != 1 {
		t.Fatalf(`LIST "Work." %% = %v; want Work.Q3`, sub)
	}
	wantCode(t, "CREATE INBOX.x", c.Create("INBOX.x", nil).Wait(), imap.ResponseCodeCannot)
	wantCode(t, "SELECT INBOX.Sent", func() error { _, err := c.Select("INBOX.Sent", nil).Wait(); return err }(),
		imap.ResponseCodeNonExistent)

	if d := mustSelectFolder(t, c, "Sent"); d.NumMessages != 1 {
		t.Fatalf("SELECT Sent: %d messages; want 1", d.NumMessages)
	}
	msg := testMessage("filed")
	if _, err := appendMsg(c, "Work.Q3", msg); err != nil {
		t.Fatal(err)
	}
	st, err := c.Status("Work.Q3", &imap.StatusOptions{NumMessages: true}).Wait()
	if err != nil || st.Mailbox != "Work.Q3" || *st.NumMessages != 1 {
		t.Fatalf("STATUS Work.Q3 = %+v, %v", st, err)
	}
	ls, err := c.List("", "Work*", &imap.ListOptions{ReturnStatus: &imap.StatusOptions{NumMessages: true}}).Collect()
	if err != nil {
		t.Fatal(err)
	}
	var statusNames []string
	for _, l := range ls {
		if l.Status != nil {
			statusNames = append(statusNames, l.Status.Mailbox)
		}
	}
	if !slices.Equal(statusNames, []string{"Work", "Work.Q3"}) {
		t.Fatalf("LIST-STATUS names %v; want [Work Work.Q3]", statusNames)
	}

	wantOK(t, "SUBSCRIBE", c.Subscribe("Work.Q3").Wait())
	wantOK(t, "RENAME", c.Rename("Work", "Job", nil).Wait())
	if f := e.providerFolders(alice); !slices.Contains(f, "INBOX.Job.Q3") || slices.Contains(f, "INBOX.Work") {
		t.Fatalf("provider folders after RENAME: %v", f)
	}
	if sub := listMap(t, c, "", "*", &imap.ListOptions{SelectSubscribed: true}); sub["Job.Q3"] == nil || sub["INBOX"] == nil {
		t.Fatalf("LIST (SUBSCRIBED) after RENAME: %v", sub)
	}
	wantOK(t, "DELETE", c.Delete("Job.Q3").Wait())
	wantCode(t, "DELETE Sent", c.Delete("Sent").Wait(), imap.ResponseCodeCannot)
}

// outlookFirstRun replays, with imaplib, what Outlook (2016 to 365) does
// on its first connection to an IMAP account whose root folder path is
// empty: it lists the folders, creates the special folders under the names
// it uses ("Sent Items", "Deleted Items", "Junk Email", "Drafts") and
// subscribes them, looks them up by name, then files a sent message with
// APPEND to "Sent Items" and deletes a message the way it does: UID COPY
// to "Deleted Items", UID STORE +FLAGS.SILENT (\Deleted), EXPUNGE.
const outlookFirstRun = `
import imaplib, sys

host, port, user, pw = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
q = lambda s: '"' + s + '"'
m = imaplib.IMAP4(host, port)
m.login(user, pw)
m.capability()
m.list('""', '""')
m.list('""', '*')
m.lsub('""', '*')
for name in ["Sent Items", "Deleted Items", "Junk Email", "Drafts"]:
    typ, data = m.create(q(name))
    print("create", name, typ)
    typ, data = m.subscribe(q(name))
    print("subscribe", name, typ)
    typ, data = m.list('""', q(name))
    print("listed", name, typ, b" ".join(d for d in data if d).decode())
    typ, data = m.status(q(name), "(MESSAGES UNSEEN UIDNEXT)")
    print("status", name, typ)
typ, data = m.select("Inbox")
print("select", typ, data[0].decode())
msg = b"From: alice@direct.example\r\nTo: bob@direct.example\r\nSubject: sent by outlook\r\nMessage-ID: <outlook-sent@example>\r\n\r\nbody\r\n"
typ, data = m.append(q("Sent Items"), r"(\Seen)", None, msg)
print("append", typ)
typ, data = m.uid("SEARCH", None, "ALL")
uid = data[0].split()[0].decode()
typ, data = m.uid("COPY", uid, q("Deleted Items"))
print("copy", typ)
typ, data = m.uid("STORE", uid, "+FLAGS.SILENT", r"(\Deleted)")
print("store", typ)
typ, data = m.expunge()
print("expunge", typ)
typ, data = m.list('""', '*')
for d in data:
    print("folder", d.decode())
m.logout()
`

// replayOutlook runs outlookFirstRun against e after delivering two
// messages, checks what holds in both layouts (the lines in want, no
// provider folder made, the sent copy in INBOX.Sent, the deleted message
// once in INBOX.Trash) and returns imaplib's output.
func replayOutlook(t *testing.T, e *env, want ...string) string {
	t.Helper()
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 not installed")
	}
	e.deliver(alice, "INBOX", testMessage("to-delete"))
	e.deliver(alice, "INBOX", testMessage("to-keep"))
	before := e.providerFolders(alice)
	host, port, _ := strings.Cut(e.addr, ":")
	out, err := exec.Command("python3", "-c", outlookFirstRun, host, port, alice, alicePW).CombinedOutput()
	text := string(out)
	if err != nil {
		t.Fatalf("imaplib session failed: %v\n%s", err, text)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("imaplib output:\n%s", text)
		}
	})
	for _, w := range want {
		if !strings.Contains(text, w) {
			t.Errorf("imaplib output lacks %q", w)
		}
	}
	if after := e.providerFolders(alice); !slices.Equal(after, before) {
		t.Errorf("provider folders changed: %v, then %v", before, after)
	}
	if n := e.count(alice, "INBOX.Sent"); n != 1 {
		t.Errorf("INBOX.Sent holds %d messages; want the appended one", n)
	}
	if n := e.count(alice, "INBOX.Trash"); n != 1 {
		t.Errorf("INBOX.Trash holds %d messages; want the deleted one once", n)
	}
	return text
}

// TestOutlookFirstRunInbox: in the INBOX layout, with its root folder
// path left empty, Outlook's first run gets its special folders too (the
// aliases are taken at the top level) and makes no folder.
func TestOutlookFirstRunInbox(t *testing.T) {
	replayOutlook(t, newEnv(t, options{}),
		"create Sent Items OK", "create Deleted Items OK", "create Junk Email OK", "append OK", "expunge OK")
}

// TestOutlookFirstRunFlat: Outlook's first run in the flat layout makes
// no duplicate special folders: its names stand for the provider's, the
// sent copy lands in INBOX.Sent, the deleted message once in INBOX.Trash.
func TestOutlookFirstRunFlat(t *testing.T) {
	e := flatEnv(t)
	text := replayOutlook(t, e,
		"create Sent Items OK", "subscribe Sent Items OK", `listed Sent Items OK (\HasNoChildren \Sent) "." "Sent Items"`,
		"status Sent Items OK", "create Deleted Items OK", "status Deleted Items OK", "create Junk Email OK",
		"create Drafts NO", "subscribe Drafts OK", "select OK 2", "append OK", "copy OK", "store OK", "expunge OK")
	special := map[string]int{}
	for _, line := range strings.Split(text, "\n") {
		if !strings.HasPrefix(line, "folder ") {
			continue
		}
		for _, a := range []string{`\Sent`, `\Trash`, `\Junk`, `\Drafts`} {
			if strings.Contains(line, a) {
				special[a]++
			}
		}
		for _, alias := range []string{"Sent Items", "Deleted Items", "Junk Email"} {
			if strings.Contains(line, alias) {
				t.Errorf("LIST * shows the alias: %s", line)
			}
		}
	}
	for _, a := range []string{`\Sent`, `\Trash`, `\Junk`, `\Drafts`} {
		if special[a] != 1 {
			t.Errorf("LIST * shows %d folders marked %s; want 1", special[a], a)
		}
	}
	if n := e.count(alice, "INBOX"); n != 1 {
		t.Errorf("INBOX holds %d messages; want 1", n)
	}
}

// TestSpecialAliasEdges: an alias stands for its special folder only
// while no folder has the name and the special folder exists; a folder
// that would make a level named like an alias is refused; LIST with a
// reference finds an alias as MatchList would; in the flat layout only
// INBOX itself is case-insensitive in patterns.
func TestSpecialAliasEdges(t *testing.T) {
	e := flatEnv(t)
	c := e.login(alice, alicePW)
	wantCode(t, "CREATE Sent Items.Old", c.Create("Sent Items.Old", nil).Wait(), imap.ResponseCodeCannot)
	wantCode(t, "CREATE Sent", c.Create("Sent", nil).Wait(), imap.ResponseCodeAlreadyExists)
	wantOK(t, "CREATE Projects", c.Create("Projects", nil).Wait())
	wantCode(t, "RENAME to Junk.x", c.Rename("Projects", "Junk.x", nil).Wait(), imap.ResponseCodeCannot)
	if f := e.providerFolders(alice); slices.Contains(f, "INBOX.Sent Items") || slices.Contains(f, "INBOX.Junk") {
		t.Fatalf("an alias level was made at the provider: %v", f)
	}
	// "Deleted Items" names the Trash while there is one; without it, it
	// is an ordinary name.
	if l := listMap(t, c, "", "Deleted Items", nil); l["Deleted Items"] == nil || !hasAttr(l["Deleted Items"], imap.MailboxAttrTrash) {
		t.Fatalf(`LIST "" "Deleted Items" = %v; want the alias with \Trash`, l)
	}
	ls, err := c.List("", "Deleted Items", &imap.ListOptions{ReturnStatus: &imap.StatusOptions{NumMessages: true}}).Collect()
	if err != nil || len(ls) != 1 || ls[0].Status == nil || ls[0].Status.Mailbox != "Deleted Items" {
		t.Fatalf(`LIST "" "Deleted Items" RETURN (STATUS): %+v, %v; want the alias's STATUS`, ls, err)
	}
	wantOK(t, "DELETE Trash", c.Delete("Trash").Wait())
	wantOK(t, "CREATE Deleted Items", c.Create("Deleted Items", nil).Wait())
	if f := e.providerFolders(alice); !slices.Contains(f, "INBOX.Deleted Items") {
		t.Fatalf("CREATE Deleted Items without a Trash made no folder: %v", f)
	}
	mustSelectFolder(t, c, "Deleted Items")

	// Patterns: INBOX in any case, other names as written.
	wantOK(t, "CREATE Inboxes", c.Create("Inboxes", nil).Wait())
	if l := listMap(t, c, "", "Inbox*", nil); l["INBOX"] == nil || l["Inboxes"] == nil {
		t.Fatalf(`LIST "" "Inbox*" = %v; want INBOX and Inboxes`, l)
	}
	if l := listMap(t, c, "", "inboxes", nil); l["Inboxes"] != nil {
		t.Fatalf(`LIST "" "inboxes" = %v; want nothing (only INBOX ignores case)`, l)
	}

	// A reference without its delimiter, as MatchList reads it.
	i := newEnv(t, options{})
	ic := i.login(alice, alicePW)
	if l := listMap(t, ic, "INBOX", "Sent Items", nil); l["INBOX.Sent Items"] == nil {
		t.Fatalf(`LIST "INBOX" "Sent Items" = %v; want the alias INBOX.Sent Items`, l)
	}
}
