package imapbackend_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"

	"github.com/directbridge/directbridge/imapbackend"
	"github.com/directbridge/directbridge/internal/state"
	"github.com/directbridge/directbridge/sandbox"
	"github.com/directbridge/directbridge/upstream/directapi"
)

// fsConn is a line-level IMAP client over TCP, for what imapclient cannot
// send (RFC822.* fetch items, SEARCH RETURN (SAVE), "$", exact search
// syntax) and to check wire text.
type fsConn struct {
	t   *testing.T
	c   net.Conn
	r   *bufio.Reader
	tag int
}

func fsDial(t *testing.T, e *env, user, pw string) *fsConn {
	t.Helper()
	conn, err := net.Dial("tcp", e.addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	fc := &fsConn{t: t, c: conn, r: bufio.NewReader(conn)}
	fc.c.SetDeadline(time.Now().Add(time.Minute))
	if g := fc.response(); !strings.HasPrefix(g, "* OK") {
		t.Fatalf("greeting %q", g)
	}
	fc.ok(`LOGIN "%s" "%s"`, user, pw)
	return fc
}

// run sends a command and returns its untagged responses, literals
// inlined, and the tagged status ("OK ...", "NO ...", "BAD ...").
func (fc *fsConn) run(format string, args ...any) ([]string, string) {
	fc.t.Helper()
	fc.tag++
	tag := "f" + strconv.Itoa(fc.tag)
	fc.c.SetDeadline(time.Now().Add(time.Minute))
	if _, err := fmt.Fprintf(fc.c, "%s %s\r\n", tag, fmt.Sprintf(format, args...)); err != nil {
		fc.t.Fatal(err)
	}
	var untagged []string
	for {
		line := fc.response()
		if rest, ok := strings.CutPrefix(line, tag+" "); ok {
			return untagged, rest
		}
		untagged = append(untagged, line)
	}
}

func (fc *fsConn) ok(format string, args ...any) []string {
	fc.t.Helper()
	untagged, status := fc.run(format, args...)
	if !strings.HasPrefix(status, "OK") {
		fc.t.Fatalf("%s: %s", fmt.Sprintf(format, args...), status)
	}
	return untagged
}

// response reads one response with its literals.
func (fc *fsConn) response() string {
	fc.t.Helper()
	var b strings.Builder
	for {
		line, err := fc.r.ReadString('\n')
		if err != nil {
			fc.t.Fatalf("reading response: %v (so far %q)", err, b.String())
		}
		b.WriteString(line)
		l := strings.TrimRight(line, "\r\n")
		if i := strings.LastIndexByte(l, '{'); i >= 0 && strings.HasSuffix(l, "}") {
			if n, err := strconv.Atoi(l[i+1 : len(l)-1]); err == nil {
				buf := make([]byte, n)
				if _, err := io.ReadFull(fc.r, buf); err != nil {
					fc.t.Fatal(err)
				}
				b.Write(buf)
				continue
			}
		}
		return strings.TrimRight(b.String(), "\r\n")
	}
}

// fsSelect selects a folder with imapclient.
func fsSelect(t *testing.T, c *imapclient.Client, name string) *imap.SelectData {
	t.Helper()
	d, err := c.Select(name, nil).Wait()
	if err != nil {
		t.Fatalf("SELECT %s: %v", name, err)
	}
	return d
}

// fsFetch runs a FETCH and fails the test on error.
func fsFetch(t *testing.T, c *imapclient.Client, set imap.NumSet, o *imap.FetchOptions) []*imapclient.FetchMessageBuffer {
	t.Helper()
	msgs, err := c.Fetch(set, o).Collect()
	if err != nil {
		t.Fatalf("FETCH %v: %v", set, err)
	}
	return msgs
}

func fsCode(err error) imap.ResponseCode {
	var ie *imap.Error
	if errors.As(err, &ie) {
		return ie.Code
	}
	return ""
}

// fsCRLF turns a readable message with \n line ends into wire form.
func fsCRLF(s string) string { return strings.ReplaceAll(s, "\n", "\r\n") }

// fsPDF is binary attachment content with every byte value.
var fsPDF = func() []byte {
	b := []byte("%PDF-1.4\n")
	for i := 0; i < 600; i++ {
		b = append(b, byte(i*7))
	}
	return b
}()

func fsWrap76(s string) string {
	var b strings.Builder
	for len(s) > 76 {
		b.WriteString(s[:76] + "\n")
		s = s[76:]
	}
	b.WriteString(s + "\n")
	return b.String()
}

// fsMultipart is a message with a quoted-printable text part and a base64
// PDF attachment, the usual shape of a Direct message with a document.
var fsMultipart = fsCRLF(`From: "Bob Example" <bob@direct.example>
To: alice@direct.example
Cc: carol@direct.example
Subject: =?utf-8?q?Caf=C3=A9_lab_results?=
Date: Mon, 02 Jan 2026 23:30:00 -0500
Message-ID: <multi@direct.example>
MIME-Version: 1.0
Content-Type: multipart/mixed; boundary="XYZ"

This is a multi-part message in MIME format.
--XYZ
Content-Type: text/plain; charset=utf-8
Content-Transfer-Encoding: quoted-printable

Glucose=3D5.4 mmol/L, na=C3=AFve
--XYZ
Content-Type: application/pdf; name="report.pdf"
Content-Disposition: attachment; filename="report.pdf"
Content-Transfer-Encoding: base64

` + fsWrap76(base64.StdEncoding.EncodeToString(fsPDF)) + `--XYZ--
`)

func TestFetchMetadataItems(t *testing.T) {
	e := newEnv(t, options{})
	raw := testMessage("meta")
	uid := e.deliver(alice, "INBOX", raw)
	e.deliver(alice, "INBOX", fsMultipart)
	c := e.login(alice, alicePW)
	fsSelect(t, c, "INBOX")

	msgs := fsFetch(t, c, imap.UIDSetNum(imap.UID(uid)), &imap.FetchOptions{
		UID: true, Flags: true, InternalDate: true, RFC822Size: true, Envelope: true,
	})
	if len(msgs) != 1 {
		t.Fatalf("%d messages", len(msgs))
	}
	m := msgs[0]
	if m.UID != imap.UID(uid) || m.SeqNum != 1 {
		t.Errorf("UID %d seq %d", m.UID, m.SeqNum)
	}
	if len(sortedFlags(m.Flags...)) != 0 {
		t.Errorf("FLAGS %v; want () (\\Recent aside) for a new message", m.Flags)
	}
	if d := time.Since(m.InternalDate); d < -time.Minute || d > time.Minute {
		t.Errorf("INTERNALDATE %v; want about now", m.InternalDate)
	}
	if m.RFC822Size != int64(len(raw)) {
		t.Errorf("RFC822.SIZE %d; want %d", m.RFC822Size, len(raw))
	}
	env := m.Envelope
	if env == nil || env.Subject != "meta" || env.MessageID != "meta@direct.example" ||
		len(env.From) != 1 || env.From[0].Addr() != bob || len(env.To) != 1 || env.To[0].Addr() != alice ||
		!env.Date.Equal(time.Date(2026, 1, 2, 15, 4, 5, 0, time.UTC)) {
		t.Errorf("ENVELOPE %+v", env)
	}

	// Encoded words decoded, display names, Cc, the Date's own zone.
	m = fsFetch(t, c, imap.SeqSetNum(2), &imap.FetchOptions{Envelope: true})[0]
	env = m.Envelope
	if env.Subject != "Café lab results" || env.From[0].Name != "Bob Example" || len(env.Cc) != 1 ||
		env.Cc[0].Addr() != "carol@direct.example" || env.Date.Format(time.RFC3339) != "2026-01-02T23:30:00-05:00" {
		t.Errorf("ENVELOPE %+v", env)
	}
}

func TestFetchBodySections(t *testing.T) {
	e := newEnv(t, options{})
	raw := testMessage("sections")
	e.deliver(alice, "INBOX", raw)
	c := e.login(alice, alicePW)
	fsSelect(t, c, "INBOX")

	all := &imap.FetchItemBodySection{Peek: true}
	part := &imap.FetchItemBodySection{Peek: true, Partial: &imap.SectionPartial{Offset: 0, Size: 10}}
	late := &imap.FetchItemBodySection{Peek: true, Partial: &imap.SectionPartial{Offset: 6, Size: 1000000}}
	past := &imap.FetchItemBodySection{Peek: true, Partial: &imap.SectionPartial{Offset: 100000, Size: 10}}
	header := &imap.FetchItemBodySection{Peek: true, Specifier: imap.PartSpecifierHeader}
	text := &imap.FetchItemBodySection{Peek: true, Specifier: imap.PartSpecifierText}
	subject := &imap.FetchItemBodySection{Peek: true, Specifier: imap.PartSpecifierHeader, HeaderFields: []string{"subject", "X-Missing"}}
	notSubject := &imap.FetchItemBodySection{Peek: true, Specifier: imap.PartSpecifierHeader, HeaderFieldsNot: []string{"Subject", "Message-ID", "Content-Type"}}
	one := &imap.FetchItemBodySection{Peek: true, Part: []int{1}}
	m := fsFetch(t, c, imap.SeqSetNum(1), &imap.FetchOptions{
		RFC822Size:  true,
		BodySection: []*imap.FetchItemBodySection{all, part, late, past, header, text, subject, notSubject, one},
	})[0]

	if got := string(m.FindBodySection(all)); got != raw {
		t.Errorf("BODY[] %q; want %q", got, raw)
	}
	if m.RFC822Size != int64(len(m.FindBodySection(all))) {
		t.Errorf("RFC822.SIZE %d != len(BODY[]) %d", m.RFC822Size, len(m.FindBodySection(all)))
	}
	if got := string(m.FindBodySection(part)); got != raw[:10] {
		t.Errorf("BODY[]<0.10> %q", got)
	}
	if got := string(m.FindBodySection(late)); got != raw[6:] {
		t.Errorf("BODY[]<6.1000000> %q", got)
	}
	if got := m.FindBodySection(past); len(got) != 0 {
		t.Errorf("BODY[]<100000.10> %q; want empty", got)
	}
	h, b := string(m.FindBodySection(header)), string(m.FindBodySection(text))
	if h+b != raw || !strings.HasSuffix(h, "\r\n\r\n") || b != "Hello sections\r\n" {
		t.Errorf("BODY[HEADER] %q BODY[TEXT] %q", h, b)
	}
	if got := string(m.FindBodySection(subject)); got != "Subject: sections\r\n\r\n" {
		t.Errorf("BODY[HEADER.FIELDS (subject X-Missing)] %q", got)
	}
	want := "From: bob@direct.example\r\nTo: alice@direct.example\r\nDate: Mon, 02 Jan 2026 15:04:05 +0000\r\n\r\n"
	if got := string(m.FindBodySection(notSubject)); got != want {
		t.Errorf("BODY[HEADER.FIELDS.NOT (...)] %q; want %q", got, want)
	}
	if got := string(m.FindBodySection(one)); got != "Hello sections\r\n" {
		t.Errorf("BODY[1] of a single-part message %q", got)
	}
}

func TestFetchMultipart(t *testing.T) {
	e := newEnv(t, options{})
	e.deliver(alice, "INBOX", fsMultipart)
	c := e.login(alice, alicePW)
	fsSelect(t, c, "INBOX")

	text := &imap.FetchItemBodySection{Peek: true, Part: []int{1}}
	mime2 := &imap.FetchItemBodySection{Peek: true, Part: []int{2}, Specifier: imap.PartSpecifierMIME}
	missing := &imap.FetchItemBodySection{Peek: true, Part: []int{9}}
	bin1 := &imap.FetchItemBinarySection{Peek: true, Part: []int{1}}
	bin2 := &imap.FetchItemBinarySection{Peek: true, Part: []int{2}}
	bin2part := &imap.FetchItemBinarySection{Peek: true, Part: []int{2}, Partial: &imap.SectionPartial{Offset: 9, Size: 5}}
	m := fsFetch(t, c, imap.SeqSetNum(1), &imap.FetchOptions{
		BodyStructure:     &imap.FetchItemBodyStructure{Extended: true},
		BodySection:       []*imap.FetchItemBodySection{text, mime2, missing},
		BinarySection:     []*imap.FetchItemBinarySection{bin1, bin2, bin2part},
		BinarySectionSize: []*imap.FetchItemBinarySectionSize{{Part: []int{2}}, {Part: []int{1}}},
	})[0]

	if got := string(m.FindBodySection(text)); got != "Glucose=3D5.4 mmol/L, na=C3=AFve" {
		t.Errorf("BODY[1] %q", got)
	}
	if got := string(m.FindBodySection(mime2)); !strings.Contains(got, "Content-Disposition: attachment; filename=\"report.pdf\"\r\n") ||
		!strings.HasSuffix(got, "\r\n\r\n") {
		t.Errorf("BODY[2.MIME] %q", got)
	}
	if got := m.FindBodySection(missing); len(got) != 0 {
		t.Errorf("BODY[9] %q; want empty", got)
	}
	if got := string(m.FindBinarySection(bin1)); got != "Glucose=5.4 mmol/L, naïve" {
		t.Errorf("BINARY[1] %q", got)
	}
	if got := m.FindBinarySection(bin2); !bytes.Equal(got, fsPDF) {
		t.Errorf("BINARY[2]: %d bytes, want the %d attachment bytes", len(got), len(fsPDF))
	}
	// imapclient's FindBinarySection ignores <partial>: the third answer.
	if got := m.BinarySection[2].Bytes; !bytes.Equal(got, fsPDF[9:14]) {
		t.Errorf("BINARY[2]<9.5> %v", got)
	}
	if n, ok := m.FindBinarySectionSize([]int{2}); !ok || n != uint32(len(fsPDF)) {
		t.Errorf("BINARY.SIZE[2] %d %v; want %d", n, ok, len(fsPDF))
	}
	if n, ok := m.FindBinarySectionSize([]int{1}); !ok || n != uint32(len("Glucose=5.4 mmol/L, naïve")) {
		t.Errorf("BINARY.SIZE[1] %d %v", n, ok)
	}

	mp, ok := m.BodyStructure.(*imap.BodyStructureMultiPart)
	if !ok || mp.Subtype != "mixed" || len(mp.Children) != 2 || mp.Extended == nil || mp.Extended.Params["boundary"] != "XYZ" {
		t.Fatalf("BODYSTRUCTURE %#v", m.BodyStructure)
	}
	p1, ok1 := mp.Children[0].(*imap.BodyStructureSinglePart)
	p2, ok2 := mp.Children[1].(*imap.BodyStructureSinglePart)
	if !ok1 || !ok2 {
		t.Fatalf("children %#v", mp.Children)
	}
	if p1.Type != "text" || p1.Subtype != "plain" || p1.Params["charset"] != "utf-8" || !strings.EqualFold(p1.Encoding, "quoted-printable") ||
		p1.Size != uint32(len("Glucose=3D5.4 mmol/L, na=C3=AFve")) || p1.Text == nil {
		t.Errorf("part 1 %#v", p1)
	}
	if p2.Type != "application" || p2.Subtype != "pdf" || !strings.EqualFold(p2.Encoding, "base64") ||
		p2.Extended == nil || p2.Extended.Disposition == nil || p2.Extended.Disposition.Value != "attachment" ||
		p2.Extended.Disposition.Params["filename"] != "report.pdf" || p2.Filename() != "report.pdf" {
		t.Errorf("part 2 %#v", p2)
	}

	// BODY (the non-extended structure) too.
	m = fsFetch(t, c, imap.SeqSetNum(1), &imap.FetchOptions{BodyStructure: &imap.FetchItemBodyStructure{}})[0]
	if mp, ok := m.BodyStructure.(*imap.BodyStructureMultiPart); !ok || len(mp.Children) != 2 {
		t.Errorf("BODY %#v", m.BodyStructure)
	}
}

// Mail that breaks MIME rules still gets a structure every client can
// parse, and the connection stays up.
func TestFetchBodyStructureOfOddMail(t *testing.T) {
	e := newEnv(t, options{})
	e.deliver(alice, "INBOX", "From: bob@direct.example\r\nSubject: no type\r\n\r\nplain\r\ntext\r\n")
	e.deliver(alice, "INBOX", "From: bob@direct.example\r\nSubject: no boundary\r\nContent-Type: multipart/mixed\r\n\r\nnot really multipart\r\n")
	e.deliver(alice, "INBOX", fsCRLF("From: bob@direct.example\nSubject: digest\nContent-Type: multipart/digest; boundary=D\n\n--D\n\nFrom: x@example.org\nSubject: inner\n\ninner body\n--D--\n"))
	c := e.login(alice, alicePW)
	fsSelect(t, c, "INBOX")
	msgs := fsFetch(t, c, imap.SeqSetNum(1, 2, 3), &imap.FetchOptions{BodyStructure: &imap.FetchItemBodyStructure{Extended: true}})
	if len(msgs) != 3 {
		t.Fatalf("%d answers", len(msgs))
	}
	p, ok := msgs[0].BodyStructure.(*imap.BodyStructureSinglePart)
	if !ok || p.Type != "text" || p.Subtype != "plain" || p.Params["charset"] != "us-ascii" || p.Text == nil || p.Text.NumLines != 2 {
		t.Errorf("no Content-Type: %#v", msgs[0].BodyStructure)
	}
	if p, ok := msgs[1].BodyStructure.(*imap.BodyStructureSinglePart); !ok || p.Type != "text" {
		t.Errorf("multipart without boundary: %#v", msgs[1].BodyStructure)
	}
	mp, ok := msgs[2].BodyStructure.(*imap.BodyStructureMultiPart)
	if !ok || mp.Subtype != "digest" || len(mp.Children) != 1 {
		t.Fatalf("digest: %#v", msgs[2].BodyStructure)
	}
	if inner, ok := mp.Children[0].(*imap.BodyStructureSinglePart); !ok || inner.Type != "message" || inner.MessageRFC822 == nil ||
		inner.MessageRFC822.Envelope.Subject != "inner" {
		t.Errorf("digest part: %#v", mp.Children[0])
	}
	if err := c.Noop().Wait(); err != nil {
		t.Fatal(err)
	}
}

// RFC822, RFC822.HEADER and RFC822.TEXT are answered under their own
// names; RFC822 and RFC822.TEXT set \Seen, RFC822.HEADER does not.
func TestFetchRFC822Items(t *testing.T) {
	e := newEnv(t, options{})
	raw := testMessage("old")
	e.deliver(alice, "INBOX", raw)
	e.deliver(alice, "INBOX", testMessage("older"))
	fc := fsDial(t, e, alice, alicePW)
	fc.ok("SELECT INBOX")

	resp := strings.Join(fc.ok("FETCH 1 (RFC822.HEADER)"), "\n")
	hdr := raw[:strings.Index(raw, "\r\n\r\n")+4]
	if !strings.Contains(resp, fmt.Sprintf("RFC822.HEADER {%d}\r\n%s", len(hdr), hdr)) || strings.Contains(resp, `\Seen`) {
		t.Errorf("RFC822.HEADER: %q", resp)
	}
	if n, _ := e.client.GetUnreadMessageCount(context.Background(), auth(alice), "INBOX"); n != 2 {
		t.Errorf("RFC822.HEADER marked read: %d unread", n)
	}
	resp = strings.Join(fc.ok("FETCH 1 (RFC822.TEXT)"), "\n")
	if !strings.Contains(resp, "RFC822.TEXT {11}\r\nHello old\r\n") || !strings.Contains(resp, `FLAGS (\Seen`) {
		t.Errorf("RFC822.TEXT: %q", resp)
	}
	resp = strings.Join(fc.ok("FETCH 2 (RFC822 RFC822.SIZE)"), "\n")
	raw2 := testMessage("older")
	if !strings.Contains(resp, fmt.Sprintf("RFC822 {%d}\r\n%s", len(raw2), raw2)) || !strings.Contains(resp, fmt.Sprintf("RFC822.SIZE %d", len(raw2))) ||
		!strings.Contains(resp, `FLAGS (\Seen`) {
		t.Errorf("RFC822: %q", resp)
	}
	if n, _ := e.client.GetUnreadMessageCount(context.Background(), auth(alice), "INBOX"); n != 0 {
		t.Errorf("after RFC822.TEXT and RFC822: %d unread", n)
	}
	// Macros.
	resp = strings.Join(fc.ok("FETCH 1 ALL"), "\n")
	for _, item := range []string{"FLAGS (", "INTERNALDATE ", "RFC822.SIZE ", "ENVELOPE ("} {
		if !strings.Contains(resp, item) {
			t.Errorf("FETCH ALL lacks %s: %q", item, resp)
		}
	}
	resp = strings.Join(fc.ok("FETCH 1 FULL"), "\n")
	if !strings.Contains(resp, `BODY ("text" "plain" ("charset" "utf-8")`) {
		t.Errorf("FETCH FULL: %q", resp)
	}
	// MIME without a part number is a client error.
	if _, st := fc.run("FETCH 1 BODY[MIME]"); !strings.HasPrefix(st, "BAD") {
		t.Errorf("BODY[MIME]: %s", st)
	}
}

// BODY[] sets \Seen at the provider and in every session's view; PEEK
// does not; FLAGS comes with the answer; other sessions on the folder get
// FETCH FLAGS; EXAMINE never sets it.
func TestFetchSetsSeen(t *testing.T) {
	e := newEnv(t, options{})
	for i := range 4 {
		e.deliver(alice, "INBOX", testMessage(fmt.Sprint("seen", i)))
	}
	unread := func() int {
		t.Helper()
		n, err := e.client.GetUnreadMessageCount(context.Background(), auth(alice), "INBOX")
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	updates := make(chan *imapclient.FetchMessageBuffer, 16)
	other, err := imapclient.DialInsecure(e.addr, &imapclient.Options{UnilateralDataHandler: &imapclient.UnilateralDataHandler{
		Fetch: func(msg *imapclient.FetchMessageData) {
			if buf, err := msg.Collect(); err == nil {
				updates <- buf
			}
		},
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if err := other.Login(alice, alicePW).Wait(); err != nil {
		t.Fatal(err)
	}
	fsSelect(t, other, "INBOX")
	c := e.login(alice, alicePW)
	fsSelect(t, c, "INBOX")

	peek := &imap.FetchItemBodySection{Peek: true}
	m := fsFetch(t, c, imap.SeqSetNum(1), &imap.FetchOptions{BodySection: []*imap.FetchItemBodySection{peek}})[0]
	if m.Flags != nil || unread() != 4 {
		t.Fatalf("BODY.PEEK[]: FLAGS %v, %d unread", m.Flags, unread())
	}

	marks := e.sandbox.Calls("MarkMessagesAsReadByUIDs")
	body := &imap.FetchItemBodySection{}
	msgs := fsFetch(t, c, imap.SeqSetNum(1, 2, 3), &imap.FetchOptions{BodySection: []*imap.FetchItemBodySection{body}})
	if len(msgs) != 3 {
		t.Fatalf("%d answers", len(msgs))
	}
	for _, m := range msgs {
		if !slices.Equal(m.Flags, []imap.Flag{imap.FlagSeen}) || len(m.FindBodySection(body)) == 0 {
			t.Errorf("BODY[] of %d: FLAGS %v", m.SeqNum, m.Flags)
		}
	}
	if n := e.sandbox.Calls("MarkMessagesAsReadByUIDs") - marks; n != 1 {
		t.Errorf("%d MarkMessagesAsReadByUIDs calls for 3 messages; want 1", n)
	}
	if n := unread(); n != 1 {
		t.Errorf("%d unread at the provider; want 1", n)
	}
	// Read again: nothing to mark, no FLAGS unless asked.
	marks = e.sandbox.Calls("MarkMessagesAsReadByUIDs")
	m = fsFetch(t, c, imap.SeqSetNum(1), &imap.FetchOptions{BodySection: []*imap.FetchItemBodySection{body}})[0]
	if m.Flags != nil || e.sandbox.Calls("MarkMessagesAsReadByUIDs") != marks {
		t.Errorf("second BODY[]: FLAGS %v, %d more calls", m.Flags, e.sandbox.Calls("MarkMessagesAsReadByUIDs")-marks)
	}
	m = fsFetch(t, c, imap.SeqSetNum(1, 4), &imap.FetchOptions{Flags: true})[1]
	if len(m.Flags) != 0 {
		t.Errorf("message 4 FLAGS %v", m.Flags)
	}

	// The other session learns on its next NOOP (imapclient hands
	// unilateral FETCH data to the handler asynchronously).
	if err := other.Noop().Wait(); err != nil {
		t.Fatal(err)
	}
	seenByOther := map[uint32][]imap.Flag{}
	for len(seenByOther) < 3 {
		select {
		case buf := <-updates:
			seenByOther[buf.SeqNum] = buf.Flags
		case <-time.After(5 * time.Second):
			t.Fatalf("other session got FETCH FLAGS %v; want 3", seenByOther)
		}
	}
	for seq, fl := range seenByOther {
		if seq < 1 || seq > 3 || !slices.Equal(sortedFlags(fl...), []imap.Flag{imap.FlagSeen}) {
			t.Errorf("other session got FETCH %d FLAGS %v", seq, fl)
		}
	}

	// EXAMINE is read-only: no \Seen.
	ro := e.login(alice, alicePW)
	if _, err := ro.Select("INBOX", &imap.SelectOptions{ReadOnly: true}).Wait(); err != nil {
		t.Fatal(err)
	}
	m = fsFetch(t, ro, imap.SeqSetNum(4), &imap.FetchOptions{BodySection: []*imap.FetchItemBodySection{body}, Flags: true})[0]
	if len(m.Flags) != 0 || unread() != 1 {
		t.Errorf("BODY[] under EXAMINE: FLAGS %v, %d unread", m.Flags, unread())
	}
	// BINARY without PEEK reads the message too.
	binary := &imap.FetchItemBinarySection{Part: []int{1}}
	m = fsFetch(t, c, imap.SeqSetNum(4), &imap.FetchOptions{BinarySection: []*imap.FetchItemBinarySection{binary}})[0]
	if !slices.Equal(m.Flags, []imap.Flag{imap.FlagSeen}) || unread() != 0 {
		t.Errorf("BINARY[1]: FLAGS %v, %d unread", m.Flags, unread())
	}
}

// fsFill puts n small messages into a folder quickly, through
// SaveRawMessages in the client's batches.
func fsFill(t *testing.T, e *env, folder string, n int) {
	t.Helper()
	var raws []directapi.RawMessage
	for i := range n {
		raws = append(raws, directapi.NewRawMessage([]byte(testMessage(fmt.Sprintf("bulk%04d", i)))))
	}
	if err := e.client.SaveRawMessages(context.Background(), auth(alice), folder, raws); err != nil {
		t.Fatal(err)
	}
}

// The REST cost of FETCH is a small constant, not one call per message,
// and nothing already loaded is asked again.
func TestFetchCallCounts(t *testing.T) {
	e := newEnv(t, options{})
	fsFill(t, e, "INBOX", 2000)
	c := e.login(alice, alicePW)
	if d := fsSelect(t, c, "INBOX"); d.NumMessages != 2000 {
		t.Fatalf("%d messages", d.NumMessages)
	}
	all := imap.UIDSet{{Start: 1, Stop: 0}}

	e.sandbox.ResetCalls()
	msgs := fsFetch(t, c, all, &imap.FetchOptions{UID: true, Flags: true})
	if len(msgs) != 2000 || e.sandbox.TotalCalls() != 0 {
		t.Fatalf("UID FETCH 1:* (UID FLAGS): %d answers, calls %v; want 2000, none", len(msgs), e.sandbox.CallCounts())
	}

	listing := &imap.FetchOptions{UID: true, Flags: true, RFC822Size: true, InternalDate: true, Envelope: true}
	msgs = fsFetch(t, c, all, listing)
	if len(msgs) != 2000 || msgs[1999].Envelope.Subject != "bulk1999" || msgs[0].RFC822Size != int64(len(testMessage("bulk0000"))) {
		t.Fatalf("listing: %d answers", len(msgs))
	}
	if n := e.sandbox.Calls("GetMessageMetaData"); n != 1 || e.sandbox.TotalCalls() != 1 {
		t.Fatalf("listing calls %v; want one GetMessageMetaData", e.sandbox.CallCounts())
	}
	e.sandbox.ResetCalls()
	fsFetch(t, c, all, listing)
	// Thunderbird's and mbsync's header listings are metadata too.
	fsFetch(t, c, all, &imap.FetchOptions{UID: true, RFC822Size: true, BodySection: []*imap.FetchItemBodySection{
		{Peek: true, Specifier: imap.PartSpecifierHeader, HeaderFields: []string{"From", "To", "Subject", "Date", "Message-ID", "References"}},
	}})
	if e.sandbox.TotalCalls() != 0 {
		t.Fatalf("repeated listing calls %v; want none", e.sandbox.CallCounts())
	}

	five := imap.UIDSetNum(3, 300, 600, 1200, 1999)
	body := &imap.FetchItemBodySection{Peek: true}
	msgs = fsFetch(t, c, five, &imap.FetchOptions{UID: true, RFC822Size: true, BodySection: []*imap.FetchItemBodySection{body}})
	if len(msgs) != 5 || e.sandbox.Calls("GetRawMessagesByUIDs") != 1 || e.sandbox.TotalCalls() != 1 {
		t.Fatalf("BODY.PEEK[] of 5: %d answers, calls %v; want one GetRawMessagesByUIDs", len(msgs), e.sandbox.CallCounts())
	}
	for _, m := range msgs {
		if int64(len(m.FindBodySection(body))) != m.RFC822Size {
			t.Errorf("UID %d: RFC822.SIZE %d, BODY[] %d bytes", m.UID, m.RFC822Size, len(m.FindBodySection(body)))
		}
	}
	e.sandbox.ResetCalls()
	fsFetch(t, c, five, &imap.FetchOptions{UID: true, BodyStructure: &imap.FetchItemBodyStructure{Extended: true}, BodySection: []*imap.FetchItemBodySection{body}})
	if e.sandbox.TotalCalls() != 0 {
		t.Fatalf("cached BODY.PEEK[] calls %v; want none", e.sandbox.CallCounts())
	}
}

// A message deleted at the provider while the session still shows it:
// the others are answered, the command ends OK (RFC 2180 §4.1.2), nothing
// is invented, and the EXPUNGE follows.
func TestFetchExpungedAtProvider(t *testing.T) {
	e := newEnv(t, options{})
	e.deliver(alice, "INBOX", testMessage("stays"))
	gone := e.deliver(alice, "INBOX", testMessage("goes"))
	e.deliver(alice, "INBOX", testMessage("stays too"))
	expunged := make(chan uint32, 4)
	c, err := imapclient.DialInsecure(e.addr, &imapclient.Options{UnilateralDataHandler: &imapclient.UnilateralDataHandler{
		Expunge: func(seq uint32) { expunged <- seq },
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Login(alice, alicePW).Wait(); err != nil {
		t.Fatal(err)
	}
	fsSelect(t, c, "INBOX")
	if err := e.client.DeleteMessagesByUIDs(context.Background(), auth(alice), "INBOX", []int64{gone}, true); err != nil {
		t.Fatal(err)
	}

	// What is known is still answered.
	if msgs := fsFetch(t, c, imap.SeqSetNum(2), &imap.FetchOptions{UID: true, Flags: true}); len(msgs) != 1 || msgs[0].UID != imap.UID(gone) {
		t.Fatalf("FLAGS of the deleted message: %+v", msgs)
	}
	body := &imap.FetchItemBodySection{Peek: true}
	msgs, err := c.Fetch(imap.SeqSetNum(1, 2, 3), &imap.FetchOptions{UID: true, BodySection: []*imap.FetchItemBodySection{body}}).Collect()
	if err != nil {
		t.Fatalf("FETCH with a deleted message: %v; want OK", err)
	}
	if len(msgs) != 2 || msgs[0].SeqNum != 1 || msgs[1].SeqNum != 3 || string(msgs[1].FindBodySection(body)) != testMessage("stays too") {
		t.Fatalf("answers %+v", msgs)
	}
	if err := c.Noop().Wait(); err != nil {
		t.Fatal(err)
	}
	select {
	case seq := <-expunged:
		if seq != 2 {
			t.Errorf("EXPUNGE %d; want 2", seq)
		}
	case <-time.After(5 * time.Second):
		t.Error("no EXPUNGE after NOOP")
	}
}

// INTERNALDATE of a message the provider no longer lists cannot be made
// up either.
func TestFetchInternalDateOfExpunged(t *testing.T) {
	e := newEnv(t, options{})
	stays := e.deliver(alice, "INBOX", testMessage("stays"))
	gone := e.deliver(alice, "INBOX", testMessage("goes"))
	// Read, so that SELECT's unread list does not bring their metadata.
	if err := e.client.MarkMessagesAsReadByUIDs(context.Background(), auth(alice), "INBOX", []int64{stays, gone}); err != nil {
		t.Fatal(err)
	}
	c := e.login(alice, alicePW)
	fsSelect(t, c, "INBOX")
	if err := e.client.DeleteMessagesByUIDs(context.Background(), auth(alice), "INBOX", []int64{gone}, true); err != nil {
		t.Fatal(err)
	}
	msgs, err := c.Fetch(imap.SeqSetNum(1, 2), &imap.FetchOptions{InternalDate: true, Envelope: true}).Collect()
	if err != nil {
		t.Fatalf("INTERNALDATE with a deleted message: %v; want OK", err)
	}
	if len(msgs) != 1 || msgs[0].SeqNum != 1 || msgs[0].Envelope.Subject != "stays" {
		t.Fatalf("answers %+v", msgs)
	}
}

// Provider faults are NO [UNAVAILABLE], never a hang, and the session
// works again once the provider is back.
func TestFetchProviderFaults(t *testing.T) {
	e := newEnv(t, options{cfg: func(c *imapbackend.Config) { c.CallTimeout = 500 * time.Millisecond }})
	var uids []int64
	for range 4 {
		uids = append(uids, e.deliver(alice, "INBOX", fsMultipart))
	}
	// Read, so that SELECT's unread list does not bring their metadata;
	// the last stays unread for the case that sets \Seen.
	if err := e.client.MarkMessagesAsReadByUIDs(context.Background(), auth(alice), "INBOX", uids[:3]); err != nil {
		t.Fatal(err)
	}
	c := e.login(alice, alicePW)
	fsSelect(t, c, "INBOX")
	body := &imap.FetchItemBodySection{Peek: true}

	// Each case on a message of its own, so that no cache answers it.
	for i, tc := range []struct {
		op    string
		fault sandbox.Fault
		o     *imap.FetchOptions
	}{
		{"GetRawMessagesByUIDs", sandbox.Fault{Status: 503}, &imap.FetchOptions{BodySection: []*imap.FetchItemBodySection{body}}},
		{"GetRawMessagesByUIDs", sandbox.Fault{Malformed: true}, &imap.FetchOptions{BodyStructure: &imap.FetchItemBodyStructure{}}},
		{"GetMessageMetaData", sandbox.Fault{Latency: 3 * time.Second}, &imap.FetchOptions{Envelope: true}},
		{"MarkMessagesAsReadByUIDs", sandbox.Fault{Status: 500}, &imap.FetchOptions{BodySection: []*imap.FetchItemBodySection{{}}}},
	} {
		e.sandbox.InjectFault(tc.op, tc.fault)
		if tc.op == "GetMessageMetaData" {
			// Metadata comes by listing or by UID, whichever is cheaper.
			e.sandbox.InjectFault("GetMessagesByUIDs", tc.fault)
		}
		start := time.Now()
		seq := imap.SeqSetNum(uint32(i) + 1)
		_, err := c.Fetch(seq, tc.o).Collect()
		if fsCode(err) != imap.ResponseCodeUnavailable {
			t.Errorf("%s %+v: %v; want NO [UNAVAILABLE]", tc.op, tc.fault, err)
		}
		if time.Since(start) > 2*time.Second {
			t.Errorf("%s %+v: took %v", tc.op, tc.fault, time.Since(start))
		}
		e.sandbox.ClearFaults()
		msgs, err := c.Fetch(seq, tc.o).Collect()
		if err != nil || len(msgs) != 1 {
			t.Errorf("%s recovered: %v", tc.op, err)
		}
	}
	// The read marking failed once and then worked.
	if n, _ := e.client.GetUnreadMessageCount(context.Background(), auth(alice), "INBOX"); n != 0 {
		t.Errorf("%d unread", n)
	}
}

// BINARY of a part in a transfer encoding nobody can undo is NO
// [UNKNOWN-CTE] (RFC 3516 §4.2).
func TestFetchBinaryUnknownCTE(t *testing.T) {
	e := newEnv(t, options{})
	e.deliver(alice, "INBOX", fsCRLF("From: bob@direct.example\nSubject: uu\nContent-Type: application/octet-stream\nContent-Transfer-Encoding: x-uuencode\n\nbegin 644 f\n`\nend\n"))
	c := e.login(alice, alicePW)
	fsSelect(t, c, "INBOX")
	_, err := c.Fetch(imap.SeqSetNum(1), &imap.FetchOptions{BinarySection: []*imap.FetchItemBinarySection{{Peek: true, Part: []int{1}}}}).Collect()
	if fsCode(err) != imap.ResponseCodeUnknownCTE {
		t.Fatalf("BINARY[1] of x-uuencode: %v", err)
	}
	// BODY[1] gives the bytes as they are.
	b := &imap.FetchItemBodySection{Peek: true, Part: []int{1}}
	if m := fsFetch(t, c, imap.SeqSetNum(1), &imap.FetchOptions{BodySection: []*imap.FetchItemBodySection{b}})[0]; string(m.FindBodySection(b)) != "begin 644 f\r\n`\r\nend\r\n" {
		t.Errorf("BODY[1] %q", m.FindBodySection(b))
	}
}

// Flags are written in canonical case whatever the state store holds.
func TestFetchCanonicalFlags(t *testing.T) {
	e := newEnv(t, options{})
	uid := e.deliver(alice, "INBOX", testMessage("flags"))
	if err := e.client.MarkMessagesAsReadByUIDs(context.Background(), auth(alice), "INBOX", []int64{uid}); err != nil {
		t.Fatal(err)
	}
	fsKeepFlags(t, e, "INBOX", map[uint32][]string{uint32(uid): {`\flagged`, `\ANSWERED`, "$Label1"}})
	c := e.login(alice, alicePW)
	fsSelect(t, c, "INBOX")
	m := fsFetch(t, c, imap.SeqSetNum(1), &imap.FetchOptions{Flags: true})[0]
	want := []imap.Flag{imap.FlagSeen, "$Label1", imap.FlagAnswered, imap.FlagFlagged}
	got := sortedFlags(m.Flags...)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("FLAGS %v; want %v", m.Flags, want)
	}
}

// fsKeepFlags writes kept flags into the state store before the folder is
// first selected, as an earlier run of the bridge would have left them.
func fsKeepFlags(t *testing.T, e *env, folder string, flags map[uint32][]string) {
	t.Helper()
	st, err := state.OpenStore(e.stateDir)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	fs, err := st.Folder(ctx, alice, folder)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.SetFlags(ctx, alice, folder, fs.UIDValidity, flags); err != nil {
		t.Fatal(err)
	}
}
