package fakeprovider_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/directbridge/directbridge/internal/fakeprovider"
	"github.com/directbridge/directbridge/upstream"
	"github.com/directbridge/directbridge/upstream/directapi"
)

const (
	alice, alicePW = "alice@direct.example", "alice-pw"
	bob, bobPW     = "bob@direct.example", "bob-pw"
)

var (
	aliceAuth = upstream.Auth{Username: alice, Password: directapi.Secret(alicePW)}
	bobAuth   = upstream.Auth{Username: bob, Password: directapi.Secret(bobPW)}
	ctx       = context.Background()
)

func newProvider(t *testing.T) *fakeprovider.Provider {
	t.Helper()
	return fakeprovider.New(fakeprovider.Options{Users: map[string]string{alice: alicePW, bob: bobPW}})
}

func msg(n int) []byte {
	return fmt.Appendf(nil, "From: bob@direct.example\r\nTo: alice@direct.example\r\nSubject: message %d\r\n"+
		"Message-ID: <m%d@direct.example>\r\nDate: Mon, 02 Jan 2026 15:04:05 +0000\r\n\r\nbody %d\r\n", n, n, n)
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func wantClass(t *testing.T, err, class error) {
	t.Helper()
	if !errors.Is(err, class) {
		t.Fatalf("error %v; want %v", err, class)
	}
	if upstream.Detail(err) == nil {
		t.Fatalf("error %v is not an *upstream.Error", err)
	}
}

func uids(t *testing.T, p *fakeprovider.Provider, folder string) []int64 {
	t.Helper()
	u, err := p.UIDs(ctx, aliceAuth, folder)
	must(t, err)
	return u
}

func TestNewMailboxHasTheSandboxFolders(t *testing.T) {
	p := newProvider(t)
	got, err := p.Folders(ctx, aliceAuth, "INBOX", false)
	must(t, err)
	want := []string{"INBOX.Drafts", "INBOX.Sent", "INBOX.Spam", "INBOX.Templates", "INBOX.Trash"}
	if !slices.Equal(got, want) {
		t.Fatalf("Folders = %v; want %v", got, want)
	}
}

func TestCredentials(t *testing.T) {
	p := newProvider(t)
	must(t, p.CheckCredentials(ctx, aliceAuth))
	wrong := upstream.Auth{Username: alice, Password: "nope"}
	wantClass(t, p.CheckCredentials(ctx, wrong), upstream.ErrAuth)
	_, err := p.UIDs(ctx, upstream.Auth{Username: "carol@direct.example", Password: "x"}, "INBOX")
	wantClass(t, err, upstream.ErrAuth)
	// Addresses compare without regard to case, as the sandbox's do.
	must(t, p.CheckCredentials(ctx, upstream.Auth{Username: "Alice@Direct.Example", Password: alicePW}))
	wantClass(t, p.CheckTuser(ctx, directapi.AuthenticationWithTuser{Username: alice, Password: alicePW, DirectAddr: alice}), upstream.ErrAuth)
}

func TestSaveListsUnreadInOrder(t *testing.T) {
	p := newProvider(t)
	must(t, p.Save(ctx, aliceAuth, "INBOX", [][]byte{msg(1), msg(2)}))
	must(t, p.Save(ctx, aliceAuth, "INBOX", [][]byte{msg(3)}))
	if got := uids(t, p, "INBOX"); !slices.Equal(got, []int64{1, 2, 3}) {
		t.Fatalf("UIDs = %v", got)
	}
	n, _ := p.Count(ctx, aliceAuth, "INBOX")
	un, _ := p.UnreadCount(ctx, aliceAuth, "INBOX")
	if n != 3 || un != 3 {
		t.Fatalf("Count %d, UnreadCount %d; want 3, 3", n, un)
	}
	raws, err := p.Raw(ctx, aliceAuth, "INBOX", []int64{2})
	must(t, err)
	if string(raws[2]) != string(msg(2)) {
		t.Fatalf("Raw(2) = %q", raws[2])
	}
	must(t, p.Save(ctx, aliceAuth, "INBOX", nil)) // no request at all, as the adapter does
	wantClass(t, p.Save(ctx, aliceAuth, "INBOX", [][]byte{msg(4), {}}), upstream.ErrRefused)
	wantClass(t, p.Save(ctx, aliceAuth, "INBOX.Nope", [][]byte{msg(4)}), upstream.ErrRefused)
	if got := uids(t, p, "INBOX"); len(got) != 3 {
		t.Fatalf("a refused Save saved: %v", got)
	}
}

// TestChangesRefuseTheWholeRequest: one missing UID refuses SetRead,
// Copy, Move and Delete as a whole, as the provider's "other error"
// does; nothing is half done.
func TestChangesRefuseTheWholeRequest(t *testing.T) {
	p := newProvider(t)
	must(t, p.Save(ctx, aliceAuth, "INBOX", [][]byte{msg(1), msg(2)}))
	before := p.Journal()
	calls := map[string]func() error{
		"SetRead": func() error { return p.SetRead(ctx, aliceAuth, "INBOX", []int64{1, 9}, true) },
		"Copy":    func() error { return p.Copy(ctx, aliceAuth, "INBOX", "INBOX.Drafts", []int64{1, 9}) },
		"Move":    func() error { return p.Move(ctx, aliceAuth, "INBOX", "INBOX.Drafts", []int64{2, 9}) },
		"Delete":  func() error { return p.Delete(ctx, aliceAuth, "INBOX", []int64{1, 9}, false) },
		"Forever": func() error { return p.Delete(ctx, aliceAuth, "INBOX", []int64{1, 9}, true) },
	}
	for name, call := range calls {
		err := call()
		wantClass(t, err, upstream.ErrRefused)
		if !strings.Contains(upstream.ProviderMessage(err), "no message with uid 9") {
			t.Errorf("%s: provider text %q", name, upstream.ProviderMessage(err))
		}
	}
	if len(p.Journal()) != len(before) {
		t.Fatalf("refused changes were journaled: %v", p.Journal()[len(before):])
	}
	s, _ := p.Snapshot(alice, "INBOX")
	if !slices.Equal(s.UIDs(), []int64{1, 2}) || s.Messages[0].Read || s.Messages[1].Read {
		t.Fatalf("refused changes changed INBOX: %+v", s)
	}
}

func TestReadsLeaveOutMissingUIDs(t *testing.T) {
	p := newProvider(t)
	must(t, p.Save(ctx, aliceAuth, "INBOX", [][]byte{msg(1), msg(2), msg(3)}))
	raws, err := p.Raw(ctx, aliceAuth, "INBOX", []int64{3, 1, 7})
	must(t, err)
	if len(raws) != 2 || raws[1] == nil || raws[3] == nil {
		t.Fatalf("Raw = %v", raws)
	}
	ds, err := p.Messages(ctx, aliceAuth, "INBOX", []int64{2, 8})
	must(t, err)
	if len(ds) != 1 || ds[0].UID != 2 || ds[0].MsgNum != 2 || !strings.Contains(ds[0].Body, "body 2") {
		t.Fatalf("Messages = %+v", ds)
	}
	// No UIDs: the adapter sends no request and answers nothing.
	if raws, err := p.Raw(ctx, aliceAuth, "INBOX", nil); err != nil || len(raws) != 0 {
		t.Fatalf("Raw(nil) = %v, %v", raws, err)
	}
	if ds, err := p.Messages(ctx, aliceAuth, "INBOX.Nope", nil); err != nil || len(ds) != 0 {
		t.Fatalf("Messages(nil) = %v, %v", ds, err)
	}
}

func TestCopyMoveDelete(t *testing.T) {
	p := newProvider(t)
	must(t, p.CreateFolder(ctx, aliceAuth, "INBOX.Work"))
	must(t, p.Save(ctx, aliceAuth, "INBOX", [][]byte{msg(1), msg(2), msg(3)}))
	must(t, p.SetRead(ctx, aliceAuth, "INBOX", []int64{2}, true))

	// New UIDs follow the source UIDs' order; the read state goes along.
	must(t, p.Copy(ctx, aliceAuth, "INBOX", "INBOX.Work", []int64{3, 2}))
	w, _ := p.Snapshot(alice, "INBOX.Work")
	if !slices.Equal(w.UIDs(), []int64{1, 2}) || string(w.Messages[0].Raw) != string(msg(2)) || !w.Messages[0].Read || w.Messages[1].Read {
		t.Fatalf("after Copy, INBOX.Work = %+v", w)
	}
	// Copying into the same folder duplicates; moving there is refused.
	must(t, p.Copy(ctx, aliceAuth, "INBOX", "INBOX", []int64{1}))
	wantClass(t, p.Move(ctx, aliceAuth, "INBOX", "INBOX", []int64{1}), upstream.ErrRefused)
	wantClass(t, p.Move(ctx, aliceAuth, "INBOX", "INBOX.Nope", []int64{1}), upstream.ErrRefused)

	must(t, p.Move(ctx, aliceAuth, "INBOX", "INBOX.Work", []int64{1}))
	if got := uids(t, p, "INBOX"); !slices.Equal(got, []int64{2, 3, 4}) {
		t.Fatalf("after Move, INBOX = %v", got)
	}
	must(t, p.Delete(ctx, aliceAuth, "INBOX", []int64{2}, false))
	must(t, p.Delete(ctx, aliceAuth, "INBOX", []int64{3}, true))
	if got := uids(t, p, "INBOX"); !slices.Equal(got, []int64{4}) {
		t.Fatalf("after Delete, INBOX = %v", got)
	}
	tr, _ := p.Snapshot(alice, "INBOX.Trash")
	if len(tr.Messages) != 1 || string(tr.Messages[0].Raw) != string(msg(2)) || !tr.Messages[0].Read {
		t.Fatalf("INBOX.Trash = %+v", tr)
	}
	// In the Trash, deleting removes for good either way.
	must(t, p.Delete(ctx, aliceAuth, "INBOX.Trash", tr.UIDs(), false))
	if got := uids(t, p, "INBOX.Trash"); len(got) != 0 {
		t.Fatalf("INBOX.Trash after Delete = %v", got)
	}
	j := p.Journal()
	last := j[len(j)-1]
	if last.Op != "Delete" || !last.Forever || last.Folder != "INBOX.Trash" {
		t.Fatalf("last event %+v", last)
	}
}

// TestUIDsNeverReused: not after a removal, not in a folder deleted and
// made again, not in one renamed onto a name that had UIDs.
func TestUIDsNeverReused(t *testing.T) {
	p := newProvider(t)
	must(t, p.CreateFolder(ctx, aliceAuth, "INBOX.A"))
	must(t, p.Save(ctx, aliceAuth, "INBOX.A", [][]byte{msg(1), msg(2)}))
	must(t, p.Remove(alice, "INBOX.A", 2))
	uid, err := p.Deliver(alice, "INBOX.A", msg(3))
	must(t, err)
	if uid != 3 {
		t.Fatalf("Deliver after a removal got UID %d; want 3", uid)
	}
	must(t, p.DeleteFolder(ctx, aliceAuth, "INBOX.A"))
	must(t, p.CreateFolder(ctx, aliceAuth, "INBOX.A"))
	must(t, p.Save(ctx, aliceAuth, "INBOX.A", [][]byte{msg(4)}))
	if got := uids(t, p, "INBOX.A"); !slices.Equal(got, []int64{4}) {
		t.Fatalf("a folder made again reused UIDs: %v", got)
	}
	must(t, p.CreateFolder(ctx, aliceAuth, "INBOX.B"))
	must(t, p.RenameFolder(ctx, aliceAuth, "INBOX.A", "INBOX.C"))
	if got := uids(t, p, "INBOX.C"); !slices.Equal(got, []int64{4}) {
		t.Fatalf("renamed folder has UIDs %v; want its own", got)
	}
	must(t, p.RenameFolder(ctx, aliceAuth, "INBOX.C", "INBOX.A"))
	must(t, p.Save(ctx, aliceAuth, "INBOX.A", [][]byte{msg(5)}))
	if got := uids(t, p, "INBOX.A"); !slices.Equal(got, []int64{4, 5}) {
		t.Fatalf("INBOX.A = %v", got)
	}
}

func TestFolderRules(t *testing.T) {
	p := newProvider(t)
	for _, name := range []string{"INBOX.Sent", "INBOX", "Work", "INBOX..x", "INBOX.Trash"} {
		wantClass(t, p.CreateFolder(ctx, aliceAuth, name), upstream.ErrRefused)
	}
	wantClass(t, p.DeleteFolder(ctx, aliceAuth, "INBOX.Drafts"), upstream.ErrRefused)
	wantClass(t, p.RenameFolder(ctx, aliceAuth, "INBOX.Spam", "INBOX.Junk"), upstream.ErrRefused)
	must(t, p.CreateFolder(ctx, aliceAuth, "INBOX.Work.Q3"))
	must(t, p.SetSubscribed(ctx, aliceAuth, []string{"INBOX.Work"}, false))
	wantClass(t, p.SetSubscribed(ctx, aliceAuth, []string{"INBOX.Work.Q3", "INBOX.Nope"}, false), upstream.ErrRefused)
	all, _ := p.Folders(ctx, aliceAuth, "INBOX.Work", false)
	sub, _ := p.Folders(ctx, aliceAuth, "INBOX", true)
	if !slices.Equal(all, []string{"INBOX.Work.Q3"}) || slices.Contains(sub, "INBOX.Work") || !slices.Contains(sub, "INBOX.Work.Q3") {
		t.Fatalf("Folders: under INBOX.Work %v, subscribed %v", all, sub)
	}
	// Deleting a folder removes its sub-folders.
	must(t, p.DeleteFolder(ctx, aliceAuth, "INBOX.Work"))
	if names, _ := p.FolderNames(alice); slices.Contains(names, "INBOX.Work.Q3") {
		t.Fatalf("sub-folder survived: %v", names)
	}
	// The Trash is not reserved, and Delete makes it again.
	must(t, p.DeleteFolder(ctx, aliceAuth, "INBOX.Trash"))
	must(t, p.Save(ctx, aliceAuth, "INBOX", [][]byte{msg(1)}))
	must(t, p.Delete(ctx, aliceAuth, "INBOX", []int64{1}, false))
	if got := uids(t, p, "INBOX.Trash"); len(got) != 1 {
		t.Fatalf("INBOX.Trash = %v", got)
	}
}

// TestMetadata: the MessageDetail fields the sandbox fills.
func TestMetadata(t *testing.T) {
	now := time.Date(2026, 3, 4, 5, 6, 7, 891_234_567, time.UTC)
	clock := now
	p := fakeprovider.New(fakeprovider.Options{Users: map[string]string{alice: alicePW}, Now: func() time.Time { return clock }})
	must(t, p.Save(ctx, aliceAuth, "INBOX", [][]byte{msg(1)}))
	clock = now.Add(time.Hour)
	must(t, p.Save(ctx, aliceAuth, "INBOX", [][]byte{msg(2)}))
	must(t, p.SetRead(ctx, aliceAuth, "INBOX", []int64{1}, true))

	meta, err := p.Metadata(ctx, aliceAuth, "INBOX")
	must(t, err)
	if len(meta) != 2 {
		t.Fatalf("Metadata = %+v", meta)
	}
	d := meta[1]
	if d.UID != 2 || d.MsgNum != 2 || d.Folder != "INBOX" || d.MsgID != "<m2@direct.example>" || d.Subject != "message 2" ||
		d.Size != len(msg(2)) || d.Body != "" || !d.ReceivedDate.Equal(now.Add(time.Hour).Truncate(time.Millisecond)) ||
		d.SentDate.IsZero() || len(d.Headers) == 0 || d.Sender == "" {
		t.Fatalf("metadata of UID 2 = %+v", d)
	}
	un, err := p.Unread(ctx, aliceAuth, "INBOX")
	must(t, err)
	if len(un) != 1 || un[0].UID != 2 || !strings.Contains(un[0].Body, "body 2") {
		t.Fatalf("Unread = %+v", un)
	}
	got, err := p.MetadataReceived(ctx, aliceAuth, "INBOX", now.Add(time.Minute), now.Add(time.Hour))
	must(t, err)
	if len(got) != 1 || got[0].UID != 2 {
		t.Fatalf("MetadataReceived = %+v", got)
	}
}

func TestSend(t *testing.T) {
	p := newProvider(t)
	id, err := p.Send(ctx, aliceAuth, "", directapi.MessageWithHeader{Message: directapi.Message{Sender: alice, Subject: "hi", Body: "hello",
		Recipients: []directapi.Recipient{{Email: bob, Type: directapi.TO}, {Email: "x@elsewhere.example", Type: directapi.CC}}}}, false)
	must(t, err)
	sent, _ := p.Snapshot(alice, "INBOX.Sent")
	in, _ := p.Snapshot(bob, "INBOX")
	if len(sent.Messages) != 1 || len(in.Messages) != 1 || !strings.Contains(string(in.Messages[0].Raw), id) {
		t.Fatalf("Sent %+v, bob's INBOX %+v", sent, in)
	}
	logs, err := p.Status(ctx, aliceAuth, []string{"<" + id + ">"})
	must(t, err)
	if len(logs) != 2 || logs[0].Status != directapi.StatusDelivered || logs[1].Status != directapi.StatusWaiting {
		t.Fatalf("Status = %+v", logs)
	}
	_, err = p.Send(ctx, aliceAuth, "", directapi.MessageWithHeader{Message: directapi.Message{Sender: bob,
		Recipients: []directapi.Recipient{{Email: bob, Type: directapi.TO}}}}, false)
	wantClass(t, err, upstream.ErrAddress)
	_, err = p.Forward(ctx, aliceAuth, "INBOX.Sent", []int64{1}, []directapi.Recipient{{Email: bob, Type: directapi.TO}})
	must(t, err)
	if in, _ := p.Snapshot(bob, "INBOX"); len(in.Messages) != 2 {
		t.Fatalf("Forward did not deliver: %+v", in)
	}
}

// TestConcurrentSaves: UIDs stay unique under concurrent changes (run
// with -race).
func TestConcurrentSaves(t *testing.T) {
	p := newProvider(t)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 25 {
				if err := p.Save(ctx, aliceAuth, "INBOX", [][]byte{msg(g*100 + i)}); err != nil {
					t.Error(err)
				}
				p.Deliver(alice, "INBOX", msg(g*1000+i))
				p.UIDs(ctx, aliceAuth, "INBOX")
			}
		}()
	}
	wg.Wait()
	got := uids(t, p, "INBOX")
	if len(got) != 400 || got[0] != 1 || got[399] != 400 {
		t.Fatalf("%d UIDs from %d to %d", len(got), got[0], got[len(got)-1])
	}
	if n := p.Calls("Save"); n != 200 {
		t.Fatalf("Calls(Save) = %d", n)
	}
}
