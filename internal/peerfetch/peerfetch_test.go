package peerfetch

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"

	"github.com/directbridge/directbridge/internal/mailstore"
	"github.com/directbridge/directbridge/upstream/directapi"
)

// serve starts a server of src under key on a real socket.
func serve(t *testing.T, key []byte, src Source) string {
	t.Helper()
	srv, err := NewServer(key, src, nil)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close(context.Background()) })
	return ln.Addr().String()
}

func key(b byte) []byte { return bytes.Repeat([]byte{b}, 32) }

func TestHeldRoundTrip(t *testing.T) {
	ref := mailstore.FolderRef{User: "alice@direct.example", Folder: "INBOX", Validity: 7}
	raw := []byte("From: bob@direct.example\r\nSubject: x\r\n\r\nbody\x00with a NUL and \xff bytes\r\n")
	var asked []imap.UID
	addr := serve(t, key(1), func(r mailstore.FolderRef, uids []imap.UID) []mailstore.HeldMessage {
		if r != ref {
			t.Errorf("asked for %+v, want %+v", r, ref)
		}
		asked = uids
		meta := &directapi.MessageDetail{UID: 3, Size: len(raw)}
		meta.Subject = "x"
		return []mailstore.HeldMessage{
			{UID: 3, Raw: raw, Meta: meta},
			{UID: 5, Meta: &directapi.MessageDetail{UID: 5, Size: 10}}, // metadata only
		}
	})
	c, err := NewClient(key(1), func(id string) (string, bool) { return addr, id == "a" })
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.Held(context.Background(), "a", ref, []imap.UID{3, 4, 5})
	if err != nil {
		t.Fatal(err)
	}
	if len(asked) != 3 {
		t.Errorf("the holder was asked for %v, want 3 UIDs", asked)
	}
	if len(got) != 2 || got[0].UID != 3 || !bytes.Equal(got[0].Raw, raw) || got[0].Meta == nil || got[0].Meta.Subject != "x" ||
		got[1].UID != 5 || got[1].Raw != nil || got[1].Meta == nil || got[1].Meta.Size != 10 {
		t.Fatalf("answer: %+v", got)
	}
	// A replica that serves nothing is not asked, and that is no error.
	if got, err := c.Held(context.Background(), "b", ref, []imap.UID{3}); err != nil || got != nil {
		t.Fatalf("a replica without an address: %v, %v; want nothing, no error", got, err)
	}
}

// TestHeldRefusesStrangers: a replica of another cluster (another
// journal key), a request not sealed at all, and one recorded and sent
// again after MaxSkew are refused, and the holder is never asked.
func TestHeldRefusesStrangers(t *testing.T) {
	served := 0
	addr := serve(t, key(1), func(mailstore.FolderRef, []imap.UID) []mailstore.HeldMessage {
		served++
		return []mailstore.HeldMessage{{UID: 1, Raw: []byte("secret")}}
	})
	ref := mailstore.FolderRef{User: "alice@direct.example", Folder: "INBOX", Validity: 1}
	stranger, _ := NewClient(key(2), func(string) (string, bool) { return addr, true })
	if got, err := stranger.Held(context.Background(), "a", ref, []imap.UID{1}); err == nil || got != nil {
		t.Fatalf("another cluster's replica got %v, %v; want refused", got, err)
	}
	plain, _ := json.Marshal(request{T: time.Now().UnixMilli(), U: ref.User, F: ref.Folder, V: 1, I: []uint32{1}})
	resp, err := http.Post("http://"+addr+Path, "application/json", bytes.NewReader(plain))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("an unsealed request: %s, want 403", resp.Status)
	}
	s, _ := newSealer(key(1))
	old, _ := json.Marshal(request{T: time.Now().Add(-2 * MaxSkew).UnixMilli(), U: ref.User, F: ref.Folder, V: 1, I: []uint32{1}})
	resp, err = http.Post("http://"+addr+Path, "application/octet-stream", bytes.NewReader(s.seal(old, []byte(requestAD))))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("a request older than MaxSkew: %s, want 403", resp.Status)
	}
	if served != 0 {
		t.Fatalf("the holder was asked %d times for refused requests", served)
	}
	// A request recorded on the network and sent again is answered once.
	fresh, _ := json.Marshal(request{T: time.Now().UnixMilli(), U: ref.User, F: ref.Folder, V: 1, I: []uint32{1}})
	sealed := s.seal(fresh, []byte(requestAD))
	for i, want := range []int{http.StatusOK, http.StatusForbidden} {
		resp, err := http.Post("http://"+addr+Path, "application/octet-stream", bytes.NewReader(sealed))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Fatalf("the same request, time %d: %s, want %d", i+1, resp.Status, want)
		}
	}
	if served != 1 {
		t.Fatalf("the holder was asked %d times for one request sent twice, want 1", served)
	}
}

// TestAnswerBoundToRequest: an answer opens only as the answer to its
// own request, not to another one.
func TestAnswerBoundToRequest(t *testing.T) {
	s, _ := newSealer(key(1))
	req1 := s.seal([]byte("one"), []byte(requestAD))
	req2 := s.seal([]byte("two"), []byte(requestAD))
	n := s.aead.NonceSize()
	answer := s.seal(appendHeld(nil, mailstore.HeldMessage{UID: 1, Raw: []byte("x")}), answerADFor(req1[:n]))
	if _, _, err := s.open(answer, answerADFor(req2[:n])); err == nil {
		t.Fatal("an answer opened as the answer to another request")
	}
	if _, _, err := s.open(req1, answerADFor(req1[:n])); err == nil {
		t.Fatal("a request opened as an answer")
	}
	if _, err := parseAnswer([]byte{0, 0, 0, 1, 0, 0, 0, 9, 1}); err == nil {
		t.Fatal("a truncated answer parsed")
	}
}

// TestDeadHolderNotAskedAgain: a replica that does not answer (its pod
// gone, its heartbeat not yet expired) is left alone for cluster.DownFor, so
// that each FETCH does not wait for its dial to fail.
func TestDeadHolderNotAskedAgain(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nobody listens there now
	c, _ := NewClient(key(1), func(string) (string, bool) { return addr, true })
	ref := mailstore.FolderRef{User: "alice@direct.example", Folder: "INBOX", Validity: 1}
	if _, err := c.Held(context.Background(), "gone", ref, []imap.UID{1}); err == nil {
		t.Fatal("a replica that does not listen answered")
	}
	start := time.Now()
	got, err := c.Held(context.Background(), "gone", ref, []imap.UID{1})
	if !errors.Is(err, ErrDown) || got != nil || time.Since(start) > 100*time.Millisecond {
		t.Fatalf("asked again at once: %v, %v after %v; want left alone (ErrDown at once)", got, err, time.Since(start))
	}
}

// TestNonceSet: a nonce is refused a second time within the window,
// forgotten oldest first once past it.
func TestNonceSet(t *testing.T) {
	var s nonceSet
	t0 := time.Now()
	a, b := bytes.Repeat([]byte{1}, 12), bytes.Repeat([]byte{2}, 12)
	if !s.add(a, t0) || s.add(a, t0.Add(time.Second)) {
		t.Fatal("a nonce seen twice within the window was taken twice")
	}
	if !s.add(b, t0.Add(MaxSkew)) {
		t.Fatal("a fresh nonce refused")
	}
	// Past 2*MaxSkew, a is forgotten (a request that old is refused for
	// its age anyway) and b, younger, is still known.
	later := t0.Add(2*MaxSkew + time.Second)
	if s.add(b, later) || !s.add(a, later) {
		t.Fatal("nonces not forgotten oldest first")
	}
}
