package mimeconv

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/directbridge/directbridge/upstream/directapi"
)

type wantAttachment struct {
	filename    string
	contentType string
	sha256      string // of the decoded bytes; "" to skip
	prefix      string // the decoded bytes start with this; "" to skip
}

// The attachment hashes below were computed independently with Python's
// email package (policy.default, get_payload(decode=True)).
var parseCases = []struct {
	file         string
	sender       string
	subject      string
	messageID    string
	date         string // RFC 3339, "" for zero
	recipients   []directapi.Recipient
	html         bool
	bodyPrefix   string
	bodyContains string
	attachments  []wantAttachment
	headers      int
	firstHeader  directapi.MessageHeader
}{
	{
		file:       "direct-plain-outgoing.txt",
		sender:     "User1@Cerner.com",
		subject:    "I-D ACTION:draft-ietf-mailext-pipeline-01.txt",
		messageID:  "<9501051053.aa04167@IETF.CNR I.Reston.VA.US>",
		date:       "1995-01-05T10:53:24-05:00",
		recipients: []directapi.Recipient{{Email: "externUser1@starugh-stateline.com", Type: directapi.TO}},
		// The parts have an empty line right after the delimiter, so they
		// have no header and their Content-type lines are text.
		bodyPrefix:   "Content-type: text/plain; charset=\"us-ascii\"\n\nA Revised Internet-Draft",
		bodyContains: "performance significantly.\n",
		attachments:  []wantAttachment{{filename: "attachment-1.txt", contentType: "text/plain; charset=us-ascii", prefix: "Content-type: Message/External-body;\r\n"}},
		headers:      7,
		firstHeader:  directapi.MessageHeader{Name: "To", Value: "externUser1@starugh-stateline.com"},
	},
	{
		file:       "direct-multiple-recipients.txt",
		sender:     "externUser1@starugh-stateline.com",
		subject:    "I-D ACTION:draft-ietf-mailext-pipeline-01.txt",
		messageID:  "<9501051053.aa04167@IETF.CNR I.Reston.VA.US>",
		date:       "1995-01-05T10:53:24-05:00",
		recipients: []directapi.Recipient{{Email: "user1@cerner.com", Type: directapi.TO}, {Email: "gm2552@securehealthemail.com", Type: directapi.TO}},
		bodyPrefix: "Content-type: text/plain; charset=\"us-ascii\"\n\nA Revised",
		// LF file: the part keeps its bare LF line endings.
		attachments: []wantAttachment{{filename: "attachment-1.txt", contentType: "text/plain; charset=us-ascii", prefix: "Content-type: Message/External-body;\nname="}},
		headers:     7,
		firstHeader: directapi.MessageHeader{Name: "To", Value: "user1@cerner.com, gm2552@securehealthemail.com"},
	},
	{
		file:        "direct-attachment-png.txt",
		sender:      "gm2552@securehealthemail.com",
		subject:     "test pic",
		messageID:   "<4C07A6B7.6020205@securehealthemail.com>",
		date:        "2010-06-03T07:57:27-05:00",
		recipients:  []directapi.Recipient{{Email: "ryan@securehealthemail.com", Type: directapi.TO}},
		bodyPrefix:  "test pic\n",
		attachments: []wantAttachment{{"iMac-icon.png", "image/png", "c6f240870a7d0ebd7950298999980bd8ccaedf3b54460d7f1efae093c573c4c5", "\x89PNG\r\n"}},
		headers:     9,
		firstHeader: directapi.MessageHeader{Name: "Received", Value: "from localhost ([0:0:0:0:0:0:0:1]) by bizet (JAMES SMTP Server 2.3.2) with SMTP ID 337 for <ryan@securehealthemail.com>; Thu, 3 Jun 2010 07:57:27 -0500 (CDT)"},
	},
	{
		file:    "direct-complicated-ccd-attachment.eml",
		sender:  "toby@redmond.hsgincubator.com",
		subject: "Complicated Message With Sanitization",
		date:    "2010-11-21T09:53:14-08:00",
		recipients: []directapi.Recipient{
			{Email: "gussie@nhind.hsgincubator.com", Type: directapi.TO},
			{Email: "biff@nhind.hsgincubator.com", Type: directapi.TO},
			{Email: "bob@nhind.hsgincubator.com", Type: directapi.TO},
			{Email: "gussie@nhind.hsgincubator.com", Type: directapi.TO},
		},
		// mixed > related > alternative(plain, html): the HTML wins.
		html:         true,
		bodyPrefix:   "<HTML><HEAD></HEAD>\n<BODY dir=ltr>",
		bodyContains: "CCRs &amp; PDFs.</DIV>",
		attachments: []wantAttachment{
			{"wlEmoticon-smilewithtongueout[1].png", "image/png", "b50075576dfadab8207b48d65efa412b3522c0c7508e0c79f614f2440bd2b026", "\x89PNG"},
			{"toe%20x-ray[1].jpg", "image/jpeg", "71adde737eb78a272e8e3436eb265c2c4a0c36e6c6b61c572f93b86432dee318", "\xff\xd8"},
			{"wlEmoticon-hotsmile[1].png", "image/png", "cedffd3bc20bd5db1612b84e9042b1c1a28539ab36bee51a10fef3616476697e", "\x89PNG"},
			{"JohnHalamkaCCDDocument_C32.xml", "text/xml", "0fc9280108d891d51f44c83c980e6d2cf1b1583f7ad35d862c2e21e165d771c6", "<ClinicalDocument "},
			{"report.pdf", "application/pdf", "e236518cc280f5250a81b42c0a80bc4ea040e8c223533caae7e60707ae36d49c", "%PDF-"},
			{"RonBogart_ccd.html", "text/html", "4f1dbb22477db96e11e892c69d933647ad73eb54d9d010623814bdf7669ccab7", ""},
		},
		headers:     13,
		firstHeader: directapi.MessageHeader{Name: "From", Value: `"Dr Biff Hooper" <toby@redmond.hsgincubator.com>`},
	},
	{
		file:        "direct-single-part-pdf.txt",
		sender:      "llindsey@messaging.cernerdemos.com",
		subject:     "dms_F312F759-A3EC-B735-3494-6A98F9F03834.pdf",
		messageID:   "<850539186.153.1275928495553.JavaMail.llindsey@cernhsvmail03.cernerasp.com>",
		date:        "2010-06-07T11:34:52-05:00",
		recipients:  []directapi.Recipient{{Email: "highlandclinic@securehealthemail.com", Type: directapi.TO}},
		attachments: []wantAttachment{{"dms_F312F759-A3EC-B735-3494-6A98F9F03834.pdf", "application/pdf", "d64cd86a6031040b74a853c0ad8b1a2858895b5da11e40876a1e8f6cb4545cd4", "%PDF-1.4"}},
		headers:     14,
		firstHeader: directapi.MessageHeader{Name: "Received", Value: "from localhost.localdomain ([127.0.0.1]) by cernhsvmail03 (JAMES SMTP Server 2.3.2) with SMTP ID 685 for <highlandclinic@securehealthemail.com>; Mon, 7 Jun 2010 11:34:56 -0500 (CDT)"},
	},
	{
		file:      "direct-smime-signed-wrapped.eml",
		sender:    "vtest@directaddress.net",
		subject:   "SES Secure Message",
		messageID: "<c7ac6e24-fb14-44c9-b996-885a3a1786a0@directaddress.net>",
		date:      "2013-03-15T00:10:13Z",
		recipients: []directapi.Recipient{
			{Email: "vses_test@direct.healthvault.com", Type: directapi.TO},
			{Email: "vtest1@directaddress.net", Type: directapi.CC},
		},
		// multipart/signed: the content is a message/rfc822, which is not
		// opened, and the signature is an attachment.
		attachments: []wantAttachment{
			{filename: "Html Content.eml", contentType: "message/rfc822", prefix: "x-ses-message-id: 59dc9670-6e1c-404d-ada7-89972c742778@directaddress.net\r\nContent-Type: multipart/alternative;\r\n boundary=\"----=_NextPart_51415223.066511374841\"\r\n"},
			{"smime.p7s", "application/pkcs7-signature", "e55663bd4d0b636c6c6449cb3e0773962886104512d12fe359c0d0ece974994c", ""},
		},
		headers:     8,
		firstHeader: directapi.MessageHeader{Name: "MIME-Version", Value: "1.0"},
	},
	{
		file:        "direct-encrypted-signed-ccda.txt",
		sender:      "from@test.com",
		messageID:   "<829450141.1.1405622177115.JavaMail.jnp3@P854708>",
		date:        "2014-07-17T14:36:18-04:00",
		recipients:  []directapi.Recipient{{Email: "to@test.com", Type: directapi.TO}},
		attachments: []wantAttachment{{"smime.p7m", "application/pkcs7-mime", "a9342bad0eabbe50618cec16065abbd96f26fa1387fb01ba956388fe4d06a7d1", ""}},
		headers:     8,
		firstHeader: directapi.MessageHeader{Name: "Date", Value: "Thu, 17 Jul 2014 14:36:18 -0400 (EDT)"},
	},
	{
		file:        "hard-wrapped-rfc822-base64-bom.eml",
		sender:      "toby@nhind.hsgincubator.com",
		date:        "2013-03-21T16:21:22-07:00",
		recipients:  []directapi.Recipient{{Email: "toby@nhind.hsgicubator.com", Type: directapi.TO}},
		attachments: []wantAttachment{{filename: "message-1.eml", contentType: "message/rfc822", prefix: "X-Sender: toby@nhind.hsgincubator.com\r\n"}},
		headers:     8,
		// The byte order mark is not part of the first name.
		firstHeader: directapi.MessageHeader{Name: "X-Sender", Value: "toby@nhind.hsgincubator.com"},
	},
	{
		file:      "hard-rfc2047-encoded-words.eml",
		sender:    "jamehi03@jamehi03lx.noa.com",
		subject:   "MIME UTF8 Test ¢ More Text",
		messageID: "<5081A889.3020108@jamehi03lx.noa.com>",
		date:      "2012-10-19T12:22:49-07:00",
		// The ISO-8859-1 Q-encoded display name is decoded away; only the
		// addr-spec is kept.
		recipients:   []directapi.Recipient{{Email: "marczak@inbucket.com", Type: directapi.TO}},
		html:         true,
		bodyPrefix:   "<html>\n  <head>\n",
		bodyContains: "Praesent non nibh odio.",
		headers:      9,
		firstHeader:  directapi.MessageHeader{Name: "Message-ID", Value: "<5081A889.3020108@jamehi03lx.noa.com>"},
	},
	{
		file:       "hard-multipart-without-boundary.eml",
		sender:     "Mailer-Daemon@example.com",
		subject:    "Delivery Status Notification (Failure)",
		messageID:  "<444A6F676F-A9A1C1F7-799A-4D89-B97E-8057E132FBFB@YSHSERVER>",
		recipients: []directapi.Recipient{{Email: "user@example.com", Type: directapi.TO}},
		// Read as text/plain (RFC 2045 §5.2).
		bodyPrefix:  "I'm  multipart message without boundary\n",
		headers:     6,
		firstHeader: directapi.MessageHeader{Name: "Delivered-To", Value: "test@example.com"},
	},
	{
		file:        "hard-missing-final-boundary.eml",
		sender:      "james@makita.skynet",
		subject:     "Attachment",
		messageID:   "<07B7061D-2676-487E-942E-C341CE4D13DC@makita.skynet>",
		date:        "2012-10-18T22:48:39-07:00",
		recipients:  []directapi.Recipient{{Email: "greg@inbucket", Type: directapi.TO}},
		bodyPrefix:  "A text section",
		attachments: []wantAttachment{{"foo_9E5D72.zip", "application/x-zip-compressed", "b53a55383d2f1f040ab010606d7911907f1a17f979f1d475fb4ac226243135e5", "<html>\n"}},
		headers:     7,
		firstHeader: directapi.MessageHeader{Name: "From", Value: "James Hillyerd <james@makita.skynet>"},
	},
	{
		file:       "hard-8bit-utf8-labelled-us-ascii.eml",
		sender:     "james@makita.skynet",
		subject:    "plain text",
		messageID:  "<07B7061D-2676-487E-942E-C341CE4D13DC@makita.skynet>",
		date:       "2012-10-18T22:48:39-07:00",
		recipients: []directapi.Recipient{{Email: "greg@inbucket", Type: directapi.TO}},
		// The raw UTF-8 survives the wrong us-ascii label.
		bodyPrefix:   "Using Unicode/UTF-8, you can write",
		bodyContains: "∮ E⋅da = Q,  n → ∞, ∑ f(i) = ∏ g(i)",
		headers:      6,
		firstHeader:  directapi.MessageHeader{Name: "From", Value: "James Hillyerd <james@makita.skynet>"},
	},
	{
		file:    "hard-8bit-unencoded-filename.eml",
		sender:  "pavel.bazika@some.domain",
		subject: "Malformed test",
		date:    "2021-02-22T13:29:24+08:00",
		// "To: <test@dome.domain>," has a trailing comma.
		recipients:  []directapi.Recipient{{Email: "test@dome.domain", Type: directapi.TO}},
		bodyPrefix:  "Text part\n",
		attachments: []wantAttachment{{"管理.doc", "application/msword", "b53a55383d2f1f040ab010606d7911907f1a17f979f1d475fb4ac226243135e5", ""}},
		headers:     6,
		firstHeader: directapi.MessageHeader{Name: "Date", Value: "Wed, 22 Feb 2021 13:29:24 +0800"},
	},
	{
		file:        "direct-mdn-processed.txt",
		sender:      "externUser1@starugh-stateline.com",
		subject:     "Processed: I-D ACTION:draft-ietf-mailext-pipeline-01.txt",
		messageID:   "0c796d0e-4c76-43e8-be40-2cd5e30c1005",
		recipients:  []directapi.Recipient{{Email: "User1@Cerner.com", Type: directapi.TO}},
		bodyPrefix:  "This is a CDATA subject",
		attachments: []wantAttachment{{filename: "attachment-1.txt", contentType: "message/disposition-notification", prefix: "Disposition: automatic-action/MDN-sent-automatically;processed"}},
		headers:     5,
		// Names are kept as written, in lower case here.
		firstHeader: directapi.MessageHeader{Name: "to", Value: "User1@Cerner.com"},
	},
	{
		file:        "direct-dsn-failed.txt",
		sender:      "externUser1@starugh-stateline.com",
		subject:     "Delivery Notification (success) for Bob@Example.COM",
		messageID:   "0c796d0e-4c76-43e8-be40-2cd5e30c1006",
		recipients:  []directapi.Recipient{{Email: "User1@Cerner.com", Type: directapi.TO}},
		bodyPrefix:  "Your message (id QQ314159) could not be delivered to\nCarol@Ivory.EDU.\n",
		attachments: []wantAttachment{{filename: "attachment-1.txt", contentType: "message/delivery-status", prefix: "Reporting-MTA:"}},
		headers:     6,
		firstHeader: directapi.MessageHeader{Name: "To", Value: "User1@Cerner.com"},
	},
}

