package imapbackend_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"

	"github.com/directbridge/directbridge/internal/mailstore"
	"github.com/directbridge/directbridge/sandbox"
	"github.com/directbridge/directbridge/upstream"
)

// appendResult is one APPEND's answer.
type appendResult struct {
	uid imap.UID
	err error
}

// appendEach APPENDs msgs[i] to INBOX on conns[i], all started together,
// and returns each one's answer.
func appendEach(conns []*imapclient.Client, msgs []string) []appendResult {
	out := make([]appendResult, len(msgs))
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i, raw := range msgs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			data, err := appendMsg(conns[i], "INBOX", raw)
			if err == nil {
				out[i].uid = data.UID
			}
			out[i].err = err
		}()
	}
	close(start)
	wg.Wait()
	return out
}

// appendAllAtOnce is appendEach where every APPEND must succeed; it
// returns the APPENDUIDs (0 for a failure, which is reported).
func appendAllAtOnce(t *testing.T, conns []*imapclient.Client, msgs []string) []imap.UID {
	t.Helper()
	uids := make([]imap.UID, len(msgs))
	for i, r := range appendEach(conns, msgs) {
		if r.err != nil {
			t.Errorf("APPEND %d: %v", i, r.err)
		}
		uids[i] = r.uid
	}
	return uids
}

// checkSavedOnce checks that INBOX holds exactly msgs, each once, under
// the UIDs their APPENDs answered, byte for byte.
func checkSavedOnce(t *testing.T, e *env, msgs []string, uids []imap.UID) {
	t.Helper()
	if n := e.count(alice, "INBOX"); n != len(msgs) {
		t.Errorf("INBOX holds %d messages; want %d, each once", n, len(msgs))
	}
	if slices.Contains(uids, 0) {
		t.Fatalf("APPENDUIDs %v: some APPEND failed or answered none", uids)
	}
	if u := slices.Compact(slices.Sorted(slices.Values(uids))); len(u) != len(uids) {
		t.Fatalf("APPENDUIDs %v repeat", uids)
	}
	c := e.login(alice, alicePW)
	mustSelectFolder(t, c, "INBOX")
	for i, uid := range uids {
		if got := fetchBody(t, c, uid); got != msgs[i] {
			t.Errorf("UID %d (APPEND %d) holds %q; want the bytes appended", uid, i, got)
		}
	}
}

// budgetedEnv is an env whose engine spends a budget of 10 requests a
// second, wrapped as the daemon wraps it (bridge.go), with the burst
// spent, so that the next calls wait for it.
func budgetedEnv(t *testing.T) *env {
	b := upstream.NewBudget(10)
	e := newEnv(t, options{engine: func(c *mailstore.Config) {
		c.Provider = upstream.WithCoalescing(upstream.WithBudget(c.Provider, b), b)
		c.Budget = b
	}})
	for range 10 {
		if err := b.Wait(context.Background(), "someone else"); err != nil {
			t.Fatal(err)
		}
	}
	return e
}

// TestConcurrentAppendsShareSaves: under a budget, APPENDs to one folder
// whose saves wait for it at the same time go in one SaveRawMessages
// (upstream.WithCoalescing), and each still gets its own APPENDUID and its
// bytes saved once; their UIDs are found with no listing of the folder.
func TestConcurrentAppendsShareSaves(t *testing.T) {
	e := budgetedEnv(t)
	const n = 10
	msgs := make([]string, n)
	for i := range msgs {
		msgs[i] = testMessage(fmt.Sprintf("together-%d", i))
	}
	// One APPEND first teaches the bridge the provider's clock, so that a
	// metadata search alone finds the UIDs of what it saves
	// (mailstore/discover.go).
	warm := testMessage("warm-up")
	data, err := appendMsg(e.login(alice, alicePW), "INBOX", warm)
	if err != nil {
		t.Fatal(err)
	}
	conns := make([]*imapclient.Client, n)
	for i := range conns {
		conns[i] = e.login(alice, alicePW)
	}
	e.sandbox.ResetCalls()
	uids := appendAllAtOnce(t, conns, msgs)
	calls := e.sandbox.CallCounts()
	if calls["SaveRawMessages"] > 3 {
		t.Errorf("%d APPENDs started together made %d SaveRawMessages; want at most 3", n, calls["SaveRawMessages"])
	}
	if calls["GetUIDs"] != 0 {
		t.Errorf("finding the UIDs of %d APPENDs cost %v; want no GetUIDs", n, calls)
	}
	checkSavedOnce(t, e, append([]string{warm}, msgs...), append([]imap.UID{data.UID}, uids...))
}

