package mailstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"

	"github.com/directbridge/directbridge/internal/state"
	"github.com/directbridge/directbridge/upstream"
	"github.com/directbridge/directbridge/upstream/directapi"
)

// folderProvider is a fake upstream.Provider holding one folder in
// memory: enough for the store's refresh, metadata and APPEND paths.
// Hold, when set, makes the next UIDs call answer with the folder as it
// was when called, but only once Hold is closed: a refresh whose answer
// was read before a command changed the mirror.
type folderProvider struct {
	upstream.Provider
	mu     sync.Mutex
	next   int64
	raw    map[int64][]byte
	read   map[int64]bool
	calls  map[string]int
	hold   chan struct{}
	called chan struct{} // closed when a held UIDs call has read the folder
}

func newFolderProvider(n int) *folderProvider {
	p := &folderProvider{raw: map[int64][]byte{}, read: map[int64]bool{}, calls: map[string]int{}}
	for i := 0; i < n; i++ {
		p.add(fmt.Sprintf("Message-ID: <m%d@example.org>\r\nSubject: s\r\n\r\nbody %d\r\n", i, i))
	}
	return p
}

func (p *folderProvider) add(raw string) int64 {
	p.next++
	p.raw[p.next] = []byte(raw)
	return p.next
}

func (p *folderProvider) count(op string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.calls[op]
}

func (p *folderProvider) UIDs(_ context.Context, _ upstream.Auth, _ string) ([]int64, error) {
	p.mu.Lock()
	p.calls["UIDs"]++
	var out []int64
	for u := range p.raw {
		out = append(out, u)
	}
	hold, called := p.hold, p.called
	p.hold = nil
	p.mu.Unlock()
	if hold != nil {
		close(called)
		<-hold
	}
	slices.Sort(out)
	return out, nil
}

func (p *folderProvider) UnreadCount(_ context.Context, _ upstream.Auth, _ string) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls["UnreadCount"]++
	n := 0
	for u := range p.raw {
		if !p.read[u] {
			n++
		}
	}
	return n, nil
}

func (p *folderProvider) Unread(_ context.Context, _ upstream.Auth, _ string) ([]directapi.MessageDetail, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls["Unread"]++
	var out []directapi.MessageDetail
	for u := range p.raw {
		if !p.read[u] {
			out = append(out, directapi.MessageDetail{UID: u, Size: len(p.raw[u])})
		}
	}
	return out, nil
}

func (p *folderProvider) Metadata(_ context.Context, _ upstream.Auth, _ string) ([]directapi.MessageDetail, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls["Metadata"]++
	var out []directapi.MessageDetail
	for u, raw := range p.raw {
		out = append(out, directapi.MessageDetail{UID: u, Size: len(raw), MsgID: fmt.Sprintf("<m%d@example.org>", u-1)})
	}
	return out, nil
}

// MetadataReceived lists every message (the fake keeps no dates), with
// the Message-ID its bytes carry.
func (p *folderProvider) MetadataReceived(_ context.Context, _ upstream.Auth, _ string, _, _ time.Time) ([]directapi.MessageDetail, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls["MetadataReceived"]++
	var out []directapi.MessageDetail
	for u, raw := range p.raw {
		d := directapi.MessageDetail{UID: u, Size: len(raw)}
		for _, line := range strings.Split(string(raw), "\r\n") {
			if v, ok := strings.CutPrefix(line, "Message-ID: "); ok {
				d.MsgID = v
			}
		}
		out = append(out, d)
	}
	return out, nil
}

func (p *folderProvider) SetRead(_ context.Context, _ upstream.Auth, _ string, uids []int64, read bool) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls["SetRead"]++
	for _, u := range uids {
		p.read[u] = read
	}
	return nil
}

func (p *folderProvider) isRead(uid int64) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.read[uid]
}

func (p *folderProvider) Save(_ context.Context, _ upstream.Auth, _ string, raws [][]byte) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls["Save"]++
	for _, r := range raws {
		p.add(string(r))
	}
	return nil
}

