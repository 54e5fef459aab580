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
	// Every save takes 150 ms: the first one goes alone, and the others,
	// started with it, wait for it and go together.
	e.sandbox.InjectFault("SaveRawMessages", sandbox.Fault{Latency: 150 * time.Millisecond})
	e.sandbox.ResetCalls()
	uids := appendAllAtOnce(t, e, msgs)
	saves := e.sandbox.Calls("SaveRawMessages")
	e.sandbox.ClearFaults()
	if saves > 3 {
		t.Errorf("%d APPENDs started together made %d SaveRawMessages; want at most 3 (the first alone, the rest together)", n, saves)
	}
	checkSavedOnce(t, e, msgs, uids)
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
