package mimeconv

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
)

func crlf(s string) string { return strings.ReplaceAll(s, "\n", "\r\n") }

// treeMIME is imaptest's fetch-body-mime message: a text part and a
// message/rfc822 part holding a multipart/alternative, with prologues and
// epilogues, and a boundary folded over two lines.
var treeMIME = crlf(`From: user@domain.org
Date: Sat, 24 Mar 2007 23:00:00 +0200
Mime-Version: 1.0
Content-Type: multipart/mixed; boundary="foo
 bar"

Root MIME prologue

--foo bar
Content-Type: text/x-myown; charset=us-ascii

hello

--foo bar
Content-Type: message/rfc822

From: sub@domain.org
Date: Sun, 12 Aug 2012 12:34:56 +0300
Subject: submsg
Content-Type: multipart/alternative; boundary="sub1"

Sub MIME prologue
--sub1
Content-Type: text/html

<p>Hello world</p>

--sub1
Content-Type: text/plain

Hello another world

--sub1--
Sub MIME epilogue

--foo bar--
Root MIME epilogue

`)

func mustTree(t *testing.T, raw string) *Part {
	t.Helper()
	p, err := ParseTree([]byte(raw), ParseOptions{})
	if err != nil {
		t.Fatalf("ParseTree: %v", err)
	}
	checkTree(t, []byte(raw), p, ParseOptions{})
	return p
}

func TestTreeSections(t *testing.T) {
	root := mustTree(t, treeMIME)
	if root.MediaType() != "multipart/mixed" || root.Params["boundary"] != "foo bar" || len(root.Children) != 2 {
		t.Fatalf("root %s %v, %d children", root.MediaType(), root.Params, len(root.Children))
	}
	if got := string(root.HeaderBytes()) + string(root.Body()); got != treeMIME {
		t.Errorf("HEADER + TEXT is not the message")
	}
	cases := []struct {
		path []int
		body string // "" with nilPart: no such part
		mime string
	}{
		{[]int{1}, "hello\r\n", "Content-Type: text/x-myown; charset=us-ascii\r\n\r\n"},
		{[]int{2}, treeMIME[strings.Index(treeMIME, "From: sub@"):strings.Index(treeMIME, "\r\n--foo bar--")], "Content-Type: message/rfc822\r\n\r\n"},
		{[]int{2, 1}, "<p>Hello world</p>\r\n", "Content-Type: text/html\r\n\r\n"},
		{[]int{2, 2}, "Hello another world\r\n", "Content-Type: text/plain\r\n\r\n"},
	}
	for _, tc := range cases {
		p := root.Find(tc.path)
		if p == nil {
			t.Errorf("Find(%v) = nil", tc.path)
			continue
		}
		if string(p.Body()) != tc.body || string(p.HeaderBytes()) != tc.mime {
			t.Errorf("Find(%v): body %q mime %q", tc.path, p.Body(), p.HeaderBytes())
		}
	}
	for _, path := range [][]int{{3}, {0}, {1, 2}, {2, 3}, {2, 1, 2}, {-1}} {
		if p := root.Find(path); p != nil {
			t.Errorf("Find(%v) = %s; want none", path, p.MediaType())
		}
	}
	// x.1 of a leaf is x, as Dovecot answers it.
	if root.Find([]int{1, 1}) != root.Find([]int{1}) || root.Find([]int{2, 1, 1, 1}) != root.Find([]int{2, 1}) {
		t.Errorf("x.1 of a leaf")
	}
	// HEADER, HEADER.FIELDS and TEXT of the message/rfc822 part are those
	// of the message it holds (RFC 3501 §6.4.5).
	sub := root.Find([]int{2}).Encapsulated()
	if got := string(sub.FilterHeader([]string{"from", "SUBJECT", "x-foo"}, false)); got != "From: sub@domain.org\r\nSubject: submsg\r\n\r\n" {
		t.Errorf("2.HEADER.FIELDS %q", got)
	}
	if got := string(sub.FilterHeader([]string{"from", "subject"}, true)); got != "Date: Sun, 12 Aug 2012 12:34:56 +0300\r\nContent-Type: multipart/alternative; boundary=\"sub1\"\r\n\r\n" {
		t.Errorf("2.HEADER.FIELDS.NOT %q", got)
	}
	if !strings.HasPrefix(string(sub.Body()), "Sub MIME prologue\r\n--sub1") || sub.Header.Envelope().Subject != "submsg" {
		t.Errorf("2.TEXT %q", sub.Body())
	}

	// HEADER.FIELDS are the fields as written, folding and all, and bare
	// LF stays bare LF: sections are sliced, never re-serialised.
	folded := mustTree(t, "Subject: a\n  long one\nX-A: 1\nFrom: b@x\n\nbody")
	if got := string(folded.FilterHeader([]string{"subject", "from"}, false)); got != "Subject: a\n  long one\nFrom: b@x\n\r\n" {
		t.Errorf("HEADER.FIELDS of a folded field %q", got)
	}
	if got := folded.Header.Get("Subject"); got != "a long one" {
		t.Errorf("unfolded value %q", got)
	}

	// A message that is not multipart has one part: itself.
	single := mustTree(t, "Subject: x\r\n\r\nbody\r\n")
	if single.Find([]int{1}) != single || single.Find([]int{2}) != nil || single.Find([]int{1, 1}) != single {
		t.Errorf("single part numbering")
	}
	// A message that is itself message/rfc822: part 1 is its body, and
	// 1.1 the body of the message inside.
	wrapped := mustTree(t, "Content-Type: message/rfc822\r\n\r\nSubject: inner\r\n\r\ninner body\r\n")
	if p := wrapped.Find([]int{1, 1}); p == nil || string(p.Body()) != "inner body\r\n" || wrapped.Find([]int{1}) != wrapped {
		t.Errorf("message/rfc822 at the top: %v", p)
	}
}