func (p *folderProvider) Raw(_ context.Context, _ upstream.Auth, _ string, uids []int64) (map[int64][]byte, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls["Raw"]++
	out := map[int64][]byte{}
	for _, u := range uids {
		if r, ok := p.raw[u]; ok {
			out[u] = r
		}
	}
	return out, nil
}

func (p *folderProvider) Delete(_ context.Context, _ upstream.Auth, _ string, uids []int64, _ bool) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls["Delete"]++
	for _, u := range uids {
		delete(p.raw, u)
	}
	return nil
}

// newTestStore is a Store over p with a real state store.
func newTestStore(t *testing.T, p upstream.Provider) *Store {
	t.Helper()
	state, err := state.OpenStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { state.Close() })
	return New(Config{Provider: p, State: state, PollInterval: time.Hour, CacheBytes: 1 << 20})
}

var testAuth = directapi.Authentication{Username: "alice@direct.example", Password: "x"}

// heldRefresh starts a refresh of f whose provider answer is read at
// once but returned only when the returned release is called.
func heldRefresh(t *testing.T, p *folderProvider, f *Folder) (release func() error) {
	t.Helper()
	p.mu.Lock()
	p.hold, p.called = make(chan struct{}), make(chan struct{})
	hold, called := p.hold, p.called
	p.mu.Unlock()
	done := make(chan error, 1)
	go func() { done <- f.refresh(context.Background(), time.Now(), false) }()
	select {
	case <-called:
	case <-time.After(5 * time.Second):
		t.Fatal("the refresh never asked for the UIDs")
	}
	return func() error {
		close(hold)
		return <-done
	}
}

// TestNoLockAcrossProviderCalls: while a refresh waits for the provider,
// every accessor a command uses answers at once.
func TestNoLockAcrossProviderCalls(t *testing.T) {
	p := newFolderProvider(3)
	st := newTestStore(t, p)
	ctx := context.Background()
	f, err := st.Acquire(ctx, testAuth, "INBOX")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Release(f)
	release := heldRefresh(t, p, f)
	answered := make(chan struct{})
	go func() {
		f.Validity()
		f.Mailbox().UIDs()
		f.isLive(1)
		f.show([]shown{{UID: 1, SetKept: true, Kept: []imap.Flag{imap.FlagFlagged}}}, nil)
		f.Handles([]imap.UID{1, 2})
		close(answered)
	}()
	select {
	case <-answered:
	case <-time.After(5 * time.Second):
		t.Fatal("an accessor waited for the provider")
	}
	if err := release(); err != nil {
		t.Fatal(err)
	}
}

// TestRefreshKeepsLaterChanges: a refresh whose answer was read before a
// command removed a message and changed flags does not bring the message
// back nor undo the flags.
func TestRefreshKeepsLaterChanges(t *testing.T) {
	p := newFolderProvider(3)
	st := newTestStore(t, p)
	ctx := context.Background()
	f, err := st.Acquire(ctx, testAuth, "INBOX")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Release(f)
	release := heldRefresh(t, p, f)

	// Meanwhile a command expunges UID 2 and marks UID 3 read.
	if err := p.Delete(ctx, testAuth, "INBOX", []int64{2}, true); err != nil {
		t.Fatal(err)
	}
	f.remove(ctx, f.Validity(), []imap.UID{2})
	seen := true
	p.SetRead(ctx, testAuth, "INBOX", []int64{3}, true)
	f.show([]shown{{UID: 3, Seen: &seen}}, nil)

	if err := release(); err != nil {
		t.Fatal(err)
	}
	mb := f.Mailbox()
	if got := mb.UIDs(); !slices.Equal(got, []imap.UID{1, 3}) {
		t.Fatalf("UIDs after the older refresh: %v; want [1 3]", got)
	}
	if fl, _ := mb.Flags(3); !HasSeen(fl) {
		t.Fatalf("UID 3 lost \\Seen to the older refresh: %v", fl)
	}
	// A refresh started afterwards agrees with the provider.
	if err := f.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if got := mb.UIDs(); !slices.Equal(got, []imap.UID{1, 3}) {
		t.Fatalf("UIDs after a new refresh: %v; want [1 3]", got)
	}
}

