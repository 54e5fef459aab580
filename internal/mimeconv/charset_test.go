package mimeconv

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/emersion/go-message/charset"
)

// latin1Dose is the measured failure of the "reliability" issue: Windows-1252
// (here also ISO-8859-1) bytes from an older EHR, and what they say.
const (
	latin1Dose = "Patient: M\xfcller, dose 5 \xb5g"
	dose       = "Patient: Müller, dose 5 µg"
)

// TestDecodeText checks the charset rule of decodeText: mislabelled
// Windows-1252 keeps its meaning, declared charsets decode by their
// tables, and what cannot be read without loss is reported, with the
// tolerant reading still returned.
func TestDecodeText(t *testing.T) {
	const (
		ok      = iota // no error
		invalid        // *CharsetError, bytes not valid in the charset
		unknown        // *CharsetError, charset unknown
	)
	cases := []struct {
		name, cs, in, want string
		err                int
	}{
		{"8-bit Windows-1252 labelled utf-8", "utf-8", latin1Dose, dose, ok},
		{"8-bit Windows-1252 labelled UTF8 in quotes", `"UTF8"`, latin1Dose, dose, ok},
		{"8-bit Windows-1252 without charset", "", latin1Dose, dose, ok},
		{"8-bit Windows-1252 labelled us-ascii", "us-ascii", latin1Dose, dose, ok},
		{"8-bit Windows-1252 labelled unknown-8bit", "unknown-8bit", latin1Dose, dose, ok},
		{"ISO-8859-1 declared correctly", "ISO-8859-1", latin1Dose, dose, ok},
		{"latin1 alias", "latin1", latin1Dose, dose, ok},
		{"ISO-8859-1 label with Windows-1252 punctuation (WHATWG)", "iso-8859-1", "\x80 50 \x84Zuzahlung\x93 \x96 \x85", "€ 50 „Zuzahlung“ – …", ok},
		{"Windows-1252 undefined byte is its C1 control, not U+FFFD", "windows-1252", "a\x81b", "a\u0081b", ok},
		{"valid UTF-8 stays UTF-8", "utf-8", "Patient: Müller, dose 5 µg", dose, ok},
		{"UTF-8 labelled us-ascii stays UTF-8", "us-ascii", "Patient: Müller, dose 5 µg", dose, ok},
		{"UTF-8 without charset stays UTF-8", "", "Größe ✓", "Größe ✓", ok},
		{"ISO-8859-2 by its table", "iso-8859-2", "\xb1\xe6", "ąć", ok},
		{"ISO-8859-15 by its table", "ISO-8859-15", "\xa4", "€", ok},
		{"Shift_JIS by its table", "Shift_JIS", "\x82\xa0", "あ", ok},
		{"ASCII in an unknown charset", "x-unknown", "plain words", "plain words", ok},
		{"invalid Shift_JIS", "shift_jis", "dose \x81 5", "dose \ufffd 5", invalid},
		{"invalid GB2312", "gb2312", "dose \xff\xff", "dose \ufffd\ufffd", invalid},
		{"byte undefined in ISO-8859-3", "iso-8859-3", "a\xa5b", "a\ufffdb", invalid},
		{"odd UTF-16", "utf-16be", "\x00a\x00", "a\ufffd", invalid},
		{"8-bit text in an unknown charset", "x-unknown", latin1Dose, "Patient: M\ufffdller, dose 5 \ufffdg", unknown},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := decodeText(tc.cs, []byte(tc.in))
			if got != tc.want {
				t.Errorf("decodeText(%q, %q) = %q, want %q", tc.cs, tc.in, got, tc.want)
			}
			if !utf8.ValidString(got) {
				t.Errorf("result %q is not valid UTF-8", got)
			}
			var ce *CharsetError
			switch {
			case tc.err == ok && err != nil:
				t.Errorf("error %v, want none", err)
			case tc.err != ok && !errors.Is(err, ErrUndecodableText):
				t.Errorf("error %v, want ErrUndecodableText", err)
			case tc.err != ok && !errors.As(err, &ce):
				t.Errorf("error %T is not a *CharsetError", err)
			case tc.err != ok && ce.Unknown != (tc.err == unknown):
				t.Errorf("Unknown = %v, want %v", ce.Unknown, tc.err == unknown)
			}
		})
	}
}

