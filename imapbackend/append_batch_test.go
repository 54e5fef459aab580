package imapbackend_test

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"

	"github.com/directbridge/directbridge/sandbox"
)

// appendAllAtOnce APPENDs msgs to INBOX, each on a connection of its own,
// all started together, and returns each one's APPENDUID (0 for a
// failure, whose error is reported).
func appendAllAtOnce(t *testing.T, e *env, msgs []string) []imap.UID {
	t.Helper()
	conns := make([]*imapclient.Client, len(msgs))
	for i := range msgs {
		conns[i] = e.login(alice, alicePW)
	}
	uids := make([]imap.UID, len(msgs))
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i, raw := range msgs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			data, err := appendMsg(conns[i], "INBOX", raw)
			if err != nil {
				t.Errorf("APPEND %d: %v", i, err)
				return
			}
			uids[i] = data.UID
		}()
	}
	close(start)
	wg.Wait()
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

// TestConcurrentAppendsShareSaves: APPENDs to one folder from several
// connections while a save is with the provider go together in the next
// SaveRawMessages (mailstore/savebatch.go), and each still gets its own
// APPENDUID and its bytes saved once.
func TestConcurrentAppendsShareSaves(t *testing.T) {
	e := newEnv(t, options{})
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
	// Every save takes 150 ms: the first one goes alone, and the others,
	// started with it, wait for it and go together.
	e.sandbox.InjectFault("SaveRawMessages", sandbox.Fault{Latency: 150 * time.Millisecond})
	e.sandbox.ResetCalls()
	uids := appendAllAtOnce(t, e, msgs)
	calls := e.sandbox.CallCounts()
	e.sandbox.ClearFaults()
	if calls["SaveRawMessages"] > 3 {
		t.Errorf("%d APPENDs started together made %d SaveRawMessages; want at most 3 (the first alone, the rest together)", n, calls["SaveRawMessages"])
	}
	// Their UIDs: one search per save at most (a refresh waits for the
	// save after its own to share a search), and no listing of the folder.
	if calls["SearchMessagesMetadataByReceivedDate"] > calls["SaveRawMessages"] || calls["GetUIDs"] != 0 {
		t.Errorf("finding the UIDs of %d APPENDs cost %v; want at most one search per save and no GetUIDs", n, calls)
	}
	checkSavedOnce(t, e, append([]string{warm}, msgs...), append([]imap.UID{data.UID}, uids...))
}

// TestRefusedBatchIsSplit: when the provider refuses a SaveRawMessages
// that carried several APPENDs, the folder is read for their bytes and
// those not there are saved again one by one, so one APPEND's refusal
// does not fail the others, and none is saved twice.
func TestRefusedBatchIsSplit(t *testing.T) {
	e := newEnv(t, options{})
	msgs := []string{testMessage("first")}
	for i := range 5 {
		msgs = append(msgs, testMessage(fmt.Sprintf("shared-%d", i)))
	}
	e.sandbox.ResetCalls()
	e.sandbox.InjectFault("SaveRawMessages", sandbox.Fault{Latency: 400 * time.Millisecond, Times: 1})
	first := e.login(alice, alicePW)
	firstDone := make(chan imap.UID, 1)
	go func() {
		data, err := appendMsg(first, "INBOX", msgs[0])
		if err != nil {
			t.Errorf("APPEND 0: %v", err)
			firstDone <- 0
			return
		}
		firstDone <- data.UID
	}()
	for deadline := time.Now().Add(5 * time.Second); e.sandbox.Calls("SaveRawMessages") == 0; {
		if time.Now().After(deadline) {
			t.Fatal("the first APPEND's save never reached the provider")
		}
		time.Sleep(5 * time.Millisecond)
	}
	// The first save is with the provider: the next five wait for it and
	// go together, in a call the provider refuses.
	e.sandbox.InjectFault("SaveRawMessages", sandbox.Fault{Code: 3, Times: 1})
	rest := appendAllAtOnce(t, e, msgs[1:])
	uids := append([]imap.UID{<-firstDone}, rest...)
	// The first alone, the five together (refused), then each again alone.
	if got := e.sandbox.Calls("SaveRawMessages"); got != 7 {
		t.Errorf("SaveRawMessages called %d times; want 7 (1 alone, 1 of five refused, 5 alone)", got)
	}
	checkSavedOnce(t, e, msgs, uids)
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
