package imapbackend_test

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/emersion/go-imap/v2"
)

// The cases where the bridge's three MIME parsers (mimeconv, the FETCH
// code and the SEARCH code) used to disagree, answered through a real
// client now that one message tree serves them all (issue 8).
func TestMIMEFormerDisagreements(t *testing.T) {
	msgs := []struct {
		name, raw string
	}{
		// 1. Two base64 lines, each with its own padding: the FETCH code
		// stopped at the first "=" (BINARY[1] was "hello"), SEARCH's
		// go-message decoder too.
		{"padded base64", fsCRLF("From: a@x.example\nSubject: b64\nContent-Type: text/plain\nContent-Transfer-Encoding: base64\n\naGVsbG8=\nd29ybGQ=\n")},
		// 2. A body part with neither header nor empty line: go-message's
		// multipart reader gave up on it and every later part.
		{"headless part", fsCRLF("From: a@x.example\nContent-Type: multipart/mixed; boundary=b\n\n--b\nhello\n--b\nContent-Type: text/html\n\n<p>x</p>\n--b--\n")},
		// 3. Junk after the transfer encoding: BINARY answered
		// UNKNOWN-CTE where mimeconv decoded.
		{"encoding with a comment", fsCRLF("From: a@x.example\nContent-Type: multipart/mixed; boundary=b\n\n--b\nContent-Transfer-Encoding: Base64 (the usual)\n\naGk=\n--b--\n")},
		// 4. A raw 8-bit parameter beside the boundary: the strict parser
		// dropped every parameter, the boundary with them.
		{"8-bit parameter", "From: a@x.example\r\nContent-Type: multipart/mixed; name=Bef\xfcnd.pdf; boundary=b\r\n\r\n--b\r\n\r\none\r\n--b\r\n\r\ntwo\r\n--b--\r\n"},
		// 5. Quoted-printable with a stray "=": go-message stopped there.
		{"stray equals", fsCRLF("From: a@x.example\nContent-Transfer-Encoding: quoted-printable\n\na=zz b=3D=\nc\n")},
		// 6. No close delimiter: the last part runs to the end.
		{"no close delimiter", fsCRLF("From: a@x.example\nContent-Type: multipart/mixed; boundary=b\n\n--b\n\none\n--b\n\ntwo\n")},
		// 7. No empty line after the header: mimeconv started the body at
		// the first line that is no field, the FETCH code made it all
		// header.
		{"no separator", fsCRLF("From: a@x.example\nSubject: nosep\nHello world\n")},
	}
	e := newEnv(t, options{})
	for _, m := range msgs {
		e.deliver(alice, "INBOX", m.raw)
	}
	c := e.login(alice, alicePW)
	fsSelect(t, c, "INBOX")

	bin := func(part ...int) *imap.FetchItemBinarySection {
		return &imap.FetchItemBinarySection{Peek: true, Part: part}
	}
	body := func(part ...int) *imap.FetchItemBodySection {
		return &imap.FetchItemBodySection{Peek: true, Part: part}
	}
	fetch := func(seq uint32, o *imap.FetchOptions) {
		t.Helper()
		o.BodyStructure = &imap.FetchItemBodyStructure{Extended: true}
		got := fsFetch(t, c, imap.SeqSetNum(seq), o)
		if len(got) != 1 {
			t.Fatalf("message %d: %d answers", seq, len(got))
		}
		m := got[0]
		for _, bs := range o.BinarySection {
			want := map[uint32]string{1: "helloworld", 3: "hi", 5: "a=zz b=c\r\n"}[seq]
			if got := string(m.FindBinarySection(bs)); got != want {
				t.Errorf("%s: BINARY[%v] %q; want %q", msgs[seq-1].name, bs.Part, got, want)
			}
			if n, ok := m.FindBinarySectionSize(bs.Part); !ok || n != uint32(len(want)) {
				t.Errorf("%s: BINARY.SIZE[%v] %d; want %d", msgs[seq-1].name, bs.Part, n, len(want))
			}
		}
	}
	fetch(1, &imap.FetchOptions{BinarySection: []*imap.FetchItemBinarySection{bin(1)}, BinarySectionSize: []*imap.FetchItemBinarySectionSize{{Part: []int{1}}}})
	fetch(3, &imap.FetchOptions{BinarySection: []*imap.FetchItemBinarySection{bin(1)}, BinarySectionSize: []*imap.FetchItemBinarySectionSize{{Part: []int{1}}}})
	fetch(5, &imap.FetchOptions{BinarySection: []*imap.FetchItemBinarySection{bin(1)}, BinarySectionSize: []*imap.FetchItemBinarySectionSize{{Part: []int{1}}}})

	// BODY[n] and BODYSTRUCTURE of the multiparts.
	for _, tc := range []struct {
		seq   uint32
		parts []string
	}{
		{2, []string{"hello", "<p>x</p>"}},
		{4, []string{"one", "two"}},
		{6, []string{"one", "two\r\n"}},
	} {
		o := &imap.FetchOptions{BodyStructure: &imap.FetchItemBodyStructure{Extended: true}}
		for i := range tc.parts {
			o.BodySection = append(o.BodySection, body(i+1))
		}
		m := fsFetch(t, c, imap.SeqSetNum(tc.seq), o)[0]
		for i, want := range tc.parts {
			if got := string(m.FindBodySection(o.BodySection[i])); got != want {
				t.Errorf("%s: BODY[%d] %q; want %q", msgs[tc.seq-1].name, i+1, got, want)
			}
		}
		// n.1 of a leaf is the leaf, as Dovecot and go-imap answer it.
		if got := string(fsFetch(t, c, imap.SeqSetNum(tc.seq), &imap.FetchOptions{BodySection: []*imap.FetchItemBodySection{body(1, 1)}})[0].FindBodySection(body(1, 1))); got != tc.parts[0] {
			t.Errorf("%s: BODY[1.1] %q", msgs[tc.seq-1].name, got)
		}
		mp, ok := m.BodyStructure.(*imap.BodyStructureMultiPart)
		if !ok || len(mp.Children) != len(tc.parts) || mp.Extended.Params["boundary"] != "b" {
			t.Errorf("%s: BODYSTRUCTURE %#v", msgs[tc.seq-1].name, m.BodyStructure)
		}
	}

	header := &imap.FetchItemBodySection{Peek: true, Specifier: imap.PartSpecifierHeader}
	text := &imap.FetchItemBodySection{Peek: true, Specifier: imap.PartSpecifierText}
	m := fsFetch(t, c, imap.SeqSetNum(7), &imap.FetchOptions{BodySection: []*imap.FetchItemBodySection{header, text, body(1)}, Envelope: true})[0]
	if h, b := string(m.FindBodySection(header)), string(m.FindBodySection(text)); h != "From: a@x.example\r\nSubject: nosep\r\n" || b != "Hello world\r\n" ||
		string(m.FindBodySection(body(1))) != b || m.Envelope.Subject != "nosep" {
		t.Errorf("no separator: HEADER %q TEXT %q ENVELOPE %+v", h, b, m.Envelope)
	}

	// SEARCH reads the same decoded text.
	for _, tc := range []struct {
		crit imap.SearchCriteria
		want []uint32
	}{
		{imap.SearchCriteria{Body: []string{"helloworld"}}, []uint32{1}},
		{imap.SearchCriteria{Body: []string{"b=c"}}, []uint32{5}},
		{imap.SearchCriteria{Body: []string{"two"}}, []uint32{4, 6}},
		{imap.SearchCriteria{Body: []string{"<p>x"}}, []uint32{2}},
		{imap.SearchCriteria{Body: []string{"hello world"}}, []uint32{7}},
		{imap.SearchCriteria{Text: []string{"the usual"}}, []uint32{3}},
	} {
		data, err := c.Search(&tc.crit, nil).Wait()
		if err != nil {
			t.Fatal(err)
		}
		if got := data.AllSeqNums(); !slices.Equal(got, tc.want) {
			t.Errorf("SEARCH %+v = %v; want %v", tc.crit, got, tc.want)
		}
	}
}

