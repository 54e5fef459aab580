package mailstore

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

// fakePath is an AnswerPath that is lost when told.
type fakePath struct{ lost atomic.Bool }

func (p *fakePath) Lost() bool { return p.lost.Load() }

// TestLostAnswerPathRetryIsAnsweredFromTheFolder: an APPEND answered on
// a path another replica relays, which then died (the client never got
// the answer), is retried: the retry is answered with the message
// already saved, not saved again. While the path stands, the same bytes
// again are a new message (TestRepeatedAppendIsANewMessage); and once
// the answer grace has passed with the path lost, the entry stays for
// the retry instead of ending.
func TestLostAnswerPathRetryIsAnsweredFromTheFolder(t *testing.T) {
	p := newFolderProvider(1)
	st := newTestStore(t, p)
	ctx := context.Background()
	f, err := st.Acquire(ctx, testAuth, "INBOX")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Release(f)

	path := &fakePath{}
	pctx := WithAnswerPath(ctx, path)
	raw := []byte("Message-ID: <lost@example.org>\r\nSubject: lost\r\n\r\nrelayed\r\n")
	first, err := f.Append(pctx, testAuth, raw, "<lost@example.org>", false, nil, true)
	if err != nil || first == 0 {
		t.Fatalf("first APPEND: uid %d, %v", first, err)
	}
	again, err := f.Append(pctx, testAuth, raw, "<lost@example.org>", false, nil, true)
	if err != nil || again == first || p.count("Save") != 2 {
		t.Fatalf("the same bytes while the path stands: uid %d (first %d), %v, %d saves; want a second message", again, first, err, p.count("Save"))
	}
	path.lost.Store(true) // the relaying replica died
	retry, err := f.Append(ctx, testAuth, raw, "<lost@example.org>", false, nil, true)
	if err != nil || p.count("Save") != 2 || (retry != first && retry != again) {
		t.Fatalf("retry after the path was lost: uid %d (earlier %d, %d), %v, %d saves; want an earlier UID and no save", retry, first, again, err, p.count("Save"))
	}

	// The grace ends with the path lost: the entry is made unknown, not
	// ended, and a retry later is still answered from the folder.
	path2 := &fakePath{}
	raw2 := []byte("Message-ID: <late@example.org>\r\nSubject: late\r\n\r\nrelayed\r\n")
	uid2, err := f.Append(WithAnswerPath(ctx, path2), testAuth, raw2, "<late@example.org>", false, nil, true)
	if err != nil || uid2 == 0 {
		t.Fatalf("APPEND: %d, %v", uid2, err)
	}
	path2.lost.Store(true)
	time.Sleep(answerGrace + answeredBatch + 500*time.Millisecond)
	saves := p.count("Save")
	if u, err := st.cfg.State.UndecidedAttempts(ctx, testAuth.Username, st.appendKey("INBOX", raw2), st.owner); err != nil || len(u) != 1 {
		t.Fatalf("journal after the grace with the path lost: %+v, %v; want the entry, unknown", u, err)
	}
	retry2, err := f.Append(ctx, testAuth, raw2, "<late@example.org>", false, nil, true)
	if err != nil || retry2 != uid2 || p.count("Save") != saves {
		t.Fatalf("retry after the grace, path lost: uid %d (saved %d), %v, %d new saves; want the saved UID", retry2, uid2, err, p.count("Save")-saves)
	}
}
