package sandbox_test

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/directbridge/directbridge/sandbox"
)

// TestHTTPByUIDOnLargeFolder: on a folder of 2,500 messages with holes,
// the by-UID operations answer for exactly the UIDs asked that exist, once
// each, in UID order, with the right bytes and message numbers; and the
// UID-set operations refuse a set with a missing UID as a whole.
func TestHTTPByUIDOnLargeFolder(t *testing.T) {
	t.Parallel()
	r := newWireEnv(t, sandbox.Options{})
	const n = 2500
	raws := map[int64][]byte{}
	var batch []string
	for i := range n {
		raw := benchMessage(i)[:300] // headers and a little body; size does not matter here
		raws[int64(i+1)] = raw       // SaveRawMessages hands out UIDs in order from 1
		batch = append(batch, `{"data":"`+base64.StdEncoding.EncodeToString(raw)+`"}`)
		if len(batch) == 500 || i == n-1 {
			r.ok("POST", "/SaveRawMessages/INBOX", `{"auth":`+wireAliceAuth+`,"messages":[`+strings.Join(batch, ",")+`]}`)
			batch = nil
		}
	}
	var gone []int64
	for uid := int64(10); uid <= n; uid += 10 {
		gone = append(gone, uid)
	}
	r.ok("POST", "/DeleteMessagesByUIDs/INBOX/true", wireUIDsBody(wireAliceAuth, gone...))
	uids := r.uids(wireAliceAuth, "INBOX")
	if len(uids) != n-len(gone) {
		t.Fatalf("%d UIDs left, want %d", len(uids), n-len(gone))
	}
	msgnum := map[int64]int64{}
	for i, u := range uids {
		msgnum[u] = int64(i + 1)
	}

	// Unordered, with duplicates, deleted UIDs and UIDs never handed out.
	ask := []int64{2499, n + 40, 3, 2490, 1, 2499, 1234, 0, 3, 1250}
	want := []int64{1, 3, 1234, 2499}
	raw := wireList(t, r.ok("POST", "/GetRawMessagesByUIDs/INBOX", wireUIDsBody(wireAliceAuth, ask...)), "messages")
	var got []int64
	for _, v := range raw {
		m := v.(map[string]any)
		uid := wireNum(t, m, "uid")
		got = append(got, uid)
		data, err := base64.StdEncoding.DecodeString(wireStr(t, m, "data"))
		if err != nil || string(data) != string(raws[uid]) {
			t.Errorf("GetRawMessagesByUIDs: uid %d: data differs from what was delivered (%v)", uid, err)
		}
		if wireStr(t, m, "msgID") != fmt.Sprintf("<bench-%d@other.example>", uid-1) {
			t.Errorf("GetRawMessagesByUIDs: uid %d: msgID %v", uid, m["msgID"])
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("GetRawMessagesByUIDs(%v) answered UIDs %v, want %v", ask, got, want)
	}

	// Few UIDs and many (the sandbox numbers them in two ways).
	many := slices.Clone(ask)
	for u := int64(2000); u < 2060; u++ {
		many = append(many, u, u)
	}
	for _, ask := range [][]int64{ask, many} {
		var want []int64
		for _, u := range ask {
			if _, ok := msgnum[u]; ok && !slices.Contains(want, u) {
				want = append(want, u)
			}
		}
		slices.Sort(want)
		ms := wireList(t, r.ok("POST", "/GetMessagesByUIDs/INBOX", wireUIDsBody(wireAliceAuth, ask...)), "messages")
		got = nil
		for _, v := range ms {
			m := v.(map[string]any)
			uid := wireNum(t, m, "uid")
			got = append(got, uid)
			if wireNum(t, m, "msgnum") != msgnum[uid] || wireNum(t, m, "size") != int64(len(raws[uid])) ||
				wireStr(t, m, "subject") != fmt.Sprintf("note %d", uid-1) || m["body"] == "" {
				t.Errorf("GetMessagesByUIDs: uid %d: msgnum %v size %v subject %v, want msgnum %d size %d",
					uid, m["msgnum"], m["size"], m["subject"], msgnum[uid], len(raws[uid]))
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("GetMessagesByUIDs(%d UIDs) answered UIDs %v, want %v", len(ask), got, want)
		}
	}

	// A set with duplicates is fine; one missing UID refuses the whole set.
	r.ok("POST", "/MarkMessagesAsReadByUIDs/INBOX", wireUIDsBody(wireAliceAuth, 2499, 5, 2499, 5))
	if u := r.unread(wireAliceAuth, "INBOX"); u != int64(len(uids)-2) {
		t.Errorf("unread %d after marking 2 read, want %d", u, len(uids)-2)
	}
	r.fails("POST", "/MarkMessagesAsReadByUIDs/INBOX", wireUIDsBody(wireAliceAuth, 7, 2490), http.StatusOK, sandbox.CodeBadRequest)
	if u := r.unread(wireAliceAuth, "INBOX"); u != int64(len(uids)-2) {
		t.Errorf("a refused mark changed the unread count to %d", u)
	}
	unread := wireList(t, r.ok("POST", "/GetUnreadMessages/INBOX", wireAliceAuth), "messages")
	// The last message (2499) is read now; the one before it is the last unread.
	if len(unread) != len(uids)-2 || wireNum(t, unread[len(unread)-1].(map[string]any), "msgnum") != int64(len(uids)-1) {
		t.Errorf("GetUnreadMessages: %d messages, the last numbered %v", len(unread), unread[len(unread)-1].(map[string]any)["msgnum"])
	}

	// Copy hands out new UIDs in the order of the source UIDs, once each.
	r.ok("POST", "/CreateFolder/INBOX.Copy", wireAliceAuth)
	r.ok("POST", "/CopyMessagesByUIDs/INBOX/INBOX.Copy", wireUIDsBody(wireAliceAuth, 2499, 4, 1234, 4))
	copied := wireList(t, r.ok("POST", "/GetRawMessagesByUIDs/INBOX.Copy", wireUIDsBody(wireAliceAuth, 1, 2, 3, 4)), "messages")
	if len(copied) != 3 {
		t.Fatalf("copy holds %d messages, want 3", len(copied))
	}
	for i, src := range []int64{4, 1234, 2499} {
		m := copied[i].(map[string]any)
		data, _ := base64.StdEncoding.DecodeString(wireStr(t, m, "data"))
		if wireNum(t, m, "uid") != int64(i+1) || string(data) != string(raws[src]) {
			t.Errorf("copy uid %v is not source uid %d", m["uid"], src)
		}
	}
}