// TestWindows1252Table checks the hand-written table against go-message's
// Windows-1252 decoder (golang.org/x/text) for every byte but the five
// that Windows-1252 leaves undefined: x/text makes those U+FFFD, the
// WHATWG index (which decodeWindows1252 follows) the C1 control of the
// same number.
func TestWindows1252Table(t *testing.T) {
	undefined := map[byte]bool{0x81: true, 0x8D: true, 0x8F: true, 0x90: true, 0x9D: true}
	for i := 0; i < 256; i++ {
		c := byte(i)
		got := decodeWindows1252([]byte{c})
		if undefined[c] {
			if got != string(rune(c)) {
				t.Errorf("byte %#x = %q, want U+%04X", c, got, c)
			}
			continue
		}
		r, err := charset.Reader("windows-1252", bytes.NewReader([]byte{c}))
		if err != nil {
			t.Fatal(err)
		}
		want, _ := io.ReadAll(r)
		if got != string(want) {
			t.Errorf("byte %#x = %q, x/text says %q", c, got, want)
		}
	}
}

// TestDecodeWordsCharsets checks RFC 2047 encoded-words and raw 8-bit
// header text: wrong labels and split characters keep their meaning,
// undecodable words are kept as written and reported when that loses
// text.
func TestDecodeWordsCharsets(t *testing.T) {
	cases := []struct {
		name, in, want string
		err            bool
	}{
		{"Windows-1252 bytes in a utf-8 word", "=?utf-8?q?M=FCller=2C_dose_5_=B5g?=", "Müller, dose 5 µg", false},
		{"Windows-1252 bytes in a us-ascii word", "=?us-ascii?Q?M=FCller?=", "Müller", false},
		{"ISO-8859-1 word", "=?ISO-8859-1?B?TfxsbGVyLCBkb3NlIDUgtWc=?=", "Müller, dose 5 µg", false},
		{"language suffix (RFC 2231 §5)", "=?UTF-8*de?Q?M=C3=BCller?=", "Müller", false},
		{"character split across two words", "=?utf-8?q?M=C3?= =?utf-8?q?=BCller?=", "Müller", false},
		{"B without padding", "=?utf-8?b?TcO8bGxlcg?=", "Müller", false},
		{"raw 8-bit Windows-1252", latin1Dose, dose, false},
		{"raw UTF-8 (RFC 6532)", "Befund Müller", "Befund Müller", false},
		{"raw 8-bit next to a word", "Befund M\xfcller =?utf-8?q?=E2=80=93?= neu", "Befund Müller – neu", false},
		{"space between words of two charsets dropped", "=?utf-8?q?a?= =?iso-8859-1?q?=FC?=", "aü", false},
		{"unknown charset, ASCII: kept as written", "=?x-unknown?q?hello?= world", "=?x-unknown?q?hello?= world", false},
		{"space next to a word kept as written stays", "=?utf-8?q?a?= =?x-unknown?q?b?=", "a =?x-unknown?q?b?=", false},
		{"not valid Q: kept as written", "=?utf-8?q?a=Z?=", "=?utf-8?q?a=Z?=", false},
		{"unknown charset, 8-bit: kept and reported", "=?x-unknown?q?M=FCller?=", "=?x-unknown?q?M=FCller?=", true},
		{"empty charset, 8-bit: kept and reported", "=??q?M=FCller?=", "=??q?M=FCller?=", true},
		{"invalid Shift_JIS: reported", "=?shift_jis?b?gSA=?=", "\ufffd ", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := decodeWords(tc.in)
			if got != tc.want {
				t.Errorf("decodeWords(%q) = %q, want %q", tc.in, got, tc.want)
			}
			if DecodeWords(tc.in) != got {
				t.Errorf("DecodeWords differs from decodeWords")
			}
			if (err != nil) != tc.err || err != nil && !errors.Is(err, ErrUndecodableText) {
				t.Errorf("error %v, want error: %v", err, tc.err)
			}
		})
	}
}

