package smtpbackend_test

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"

	"github.com/directbridge/directbridge/internal/state"
	"github.com/directbridge/directbridge/smtpbackend"
)

// startServer starts another SMTP server of the harness, on the same
// provider, with the state store st: the bridge after a restart. It is
// shut down before the harness's own cleanup checks its servers.
func startServer(t *testing.T, h *harness, st state.StateStore) string {
	t.Helper()
	cfg := h.cfg
	cfg.Store = st
	srv, err := smtpbackend.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	addr := h.serve(t, srv.ServeSubmission, "127.0.0.1:0")
	t.Cleanup(func() {
		if err := srv.Shutdown(ctxT(t)); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	})
	return addr
}

// loginAt dials the submission listener at addr and logs in as user.
func loginAt(t *testing.T, addr, user string) *smtp.Client {
	t.Helper()
	c, err := smtp.DialStartTLS(addr, clientTLS())
	if err != nil {
		t.Fatalf("DialStartTLS: %v", err)
	}
	withTimeouts(t, c)
	if err := c.Auth(sasl.NewPlainClient("", user, passwords[user])); err != nil {
		t.Fatalf("AUTH PLAIN %s: %v", user, err)
	}
	return c
}

// journalKeys returns the keys and matches of the send journal in dir's
// state store, read directly from the database file.
func journalKeys(t *testing.T, dir string) (keys, matches []string) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "state.db")+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query(`SELECT key, match FROM submissions`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var k, m string
		if err := rows.Scan(&k, &m); err != nil {
			t.Fatal(err)
		}
		keys, matches = append(keys, k), append(matches, m)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return keys, matches
}

// TestJournalKeyedAcrossRestart: with the data directory's journal key
// (state.LoadJournalKey, as the bridge loads it), the send journal holds
// the message's fingerprint as HMAC-SHA256 under the key, and the state
// store holds no plain SHA-256 of the message (nor the old unkeyed
// journal key) anywhere in its files. After a restart (the store closed
// and opened again, the key read back from its file) a retry of the
// message is recognised: 250 with the first smtpId, not sent again. Under
// another key it is not recognised: the fingerprint depends on the key.
//
// Broken on purpose: with submissionKey hashing with sha256.New() again,
// the key is not the HMAC and the unkeyed hash is found in the database;
// with a key made anew at each start, the retry after the restart is sent
// a second time.
func TestJournalKeyedAcrossRestart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	key, created, err := state.LoadJournalKey(dir)
	if err != nil || !created {
		t.Fatalf("LoadJournalKey on a new directory: created %v, %v", created, err)
	}
	st, err := state.OpenStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, func(c *smtpbackend.Config) { c.Store = smtpbackend.WithJournalKey(st, key) })
	sends := func() int { return h.sb.Calls("Send") + h.sb.Calls("SendWithHeader") }
	subject := h.subject("keyed journal")
	// With a Message-ID: identical bytes whose 250 was written are a
	// retry only when they carry one (journal.go).
	raw := simple(subject, "Potassium 6.8 mmol/L, please call the patient.\n",
		fmt.Sprintf("Message-ID: <keyed-%d@client.example>", h.seq.Add(1)))

	c := h.login(t, aliceAddr)
	first := mustSubmit(t, c, aliceAddr, []string{bobAddr}, raw)
	got := h.withSubject(t, bobAddr, "INBOX", subject)
	if len(got) != 1 || !strings.Contains(first, smtpIDOf(got[0])) {
		t.Fatalf("first send: %d copies, reply %q", len(got), first)
	}
	id := smtpIDOf(got[0])
	c.Close()
	st.Close() // the bridge stops

	keys, matches := journalKeys(t, dir)
	m := hmac.New(sha256.New, key)
	m.Write([]byte(aliceAddr + "\x00\x00"))
	m.Write(raw)
	if want := hex.EncodeToString(m.Sum(nil)); len(keys) != 1 || keys[0] != want {
		t.Fatalf("journal keys %v; want the one HMAC-SHA256 under the key %s", keys, want)
	}
	sum := sha256.Sum256(raw)
	oldKey := sha256.Sum256(append([]byte(aliceAddr+"\x00\x00"), raw...))
	unkeyed := [][]byte{
		sum[:], []byte(hex.EncodeToString(sum[:])),
		oldKey[:], []byte(hex.EncodeToString(oldKey[:])),
		[]byte("Potassium"),
	}
	for _, name := range []string{"state.db", "state.db-wal"} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		for _, u := range unkeyed {
			if bytes.Contains(b, u) {
				t.Errorf("%s holds %q: a plain hash or text of the message", name, u)
			}
		}
	}
	for _, v := range append(keys, matches...) {
		if v == hex.EncodeToString(sum[:]) || v == hex.EncodeToString(oldKey[:]) {
			t.Errorf("a journal row holds the unkeyed hash %s", v)
		}
	}

	// The restart: the key is read back, not made again.
	again, created, err := state.LoadJournalKey(dir)
	if err != nil || created || !bytes.Equal(again, key) {
		t.Fatalf("LoadJournalKey after the restart: created %v, %v, same key %v", created, err, bytes.Equal(again, key))
	}
	st2, err := state.OpenStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st2.Close() })
	c2 := loginAt(t, startServer(t, h, smtpbackend.WithJournalKey(st2, again)), aliceAddr)
	if reply := mustSubmit(t, c2, aliceAddr, []string{bobAddr}, raw); !strings.Contains(reply, id) {
		t.Errorf("the retry after the restart got %q; want the first send's smtpId %s", reply, id)
	}
	if n := sends(); n != 1 {
		t.Fatalf("the provider saw %d sends after the retry; want 1", n)
	}

	// Under another key the journal entry is not this message's.
	other := make([]byte, state.JournalKeySize)
	rand.Read(other)
	c3 := loginAt(t, startServer(t, h, smtpbackend.WithJournalKey(st2, other)), aliceAddr)
	if reply := mustSubmit(t, c3, aliceAddr, []string{bobAddr}, raw); strings.Contains(reply, id) {
		t.Errorf("under another key the message was recognised: %q", reply)
	}
	if n := sends(); n != 2 {
		t.Errorf("the provider saw %d sends; want 2 (another key, another fingerprint)", n)
	}
}