// TestAppendFindsUID: an APPEND to a folder costs one Save, and the UID
// it answers comes from one light refresh (GetUIDs only), with the
// requested flags in place.
func TestAppendFindsUID(t *testing.T) {
	p := newFolderProvider(2)
	st := newTestStore(t, p)
	ctx := context.Background()
	f, err := st.Acquire(ctx, testAuth, "INBOX")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Release(f)
	uidsBefore := p.count("UIDs")
	raw := []byte("Message-ID: <new@example.org>\r\nSubject: n\r\n\r\nnew\r\n")
	uid, err := f.Append(ctx, testAuth, raw, "<new@example.org>", true, []imap.Flag{imap.FlagFlagged}, true)
	if err != nil {
		t.Fatal(err)
	}
	if uid != 3 {
		t.Fatalf("APPEND answered UID %d; want 3", uid)
	}
	if n := p.count("Save"); n != 1 {
		t.Errorf("Save calls: %d; want 1", n)
	}
	if n := p.count("UIDs") - uidsBefore; n != 1 {
		t.Errorf("UIDs calls to find the UID: %d; want 1", n)
	}
	fl, ok := f.Mailbox().Flags(3)
	if !ok || !HasSeen(fl) || !slices.Contains(fl, imap.FlagFlagged) {
		t.Fatalf("flags of the appended message: %v (known %v); want \\Seen and \\Flagged", fl, ok)
	}
	// \Seen goes to the provider with the settle timer, in one call for
	// all messages appended meanwhile.
	if p.isRead(3) {
		t.Error("\\Seen was sent at once; want it batched after appendSettle")
	}
	deadline := time.Now().Add(5 * appendSettle)
	for !p.isRead(3) && time.Now().Before(deadline) {
		time.Sleep(appendSettle / 10)
	}
	if !p.isRead(3) {
		t.Error("\\Seen was not set at the provider")
	}
	// Its bytes are in the cache: a FETCH costs no download.
	if got, ok := st.Bodies().Cached(f.Ref(), 3); !ok || string(got) != string(raw) {
		t.Error("the appended bytes are not in the cache")
	}
}

// TestReleasedFolderForgotten: a folder nobody holds is forgotten after
// Config.Idle, and its read state is inferred from the memo when it is
// opened again (no GetUnreadMessages).
func TestReleasedFolderForgotten(t *testing.T) {
	p := newFolderProvider(4)
	p.read[1], p.read[3] = true, true
	state, err := state.OpenStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer state.Close()
	st := New(Config{Provider: p, State: state, PollInterval: time.Hour, Idle: 20 * time.Millisecond})
	ctx := context.Background()
	f, err := st.Acquire(ctx, testAuth, "INBOX")
	if err != nil {
		t.Fatal(err)
	}
	st.Release(f)
	deadline := time.Now().Add(5 * time.Second)
	for st.peek(testAuth.Username, "INBOX") != nil {
		if time.Now().After(deadline) {
			t.Fatal("the released folder was never forgotten")
		}
		time.Sleep(10 * time.Millisecond)
	}
	unread := p.count("Unread")
	g, err := st.Acquire(ctx, testAuth, "INBOX")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Release(g)
	if g == f {
		t.Fatal("the forgotten mirror came back")
	}
	if n := p.count("Unread") - unread; n != 0 {
		t.Errorf("GetUnreadMessages on reopening: %d calls; want 0 (the memo agrees)", n)
	}
	for u, want := range map[imap.UID]bool{1: true, 2: false, 3: true, 4: false} {
		if fl, _ := g.Mailbox().Flags(u); HasSeen(fl) != want {
			t.Errorf("UID %d: \\Seen %v; want %v", u, HasSeen(fl), want)
		}
	}
}

