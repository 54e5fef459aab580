package imapbackend_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"

	"github.com/directbridge/directbridge/imapbackend"
	"github.com/directbridge/directbridge/sandbox"
)

// Regressions of the engine under concurrent clients (issue 18): each test
// drives real connections at once against the sandbox.

// TestConcurrentKeywordsNotLost: two connections that add different
// keywords to one message at the same moment both keep theirs. +FLAGS is a
// change applied to the set kept at that moment (state.ChangeFlags), not
// a read of the set followed by a write of the whole set, which lost one
// keyword in about one round in five.
func TestConcurrentKeywordsNotLost(t *testing.T) {
	e := newEnv(t, options{})
	uid := e.deliver(alice, "INBOX", testMessage("shared"))
	a := e.login(alice, alicePW)
	b := e.login(alice, alicePW)
	mustSelectFolder(t, a, "INBOX")
	mustSelectFolder(t, b, "INBOX")
	set := imap.UIDSetNum(imap.UID(uid))
	const rounds = 200
	for i := range rounds {
		kA, kB := imap.Flag(fmt.Sprintf("kA%d", i)), imap.Flag(fmt.Sprintf("kB%d", i))
		var wg sync.WaitGroup
		errs := make([]error, 2)
		wg.Add(2)
		go func() {
			defer wg.Done()
			errs[0] = a.Store(set, &imap.StoreFlags{Op: imap.StoreFlagsAdd, Silent: true, Flags: []imap.Flag{kA}}, nil).Close()
		}()
		go func() {
			defer wg.Done()
			errs[1] = b.Store(set, &imap.StoreFlags{Op: imap.StoreFlagsAdd, Silent: true, Flags: []imap.Flag{kB}}, nil).Close()
		}()
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				t.Fatalf("round %d: STORE: %v", i, err)
			}
		}
		// a's view takes b's change at a command boundary (NOOP),
		// then FETCH FLAGS shows both.
		if err := a.Noop().Wait(); err != nil {
			t.Fatal(err)
		}
		msgs, err := a.Fetch(set, &imap.FetchOptions{Flags: true}).Collect()
		if err != nil || len(msgs) != 1 {
			t.Fatalf("round %d: FETCH: %v %v", i, msgs, err)
		}
		if !slices.Contains(msgs[0].Flags, kA) || !slices.Contains(msgs[0].Flags, kB) {
			t.Fatalf("round %d: flags %v lack %s or %s", i, msgs[0].Flags, kA, kB)
		}
		// Take them away again, both at once, so that the set stays small.
		wg.Add(2)
		go func() {
			defer wg.Done()
			errs[0] = a.Store(set, &imap.StoreFlags{Op: imap.StoreFlagsDel, Silent: true, Flags: []imap.Flag{kA}}, nil).Close()
		}()
		go func() {
			defer wg.Done()
			errs[1] = b.Store(set, &imap.StoreFlags{Op: imap.StoreFlagsDel, Silent: true, Flags: []imap.Flag{kB}}, nil).Close()
		}()
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				t.Fatalf("round %d: STORE -FLAGS: %v", i, err)
			}
		}
	}
	// What the store holds, seen by a connection that comes later.
	c := e.login(alice, alicePW)
	mustSelectFolder(t, c, "INBOX")
	msgs, err := c.Fetch(set, &imap.FetchOptions{Flags: true}).Collect()
	if err != nil || len(msgs) != 1 {
		t.Fatalf("FETCH: %v %v", msgs, err)
	}
	if len(msgs[0].Flags) != 0 {
		t.Fatalf("flags left %v; want none", msgs[0].Flags)
	}
}

