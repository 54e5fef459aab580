package imapbackend_test

import (
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"

	"github.com/directbridge/directbridge/sandbox"
)

// TestAppendConfirmNarrowsToProviderClock: the metadata search that
// confirms an APPEND's UID asks for what was received since the seconds
// before the save in the provider's clock, learnt from the messages saved before, not for ten
// minutes of mail (every message of which the provider parses and the
// bridge decodes); here the provider's clock is three minutes ahead, and
// after one jump of another ninety seconds the wide search still finds
// the message. Every APPEND is answered with its own message's UID, and
// once the clock is known costs one save and one search.
func TestAppendConfirmNarrowsToProviderClock(t *testing.T) {
	var skew atomic.Int64
	skew.Store(int64(3 * time.Minute))
	var mu sync.Mutex
	var widths []time.Duration
	e := newEnv(t, options{
		sandbox: func(o *sandbox.Options) {
			o.Clock = func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }
		},
		wrap: func(h http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if _, rest, ok := strings.Cut(r.URL.Path, "/SearchMessagesMetadataByReceivedDate/"); ok {
					parts := strings.Split(rest, "/")
					begin, _ := strconv.ParseInt(parts[len(parts)-2], 10, 64)
					// How far back the search reaches from the
					// provider's now: what it makes the provider read.
					// (A light refresh's search is open at the end,
					// where nothing has been received yet.)
					now := time.Now().Add(time.Duration(skew.Load()))
					mu.Lock()
					widths = append(widths, now.Sub(time.UnixMilli(begin)))
					mu.Unlock()
				}
				h.ServeHTTP(w, r)
			})
		},
	})
	c := e.login(alice, alicePW)
	mustSelectFolder(t, c, "INBOX")
	check := func(i int) {
		t.Helper()
		subject := "saved" + strconv.Itoa(i)
		data, err := appendMsg(c, "INBOX", testMessage(subject))
		if err != nil {
			t.Fatal(err)
		}
		if data.UID == 0 {
			t.Fatalf("APPEND %d: no APPENDUID", i)
		}
		if ids := e.msgIDs(alice, "INBOX", []imap.UID{data.UID}); ids[data.UID] != "<"+subject+"@direct.example>" {
			t.Fatalf("APPEND %d answered UID %d, which holds %q", i, data.UID, ids[data.UID])
		}
	}
	for i := range 4 {
		check(i)
	}
	mu.Lock()
	before := slices.Clone(widths)
	mu.Unlock()
	if len(before) < 2 {
		t.Fatalf("%d metadata searches for 4 APPENDs; want one each", len(before))
	}
	if before[0] < 5*time.Minute {
		t.Errorf("the first search reaches %v back; with the provider's clock unknown it must reach minutes", before[0])
	}
	for i, w := range before[1:] {
		if w > time.Minute {
			t.Errorf("search %d reaches %v back once the provider's clock was learnt; want seconds", i+2, w)
		}
	}
	// With the clock known, an APPEND is one save and one search: the
	// search alone tells the new UID (internal/mailstore/discover.go), no listing
	// of the folder.
	e.sandbox.ResetCalls()
	check(100)
	if calls := e.sandbox.CallCounts(); calls["SaveRawMessages"] != 1 || calls["SearchMessagesMetadataByReceivedDate"] != 1 || calls["GetUIDs"] != 0 {
		t.Errorf("an APPEND cost %v; want one save and one search", calls)
	}
	mu.Lock()
	before = slices.Clone(widths)
	mu.Unlock()
	// The provider's clock jumps: the narrow search misses, the wide
	// one finds the message, and the next narrow ones follow the jump.
	skew.Add(int64(90 * time.Second))
	for i := 4; i < 8; i++ {
		check(i)
	}
	mu.Lock()
	after := widths[len(before):]
	mu.Unlock()
	if len(after) > 4+2 {
		t.Errorf("%d searches for 4 APPENDs after the clock jumped; want at most two extra (the narrow one of the search-only discovery and of the listing's pairing)", len(after))
	}
	if last := after[len(after)-1]; last > time.Minute {
		t.Errorf("after the jump the searches still reach %v back", last)
	}
}