// TestRepeatedAppendIsANewMessage: the same bytes appended again after
// the first APPEND was answered OK are a second message (the client was
// told the first was saved), from any connection; nothing in the journal
// of attempts stays behind.
func TestRepeatedAppendIsANewMessage(t *testing.T) {
	p := newFolderProvider(1)
	st := newTestStore(t, p)
	ctx := context.Background()
	f, err := st.Acquire(ctx, testAuth, "INBOX")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Release(f)
	raw := []byte("Message-ID: <r@example.org>\r\nSubject: r\r\n\r\nagain\r\n")
	first, err := f.Append(ctx, testAuth, raw, "<r@example.org>", false, nil, true)
	if err != nil || first == 0 {
		t.Fatalf("first APPEND: uid %d, %v", first, err)
	}
	again, err := f.Append(ctx, testAuth, raw, "<r@example.org>", false, nil, true)
	if err != nil || again == first || p.count("Save") != 2 {
		t.Fatalf("the same bytes again: uid %d (first %d), %v, %d saves; want a second message", again, first, err, p.count("Save"))
	}
	// The entries outlive the answers a moment (answerGrace: a bridge
	// killed while writing the answer leaves them for the retry), then
	// nothing stays behind.
	if u, _ := st.cfg.State.UndecidedAttempts(ctx, testAuth.Username, st.appendKey("INBOX", raw), "another process"); len(u) != 2 {
		t.Fatalf("journal right after two answered APPENDs: %v; want both entries, for a moment", u)
	}
	for deadline := time.Now().Add(answerGrace + 3*time.Second); ; time.Sleep(50 * time.Millisecond) {
		u, err := st.cfg.State.UndecidedAttempts(ctx, testAuth.Username, st.appendKey("INBOX", raw), "another process")
		if err == nil && len(u) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("journal %v after two decided APPENDs: %v, %v; want nothing", answerGrace+3*time.Second, u, err)
		}
	}
}

// TestInheritedUIDNextUndercut: a folder created again under a name
// inherits the name's UIDNEXT (state.Store.ForgetFolder); a provider
// that numbers the new folder from 1 again costs one new UIDVALIDITY,
// with a UIDNEXT above what it lists, not one per arriving message.
func TestInheritedUIDNextUndercut(t *testing.T) {
	p := newFolderProvider(0)
	state, err := state.OpenStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer state.Close()
	ctx := context.Background()
	user := strings.ToLower(testAuth.Username)
	if _, err := state.ResetFolder(ctx, user, "INBOX.Re", 100); err != nil {
		t.Fatal(err)
	}
	state.ForgetFolder(ctx, user, "INBOX.Re")
	st := New(Config{Provider: p, State: state, PollInterval: time.Hour, CacheBytes: 1 << 20})

	f, err := st.Acquire(ctx, testAuth, "INBOX.Re")
	if err != nil {
		t.Fatal(err)
	}
	first := f.Validity()
	p.mu.Lock()
	p.add("Message-ID: <a@x>\r\n\r\na\r\n")
	p.mu.Unlock()
	if err := f.Sync(ctx); !errors.Is(err, ErrFolderGone) {
		t.Fatalf("UID 1 under an inherited UIDNEXT 100: %v; want ErrFolderGone once", err)
	}
	st.Release(f)
	f, err = st.Acquire(ctx, testAuth, "INBOX.Re")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Release(f)
	if f.Validity() == first {
		t.Fatal("UIDVALIDITY kept")
	}
	fs, _ := state.Folder(ctx, user, "INBOX.Re")
	if fs.UIDNext != 2 {
		t.Fatalf("UIDNEXT after the reset %d; want 2", fs.UIDNext)
	}
	p.mu.Lock()
	p.add("Message-ID: <b@x>\r\n\r\nb\r\n")
	p.mu.Unlock()
	if err := f.Sync(ctx); err != nil {
		t.Fatalf("the next arrival: %v; want it taken", err)
	}
	if n := len(f.Mailbox().UIDs()); n != 2 {
		t.Fatalf("%d messages; want 2", n)
	}
}
