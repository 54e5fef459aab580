package seqview

import (
	"bufio"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapserver"
)

// testSession is the smallest IMAP front over a Mailbox: SELECT, FETCH
// FLAGS, STORE, NOOP and IDLE, as the real front is to use the package.
type testSession struct {
	mb *Mailbox
	v  *View
}

var errUnsupported = &imap.Error{Type: imap.StatusResponseTypeNo, Text: "not in this test"}

func (s *testSession) Close() error {
	if s.v != nil {
		s.v.Close()
	}
	return nil
}
func (s *testSession) Login(string, string) error { return nil }
func (s *testSession) Select(_ string, o *imap.SelectOptions) (*imap.SelectData, error) {
	s.Unselect()
	v, data, err := s.mb.Open(ViewOptions{ReadOnly: o.ReadOnly})
	s.v = v
	return data, err
}
func (s *testSession) Create(string, *imap.CreateOptions) error         { return errUnsupported }
func (s *testSession) Delete(string) error                              { return errUnsupported }
func (s *testSession) Rename(string, string, *imap.RenameOptions) error { return errUnsupported }
func (s *testSession) Subscribe(string) error                           { return errUnsupported }
func (s *testSession) Unsubscribe(string) error                         { return errUnsupported }
func (s *testSession) List(*imapserver.ListWriter, string, []string, *imap.ListOptions) error {
	return errUnsupported
}
func (s *testSession) Status(string, *imap.StatusOptions) (*imap.StatusData, error) {
	return nil, errUnsupported
}
func (s *testSession) Append(string, imap.LiteralReader, *imap.AppendOptions) (*imap.AppendData, error) {
	return nil, errUnsupported
}
func (s *testSession) Poll(w *imapserver.UpdateWriter, allowExpunge bool) error {
	if s.v == nil {
		return nil
	}
	return s.v.Poll(w, allowExpunge)
}
func (s *testSession) Idle(w *imapserver.UpdateWriter, stop <-chan struct{}) error {
	return s.v.Idle(w, stop)
}
func (s *testSession) Unselect() error {
	if s.v != nil {
		s.v.Close()
		s.v = nil
	}
	return nil
}
func (s *testSession) Expunge(*imapserver.ExpungeWriter, *imap.UIDSet) error { return errUnsupported }
func (s *testSession) Search(imapserver.NumKind, *imap.SearchCriteria, *imap.SearchOptions) (*imap.SearchData, error) {
	return nil, errUnsupported
}
func (s *testSession) Copy(imap.NumSet, string) (*imap.CopyData, error) { return nil, errUnsupported }

func (s *testSession) Fetch(w *imapserver.FetchWriter, set imap.NumSet, _ *imap.FetchOptions) error {
	ts, err := s.v.Resolve(set)
	if errors.Is(err, ErrBadSeqNum) {
		return &imap.Error{Type: imap.StatusResponseTypeBad, Text: "No such message"}
	}
	if err != nil {
		return err
	}
	var seqs []uint32
	var uids []imap.UID
	for _, t := range ts {
		if t.Seq != 0 {
			seqs, uids = append(seqs, t.Seq), append(uids, t.UID)
		}
	}
	for i, fl := range s.v.FetchFlags(uids...) {
		m := w.CreateMessage(seqs[i])
		m.WriteUID(uids[i])
		m.WriteFlags(fl)
		if err := m.Close(); err != nil {
			return err
		}
	}
	return nil
}

func (s *testSession) Store(_ *imapserver.FetchWriter, set imap.NumSet, fl *imap.StoreFlags, _ *imap.StoreOptions) error {
	ts, err := s.v.Resolve(set)
	if err != nil {
		return err
	}
	var changes []FlagChange
	var uids []imap.UID
	for _, t := range ts {
		if t.Live {
			changes = append(changes, FlagChange{UID: t.UID, Op: fl.Op, Flags: fl.Flags})
			uids = append(uids, t.UID)
		}
	}
	s.mb.SetFlags(s.v, changes...)
	if !fl.Silent {
		s.v.QueueFetch(uids...)
	}
	return nil
}

// wire is one raw IMAP connection.
type wire struct {
	t    *testing.T
	conn net.Conn
	r    *bufio.Reader
}

func (c *wire) line() string {
	c.t.Helper()
	c.conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	l, err := c.r.ReadString('\n')
	if err != nil {
		c.t.Fatalf("read: %v", err)
	}
	return strings.TrimRight(l, "\r\n")
}

// cmd sends a command and returns the untagged lines before its tagged
// answer, and the answer's status word.
func (c *wire) cmd(text string) (lines []string, status string) {
	c.t.Helper()
	if _, err := c.conn.Write([]byte("t " + text + "\r\n")); err != nil {
		c.t.Fatal(err)
	}
	for {
		l := c.line()
		if rest, ok := strings.CutPrefix(l, "t "); ok {
			status, _, _ = strings.Cut(rest, " ")
			return lines, status
		}
		lines = append(lines, l)
	}
}