// The disagreements between the three parsers the bridge had, each now
// answered one way.
func TestTreeFormerDisagreements(t *testing.T) {
	t.Run("base64 with padding inside", func(t *testing.T) {
		root := mustTree(t, "Content-Type: text/plain\r\nContent-Transfer-Encoding: base64\r\n\r\naGVsbG8=\r\nd29ybGQ=\r\n")
		if got, err := root.Decoded(); err != nil || string(got) != "helloworld" {
			t.Errorf("Decoded %q %v; want helloworld", got, err)
		}
	})
	t.Run("quoted-printable with a stray equals sign", func(t *testing.T) {
		root := mustTree(t, "Content-Transfer-Encoding: quoted-printable\r\n\r\na=zz b=3D=\r\nc\r\n")
		if got := root.Text(); got != "a=zz b=c\r\n" {
			t.Errorf("Text %q", got)
		}
	})
	t.Run("junk after the transfer encoding", func(t *testing.T) {
		root := mustTree(t, "Content-Transfer-Encoding: Base64 (the usual)\r\n\r\naGk=\r\n")
		if got, err := root.Decoded(); err != nil || string(got) != "hi" || root.Encoding != "base64" {
			t.Errorf("Decoded %q %v, encoding %q", got, err, root.Encoding)
		}
	})
	t.Run("unknown transfer encoding", func(t *testing.T) {
		root := mustTree(t, "Content-Transfer-Encoding: x-uuencode\r\n\r\nbegin 644 x\r\n")
		if got, err := root.Decoded(); !errors.Is(err, ErrUnknownEncoding) || string(got) != "begin 644 x\r\n" {
			t.Errorf("Decoded %q %v", got, err)
		}
	})
	t.Run("part without header or separator", func(t *testing.T) {
		root := mustTree(t, "Content-Type: multipart/mixed; boundary=b\r\n\r\n--b\r\nhello\r\n--b\r\nContent-Type: text/html\r\n\r\n<p>x</p>\r\n--b--\r\n")
		if len(root.Children) != 2 || string(root.Children[0].Body()) != "hello" || root.Children[1].Subtype != "html" {
			t.Fatalf("%d children", len(root.Children))
		}
	})
	t.Run("missing close delimiter", func(t *testing.T) {
		root := mustTree(t, "Content-Type: multipart/mixed; boundary=b\r\n\r\n--b\r\n\r\none\r\n--b\r\n\r\ntwo\r\n")
		if len(root.Children) != 2 || string(root.Children[1].Body()) != "two\r\n" {
			t.Fatalf("%d children", len(root.Children))
		}
		// A delimiter at the very end was meant to close: no empty part.
		root = mustTree(t, "Content-Type: multipart/mixed; boundary=b\r\n\r\n--b\r\n\r\none\r\n--b\r\n")
		if len(root.Children) != 1 {
			t.Fatalf("%d children", len(root.Children))
		}
	})
	t.Run("raw 8-bit parameter beside the boundary", func(t *testing.T) {
		root := mustTree(t, "Content-Type: multipart/mixed; name=Bef\xfcnd.pdf; boundary=b\r\n\r\n--b\r\n\r\none\r\n--b--\r\n")
		if root.Type != "multipart" || len(root.Children) != 1 {
			t.Fatalf("%s with %d children", root.MediaType(), len(root.Children))
		}
	})
	t.Run("header ends at a line that is no field", func(t *testing.T) {
		raw := "Subject: x\r\nHello world\r\n"
		root := mustTree(t, raw)
		if len(root.Header) != 1 || string(root.Body()) != "Hello world\r\n" {
			t.Errorf("header %v body %q", root.Header, root.Body())
		}
	})
	t.Run("byte order mark and mbox line", func(t *testing.T) {
		root := mustTree(t, "\xef\xbb\xbfFrom someone Mon Jan  1 00:00:00 2026\r\nSubject: bom\r\n\r\nx")
		if root.Header.Get("Subject") != "bom" {
			t.Errorf("header %v", root.Header)
		}
	})
	t.Run("unreadable content type keeps its charset", func(t *testing.T) {
		root := mustTree(t, "Content-Type: ; charset=iso-8859-1\r\n\r\ncaf\xe9")
		if root.MediaType() != "text/plain" || root.Text() != "café" {
			t.Errorf("%s %q", root.MediaType(), root.Text())
		}
	})
	t.Run("base64 message/rfc822", func(t *testing.T) {
		root := mustTree(t, string(readTestdata(t, "messages/hard-wrapped-rfc822-base64-bom.eml")))
		if root.Message == nil || root.Message.Header.Envelope().Subject != "This message has a base64 internal message" {
			t.Fatalf("encapsulated message not read")
		}
		if !strings.HasPrefix(root.Message.Text(), "Hello this is a message body") {
			t.Errorf("inner text %q", root.Message.Text())
		}
	})
}

