package mailbox_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/directbridge/directbridge/directapi"
	"github.com/directbridge/directbridge/mailbox"
	"github.com/directbridge/directbridge/restclient"
	"github.com/directbridge/directbridge/sandbox"
)

const alice, pw = "alice@direct.example", directapi.Secret("alice-password")

// newProvider starts a sandbox over real HTTP and a client for it.
func newProvider(t *testing.T) (*sandbox.Server, *restclient.Client) {
	t.Helper()
	srv, err := sandbox.Open(sandbox.Options{
		Users:     []sandbox.Account{{Name: alice, Password: string(pw)}, {Name: "bob@direct.example", Password: "bob-password"}},
		Resellers: []sandbox.Account{{Name: "tuser", Password: "tuser-password"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(func() { hs.Close(); srv.Close() })
	c, err := restclient.New(restclient.Options{BaseURL: hs.URL, MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	return srv, c
}

func TestVerifierSharesOneCheck(t *testing.T) {
	srv, c := newProvider(t)
	v := mailbox.NewVerifier(restclient.Upstream(c), time.Minute)
	var wg sync.WaitGroup
	errs := make(chan error, 5)
	for range 5 { // Thunderbird's five connections
		wg.Add(1)
		go func() { defer wg.Done(); errs <- v.Verify(context.Background(), alice, pw) }()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := v.Verify(context.Background(), alice, pw); err != nil {
		t.Fatal(err)
	}
	if n := srv.Calls("GetMessageCount"); n != 1 {
		t.Fatalf("%d REST calls for six logins; want 1", n)
	}
}

func TestVerifierRefusesAndDoesNotRemember(t *testing.T) {
	srv, c := newProvider(t)
	v := mailbox.NewVerifier(restclient.Upstream(c), time.Minute)
	for range 2 {
		if err := v.Verify(context.Background(), alice, "wrong"); !errors.Is(err, mailbox.ErrAuthFailed) {
			t.Fatalf("wrong password: %v; want ErrAuthFailed", err)
		}
	}
	if n := srv.Calls("GetMessageCount"); n != 2 {
		t.Fatalf("%d calls; failures must not be cached", n)
	}
	// A success for alice does not let another password in.
	if err := v.Verify(context.Background(), alice, pw); err != nil {
		t.Fatal(err)
	}
	if err := v.Verify(context.Background(), alice, pw+"x"); !errors.Is(err, mailbox.ErrAuthFailed) {
		t.Fatalf("other password after success: %v", err)
	}
	if err := v.Verify(context.Background(), "", ""); !errors.Is(err, mailbox.ErrAuthFailed) {
		t.Fatalf("empty credentials: %v", err)
	}
}

func TestVerifierProviderDownIsUnavailable(t *testing.T) {
	srv, c := newProvider(t)
	v := mailbox.NewVerifier(restclient.Upstream(c), time.Minute)
	for _, f := range []sandbox.Fault{{Status: 503}, {Malformed: true}, {Reset: true}, {Code: 4}} {
		srv.InjectFault("GetMessageCount", f)
		err := v.Verify(context.Background(), alice, pw)
		if !errors.Is(err, mailbox.ErrUnavailable) || errors.Is(err, mailbox.ErrAuthFailed) {
			t.Errorf("fault %+v: %v; want ErrUnavailable", f, err)
		}
	}
	srv.ClearFaults()
	if err := v.Verify(context.Background(), alice, pw); err != nil {
		t.Fatalf("provider back: %v", err)
	}
}

func TestVerifierExpires(t *testing.T) {
	srv, c := newProvider(t)
	v := mailbox.NewVerifier(restclient.Upstream(c), 20*time.Millisecond)
	if err := v.Verify(context.Background(), alice, pw); err != nil {
		t.Fatal(err)
	}
	time.Sleep(30 * time.Millisecond)
	if err := v.Verify(context.Background(), alice, pw); err != nil {
		t.Fatal(err)
	}
	if n := srv.Calls("GetMessageCount"); n != 2 {
		t.Fatalf("%d calls; an expired success must be checked again", n)
	}
}

func TestVerifierTuser(t *testing.T) {
	_, c := newProvider(t)
	v := mailbox.NewVerifier(restclient.Upstream(c), time.Minute)
	ctx := context.Background()
	if err := v.VerifyTuser(ctx, "tuser", "tuser-password", alice); err != nil {
		t.Fatalf("T-user: %v", err)
	}
	if err := v.VerifyTuser(ctx, "tuser", "wrong", alice); !errors.Is(err, mailbox.ErrAuthFailed) {
		t.Fatalf("T-user wrong password: %v", err)
	}
	if err := v.VerifyTuser(ctx, "tuser", "tuser-password", "nobody@elsewhere.example"); !errors.Is(err, mailbox.ErrAddress) {
		t.Fatalf("T-user unknown directAddr: %v", err)
	}
}

// gate is a mailbox.CheckGate that lets checks through or not, and
// counts what it is asked and told.
type gate struct {
	mu               sync.Mutex
	allow            bool
	asked, succeeded int
}

func (g *gate) AllowCheck(context.Context, string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.asked++
	return g.allow
}

func (g *gate) CheckSucceeded(context.Context, string) {
	g.mu.Lock()
	g.succeeded++
	g.mu.Unlock()
}

func (g *gate) set(allow bool) { g.mu.Lock(); g.allow = allow; g.mu.Unlock() }

func (g *gate) counts() (asked, succeeded int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.asked, g.succeeded
}

// TestVerifierGateHoldsBackUnknown: credentials the verifier does not
// know reach the provider only if the gate lets them; held back, they
// are answered as a wrong password (ErrAuthFailed, with ErrWithheld
// beside it) without a call, right or wrong.
func TestVerifierGateHoldsBackUnknown(t *testing.T) {
	srv, c := newProvider(t)
	v := mailbox.NewVerifier(restclient.Upstream(c), time.Minute)
	g := &gate{}
	v.SetGate(g)
	ctx := context.Background()
	for _, p := range []directapi.Secret{"guess", pw} {
		if err := v.Verify(ctx, alice, p); !errors.Is(err, mailbox.ErrAuthFailed) || !errors.Is(err, mailbox.ErrWithheld) {
			t.Fatalf("held back: %v; want ErrAuthFailed and ErrWithheld", err)
		}
	}
	if n := srv.Calls("GetMessageCount"); n != 0 {
		t.Fatalf("%d provider calls for held-back checks", n)
	}
	g.set(true)
	if err := v.Verify(ctx, alice, "guess"); !errors.Is(err, mailbox.ErrAuthFailed) || errors.Is(err, mailbox.ErrWithheld) {
		t.Fatalf("a wrong password let through: %v; want ErrAuthFailed only", err)
	}
	if err := v.Verify(ctx, alice, pw); err != nil {
		t.Fatal(err)
	}
	if asked, succeeded := g.counts(); asked != 4 || succeeded != 1 {
		t.Fatalf("gate asked %d times, told of %d successes; want 4 and 1", asked, succeeded)
	}
	if n := srv.Calls("GetMessageCount"); n != 2 {
		t.Fatalf("%d provider calls; want 2", n)
	}
}

// TestVerifierGateNeverHoldsBackAKnownPassword: a recent success is
// answered from memory without the gate or the provider, and after it
// expires the password is still checked without asking the gate. A
// password changed at the provider is forgotten at its first refusal,
// and so is one the fronts Forget.
func TestVerifierGateNeverHoldsBackAKnownPassword(t *testing.T) {
	srv, c := newProvider(t)
	v := mailbox.NewVerifier(restclient.Upstream(c), 20*time.Millisecond)
	g := &gate{allow: true}
	v.SetGate(g)
	ctx := context.Background()
	if err := v.Verify(ctx, alice, pw); err != nil {
		t.Fatal(err)
	}
	g.set(false)
	if err := v.Verify(ctx, alice, pw); err != nil {
		t.Fatalf("a recent success, the gate closed: %v", err)
	}
	if n := srv.Calls("GetMessageCount"); n != 1 {
		t.Fatalf("%d provider calls; a recent success needs none", n)
	}
	time.Sleep(30 * time.Millisecond)
	if err := v.Verify(ctx, alice, pw); err != nil {
		t.Fatalf("a password that worked, its success expired, the gate closed: %v", err)
	}
	if n := srv.Calls("GetMessageCount"); n != 2 {
		t.Fatalf("%d provider calls; an expired success is checked again", n)
	}
	if asked, succeeded := g.counts(); asked != 1 || succeeded != 3 {
		t.Fatalf("gate asked %d times, told of %d successes; want 1 (the first check) and 3", asked, succeeded)
	}
	// Changed at the provider: refused once, then unknown.
	if err := srv.AddUser(ctx, alice, "changed"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(30 * time.Millisecond)
	if err := v.Verify(ctx, alice, pw); !errors.Is(err, mailbox.ErrAuthFailed) || errors.Is(err, mailbox.ErrWithheld) {
		t.Fatalf("the old password: %v; want refused by the provider", err)
	}
	if err := v.Verify(ctx, alice, pw); !errors.Is(err, mailbox.ErrWithheld) {
		t.Fatalf("the old password again: %v; want held back", err)
	}
	// Forget drops the memory of a good password too.
	g.set(true)
	if err := v.Verify(ctx, alice, "changed"); err != nil {
		t.Fatal(err)
	}
	g.set(false)
	v.Forget(alice, "changed", "")
	if err := v.Verify(ctx, alice, "changed"); !errors.Is(err, mailbox.ErrWithheld) {
		t.Fatalf("a forgotten password: %v; want held back", err)
	}
}

func TestStoreSentRecords(t *testing.T) {
	dir := t.TempDir()
	s, err := mailbox.OpenStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	if err := s.RecordSent(ctx, mailbox.SentRecord{Username: "Alice@Direct.Example", SmtpID: "abc@direct.example", MessageID: "<m1@client>", SentAt: at}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s, err = mailbox.OpenStore(dir) // survives a restart
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	rec, ok, err := s.FindSent(ctx, alice, "<m1@client>", at.Add(-time.Hour))
	if err != nil || !ok || rec.SmtpID != "abc@direct.example" || !rec.SentAt.Equal(at) {
		t.Fatalf("FindSent = %+v, %v, %v", rec, ok, err)
	}
	if _, ok, _ := s.FindSent(ctx, alice, "<m1@client>", at.Add(time.Second)); ok {
		t.Fatal("a record older than since was found")
	}
	if _, ok, _ := s.FindSent(ctx, "bob@direct.example", "<m1@client>", time.Time{}); ok {
		t.Fatal("another user's record was found")
	}
}

func TestStoreFolderState(t *testing.T) {
	dir := t.TempDir()
	s, err := mailbox.OpenStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	a, err := s.Folder(ctx, alice, "INBOX")
	if err != nil || a.UIDValidity == 0 || a.UIDNext != 1 {
		t.Fatalf("new folder: %+v, %v", a, err)
	}
	b, _ := s.Folder(ctx, alice, "INBOX.Sent")
	if b.UIDValidity == a.UIDValidity {
		t.Fatal("two folders share a UIDVALIDITY")
	}
	if err := s.SeenUIDs(ctx, alice, "INBOX", 41); err != nil {
		t.Fatal(err)
	}
	s.SeenUIDs(ctx, alice, "INBOX", 7) // never goes down
	if err := s.SetFlags(ctx, alice, "INBOX", a.UIDValidity, map[uint32][]string{5: {"\\Flagged", "$Label1"}, 6: {"\\Answered"}}); err != nil {
		t.Fatal(err)
	}
	s.Close()

	s, _ = mailbox.OpenStore(dir) // survives a restart
	defer s.Close()
	again, _ := s.Folder(ctx, alice, "INBOX")
	if again.UIDValidity != a.UIDValidity || again.UIDNext != 42 {
		t.Fatalf("after restart: %+v; want validity %d, next 42", again, a.UIDValidity)
	}
	fl, err := s.Flags(ctx, alice, "INBOX", a.UIDValidity)
	if err != nil || len(fl) != 2 || len(fl[5]) != 2 || fl[6][0] != "\\Answered" {
		t.Fatalf("flags after restart: %v, %v", fl, err)
	}
	s.SetFlags(ctx, alice, "INBOX", a.UIDValidity, map[uint32][]string{6: nil})
	if fl, _ := s.Flags(ctx, alice, "INBOX", a.UIDValidity); len(fl) != 1 {
		t.Fatalf("removing flags: %v", fl)
	}

	// A rename keeps UIDVALIDITY and flags; a reset makes a new UIDVALIDITY.
	if err := s.RenameFolder(ctx, alice, "INBOX", "INBOX.Old"); err != nil {
		t.Fatal(err)
	}
	old, _ := s.Folder(ctx, alice, "INBOX.Old")
	if old.UIDValidity != a.UIDValidity {
		t.Fatalf("rename lost UIDVALIDITY: %+v", old)
	}
	if fl, _ := s.Flags(ctx, alice, "INBOX.Old", a.UIDValidity); len(fl) != 1 {
		t.Fatalf("rename lost flags: %v", fl)
	}
	reset, _ := s.ResetFolder(ctx, alice, "INBOX.Old", 100)
	if reset.UIDValidity == a.UIDValidity || reset.UIDNext != 100 {
		t.Fatalf("reset: %+v", reset)
	}
	if fl, _ := s.Flags(ctx, alice, "INBOX.Old", reset.UIDValidity); len(fl) != 0 {
		t.Fatalf("reset kept flags: %v", fl)
	}
	// Deleting forgets: a folder of the same name starts afresh with a
	// new UIDVALIDITY, but the UIDNEXT high-water mark of the name stays
	// (a provider does not reuse a folder name's UIDs).
	s.ForgetFolder(ctx, alice, "INBOX.Old")
	fresh, _ := s.Folder(ctx, alice, "INBOX.Old")
	if fresh.UIDValidity == reset.UIDValidity || fresh.UIDNext != 100 {
		t.Fatalf("after forget: %+v", fresh)
	}
	if again, _ := s.Folder(ctx, alice, "INBOX.Old"); again != fresh {
		t.Fatalf("state changed between reads: %+v, %+v", fresh, again)
	}
	s.ForgetFolder(ctx, alice, "INBOX.Old")
	created, _ := s.ResetFolder(ctx, alice, "INBOX.Old", 0)
	if created.UIDValidity == fresh.UIDValidity || created.UIDNext != 100 {
		t.Fatalf("re-created folder: %+v", created)
	}
	// A renamed folder's old name keeps its high-water mark too.
	s.SeenUIDs(ctx, alice, "INBOX.Old", 149)
	s.RenameFolder(ctx, alice, "INBOX.Old", "INBOX.New")
	if st, _ := s.Folder(ctx, alice, "INBOX.Old"); st.UIDNext != 150 || st.UIDValidity == created.UIDValidity {
		t.Fatalf("old name after rename: %+v", st)
	}
	if st, _ := s.Folder(ctx, alice, "INBOX.New"); st != (mailbox.FolderState{UIDValidity: created.UIDValidity, UIDNext: 150}) {
		t.Fatalf("new name after rename: %+v", st)
	}
	if fresh, _ := s.Folder(ctx, alice, "INBOX.Never"); fresh.UIDNext != 1 {
		t.Fatalf("new name: %+v", fresh)
	}
}

// TestStoreNonASCIIFolderNames: prefixes are measured in characters, as
// SQLite measures them, so sub-folders of non-ASCII names follow a rename.
func TestStoreNonASCIIFolderNames(t *testing.T) {
	s, err := mailbox.OpenStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	child, _ := s.Folder(ctx, alice, "INBOX.Bücher.Kinder")
	if err := s.RenameFolder(ctx, alice, "INBOX.Bücher", "INBOX.Books"); err != nil {
		t.Fatal(err)
	}
	moved, _ := s.Folder(ctx, alice, "INBOX.Books.Kinder")
	if moved.UIDValidity != child.UIDValidity {
		t.Fatalf("sub-folder of a non-ASCII name lost its UIDVALIDITY in a rename")
	}
	s.ForgetFolder(ctx, alice, "INBOX.Books")
	if again, _ := s.Folder(ctx, alice, "INBOX.Books.Kinder"); again.UIDValidity == child.UIDValidity {
		t.Fatal("ForgetFolder kept a sub-folder")
	}
}
