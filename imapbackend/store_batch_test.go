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

// TestConcurrentStoresShareMarkings: STOREs of \Seen from several
// connections on one folder, made while a marking is with the provider,
// go together in the next MarkMessagesAsReadByUIDs
// (mailstore/seenbatch.go); each connection is answered with its own
// message's new flags, and the provider has every message read.
func TestConcurrentStoresShareMarkings(t *testing.T) {
	e := newEnv(t, options{})
	const n = 10
	uids := make([]imap.UID, n)
	for i := range uids {
		uids[i] = imap.UID(e.deliver(alice, "INBOX", testMessage(fmt.Sprintf("unread-%d", i))))
	}
	conns := make([]*imapclient.Client, n)
	for i := range conns {
		conns[i] = e.login(alice, alicePW)
		mustSelectFolder(t, conns[i], "INBOX")
	}
	// Every marking takes 150 ms: the first goes alone, the others wait
	// for it and go together.
	e.sandbox.InjectFault("MarkMessagesAsReadByUIDs", sandbox.Fault{Latency: 150 * time.Millisecond})
	e.sandbox.ResetCalls()
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			msgs, err := c.Store(imap.UIDSetNum(uids[i]), &imap.StoreFlags{Op: imap.StoreFlagsAdd, Flags: []imap.Flag{imap.FlagSeen}}, nil).Collect()
			if err != nil {
				t.Errorf("STORE on connection %d: %v", i, err)
				return
			}
			if len(msgs) != 1 || msgs[0].UID != uids[i] || !slices.Contains(msgs[0].Flags, imap.FlagSeen) {
				t.Errorf("STORE on connection %d answered %+v; want FETCH of UID %d with \\Seen", i, msgs, uids[i])
			}
		}()
	}
	close(start)
	wg.Wait()
	marks := e.sandbox.Calls("MarkMessagesAsReadByUIDs")
	e.sandbox.ClearFaults()
	if marks > 3 {
		t.Errorf("%d STOREs of \\Seen started together made %d MarkMessagesAsReadByUIDs; want at most 3 (the first alone, the rest together)", n, marks)
	}
	if u := e.unread(alice, "INBOX"); u != 0 {
		t.Errorf("%d messages unread at the provider; want none", u)
	}
}