func TestParseTestdata(t *testing.T) {
	for _, tc := range parseCases {
		t.Run(tc.file, func(t *testing.T) {
			raw := readTestdata(t, "messages/"+tc.file)
			p, err := Parse(raw, ParseOptions{})
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			checkParsed(t, p, tc.sender, tc.subject, tc.messageID, tc.date, tc.recipients)
			if p.HTMLBody != tc.html {
				t.Errorf("HTMLBody = %v, want %v", p.HTMLBody, tc.html)
			}
			if !strings.HasPrefix(p.Body, tc.bodyPrefix) {
				t.Errorf("Body = %.80q, want prefix %q", p.Body, tc.bodyPrefix)
			}
			if !strings.Contains(p.Body, tc.bodyContains) {
				t.Errorf("Body does not contain %q", tc.bodyContains)
			}
			if strings.Contains(p.Body, "\r\n") {
				t.Errorf("Body has CRLF line breaks")
			}
			if len(p.Attachments) != len(tc.attachments) {
				for _, a := range p.Attachments {
					t.Logf("got attachment %q %q", a.Filename, a.ContentType)
				}
				t.Fatalf("%d attachments, want %d", len(p.Attachments), len(tc.attachments))
			}
			for i, want := range tc.attachments {
				got := p.Attachments[i]
				data := decodedContent(t, got.Content)
				if got.Filename != want.filename || got.ContentType != want.contentType {
					t.Errorf("attachment %d = %q %q, want %q %q", i, got.Filename, got.ContentType, want.filename, want.contentType)
				}
				if want.sha256 != "" && sha256Hex(data) != want.sha256 {
					t.Errorf("attachment %d %q: sha256 %s, want %s", i, got.Filename, sha256Hex(data), want.sha256)
				}
				if !bytes.HasPrefix(data, []byte(want.prefix)) {
					t.Errorf("attachment %d %q starts %.60q, want %q", i, got.Filename, data, want.prefix)
				}
			}
			if len(p.Headers) != tc.headers {
				t.Errorf("%d headers, want %d: %v", len(p.Headers), tc.headers, p.Headers)
			}
			if len(p.Headers) > 0 && p.Headers[0] != tc.firstHeader {
				t.Errorf("first header = %q, want %q", p.Headers[0], tc.firstHeader)
			}
		})
	}
}