// TestParseStrictText checks what the SMTP front relies on: with
// StrictText, mislabelled Windows-1252 in the body, Subject, other header
// fields and attachment names arrives with its meaning, and text that
// cannot be read without loss is an error that says where, never U+FFFD.
// Without StrictText the same messages parse, as a mailbox must.
func TestParseStrictText(t *testing.T) {
	head := "From: a@x.example\r\nTo: b@x.example\r\n"
	t.Run("mislabelled text keeps its meaning", func(t *testing.T) {
		for _, ct := range []string{
			"Content-Type: text/plain; charset=utf-8\r\n",
			"Content-Type: text/plain\r\n",
			"Content-Type: text/plain; charset=us-ascii\r\n",
			"Content-Type: text/plain; charset=iso-8859-1\r\n",
			"", // no Content-Type: text/plain; charset=us-ascii (RFC 2045 §5.2)
		} {
			raw := head + "Subject: Befund M\xfcller\r\nX-Note: M\xfcller\r\n" + ct +
				"Content-Transfer-Encoding: 8bit\r\n\r\n" + latin1Dose + "\r\n"
			p, err := Parse([]byte(raw), ParseOptions{StrictText: true})
			if err != nil {
				t.Fatalf("%q: %v", ct, err)
			}
			if p.Body != dose+"\n" {
				t.Errorf("%q: body %q, want %q", ct, p.Body, dose+"\n")
			}
			if p.Subject != "Befund Müller" {
				t.Errorf("%q: subject %q", ct, p.Subject)
			}
			if v := p.Headers[3].Value; p.Headers[3].Name != "X-Note" || v != "Müller" {
				t.Errorf("%q: header %s: %q", ct, p.Headers[3].Name, v)
			}
		}
	})
	t.Run("mislabelled attachment name and encoded-word subject", func(t *testing.T) {
		raw := head + "Subject: =?utf-8?q?Befund_M=FCller?=\r\nContent-Type: multipart/mixed; boundary=b\r\n\r\n" +
			"--b\r\nContent-Type: text/plain; charset=utf-8\r\n\r\nsee attached\r\n" +
			"--b\r\nContent-Type: application/pdf\r\nContent-Disposition: attachment; filename=\"M\xfcller.pdf\"\r\nContent-Transfer-Encoding: base64\r\n\r\nJVBERi0=\r\n--b--\r\n"
		p, err := Parse([]byte(raw), ParseOptions{StrictText: true})
		if err != nil {
			t.Fatal(err)
		}
		if p.Subject != "Befund Müller" || len(p.Attachments) != 1 || p.Attachments[0].Filename != "Müller.pdf" {
			t.Errorf("subject %q, attachments %+v", p.Subject, p.Attachments)
		}
	})
	t.Run("RFC 2231 attachment names in ISO-8859-1 and mislabelled UTF-8", func(t *testing.T) {
		// mime.ParseMediaType drops the first and keeps the second's
		// invalid UTF-8 byte.
		for _, disp := range []string{
			"attachment; filename*=iso-8859-1''M%FCller%20%B5g.pdf",
			"attachment; filename*=utf-8''M%FCller%20%B5g.pdf",
		} {
			raw := head + "Subject: x\r\nContent-Type: multipart/mixed; boundary=b\r\n\r\n" +
				"--b\r\nContent-Type: text/plain\r\n\r\nsee attached\r\n" +
				"--b\r\nContent-Type: application/pdf\r\nContent-Disposition: " + disp + "\r\nContent-Transfer-Encoding: base64\r\n\r\nJVBERi0=\r\n--b--\r\n"
			p, err := Parse([]byte(raw), ParseOptions{StrictText: true})
			if err != nil {
				t.Fatalf("%s: %v", disp, err)
			}
			if len(p.Attachments) != 1 || p.Attachments[0].Filename != "Müller µg.pdf" {
				t.Errorf("%s: attachments %+v", disp, p.Attachments)
			}
		}
	})
	t.Run("a text attachment is bytes, whatever its charset", func(t *testing.T) {
		raw := head + "Subject: x\r\nContent-Type: multipart/mixed; boundary=b\r\n\r\n" +
			"--b\r\nContent-Type: text/plain\r\n\r\nsee attached\r\n" +
			"--b\r\nContent-Type: text/plain; charset=x-unknown\r\nContent-Disposition: attachment; filename=raw.txt\r\n\r\n\xff\xfe\r\n--b--\r\n"
		if _, err := Parse([]byte(raw), ParseOptions{StrictText: true}); err != nil {
			t.Fatalf("an attachment's bytes are not decoded, yet: %v", err)
		}
	})
	for _, tc := range []struct {
		name, raw, where string
		unknown          bool
	}{
		{"body in invalid Shift_JIS", head + "Subject: x\r\nContent-Type: text/plain; charset=Shift_JIS\r\n\r\ndose \x81 5\r\n", "body", false},
		{"body in an unknown charset", head + "Subject: x\r\nContent-Type: text/plain; charset=x-unknown\r\n\r\n" + latin1Dose + "\r\n", "body", true},
		{"HTML body in invalid GB2312", head + "Subject: x\r\nContent-Type: multipart/alternative; boundary=b\r\n\r\n--b\r\nContent-Type: text/plain\r\n\r\nok\r\n--b\r\nContent-Type: text/html; charset=gb2312\r\n\r\n<p>\xff\xff</p>\r\n--b--\r\n", "body", false},
		{"Subject word in invalid Shift_JIS", head + "Subject: =?shift_jis?b?gSA=?=\r\n\r\nok\r\n", "Subject", false},
		{"Subject word in an unknown charset", head + "Subject: =?x-unknown?q?M=FCller?=\r\n\r\nok\r\n", "Subject", true},
		{"attachment name in invalid Shift_JIS", head + "Subject: x\r\nContent-Type: multipart/mixed; boundary=b\r\n\r\n--b\r\n\r\nok\r\n--b\r\nContent-Type: application/pdf; name=\"=?shift_jis?b?gSA=?=\"\r\nContent-Transfer-Encoding: base64\r\n\r\nJVBERi0=\r\n--b--\r\n", "attachment name", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Parse([]byte(tc.raw), ParseOptions{StrictText: true})
			if p != nil {
				t.Errorf("a result with the error")
			}
			var ce *CharsetError
			if !errors.Is(err, ErrUndecodableText) || !errors.As(err, &ce) {
				t.Fatalf("err = %v, want a *CharsetError", err)
			}
			if ce.Where != tc.where || ce.Unknown != tc.unknown {
				t.Errorf("error %+v, want Where %q Unknown %v", ce, tc.where, tc.unknown)
			}
			if strings.Contains(err.Error(), "dose") || strings.Contains(err.Error(), "ller") {
				t.Errorf("error %q quotes the text", err)
			}
			if _, err := Parse([]byte(tc.raw), ParseOptions{}); err != nil {
				t.Errorf("without StrictText: %v", err)
			}
		})
	}
}