// TestRefusedMergedSaveIsNotRepeated: a merged SaveRawMessages the
// provider refuses may have stored some of its messages (what it does is
// "not shown"), so it is not sent again: each APPEND in it looks for its
// own bytes and, not finding them, answers NO [UNAVAILABLE] (its retry is
// answered from the folder); nothing is stored twice.
func TestRefusedMergedSaveIsNotRepeated(t *testing.T) {
	e := budgetedEnv(t)
	msgs := make([]string, 5)
	for i := range msgs {
		msgs[i] = testMessage(fmt.Sprintf("refused-%d", i))
	}
	conns := make([]*imapclient.Client, len(msgs))
	for i := range conns {
		conns[i] = e.login(alice, alicePW)
	}
	e.sandbox.ResetCalls()
	e.sandbox.InjectFault("SaveRawMessages", sandbox.Fault{Code: 3, Times: 1})
	results := appendEach(conns, msgs)
	saves := e.sandbox.Calls("SaveRawMessages")
	if saves > 2 || saves < 1 {
		t.Fatalf("%d SaveRawMessages for %d APPENDs started together; want them merged, and the refused call not repeated", saves, len(msgs))
	}
	var ok []string
	var okUIDs []imap.UID
	for i, r := range results {
		switch {
		case r.err == nil:
			ok = append(ok, msgs[i])
			okUIDs = append(okUIDs, r.uid)
		case !strings.Contains(r.err.Error(), "UNAVAILABLE") && !strings.Contains(r.err.Error(), "CANNOT"):
			t.Errorf("APPEND %d: %v; want OK, or NO [UNAVAILABLE] in a refused merged save", i, r.err)
		}
	}
	if len(ok) == len(msgs) {
		t.Fatalf("every APPEND answered OK; the refusal reached none")
	}
	// Only what was answered OK is there, once each.
	checkSavedOnce(t, e, ok, okUIDs)
}

// TestAppendDuringSlowSearchNeedsNoListing: a light refresh's metadata
// search that is answered late (a slow provider, or one waiting for the
// budget) also holds the messages saved while it waited, and places them
// with its own: two APPENDs cost two saves and one search, no listing of
// the folder (mailstore/discover.go: the search is open at the end).
func TestAppendDuringSlowSearchNeedsNoListing(t *testing.T) {
	e := newEnv(t, options{})
	c1, c2 := e.login(alice, alicePW), e.login(alice, alicePW)
	warm := testMessage("warm-up")
	w, err := appendMsg(c1, "INBOX", warm) // teaches the provider's clock
	if err != nil {
		t.Fatal(err)
	}
	e.sandbox.ResetCalls()
	e.sandbox.InjectFault("SearchMessagesMetadataByReceivedDate", sandbox.Fault{Latency: 400 * time.Millisecond, Times: 1})
	msgs := []string{testMessage("slow-search-a"), testMessage("slow-search-b")}
	uids := make([]imap.UID, 2)
	var wg sync.WaitGroup
	appendOn := func(i int, c *imapclient.Client) {
		defer wg.Done()
		data, err := appendMsg(c, "INBOX", msgs[i])
		if err != nil {
			t.Errorf("APPEND %d: %v", i, err)
			return
		}
		uids[i] = data.UID
	}
	wg.Add(1)
	go appendOn(0, c1)
	for deadline := time.Now().Add(5 * time.Second); e.sandbox.Calls("SearchMessagesMetadataByReceivedDate") == 0; {
		if time.Now().After(deadline) {
			t.Fatal("the first APPEND's search never reached the provider")
		}
		time.Sleep(5 * time.Millisecond)
	}
	// The first APPEND's search is held up; the second saves meanwhile.
	wg.Add(1)
	go appendOn(1, c2)
	wg.Wait()
	calls := e.sandbox.CallCounts()
	if calls["SaveRawMessages"] != 2 || calls["SearchMessagesMetadataByReceivedDate"] != 1 || calls["GetUIDs"] != 0 {
		t.Errorf("two APPENDs, the second during the first's slow search, cost %v; want 2 saves, 1 search, no GetUIDs", calls)
	}
	checkSavedOnce(t, e, append([]string{warm}, msgs...), append([]imap.UID{w.UID}, uids...))
}

// fetchBody returns BODY.PEEK[] of uid in the selected folder.
func fetchBody(t *testing.T, c *imapclient.Client, uid imap.UID) string {
	t.Helper()
	msgs, err := c.Fetch(imap.UIDSetNum(uid), &imap.FetchOptions{BodySection: []*imap.FetchItemBodySection{{Peek: true}}}).Collect()
	if err != nil {
		t.Fatalf("UID FETCH %d BODY.PEEK[]: %v", uid, err)
	}
	if len(msgs) != 1 {
		return ""
	}
	for _, b := range msgs[0].BodySection {
		return string(b.Bytes)
	}
	return ""
}
