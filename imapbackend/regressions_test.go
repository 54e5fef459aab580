// Regression tests of defects found in review; each comment tells the
// defect the test guards against.
package imapbackend_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"

	"github.com/directbridge/directbridge/imapbackend"
	"github.com/directbridge/directbridge/sandbox"
)

// TestFailedFirstLoadSharesOneMirror: mailstore.Store.Acquire drops a mirror that
// failed its first load even though another connection holds a reference
// to it and is loading it at that very moment. That connection keeps an
// orphan mirror; the next SELECT builds a second one. The two never share
// updates: a \Flagged (or \Deleted) stored on one connection is never seen
// by the other, not at NOOP, not at FETCH, not after polls.
func TestFailedFirstLoadSharesOneMirror(t *testing.T) {
	e := newEnv(t, options{})
	e.deliver(alice, "INBOX", testMessage("one"))

	a := e.login(alice, alicePW)
	b := e.watch(alice, alicePW)
	c := e.login(alice, alicePW)

	// The first GetUIDs (A's first load) is slow and then fails, as a
	// provider blip would make it; B's SELECT arrives meanwhile.
	e.sandbox.InjectFault("GetUIDs", sandbox.Fault{Latency: 300 * time.Millisecond, Status: 500, Times: 1})
	var wg sync.WaitGroup
	wg.Add(1)
	var aErr error
	go func() {
		defer wg.Done()
		_, aErr = a.Select("INBOX", nil).Wait()
	}()
	time.Sleep(100 * time.Millisecond)
	if _, err := b.Select("INBOX", nil).Wait(); err != nil {
		t.Fatalf("B SELECT: %v", err)
	}
	wg.Wait()
	if aErr == nil {
		t.Fatalf("A SELECT succeeded; the fault did not apply")
	}

	// C selects afterwards and flags the message.
	mustSelectFolder(t, c, "INBOX")
	storeFlags(t, c, imap.SeqSetNum(1), imap.StoreFlagsAdd, true, imap.FlagFlagged)

	// B must learn of it (RFC 9051 §7.5.2) at its next command...
	if err := b.Noop().Wait(); err != nil {
		t.Fatal(err)
	}
	b.settle(1)
	_, _, fetches := b.take()
	if len(fetches) == 0 {
		t.Errorf("B got no FETCH FLAGS after C stored \\Flagged")
	}
	// ...and at the latest when it asks.
	got := flagsByUID(t, b.Client, 1)[1]
	want := false
	for _, f := range got {
		if f == imap.FlagFlagged {
			want = true
		}
	}
	if !want {
		t.Errorf("B FETCH FLAGS of UID 1 = %v; C stored \\Flagged on it: B and C are on two different mirrors", got)
	}
}

// TestConcurrentNoopsShareOneRefresh: N connections that NOOP together
// once each ran a full refresh, one after the other, and the last NOOP
// waited N refreshes with a slow provider. NOOPs now refresh nothing
// themselves (the poller finds changes at the provider; changes made
// through the bridge are in the folder already): at most a poll happens
// meanwhile.
func TestConcurrentNoopsShareOneRefresh(t *testing.T) {
	const conns = 8
	// PollInterval/3 = 1 s < freshness (2 s): a NOOP refreshes after 2 s.
	e := newEnv(t, options{pollInterval: 3 * time.Second})
	e.deliver(alice, "INBOX", testMessage("one"))
	var cs []*watcher
	for range conns {
		w := e.watch(alice, alicePW)
		mustSelectFolder(t, w.Client, "INBOX")
		cs = append(cs, w)
	}
	time.Sleep(2200 * time.Millisecond)
	e.sandbox.InjectFault("GetUIDs", sandbox.Fault{Latency: 150 * time.Millisecond})
	before := e.sandbox.Calls("GetUIDs")
	start := time.Now()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var slowest time.Duration
	for _, w := range cs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t0 := time.Now()
			if err := w.Noop().Wait(); err != nil {
				t.Error(err)
			}
			mu.Lock()
			slowest = max(slowest, time.Since(t0))
			mu.Unlock()
		}()
	}
	wg.Wait()
	e.sandbox.ClearFaults()
	n := e.sandbox.Calls("GetUIDs") - before
	t.Logf("%d concurrent NOOPs: %d GetUIDs calls, slowest NOOP %v (total %v)", conns, n, slowest, time.Since(start))
	if n > 2 {
		t.Errorf("%d concurrent NOOPs on one folder made %d refreshes; want 1 (one per freshness period)", conns, n)
	}
}