// A message/rfc822 part the sender base64-encoded (RFC 2046 §5.2.1 forbids
// it; Direct test messages have it): BODYSTRUCTURE describes the message
// inside, BODY[1] is the part as stored and BINARY[1] the message decoded,
// and the sections below it are those of the decoded message.
func TestMIMEEncodedMessagePart(t *testing.T) {
	inner := "Subject: inner\r\nContent-Type: text/plain\r\n\r\ninner body\r\n"
	raw := fsCRLF("From: a@x.example\nSubject: outer\nContent-Type: multipart/mixed; boundary=b\n\n--b\nContent-Type: message/rfc822\nContent-Transfer-Encoding: base64\n\n") +
		"U3ViamVjdDogaW5uZXINCkNvbnRlbnQtVHlwZTogdGV4dC9wbGFpbg0KDQppbm5lciBib2R5DQo=\r\n--b--\r\n"
	e := newEnv(t, options{})
	e.deliver(alice, "INBOX", raw)
	c := e.login(alice, alicePW)
	fsSelect(t, c, "INBOX")
	b1 := &imap.FetchItemBinarySection{Peek: true, Part: []int{1}}
	hdr := &imap.FetchItemBodySection{Peek: true, Part: []int{1}, Specifier: imap.PartSpecifierHeader}
	sub := &imap.FetchItemBodySection{Peek: true, Part: []int{1, 1}}
	m := fsFetch(t, c, imap.SeqSetNum(1), &imap.FetchOptions{
		BodyStructure: &imap.FetchItemBodyStructure{Extended: true},
		BinarySection: []*imap.FetchItemBinarySection{b1},
		BodySection:   []*imap.FetchItemBodySection{hdr, sub},
	})[0]
	if got := string(m.FindBinarySection(b1)); got != inner {
		t.Errorf("BINARY[1] %q", got)
	}
	if got := string(m.FindBodySection(hdr)); got != "Subject: inner\r\nContent-Type: text/plain\r\n\r\n" {
		t.Errorf("BODY[1.HEADER] %q", got)
	}
	if got := string(m.FindBodySection(sub)); got != "inner body\r\n" {
		t.Errorf("BODY[1.1] %q", got)
	}
	mp, ok := m.BodyStructure.(*imap.BodyStructureMultiPart)
	if !ok || len(mp.Children) != 1 {
		t.Fatalf("BODYSTRUCTURE %#v", m.BodyStructure)
	}
	p, ok := mp.Children[0].(*imap.BodyStructureSinglePart)
	if !ok || p.MessageRFC822 == nil || p.MessageRFC822.Envelope.Subject != "inner" || !strings.EqualFold(p.Encoding, "base64") {
		t.Errorf("part 1 %#v", mp.Children[0])
	}
}