func (c *wire) expect(text string, want ...string) {
	c.t.Helper()
	lines, status := c.cmd(text)
	got := append(lines, status)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		c.t.Errorf("%s:\n got: %q\nwant: %q", text, got, want)
	}
}

// TestThroughGoIMAPServer runs the package behind go-imap's server and
// checks the wire: the order of FLAGS and FETCH, a message expunged by
// another party still fetched until the EXPUNGE, BAD for a number the
// client was not told of, and new mail during IDLE.
func TestThroughGoIMAPServer(t *testing.T) {
	mb := NewMailbox(Config{UIDValidity: 9, UIDNext: 4, RecentFrom: 4})
	if err := mb.Add(NewMessage{UID: 1, Flags: []imap.Flag{imap.FlagSeen}}, NewMessage{UID: 2, Flags: []imap.Flag{imap.FlagSeen}},
		NewMessage{UID: 3}); err != nil {
		t.Fatal(err)
	}
	srv := imapserver.New(&imapserver.Options{
		NewSession: func(*imapserver.Conn) (imapserver.Session, *imapserver.GreetingData, error) {
			return &testSession{mb: mb}, nil, nil
		},
		Caps:         imap.CapSet{imap.CapIMAP4rev1: {}},
		InsecureAuth: true,
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	defer srv.Close()
	dial := func() *wire {
		conn, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		c := &wire{t: t, conn: conn, r: bufio.NewReader(conn)}
		c.line() // greeting
		if _, st := c.cmd("LOGIN u p"); st != "OK" {
			t.Fatalf("LOGIN: %s", st)
		}
		lines, st := c.cmd("SELECT INBOX")
		if st != "OK" || !strings.Contains(strings.Join(lines, "\n"), "* 3 EXISTS") {
			t.Fatalf("SELECT: %s %q", st, lines)
		}
		return c
	}
	a, b := dial(), dial()
	const flagsWork = `* FLAGS (\Seen \Answered \Flagged \Deleted \Draft $Work)`

	// B's STORE answers FLAGS first, then its FETCH.
	b.expect("STORE 2 +FLAGS ($Work)", flagsWork, `* 2 FETCH (UID 2 FLAGS ($Work \Seen))`, "OK")
	// A was not told of $Work: its FETCH leaves it out, and FLAGS and the
	// full FETCH follow before the tagged OK.
	a.expect("FETCH 2 (FLAGS)", `* 2 FETCH (UID 2 FLAGS (\Seen))`, flagsWork, `* 2 FETCH (UID 2 FLAGS ($Work \Seen))`, "OK")
	// Expunged by the provider: A still fetches it, with no EXPUNGE
	// during FETCH; NOOP tells; then 3 is beyond what A was told.
	mb.Expunge(2)
	a.expect("FETCH 2 (FLAGS)", `* 2 FETCH (UID 2 FLAGS ($Work \Seen))`, "OK")
	a.expect("NOOP", "* 2 EXPUNGE", "OK")
	a.expect("FETCH 3 (FLAGS)", "BAD")
	// No EXPUNGE during STORE either.
	b.expect("STORE 1 +FLAGS.SILENT (\\Flagged)", "OK")

	// New mail reaches an idling client at once.
	if _, err := a.conn.Write([]byte("t IDLE\r\n")); err != nil {
		t.Fatal(err)
	}
	if l := a.line(); !strings.HasPrefix(l, "+ ") {
		t.Fatalf("IDLE: %q", l)
	}
	if l := a.line(); l != `* 1 FETCH (UID 1 FLAGS (\Flagged \Seen))` {
		t.Fatalf("IDLE: %q, want B's flag change", l)
	}
	if err := mb.Add(NewMessage{UID: 4}); err != nil {
		t.Fatal(err)
	}
	if l1, l2 := a.line(), a.line(); l1 != "* 3 EXISTS" || l2 != "* 1 RECENT" {
		t.Fatalf("IDLE: %q %q", l1, l2)
	}
	if _, err := a.conn.Write([]byte("DONE\r\n")); err != nil {
		t.Fatal(err)
	}
	if l := a.line(); !strings.HasPrefix(l, "t OK") {
		t.Fatalf("after DONE: %q", l)
	}
	// B, which was not idling, learns of it at its next command, without
	// \Recent (A took it); during FETCH the EXPUNGE is still withheld, so
	// B still counts message 2 and the new one is its fourth.
	b.expect("FETCH 1:* (FLAGS)", `* 1 FETCH (UID 1 FLAGS (\Flagged \Seen))`, `* 2 FETCH (UID 2 FLAGS ($Work \Seen))`,
		`* 3 FETCH (UID 3 FLAGS ())`, "* 4 EXISTS", "* 0 RECENT", "OK")
	b.expect("NOOP", "* 2 EXPUNGE", "OK")
	b.expect("FETCH 3 (FLAGS)", `* 3 FETCH (UID 4 FLAGS ())`, "OK")
}