// TestFetchBodyWithMessageGoneAtProvider: a FETCH BODY[] (not PEEK, so it
// marks \Seen) over a range with a message another client removed at the
// provider answers OK with the others' bodies and marks them read (RFC
// 2180 §4.1); the EXPUNGE follows.
func TestFetchBodyWithMessageGoneAtProvider(t *testing.T) {
	e := newEnv(t, options{})
	var uids []int64
	for _, s := range []string{"one", "two", "three"} {
		uids = append(uids, e.deliver(alice, "INBOX", testMessage(s)))
	}
	c := e.login(alice, alicePW)
	fsSelect(t, c, "INBOX")
	if err := e.client.DeleteMessagesByUIDs(context.Background(), auth(alice), "INBOX", []int64{uids[1]}, true); err != nil {
		t.Fatal(err)
	}
	body := &imap.FetchItemBodySection{}
	msgs, err := c.Fetch(imap.SeqSetNum(1, 2, 3), &imap.FetchOptions{UID: true, Flags: true, BodySection: []*imap.FetchItemBodySection{body}}).Collect()
	if err != nil {
		t.Fatalf("FETCH 1:3 BODY[]: %v; want OK", err)
	}
	got := map[imap.UID]string{}
	for _, m := range msgs {
		if b := m.FindBodySection(body); b != nil {
			got[m.UID] = string(b)
		}
	}
	if got[imap.UID(uids[0])] != testMessage("one") || got[imap.UID(uids[2])] != testMessage("three") || len(got) != 2 {
		t.Fatalf("bodies %v", got)
	}
	// Both are read at the provider now.
	unread, err := e.client.GetUnreadMessageCount(context.Background(), auth(alice), "INBOX")
	if err != nil || unread != 0 {
		t.Fatalf("unread at the provider: %d %v; want 0", unread, err)
	}
	// The session learns of the removal at its next command.
	if err := c.Noop().Wait(); err != nil {
		t.Fatal(err)
	}
	if st, err := c.Status("INBOX", &imap.StatusOptions{NumMessages: true}).Wait(); err != nil || *st.NumMessages != 2 {
		t.Fatalf("STATUS after: %+v %v", st, err)
	}
}

// TestAppendedSeenThenVanishedNoHang: a message appended \Seen waits for
// its read marking; when another message the marking names vanishes at
// the provider, the refresh that sends the marking must not wait for
// itself (it once did: refresh → markAppendedRead → MutateExisting →
// Sync → refresh, and the folder hung for every connection). Every
// command of both connections answers within a few seconds.
func TestAppendedSeenThenVanishedNoHang(t *testing.T) {
	e := newEnv(t, options{pollInterval: 50 * time.Millisecond})
	a := e.login(alice, alicePW)
	b := e.login(alice, alicePW)
	mustSelectFolder(t, a, "INBOX")
	mustSelectFolder(t, b, "INBOX")
	deadline := func(name string, f func() error) {
		t.Helper()
		done := make(chan error, 1)
		go func() { done <- f() }()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: no answer in 10 s (the folder hangs)", name)
		}
	}
	for i := range 20 {
		ad, err := appendMsg(a, "INBOX", testMessage(fmt.Sprintf("seen-%d", i)), imap.FlagSeen)
		if err != nil {
			t.Fatal(err)
		}
		// Another client removes it before the read marking went out.
		if err := e.client.DeleteMessagesByUIDs(context.Background(), auth(alice), "INBOX", []int64{int64(ad.UID)}, true); err != nil {
			t.Fatal(err)
		}
		deadline("NOOP a", func() error { return a.Noop().Wait() })
		deadline("NOOP b", func() error { return b.Noop().Wait() })
	}
	deadline("STATUS", func() error {
		_, err := b.Status("INBOX", &imap.StatusOptions{NumMessages: true}).Wait()
		return err
	})
}

// TestHungUpClientFreesSlot: a client that hangs up while its command
// waits for a slow provider gives its connection slot back at once (not
// when the command ends, minutes later), and the command is cancelled:
// with one slot per user, a new login succeeds within a second or two.
func TestHungUpClientFreesSlot(t *testing.T) {
	e := newEnv(t, options{cfg: func(c *imapbackend.Config) { c.MaxConnsPerUser = 1 }})
	e.deliver(alice, "INBOX", testMessage("slow"))
	c := e.login(alice, alicePW)
	// The SELECT's listing takes a minute; the client gives up at once.
	e.sandbox.InjectFault("GetUIDs", sandbox.Fault{Latency: time.Minute, Times: 1})
	go c.Select("INBOX", nil).Wait()
	time.Sleep(200 * time.Millisecond)
	c.Close()
	start := time.Now()
	for {
		d, err := imapclient.DialInsecure(e.addr, nil)
		if err != nil {
			t.Fatal(err)
		}
		err = d.Login(alice, alicePW).Wait()
		d.Close()
		if err == nil {
			break
		}
		if time.Since(start) > 5*time.Second {
			t.Fatalf("login still refused %v after the client hung up: %v", time.Since(start), err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