// Every test message of mimeconv (Direct messages and broken MIME from the
// wild) is answered in full through a real client: FETCH of the structure,
// the envelope, sections and BINARY, and SEARCH of its text, with nothing
// left out and the connection still up. There is no recover() behind
// FETCH and SEARCH any more to hide a failure.
func TestMIMETestdataThroughIMAP(t *testing.T) {
	files, err := filepath.Glob("../internal/mimeconv/testdata/messages/*")
	if err != nil || len(files) == 0 {
		t.Fatalf("no test messages: %v", err)
	}
	e := newEnv(t, options{})
	raws := make([][]byte, len(files))
	for i, f := range files {
		raws[i], err = os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		e.deliver(alice, "INBOX", string(raws[i]))
	}
	c := e.login(alice, alicePW)
	fsSelect(t, c, "INBOX")
	all := &imap.FetchItemBodySection{Peek: true}
	one := &imap.FetchItemBodySection{Peek: true, Part: []int{1}}
	oneMIME := &imap.FetchItemBodySection{Peek: true, Part: []int{1}, Specifier: imap.PartSpecifierMIME}
	deep := &imap.FetchItemBodySection{Peek: true, Part: []int{1, 2, 1}}
	header := &imap.FetchItemBodySection{Peek: true, Specifier: imap.PartSpecifierHeader}
	text := &imap.FetchItemBodySection{Peek: true, Specifier: imap.PartSpecifierText}
	msgs := fsFetch(t, c, imap.SeqSet{{Start: 1, Stop: 0}}, &imap.FetchOptions{ // 1:*
		UID: true, Envelope: true, RFC822Size: true,
		BodyStructure:     &imap.FetchItemBodyStructure{Extended: true},
		BodySection:       []*imap.FetchItemBodySection{all, one, oneMIME, deep, header, text},
		BinarySection:     []*imap.FetchItemBinarySection{{Peek: true, Part: []int{1}}},
		BinarySectionSize: []*imap.FetchItemBinarySectionSize{{Part: []int{2}}},
	})
	if len(msgs) != len(files) {
		t.Fatalf("%d answers for %d messages", len(msgs), len(files))
	}
	for i, m := range msgs {
		name := filepath.Base(files[i])
		if got := m.FindBodySection(all); !bytes.Equal(got, raws[i]) || m.RFC822Size != int64(len(raws[i])) {
			t.Errorf("%s: BODY[] %d bytes, RFC822.SIZE %d; want %d", name, len(got), m.RFC822Size, len(raws[i]))
		}
		if h, b := m.FindBodySection(header), m.FindBodySection(text); !bytes.Equal(append(append([]byte{}, h...), b...), raws[i]) {
			t.Errorf("%s: HEADER + TEXT is not the message", name)
		}
		if m.BodyStructure == nil || m.Envelope == nil {
			t.Errorf("%s: no BODYSTRUCTURE or ENVELOPE", name)
		}
	}
	// SEARCH reads every message's text; a word of the CCD attachment.
	data, err := c.Search(&imap.SearchCriteria{Text: []string{"ClinicalDocument"}}, nil).Wait()
	if err != nil {
		t.Fatal(err)
	}
	if len(data.AllSeqNums()) == 0 {
		t.Errorf("SEARCH TEXT ClinicalDocument found nothing")
	}
	if err := c.Noop().Wait(); err != nil {
		t.Fatalf("connection after FETCH and SEARCH: %v", err)
	}
}