// FuzzDecodeWords checks that decodeWords never panics, always returns
// valid UTF-8, leaves valid UTF-8 without encoded-words as it is, and
// reports loss only as ErrUndecodableText.
func FuzzDecodeWords(f *testing.F) {
	for _, s := range []string{
		latin1Dose, "=?utf-8?q?M=FCller?=", "=?utf-8?q?M=C3?= =?utf-8?q?=BCller?=", "=?x?b?=?=",
		"=?shift_jis?b?gSA=?= =?iso-2022-jp?q?=1B$B?=", "=?=?=??=", "a =?utf-8*en?Q?_?= b",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := decodeWords(s)
		if !utf8.ValidString(got) {
			t.Fatalf("decodeWords(%q) = %q, not valid UTF-8", s, got)
		}
		if err != nil && !errors.Is(err, ErrUndecodableText) {
			t.Fatalf("decodeWords(%q): unexpected error %v", s, err)
		}
		if !strings.Contains(s, "=?") && utf8.ValidString(s) && (got != s || err != nil) {
			t.Fatalf("decodeWords(%q) = %q, %v; want it unchanged", s, got, err)
		}
	})
}

// TestParseMaxText: a body whose text decoded to UTF-8 (with LF line
// breaks) passes ParseOptions.MaxText fails with ErrTextTooLong, whether
// it is UTF-8, Windows-1252 that grows when decoded, or another table's
// charset; text of exactly MaxText is read.
func TestParseMaxText(t *testing.T) {
	head := "From: a@x.example\r\nContent-Type: text/plain; charset="
	for _, tc := range []struct {
		name, charset, body string
		decoded             int // bytes of UTF-8 with LF line breaks
	}{
		{"utf-8", "utf-8", "abc\r\ndef\r\n", 8},
		{"windows-1252 grows", "windows-1252", "\x80\x80\r\n\x80", 10}, // € is three bytes
		{"mislabelled utf-8", "utf-8", "M\xfcller\r\n", 8},
		{"iso-8859-7 table", "iso-8859-7", "\xe1\xe2\xe3\r\n", 7}, // Greek: two bytes each
	} {
		t.Run(tc.name, func(t *testing.T) {
			raw := []byte(head + tc.charset + "\r\n\r\n" + tc.body)
			if _, err := Parse(raw, ParseOptions{MaxText: int64(tc.decoded)}); err != nil {
				t.Fatalf("MaxText %d (the text's length): %v", tc.decoded, err)
			}
			_, err := Parse(raw, ParseOptions{MaxText: int64(tc.decoded - 1)})
			if !errors.Is(err, ErrTextTooLong) {
				t.Fatalf("MaxText %d: %v, want ErrTextTooLong", tc.decoded-1, err)
			}
		})
	}
}
