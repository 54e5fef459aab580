package imapbackend_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/emersion/go-imap/v2"
)

func TestStatusItems(t *testing.T) {
	e := newEnv(t, options{})
	e.createFolders(alice, "INBOX.Work")
	var uids []int64
	var size int64
	for i := range 3 {
		raw := testMessage(fmt.Sprintf("work%d", i))
		uids = append(uids, e.deliver(alice, "INBOX.Work", raw))
		size += int64(len(raw))
	}
	if err := e.client.MarkMessagesAsReadByUIDs(context.Background(), auth(alice), "INBOX.Work", uids[:1]); err != nil {
		t.Fatal(err)
	}
	validity := e.setKeptFlags(alice, "INBOX.Work", map[uint32][]string{uint32(uids[2]): {`\Deleted`}})

	c := e.login(alice, alicePW)
	st, err := c.Status("INBOX.Work", &imap.StatusOptions{NumMessages: true, NumUnseen: true, UIDNext: true, UIDValidity: true,
		Size: true, NumDeleted: true, AppendLimit: true}).Wait()
	if err != nil {
		t.Fatal(err)
	}
	if *st.NumMessages != 3 || *st.NumUnseen != 2 || st.UIDNext != imap.UID(uids[2]+1) || st.UIDValidity != validity ||
		*st.Size != size || *st.NumDeleted != 1 || st.AppendLimit == nil || *st.AppendLimit == 0 {
		t.Fatalf("STATUS: %+v (size %d)", st, size)
	}

	lc := e.lineLogin(alice, alicePW)
	// No session has been shown the messages yet: all three are \Recent
	// (RFC 3501 §2.3.2).
	lines, s := lc.cmd(`STATUS "inbox.Work" (MESSAGES RECENT DELETED-STORAGE)`)
	if !strings.HasPrefix(s, "OK") || len(lines) != 1 || lines[0] != fmt.Sprintf(`* STATUS "inbox.Work" (MESSAGES 3 DELETED-STORAGE %d RECENT 3)`, len(testMessage("work2"))) {
		t.Errorf("STATUS with RECENT: %q %s", lines, s)
	}
	lines, s = lc.cmd(`STATUS inbox (MESSAGES UNSEEN)`)
	if !strings.HasPrefix(s, "OK") || len(lines) != 1 || lines[0] != `* STATUS INBOX (MESSAGES 0 UNSEEN 0)` {
		t.Errorf("STATUS inbox: %q %s", lines, s)
	}
	for _, name := range []string{"INBOX.work", "INBOX.Nope", "Work", "INBOX..Work"} {
		_, err := c.Status(name, &imap.StatusOptions{NumMessages: true}).Wait()
		wantCode(t, "STATUS "+name, err, imap.ResponseCodeNonExistent)
	}
	// "Inbox.Sent" is INBOX.Sent; the reply names it as asked.
	if st, err := c.Status("Inbox.Sent", &imap.StatusOptions{NumMessages: true}).Wait(); err != nil || st.NumMessages == nil || *st.NumMessages != 0 {
		t.Errorf("STATUS Inbox.Sent: %+v, %v", st, err)
	}

	// STATUS of the selected folder is allowed and agrees with SELECT.
	sel, err := c.Select("INBOX.Work", nil).Wait()
	if err != nil {
		t.Fatal(err)
	}
	st2 := mustStatus(t, c, "INBOX.Work")
	if *st2.NumMessages != sel.NumMessages || st2.UIDValidity != sel.UIDValidity || st2.UIDNext != sel.UIDNext {
		t.Errorf("STATUS of selected %+v; SELECT %+v", st2, sel)
	}
}

// TestStatusCost: STATUS runs on the shared mirror, at the cost the issue
// sets, and a repeat within the mirror's freshness costs nothing, on any
// connection of the user.
func TestStatusCost(t *testing.T) {
	e := newEnv(t, options{})
	e.createFolders(alice, "INBOX.Unread", "INBOX.Read")
	e.deliver(alice, "INBOX.Unread", testMessage("u1"))
	e.deliver(alice, "INBOX.Unread", testMessage("u2"))
	r1 := e.deliver(alice, "INBOX.Read", testMessage("r1"))
	if err := e.client.MarkMessagesAsReadByUIDs(context.Background(), auth(alice), "INBOX.Read", []int64{r1}); err != nil {
		t.Fatal(err)
	}
	c := e.login(alice, alicePW)
	c2 := e.login(alice, alicePW)
	opts := &imap.StatusOptions{NumMessages: true, NumUnseen: true, UIDNext: true, UIDValidity: true}

	cost := func(what string, f func(), want map[string]int) {
		t.Helper()
		before := e.sandbox.CallCounts()
		f()
		after := e.sandbox.CallCounts()
		got := map[string]int{}
		for op, n := range after {
			if d := n - before[op]; d != 0 {
				got[op] = d
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s cost %v; want %v", what, got, want)
		}
	}
	cost("STATUS of an unread folder", func() {
		if _, err := c.Status("INBOX.Unread", opts).Wait(); err != nil {
			t.Fatal(err)
		}
	}, map[string]int{"GetUIDs": 1, "GetUnreadMessageCount": 1}) // all unread: nothing to ask
	cost("STATUS again on another connection", func() {
		if _, err := c2.Status("INBOX.Unread", opts).Wait(); err != nil {
			t.Fatal(err)
		}
	}, map[string]int{})
	cost("STATUS of a read folder", func() {
		if _, err := c.Status("INBOX.Read", opts).Wait(); err != nil {
			t.Fatal(err)
		}
	}, map[string]int{"GetUIDs": 1, "GetUnreadMessageCount": 1})
	cost("STATUS SIZE", func() {
		if _, err := c.Status("INBOX.Read", &imap.StatusOptions{Size: true}).Wait(); err != nil {
			t.Fatal(err)
		}
	}, map[string]int{"GetMessageMetaData": 1})
	cost("STATUS SIZE again", func() {
		if _, err := c2.Status("INBOX.Read", &imap.StatusOptions{Size: true, NumMessages: true}).Wait(); err != nil {
			t.Fatal(err)
		}
	}, map[string]int{})
	cost("STATUS of a missing folder", func() {
		_, err := c.Status("INBOX.Missing", opts).Wait()
		wantCode(t, "STATUS missing", err, imap.ResponseCodeNonExistent)
	}, map[string]int{"GetUIDs": 1, "GetFolders": 1}) // a first load counts after its listing: nothing to count when that is refused

}