func TestTreeLimits(t *testing.T) {
	root, err := ParseTree(nested(30), ParseOptions{MaxDepth: 5})
	if !errors.Is(err, ErrTooComplex) || root == nil {
		t.Fatalf("err %v", err)
	}
	checkTree(t, nested(30), root, ParseOptions{MaxDepth: 5})
	if _, err := ParseTree(nested(5), ParseOptions{MaxDepth: 5}); err != nil {
		t.Errorf("depth at the limit: %v", err)
	}
	many := "Content-Type: multipart/mixed; boundary=x\r\n\r\n" + strings.Repeat("--x\r\n\r\nx\r\n", 20) + "--x--\r\n"
	root, err = ParseTree([]byte(many), ParseOptions{MaxParts: 7})
	if !errors.Is(err, ErrTooComplex) || len(root.Children) != 7 {
		t.Errorf("err %v, %d children", err, len(root.Children))
	}
	// A deep chain of encapsulated messages is bounded too.
	deep := strings.Repeat("Content-Type: message/rfc822\r\n\r\n", 5000) + "Subject: x\r\n\r\nend"
	root, err = ParseTree([]byte(deep), ParseOptions{})
	if !errors.Is(err, ErrTooComplex) {
		t.Errorf("deep messages: %v", err)
	}
	checkTree(t, []byte(deep), root, ParseOptions{})
}