func checkParsed(t *testing.T, p *Parsed, sender, subject, messageID, date string, recipients []directapi.Recipient) {
	t.Helper()
	if p.Sender != sender {
		t.Errorf("Sender = %q, want %q", p.Sender, sender)
	}
	if p.Subject != subject {
		t.Errorf("Subject = %q, want %q", p.Subject, subject)
	}
	if p.MessageID != messageID {
		t.Errorf("MessageID = %q, want %q", p.MessageID, messageID)
	}
	if date == "" {
		if !p.SentDate.IsZero() {
			t.Errorf("SentDate = %v, want zero", p.SentDate)
		}
	} else if want, _ := time.Parse(time.RFC3339, date); !p.SentDate.Equal(want) {
		t.Errorf("SentDate = %v, want %v", p.SentDate, want)
	}
	if fmt.Sprint(p.Recipients) != fmt.Sprint(recipients) {
		t.Errorf("Recipients = %v, want %v", p.Recipients, recipients)
	}
}

// A stored message may have either line ending; both must give the same
// result apart from the line endings inside attachments that are not
// base64.
func TestParseLFAndCRLFAgree(t *testing.T) {
	for _, file := range []string{
		"direct-attachment-png.txt", "direct-complicated-ccd-attachment.eml",
		"direct-single-part-pdf.txt", "hard-rfc2047-encoded-words.eml",
		"hard-8bit-unencoded-filename.eml",
	} {
		t.Run(file, func(t *testing.T) {
			crlf := readTestdata(t, "messages/"+file)
			lf := bytes.ReplaceAll(crlf, []byte("\r\n"), []byte("\n"))
			a, err := Parse(crlf, ParseOptions{})
			if err != nil {
				t.Fatal(err)
			}
			b, err := Parse(lf, ParseOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if a.Subject != b.Subject || a.Sender != b.Sender || a.Body != b.Body || a.HTMLBody != b.HTMLBody {
				t.Errorf("CRLF and LF differ: %q/%q %q/%q body %d/%d bytes", a.Subject, b.Subject, a.Sender, b.Sender, len(a.Body), len(b.Body))
			}
			if fmt.Sprint(a.Headers) != fmt.Sprint(b.Headers) {
				t.Errorf("headers differ")
			}
			if len(a.Attachments) != len(b.Attachments) {
				t.Fatalf("%d vs %d attachments", len(a.Attachments), len(b.Attachments))
			}
			for i := range a.Attachments {
				x, y := a.Attachments[i], b.Attachments[i]
				if x.Filename != y.Filename || x.ContentType != y.ContentType {
					t.Errorf("attachment %d: %q %q vs %q %q", i, x.Filename, x.ContentType, y.Filename, y.ContentType)
				}
				if !strings.HasPrefix(x.ContentType, "text/") && x.Content != y.Content {
					t.Errorf("attachment %d %q: content differs", i, x.Filename)
				}
			}
		})
	}
}

func TestParseSkipBodies(t *testing.T) {
	raw := readTestdata(t, "messages/direct-complicated-ccd-attachment.eml")
	full, err := Parse(raw, ParseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	meta, err := Parse(raw, ParseOptions{SkipBodies: true})
	if err != nil {
		t.Fatal(err)
	}
	if meta.Body != "" || meta.HTMLBody || meta.Attachments != nil {
		t.Errorf("SkipBodies gave a body or attachments: %d bytes, %d attachments", len(meta.Body), len(meta.Attachments))
	}
	full.Body, full.HTMLBody, full.Attachments = "", false, nil
	if fmt.Sprint(*meta) != fmt.Sprint(*full) {
		t.Errorf("header fields differ:\n%v\n%v", *meta, *full)
	}

	// The body is not read: a body that would be too complex is no error.
	deep := nested(50)
	if _, err := Parse(deep, ParseOptions{SkipBodies: true}); err != nil {
		t.Errorf("SkipBodies read the body: %v", err)
	}
}

// nested returns a message with depth nested multipart/mixed entities.
func nested(depth int) []byte {
	var b bytes.Buffer
	b.WriteString("From: a@example.com\r\nSubject: deep\r\n")
	for i := 0; i < depth; i++ {
		fmt.Fprintf(&b, "Content-Type: multipart/mixed; boundary=\"b%d\"\r\n\r\n--b%d\r\n", i, i)
	}
	b.WriteString("Content-Type: text/plain\r\n\r\ninnermost\r\n")
	for i := depth - 1; i >= 0; i-- {
		fmt.Fprintf(&b, "--b%d--\r\n", i)
	}
	return b.Bytes()
}

func TestParseErrors(t *testing.T) {
	many := "From: a@example.com\r\nContent-Type: multipart/mixed; boundary=x\r\n\r\n" +
		strings.Repeat("--x\r\nContent-Type: image/png\r\n\r\nAAAA\r\n", 10) + "--x--\r\n"
	cases := []struct {
		name string
		raw  []byte
		opts ParseOptions
		want error
	}{
		{"empty", nil, ParseOptions{}, ErrNoHeader},
		{"only line breaks", []byte("\r\n\r\n\n"), ParseOptions{}, ErrNoHeader},
		{"no colon", []byte("hello world\r\n\r\nbody"), ParseOptions{}, ErrNoHeader},
		{"bad name", []byte("Bad Name: x\r\n\r\nbody"), ParseOptions{}, ErrNoHeader},
		{"only a BOM", []byte("\xef\xbb\xbf"), ParseOptions{}, ErrNoHeader},
		{"default depth", nested(DefaultMaxDepth + 1), ParseOptions{}, ErrTooComplex},
		{"small depth", nested(4), ParseOptions{MaxDepth: 3}, ErrTooComplex},
		{"parts", []byte(many), ParseOptions{MaxParts: 9}, ErrTooComplex},
		{"depth at limit", nested(DefaultMaxDepth), ParseOptions{}, nil},
		{"parts at limit", []byte(many), ParseOptions{MaxParts: 10}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Parse(tc.raw, tc.opts)
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			if err != nil && p != nil {
				t.Errorf("got a result with an error")
			}
			if err == nil && p == nil {
				t.Errorf("no result and no error")
			}
		})
	}
}

// Synthetic messages for the rules that the test data does not cover.
func TestParseStructures(t *testing.T) {
	type att struct{ name, ctype, content string }
	cases := []struct {
		name        string
		raw         string
		body        string
		html        bool
		attachments []att
	}{
		{
			name: "alternative prefers html and drops the plain text",
			raw: "From: a@x.example\nContent-Type: multipart/alternative; boundary=b\n\n" +
				"--b\nContent-Type: text/plain\n\nplain\n--b\nContent-Type: text/html; charset=utf-8\n\n<p>html</p>\n--b--\n",
			body: "<p>html</p>", html: true,
		},
		{
			name: "alternative with a related html alternative",
			raw: "From: a@x.example\nContent-Type: multipart/alternative; boundary=b\n\n" +
				"--b\nContent-Type: text/plain\n\nplain\n--b\nContent-Type: multipart/related; boundary=r\n\n" +
				"--r\nContent-Type: text/html\n\n<img src=cid:1>\n--r\nContent-Type: image/gif\nContent-Transfer-Encoding: base64\n\nR0lGODlh\n--r--\n--b--\n",
			body: "<img src=cid:1>", html: true,
			attachments: []att{{"attachment-1.gif", "image/gif", "GIF89a"}},
		},
		{
			name: "only the first inline text is the body",
			raw: "From: a@x.example\nContent-Type: multipart/mixed; boundary=b\n\n" +
				"--b\n\nfirst\n--b\nContent-Type: text/html\n\n<b>second</b>\n--b--\n",
			body:        "first",
			attachments: []att{{"attachment-1.html", "text/html", "<b>second</b>"}},
		},
		{
			name: "text with a filename or attachment disposition is an attachment",
			raw: "From: a@x.example\nContent-Type: multipart/mixed; boundary=b\n\n" +
				"--b\nContent-Type: text/plain; name=notes.txt\n\nnotes\n" +
				"--b\nContent-Type: text/xml\nContent-Disposition: attachment\n\n<x/>\n" +
				"--b\nContent-Type: text/plain\n\nthe body\n--b--\n",
			body: "the body",
			attachments: []att{
				{"notes.txt", "text/plain", "notes"},
				{"attachment-2.xml", "text/xml", "<x/>"},
			},
		},
		{
			name: "RFC 2231 and RFC 2047 file names",
			raw: "From: a@x.example\nContent-Type: multipart/mixed; boundary=b\n\n" +
				"--b\nContent-Type: application/pdf\nContent-Disposition: attachment; filename*=utf-8''Befund%20M%C3%BCller.pdf\nContent-Transfer-Encoding: base64\n\nJVBERi0=\n" +
				"--b\nContent-Type: application/pdf; name=\"=?iso-8859-1?q?R=F6ntgen.pdf?=\"\nContent-Transfer-Encoding: base64\n\nJVBERi0=\n--b--\n",
			attachments: []att{
				{"Befund Müller.pdf", "application/pdf", "%PDF-"},
				{"Röntgen.pdf", "application/pdf", "%PDF-"},
			},
		},
		{
			name: "digest parts default to message/rfc822",
			raw: "From: a@x.example\nContent-Type: multipart/digest; boundary=b\n\n" +
				"--b\n\nFrom: inner@x.example\nSubject: inner\n\nhi\n--b--\n",
			attachments: []att{{"message-1.eml", "message/rfc822", "From: inner@x.example\nSubject: inner\n\nhi"}},
		},
		{
			name: "charsets are converted, unknown ones kept",
			raw: "From: a@x.example\nContent-Type: multipart/mixed; boundary=b\n\n" +
				"--b\nContent-Type: text/plain; charset=iso-8859-1\nContent-Transfer-Encoding: quoted-printable\n\nGr=FC=DFe =\n\n--b\nContent-Type: text/plain; charset=x-unknown\nContent-Disposition: attachment; filename=raw.txt\n\nbytes \xff\n--b--\n",
			body:        "Grüße ",
			attachments: []att{{"raw.txt", "text/plain; charset=x-unknown", "bytes \xff"}}, // the bytes as sent, with their label
		},
		{
			name: "unknown charset body keeps the bytes as valid UTF-8",
			raw:  "From: a@x.example\nContent-Type: text/plain; charset=x-unknown\n\nok \xff ü\n",
			body: "ok \uFFFD ü\n",
		},
		{
			name: "quoted-printable and base64 defects",
			raw: "From: a@x.example\nContent-Type: multipart/mixed; boundary=b\n\n" +
				"--b\nContent-Transfer-Encoding: Quoted-Printable\n\na=3Db =ZZ c=\n d  \n--b\nContent-Type: application/octet-stream\nContent-Transfer-Encoding: base64\n\nSGVs bG8=\nIQ\n--b--\n",
			body:        "a=b =ZZ c d",
			attachments: []att{{"attachment-1", "application/octet-stream", "Hello!"}},
		},
		{
			name: "a nested message is one attachment and is not opened",
			raw: "From: a@x.example\nContent-Type: multipart/mixed; boundary=b\n\n" +
				"--b\nContent-Type: text/plain\n\nsee attached\n--b\nContent-Type: message/rfc822\n\nFrom: b@x.example\nContent-Type: text/html\n\n<p>inner</p>\n--b--\n",
			body:        "see attached",
			attachments: []att{{"message-1.eml", "message/rfc822", "From: b@x.example\nContent-Type: text/html\n\n<p>inner</p>"}},
		},
		{
			name: "multipart with an unknown boundary is read as text",
			raw:  "From: a@x.example\nContent-Type: multipart/mixed; boundary=nope\n\n--other\n\ntext\n",
			body: "--other\n\ntext\n",
		},
		{
			name: "mbox From line, leading empty line and a header without separator",
			raw:  "\nFrom someone@x.example Mon Jan  1 00:00:00 2024\nFrom: a@x.example\nno separator line\n",
			body: "no separator line\n",
		},
		{
			name: "unparsable content type defaults to text/plain",
			raw:  "From: a@x.example\nContent-Type: ;;\"\n\nhello",
			body: "hello",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Parse([]byte(tc.raw), ParseOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if p.Sender != "a@x.example" {
				t.Errorf("Sender = %q", p.Sender)
			}
			if p.Body != tc.body || p.HTMLBody != tc.html {
				t.Errorf("Body = %q html=%v, want %q html=%v", p.Body, p.HTMLBody, tc.body, tc.html)
			}
			if len(p.Attachments) != len(tc.attachments) {
				t.Fatalf("attachments = %v, want %v", p.Attachments, tc.attachments)
			}
			for i, want := range tc.attachments {
				got := p.Attachments[i]
				if got.Filename != want.name || got.ContentType != want.ctype || string(decodedContent(t, got.Content)) != want.content {
					t.Errorf("attachment %d = %q %q %q, want %q %q %q", i, got.Filename, got.ContentType, decodedContent(t, got.Content), want.name, want.ctype, want.content)
				}
			}
		})
	}
}

func TestParseHeaderFields(t *testing.T) {
	raw := "from: \"A, B\" <ab@x.example>\r\n" +
		"To: one@x.example,\r\n\t two@x.example\r\n" +
		"Cc: undisclosed:;\r\n" +
		"Bcc: hidden@x.example\r\n" +
		"Reply-To: Replies <r@x.example>, other@x.example\r\n" +
		"Subject: =?utf-8?B?w5xiZXJ3ZWlzdW5n?= =?utf-8?Q?_=E2=80=93_Befund?=\r\n" +
		"X-Raw: caf\xe9\r\n" +
		"Message-ID:   <id@x.example>  \r\n" +
		"Date: Tue, 1 Jul 2025 10:00:00 +0200 (CEST)\r\n" +
		"\r\nbody\r\n"
	p, err := Parse([]byte(raw), ParseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	checkParsed(t, p, "ab@x.example", "Überweisung – Befund", "<id@x.example>", "2025-07-01T10:00:00+02:00", []directapi.Recipient{
		{Email: "one@x.example", Type: directapi.TO},
		{Email: "two@x.example", Type: directapi.TO},
		{Email: "hidden@x.example", Type: directapi.BCC},
	})
	if p.ReplyTo != "r@x.example" {
		t.Errorf("ReplyTo = %q", p.ReplyTo)
	}
	want := []directapi.MessageHeader{
		{Name: "from", Value: `"A, B" <ab@x.example>`},
		{Name: "To", Value: "one@x.example, two@x.example"},
		{Name: "Cc", Value: "undisclosed:;"},
		{Name: "Bcc", Value: "hidden@x.example"},
		{Name: "Reply-To", Value: "Replies <r@x.example>, other@x.example"},
		{Name: "Subject", Value: "=?utf-8?B?w5xiZXJ3ZWlzdW5n?= =?utf-8?Q?_=E2=80=93_Befund?="},
		{Name: "X-Raw", Value: "café"}, // Windows-1252 0xE9 (headerText), not U+FFFD
		{Name: "Message-ID", Value: "<id@x.example>"},
		{Name: "Date", Value: "Tue, 1 Jul 2025 10:00:00 +0200 (CEST)"},
	}
	if fmt.Sprint(p.Headers) != fmt.Sprint(want) {
		t.Errorf("Headers =\n%q\nwant\n%q", p.Headers, want)
	}
	if p.Body != "body\n" {
		t.Errorf("Body = %q", p.Body)
	}
}
