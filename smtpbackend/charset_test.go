package smtpbackend

import (
	"errors"
	"strings"
	"testing"

	"github.com/directbridge/directbridge/internal/mimeconv"
)

// The measured failure of the "reliability" issue: Windows-1252 (here also
// ISO-8859-1) bytes from an older EHR, and what they say.
const (
	eightBitDose = "Patient: M\xfcller, dose 5 \xb5g"
	wantDose     = "Patient: Müller, dose 5 µg"
)

// charsetMessage is a message from alice to bob with the given extra
// header lines (a Content-Type among them, or none) and an 8-bit body.
func charsetMessage(body string, lines ...string) []byte {
	h := "From: " + addrAlice + "\r\nTo: " + addrBob + "\r\n"
	for _, l := range lines {
		h += l + "\r\n"
	}
	return []byte(h + "MIME-Version: 1.0\r\nContent-Transfer-Encoding: 8bit\r\n\r\n" + body + "\r\n")
}

// TestConvertMislabelledCharset: Windows-1252 text labelled UTF-8,
// us-ascii or nothing, and ISO-8859-1 labelled as such, reach the
// provider's Message with their meaning, in the body and in raw 8-bit or
// mislabelled encoded-word header fields; never as U+FFFD.
func TestConvertMislabelledCharset(t *testing.T) {
	env := Envelope{From: addrAlice, Recipients: []string{addrBob}}
	for _, tc := range []struct {
		name, contentType string
	}{
		{"charset utf-8", "Content-Type: text/plain; charset=utf-8"},
		{"no charset", "Content-Type: text/plain"},
		{"no Content-Type", ""},
		{"charset us-ascii", "Content-Type: text/plain; charset=us-ascii"},
		{"charset iso-8859-1, correct", "Content-Type: text/plain; charset=iso-8859-1"},
		{"HTML, charset utf-8", "Content-Type: text/html; charset=utf-8"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lines := []string{"Subject: Befund M\xfcller"}
			if tc.contentType != "" {
				lines = append(lines, tc.contentType)
			}
			s, err := Convert(charsetMessage(eightBitDose, lines...), env, addrAlice, Limits{})
			if err != nil {
				t.Fatalf("Convert: %v", err)
			}
			if !strings.Contains(s.Message.Body, wantDose) || strings.ContainsRune(s.Message.Body, '\uFFFD') {
				t.Errorf("body %q, want it to hold %q", s.Message.Body, wantDose)
			}
			wantEq(t, "subject", s.Message.Subject, "Befund Müller")
			composeAccepts(t, s)
		})
	}
	t.Run("header fields that travel", func(t *testing.T) {
		raw := []byte("From: Dr. M\xfcller <" + addrAlice + ">\r\nTo: " + addrBob + "\r\n" +
			"Subject: =?utf-8?q?Befund_M=FCller=2C_5_=B5g?=\r\nX-Ward: Station M\xfcller\r\n\r\nok\r\n")
		s, err := Convert(raw, env, addrAlice, Limits{})
		if err != nil {
			t.Fatalf("Convert: %v", err)
		}
		wantEq(t, "subject", s.Message.Subject, "Befund Müller, 5 µg")
		got := map[string]string{}
		for _, h := range s.Message.Headers {
			got[h.Name] = h.Value
		}
		wantEq(t, "X-Ward", got["X-Ward"], "Station Müller")
		wantEq(t, "From", got["From"], "Dr. Müller <"+addrAlice+">")
		composeAccepts(t, s)
	})
}

// TestUndecodableTextRefused: text that cannot be read without loss is a
// ConvertError matching mimeconv.ErrUndecodableText, answered 554 with
// 5.6.5 (bytes not valid in the declared charset: conversion failed) or
// 5.6.3 (a charset the bridge cannot decode: conversion not supported),
// and a text that says why without quoting the message.
func TestUndecodableTextRefused(t *testing.T) {
	env := Envelope{From: addrAlice, Recipients: []string{addrBob}}
	subject := "Subject: " + secret
	for _, tc := range []struct {
		name string
		raw  []byte
		enh  int // the last digit of 5.6.x
		says string
	}{
		{"body in invalid Shift_JIS", charsetMessage(secret+" \x81 ", subject, "Content-Type: text/plain; charset=Shift_JIS"), 5, "body text has bytes that are not valid in its declared charset (shift_jis)"},
		{"body in invalid GB2312", charsetMessage(secret+" \xff\xff", subject, "Content-Type: text/html; charset=GB2312"), 5, "(gb2312)"},
		{"body in an unknown charset", charsetMessage(eightBitDose+" "+secret, subject, "Content-Type: text/plain; charset=x-unknown"), 3, "body text is in a charset (x-unknown) the bridge cannot decode"},
		{"charset label that is no token is not quoted", charsetMessage(eightBitDose, subject, `Content-Type: text/plain; charset="Jane Roe"`), 3, "body text is in a charset the bridge cannot decode"},
		{"Subject word in invalid Shift_JIS", charsetMessage(secret, "Subject: =?shift_jis?b?gSA=?= "+secret, "Content-Type: text/plain"), 5, "the Subject has bytes"},
		{"attachment name in an unknown charset", []byte("From: " + addrAlice + "\r\nTo: " + addrBob + "\r\n" + subject +
			"\r\nContent-Type: multipart/mixed; boundary=b\r\n\r\n--b\r\n\r\n" + secret + "\r\n--b\r\n" +
			"Content-Type: application/pdf; name=\"=?x-unknown?q?M=FCller?=.pdf\"\r\nContent-Transfer-Encoding: base64\r\n\r\nJVBERi0=\r\n--b--\r\n"), 3, "an attachment name is in a charset"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Convert(tc.raw, env, addrAlice, Limits{})
			if s != nil {
				t.Errorf("a Submission with the error")
			}
			if !errors.Is(err, mimeconv.ErrUndecodableText) {
				t.Fatalf("err = %v, want mimeconv.ErrUndecodableText", err)
			}
			var ce *ConvertError
			if !errors.As(err, &ce) {
				t.Fatalf("err %T is not a *ConvertError", err)
			}
			checkReason(t, ce)
			if !strings.Contains(ce.Reason, tc.says) {
				t.Errorf("Reason %q does not say %q", ce.Reason, tc.says)
			}
			r := dataReply(err)
			if r.Code != 554 || r.EnhancedCode != [3]int{5, 6, tc.enh} {
				t.Errorf("reply %d %v, want 554 5.6.%d", r.Code, r.EnhancedCode, tc.enh)
			}
			if !strings.Contains(r.Message, ce.Reason) {
				t.Errorf("reply %q does not carry the Reason", r.Message)
			}
		})
	}
}