func TestParseAddressList(t *testing.T) {
	show := func(as []Address) string {
		var s []string
		for _, a := range as {
			switch a.Kind {
			case GroupStart:
				s = append(s, "["+a.Name+":")
			case GroupEnd:
				s = append(s, "]")
			default:
				s = append(s, fmt.Sprintf("%q %q %q@%q", a.Name, a.Route, a.Mailbox, a.Host))
			}
		}
		return strings.Join(s, " ")
	}
	for _, tc := range []struct{ in, want string }{
		{"user@domain (Real Name)", `"Real Name" "" "user"@"domain"`},
		{`"Doe, John" <john@x.org>, =?utf-8?q?J=C3=B6rg?= <jorg@x.org>`, `"Doe, John" "" "john"@"x.org" "=?utf-8?q?J=C3=B6rg?=" "" "jorg"@"x.org"`},
		{"group: g1@d1.org, g2@d2.org;, group2: g3@d3.org;", `[group: "" "" "g1"@"d1.org" "" "" "g2"@"d2.org" ] [group2: "" "" "g3"@"d3.org" ]`},
		{"undisclosed-recipients:;", `[undisclosed-recipients: ]`},
		{"Team: a@x.example", `[Team: "" "" "a"@"x.example" ]`},
		{"<@route1,@route2:user@domain>", `"" "@route1,@route2" "user"@"domain"`},
		{"<user-from (comment)@ (comment) domain.org>", `"" "" "user-from"@"domain.org"`},
		{"user-from (comment)@ (comment) domain.org", `"comment" "" "user-from"@"domain.org"`},
		{`"john doe"@x.org`, `"" "" "john doe"@"x.org"`},
		{"first . last @ x . org", `"" "" "first.last"@"x.org"`},
		{"John Smith john@x.org", `"John Smith" "" "john"@"x.org"`},
		{"Dr. Who <who@x.example>, Smith, John <john@x.example>", `"Dr. Who" "" "who"@"x.example" "" "" "Smith"@"" "John" "" "john"@"x.example"`},
		{"postmaster", `"" "" "postmaster"@""`},
		{"<>", ``},
		{"a@[127.0.0.1]", `"" "" "a"@"[127.0.0.1]"`},
		{"Bad \xff Name <a@b>", "\"Bad \u00ff Name\" \"\" \"a\"@\"b\""}, // Windows-1252 0xFF, not U+FFFD
		// A stray closing parenthesis or bracket once made the tokenizer
		// loop forever (found by FuzzTree).
		{"x) y] <c@d>", `"x ) y ]" "" "c"@"d"`},
		{`"unterminated <a@b>`, `"" "" "unterminated <a@b>"@""`},
	} {
		if got := show(ParseAddressList(tc.in)); got != tc.want {
			t.Errorf("ParseAddressList(%q)\n got %s\nwant %s", tc.in, got, tc.want)
		}
	}
}

func TestEnvelope(t *testing.T) {
	root := mustTree(t, crlf(`Date: Sat, 24 Mar 2007 23:00:00 +0200 (CEST)
From: user@domain (Real Name)
Sender:
To: group: g1@d1.org;
Subject: =?iso-8859-1?q?caf=E9?=
In-Reply-To: <a@b> <c@d>
Message-ID: <env@x.org>

body
`))
	env := root.Header.Envelope()
	if env.Date.IsZero() || env.Subject != "=?iso-8859-1?q?caf=E9?=" || len(env.From) != 1 || env.From[0].Name != "Real Name" ||
		env.Sender != nil || len(env.To) != 3 || env.InReplyTo != "<a@b> <c@d>" || env.MessageID != "<env@x.org>" {
		t.Errorf("%+v", env)
	}
	if DecodeWords(env.Subject) != "café" {
		t.Errorf("subject decodes to %q", DecodeWords(env.Subject))
	}
}

// Every test message parses into a tree that keeps the invariants.
func TestTreeTestdata(t *testing.T) {
	files, _ := filepath.Glob("testdata/messages/*")
	if len(files) == 0 {
		t.Fatal("no test messages")
	}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		root, err := ParseTree(raw, ParseOptions{})
		if err != nil {
			t.Errorf("%s: %v", f, err)
		}
		checkTree(t, raw, root, ParseOptions{})
	}
	root, _ := ParseTree(readTestdata(t, "messages/direct-attachment-png.txt"), ParseOptions{})
	var types []string
	root.Walk(func(p *Part) bool { types = append(types, p.MediaType()); return true })
	if fmt.Sprint(types) != "[multipart/mixed text/plain image/png]" {
		t.Errorf("types %v", types)
	}
}