// TestConcurrentSelectsShareOneRefresh: the same check-then-sync in mailstore.Store.Acquire: five
// connections (Thunderbird's start-up) selecting one folder at once each
// refresh it in turn, instead of sharing the first refresh.
func TestConcurrentSelectsShareOneRefresh(t *testing.T) {
	const conns = 5
	e := newEnv(t, options{})
	e.deliver(alice, "INBOX", testMessage("one"))
	var cs []*watcher
	for range conns {
		cs = append(cs, e.watch(alice, alicePW))
	}
	e.sandbox.InjectFault("GetUIDs", sandbox.Fault{Latency: 150 * time.Millisecond})
	before := e.sandbox.Calls("GetUIDs")
	var wg sync.WaitGroup
	for _, w := range cs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := w.Select("INBOX", nil).Wait(); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	e.sandbox.ClearFaults()
	if n := e.sandbox.Calls("GetUIDs") - before; n > 1 {
		t.Errorf("%d concurrent SELECTs of one folder made %d refreshes (GetUIDs); want 1", conns, n)
	}
}

// TestNonSyncLiteralNeverRunAsCommands: go-imap v2.0.0-beta.8 refuses an
// over-limit non-synchronising literal without reading it, and the unread
// message bytes would be parsed as commands (a header line "X-Note:
// CREATE INBOX.Injected" would create a folder). So LITERAL+ is not
// offered, and APPENDLIMIT never goes below the 4096 octets LITERAL- lets
// a client send unannounced: even a configured limit of 2000 takes such a
// literal, and no line of it is run.
func TestNonSyncLiteralNeverRunAsCommands(t *testing.T) {
	e := newEnv(t, options{cfg: func(c *imapbackend.Config) { c.AppendLimit = 2000 }})
	conn, err := net.Dial("tcp", e.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	r := bufio.NewReader(conn)
	readUntil := func(tag string) []string {
		var lines []string
		conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		for {
			l, err := r.ReadString('\n')
			if err != nil {
				t.Fatalf("read: %v (so far %q)", err, lines)
			}
			lines = append(lines, strings.TrimRight(l, "\r\n"))
			if strings.HasPrefix(l, tag+" ") {
				return lines
			}
		}
	}
	readUntil("*") // greeting
	fmt.Fprintf(conn, "a1 LOGIN %s %s\r\n", alice, alicePW)
	readUntil("a1")

	// An ordinary header field of an incoming message: tag "X-Note:",
	// command "CREATE" (DELETE would do just as well).
	body := "From: mallory@example.org\r\nX-Note: CREATE INBOX.Injected\r\nSubject: big\r\n\r\nhello\r\n"
	body += strings.Repeat("y", 3000-len(body)-2) + "\r\n"
	fmt.Fprintf(conn, "a2 APPEND INBOX {%d+}\r\n%s\r\na3 NOOP\r\n", len(body), body)
	conn.SetReadDeadline(time.Now().Add(3 * time.Second))
	var lines []string
	for {
		l, err := r.ReadString('\n')
		if err != nil {
			break // the blank line after the header ends the connection
		}
		lines = append(lines, strings.TrimRight(l, "\r\n"))
	}
	t.Logf("server answered: %q", lines)

	folders, err := e.client.GetFolders(context.Background(), auth(alice), "INBOX", false)
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(folders, "INBOX.Injected") {
		t.Errorf("a line of the refused message was run as an IMAP command: INBOX.Injected now exists (%v)", folders)
	}
}

// TestFirstLoadCountsAfterListing: a message that comes in unread while
// a folder's first listing is under way is shown unread. The load read
// the unread count beside the listing; the count, taken before the
// message came in, said none, and the load showed every listed message
// read, one the provider never had read (model seed 827: a FETCH BODY[]
// then answered \Seen without marking it read).
func TestFirstLoadCountsAfterListing(t *testing.T) {
	e := newEnv(t, options{})
	e.createFolder(alice, "INBOX.Work")
	c := e.login(alice, alicePW)
	// The listing is carried out 300 ms after it is asked; the message
	// comes in meanwhile.
	e.sandbox.InjectFault("GetUIDs", sandbox.Fault{Latency: 300 * time.Millisecond, Times: 1})
	delivered := make(chan struct{})
	go func() {
		defer close(delivered)
		time.Sleep(100 * time.Millisecond)
		e.deliver(alice, "INBOX.Work", testMessage("came in"))
	}()
	mustSelectFolder(t, c, "INBOX.Work")
	<-delivered
	msgs, err := c.Fetch(imap.SeqSet{{Start: 1, Stop: 0}}, &imap.FetchOptions{Flags: true}).Collect()
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 1 {
		t.Fatalf("the listing should hold the message delivered during it: %d messages", len(msgs))
	}
	if slices.Contains(msgs[0].Flags, imap.FlagSeen) {
		t.Fatalf("a message that came in unread during the first listing is shown read: %v", msgs[0].Flags)
	}
}