// checkTree calls every accessor of every part of a tree and checks what
// must hold for any input: slices within the buffer and adding up, section
// numbers that find the parts they were derived from, limits kept, valid
// UTF-8 where the API promises it.
func checkTree(t *testing.T, raw []byte, root *Part, opts ParseOptions) {
	t.Helper()
	if root == nil {
		t.Fatal("nil tree")
	}
	maxDepth := opts.MaxDepth
	if maxDepth <= 0 {
		maxDepth = DefaultMaxDepth
	}
	if !bytes.Equal(root.Bytes(), raw) {
		t.Fatalf("root bytes are not the message")
	}
	n := 0
	root.Walk(func(p *Part) bool {
		n++
		if p.Depth > maxDepth {
			t.Fatalf("part at depth %d beyond %d", p.Depth, maxDepth)
		}
		if !bytes.Equal(append(append([]byte{}, p.HeaderBytes()...), p.Body()...), p.Bytes()) {
			t.Fatalf("header and body are not the entity")
		}
		if p.Type == "" || p.Subtype == "" || strings.ContainsAny(p.MediaType(), " \t\r\n;") {
			t.Fatalf("media type %q", p.MediaType())
		}
		if p.Type == "multipart" && len(p.Children) == 0 {
			t.Fatalf("multipart without children")
		}
		if p.Children != nil && p.Type != "multipart" || p.Message != nil && p.Type != "message" {
			t.Fatalf("children of a %s", p.MediaType())
		}
		for _, f := range p.Header {
			if f.end < f.start || f.start < p.start || f.end > p.bodyStart {
				t.Fatalf("field %q outside the header", f.Name)
			}
		}
		fields := p.FilterHeader([]string{"Subject", "content-type"}, false)
		others := p.FilterHeader([]string{"Subject", "content-type"}, true)
		if !bytes.HasSuffix(fields, []byte("\r\n")) || !bytes.HasSuffix(others, []byte("\r\n")) {
			t.Fatalf("header fields section without its empty line")
		}
		dec, err := p.Decoded()
		if err != nil && !errors.Is(err, ErrUnknownEncoding) {
			t.Fatalf("Decoded: %v", err)
		}
		if len(dec) > len(p.Body()) {
			t.Fatalf("decoded content longer than the body")
		}
		if s := p.Text(); !utf8.ValidString(s) {
			t.Fatalf("Text is not UTF-8")
		}
		if p.Lines() < 0 || p.Encapsulated() == nil {
			t.Fatalf("lines or encapsulated")
		}
		d, _ := p.Disposition()
		for _, s := range append(p.Languages(), d) {
			if strings.ContainsAny(s, ",;") {
				t.Fatalf("disposition or language %q", s)
			}
		}
		env := p.Header.Envelope()
		for _, l := range [][]Address{env.From, env.Sender, env.ReplyTo, env.To, env.Cc, env.Bcc} {
			for _, a := range l {
				for _, s := range []string{a.Name, a.Route, a.Mailbox, a.Host} {
					if !utf8.ValidString(s) {
						t.Fatalf("address not UTF-8: %q", s)
					}
				}
			}
		}
		return true
	})
	if n > maxParts(opts)+1 {
		t.Fatalf("%d parts", n)
	}
	// Every part is found by its section number, and no number finds a
	// part of another message.
	var visit func(m *Part, prefix []int)
	visit = func(m *Part, prefix []int) {
		subs := m.topParts()
		if len(prefix) > 0 {
			subs = m.Children
			if m.Message != nil {
				subs = m.Message.topParts()
			}
		}
		for i, c := range subs {
			path := append(append([]int{}, prefix...), i+1)
			if got := root.Find(path); got != c {
				t.Fatalf("Find(%v) is not the part numbered so", path)
			}
			visit(c, path)
		}
	}
	visit(root, nil)
}

func maxParts(o ParseOptions) int {
	if o.MaxParts <= 0 {
		return DefaultMaxParts
	}
	return o.MaxParts
}
