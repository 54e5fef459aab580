package smtpbackend

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	netmail "net/mail"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	gomessage "github.com/emersion/go-message"

	"github.com/directbridge/directbridge/internal/mimeconv"
	"github.com/directbridge/directbridge/upstream/directapi"
)

var (
	updateGolden   = flag.Bool("update", false, "rewrite testdata/golden/*.json from Convert's output")
	generateGolden = flag.Bool("generate", false, "rewrite the generated testdata/golden/*.eml inputs (reads /work/shared/testdata)")
)

// Addresses of the generated messages (example.* domains, RFC 2606).
const (
	addrAlice  = "alice@direct.example"
	addrBob    = "bob@direct.example"
	addrCarol  = "carol@direct.example"
	addrDave   = "dave@direct.example"
	addrErin   = "erin@direct.example"
	addrClinic = "frontdesk@clinic.direct.example"
)

// SHA-256 of the source files, as listed in /work/shared/testdata/README.md
// (computed there independently of this code).
const (
	shaPDF = "124f30a7be57c3d00c07d6d88f628e0143852650c7dbdc7fecd06a81562f7382" // ccda/unstructured-embedded-pdf.decoded.pdf
	shaXDM = "addf36e2c87248aff58258d976851e5859aae3cb10f0cad34c246bffde5a51b8" // xdm/ccda-inpatient-xdm.zip
	shaCCD = "c5c60ef2281f66a69581ea7671188adb0bc3585c37828470eeb565c778a5970e" // ccda/ccd.xml
)

// logoPNG is an 8x8 PNG written for these tests with Python's zlib and
// struct modules; shaLogo is its SHA-256 computed by Python's hashlib.
const (
	logoPNG = "iVBORw0KGgoAAAANSUhEUgAAAAgAAAAICAIAAABLbSncAAAANElEQVR42mP4//+/goICkExISACSCxYsAJIPHjxgAAIgy8HBAUg2NDQAyQMHDgBJhkGpAwBUY4mhgy4I0wAAAABJRU5ErkJggg=="
	shaLogo = "5016a4ace03f813835cf453a96fd7bbbd901cf0ed8f0bc73c098cfb89460b7ad"
)

// forwardedMessage is the message/rfc822 part of nested-rfc822.eml, with
// CRLF line breaks. It is multipart itself: Convert must attach it whole
// and not take its parts apart.
var forwardedMessage = crlfText(`From: Referring Clinic <referrals@other.direct.example>
To: alice@direct.example
Subject: Referral: cardiology consult
Date: Fri, 28 Feb 2025 16:02:11 -0500
Message-ID: <ref-8812@other.direct.example>
MIME-Version: 1.0
Content-Type: multipart/mixed; boundary="inner-b"

--inner-b
Content-Type: text/plain; charset=us-ascii

Please see the attached referral note.
--inner-b
Content-Type: text/xml; name="referral.xml"
Content-Disposition: attachment; filename="referral.xml"

<ClinicalDocument xmlns="urn:hl7-org:v3"/>
--inner-b--
`)

// goldenCase is one message of the golden corpus: testdata/golden/NAME.eml
// converted with sender and env must give testdata/golden/NAME.json.
type goldenCase struct {
	name   string
	sender string
	env    Envelope
	// Independent expectations, checked besides the JSON so that the
	// golden files cannot silently absorb a wrong result.
	messageID   string
	headers     []string          // names of the headers that travel, in order
	recipients  string            // "email:TYPE ..." in order
	html        bool              // HTMLBody
	attachments map[string]string // filename -> SHA-256 of the decoded content
	check       func(t *testing.T, s *Submission)
	flatten     bool // converted with Limits.Flatten (a receipt or S/MIME message)
}

var goldenCases = []goldenCase{
	{
		name:       "plain-text",
		sender:     addrAlice,
		env:        Envelope{From: addrAlice, Recipients: []string{addrBob}},
		messageID:  "<plain-1@direct.example>",
		headers:    []string{"Message-ID"},
		recipients: "bob@direct.example:TO",
		check: func(t *testing.T, s *Submission) {
			wantEq(t, "subject", s.Message.Subject, "Lab results for follow-up")
			wantEq(t, "body", s.Message.Body, "Hello Bob,\n\nThe lab results are in the portal.\n\n-- \nAlice\n")
		},
	},
	{
		name:       "no-passthrough-headers",
		sender:     addrAlice,
		env:        Envelope{From: addrAlice, Recipients: []string{addrBob, addrCarol}},
		recipients: "bob@direct.example:TO carol@direct.example:CC",
		check: func(t *testing.T, s *Submission) {
			// Only the From field, for its display name (fromWithName).
			if len(s.Message.Headers) != 1 || s.Message.Headers[0].Name != "From" {
				t.Errorf("headers = %v, want the From field alone", s.Message.Headers)
			}
		},
	},
	{
		name:       "html-only",
		sender:     addrAlice,
		env:        Envelope{From: addrAlice, Recipients: []string{addrBob}},
		messageID:  "<html-1@direct.example>",
		headers:    []string{"Message-ID"},
		recipients: "bob@direct.example:TO",
		html:       true,
		check: func(t *testing.T, s *Submission) {
			wantEq(t, "body", s.Message.Body, "<html><body><p>R\u00e9sultats disponibles \u2713 \u2013 voir le portail. Cette ligne est assez longue pour \u00eatre coup\u00e9e par l'encodage.</p></body></html>\n")
		},
	},
	{
		name:       "alternative",
		sender:     addrAlice,
		env:        Envelope{From: addrAlice, Recipients: []string{addrBob}},
		messageID:  "<alt-1@direct.example>",
		headers:    []string{"Message-ID"},
		recipients: "bob@direct.example:TO",
		html:       true,
		check: func(t *testing.T, s *Submission) {
			if strings.Contains(s.Message.Body, "PLAIN ALTERNATIVE") {
				t.Errorf("body contains the text/plain alternative: %q", s.Message.Body)
			}
			if !strings.Contains(s.Message.Body, "<b>HTML</b> alternative") {
				t.Errorf("body is not the HTML alternative: %q", s.Message.Body)
			}
			if len(s.Message.AttachmentList) != 0 {
				t.Errorf("the plain alternative became an attachment: %v", s.Message.AttachmentList)
			}
		},
	},
	{
		name:        "attachment-pdf",
		sender:      addrAlice,
		env:         Envelope{From: addrAlice, Recipients: []string{addrBob}},
		messageID:   "<pdf-1@direct.example>",
		headers:     []string{"Message-ID"},
		recipients:  "bob@direct.example:TO",
		attachments: map[string]string{"McBee_L1_20151116_Embedded.pdf": shaPDF},
	},
	{
		name:        "inline-image",
		sender:      addrAlice,
		env:         Envelope{From: addrAlice, Recipients: []string{addrBob}},
		messageID:   "<inline-1@direct.example>",
		headers:     []string{"Message-ID"},
		recipients:  "bob@direct.example:TO",
		html:        true,
		attachments: map[string]string{"logo.png": shaLogo},
		check: func(t *testing.T, s *Submission) {
			if !strings.Contains(s.Message.Body, `src="cid:logo@direct.example"`) {
				t.Errorf("body lost the cid: reference: %q", s.Message.Body)
			}
		},
	},
	{
		name:        "xdm-zip",
		sender:      addrAlice,
		env:         Envelope{From: addrAlice, Recipients: []string{addrBob}},
		messageID:   "<xdm-1@direct.example>",
		headers:     []string{"Message-ID", "X-Direct-Final-Destination-Delivery"},
		recipients:  "bob@direct.example:TO",
		attachments: map[string]string{"CCDA_Inpatient_in_XDM.zip": shaXDM},
		check: func(t *testing.T, s *Submission) {
			wantEq(t, "content type", s.Message.AttachmentList[0].ContentType, "application/zip")
		},
	},
	{
		name:        "ccda-xml",
		sender:      addrAlice,
		env:         Envelope{From: addrAlice, Recipients: []string{addrBob}},
		messageID:   "<ccda-1@direct.example>",
		headers:     []string{"Message-ID"},
		recipients:  "bob@direct.example:TO",
		attachments: map[string]string{"CCD.xml": shaCCD},
		check: func(t *testing.T, s *Submission) {
			wantEq(t, "content type", s.Message.AttachmentList[0].ContentType, "text/xml; charset=UTF-8") // its label kept
			// The CRLF before a delimiter belongs to it (RFC 2046 §5.1.1).
			wantEq(t, "body", s.Message.Body, "Continuity of Care Document attached.")
		},
	},
	{
		name:        "nested-rfc822",
		sender:      addrAlice,
		env:         Envelope{From: addrAlice, Recipients: []string{addrBob}},
		messageID:   "<fwd-1@direct.example>",
		headers:     []string{"Message-ID"},
		recipients:  "bob@direct.example:TO",
		attachments: map[string]string{"message-1.eml": sha256Hex([]byte(forwardedMessage))},
		check: func(t *testing.T, s *Submission) {
			if n := len(s.Message.AttachmentList); n != 1 {
				t.Errorf("%d attachments, want only the forwarded message (its parts stay inside)", n)
			}
			wantEq(t, "content type", s.Message.AttachmentList[0].ContentType, "message/rfc822")
		},
	},
	{
		name:       "charset-latin1",
		sender:     addrAlice,
		env:        Envelope{From: addrAlice, Recipients: []string{addrBob}},
		messageID:  "<latin1-1@direct.example>",
		headers:    []string{"Message-ID"},
		recipients: "bob@direct.example:TO",
		check: func(t *testing.T, s *Submission) {
			// Decoded independently with Python's cp1252 and latin-1 codecs.
			wantEq(t, "subject", s.Message.Subject, "Befund f\u00fcr Herrn M\u00fcller \u2013 \u20ac 50 \u201eZuzahlung\u201c")
			wantEq(t, "body", s.Message.Body, "Sehr geehrter Herr M\u00fcller,\n\nTemperatur 38,5 \u00b0C, Gr\u00f6\u00dfe 1,82 m.\n\nMit freundlichen Gr\u00fc\u00dfen\n")
		},
	},
	{
		name:       "charset-iso-2022-jp",
		sender:     addrAlice,
		env:        Envelope{From: addrAlice, Recipients: []string{addrBob}},
		messageID:  "<jis-1@direct.example>",
		headers:    []string{"Message-ID"},
		recipients: "bob@direct.example:TO",
		check: func(t *testing.T, s *Submission) {
			wantEq(t, "subject", s.Message.Subject, "検査結果のお知らせ（山田太郎様）")
			wantEq(t, "body", s.Message.Body, "山田太郎様\n\n検査結果をお送りします。\n来週の予約をご確認ください。\n\n佐藤クリニック\n")
		},
	},
	{
		name:       "charset-shift-jis",
		sender:     addrAlice,
		env:        Envelope{From: addrAlice, Recipients: []string{addrBob}},
		messageID:  "<sjis-1@direct.example>",
		headers:    []string{"Message-ID"},
		recipients: "bob@direct.example:TO",
		html:       true,
		check: func(t *testing.T, s *Submission) {
			wantEq(t, "subject", s.Message.Subject, "紹介状の送付について")
			wantEq(t, "body", s.Message.Body, "<html><body><p>田中先生</p><p>紹介状を添付いたします。ご高配のほどよろしくお願い申し上げます。</p></body></html>\n")
		},
	},
	{
		name:       "rfc2047-subject",
		sender:     addrAlice,
		env:        Envelope{From: addrAlice, Recipients: []string{addrBob}},
		messageID:  "<2047-1@direct.example>",
		headers:    []string{"Message-ID"},
		recipients: "bob@direct.example:TO",
		check: func(t *testing.T, s *Submission) {
			// RFC 2047 §6.2: the space between adjacent encoded-words goes,
			// the one between an encoded-word and text stays.
			wantEq(t, "subject", s.Message.Subject, "Überweisung: Dr. Schäfer – Kardiologie ✓ (dringend)")
		},
	},
	{
		name:       "bcc-envelope-only",
		sender:     addrAlice,
		env:        Envelope{From: addrAlice, Recipients: []string{addrBob, addrCarol}},
		messageID:  "<bcc-1@direct.example>",
		headers:    []string{"Message-ID"},
		recipients: "bob@direct.example:TO carol@direct.example:BCC",
	},
	{
		name:       "bcc-header",
		sender:     addrAlice,
		env:        Envelope{From: addrAlice, Recipients: []string{addrBob, addrCarol}},
		messageID:  "<bcc-2@direct.example>",
		headers:    []string{"Message-ID", "X-Direct-Foo"},
		recipients: "bob@direct.example:TO carol@direct.example:BCC",
		check: func(t *testing.T, s *Submission) {
			// dave is in the Bcc field but not in the envelope.
			for _, h := range s.Message.Headers {
				if strings.Contains(h.Value, addrCarol) || strings.Contains(h.Value, addrDave) {
					t.Errorf("header %s leaks a Bcc address: %q", h.Name, h.Value)
				}
			}
		},
	},
	{
		name:   "to-cc-mixed",
		sender: addrAlice,
		// BOB is bob again and Dave is dave of the To field; gina is
		// in a Cc group; erin is in neither field, so BCC; the group
		// member frank is not in the envelope and gets nothing.
		env:        Envelope{From: addrAlice, Recipients: []string{addrBob, addrCarol, "Dave@Direct.Example", "BOB@direct.example", "gina@direct.example", addrErin}},
		messageID:  "<mixed-1@direct.example>",
		headers:    []string{"Message-ID"},
		recipients: "bob@direct.example:TO carol@direct.example:CC Dave@Direct.Example:TO gina@direct.example:CC erin@direct.example:BCC",
	},
	{
		name:       "passthrough-headers",
		sender:     addrAlice,
		env:        Envelope{From: addrAlice, Recipients: []string{addrBob}},
		messageID:  "<reply-2@direct.example>",
		headers:    []string{"Message-ID", "In-Reply-To", "References", "Reply-To", "Disposition-Notification-To", "Disposition-Notification-Options", "X-Direct-Foo", "x-lower-case", "X-Folded", "X-Empty"},
		recipients: "bob@direct.example:TO",
		check: func(t *testing.T, s *Submission) {
			got := map[string]string{}
			for _, h := range s.Message.Headers {
				got[h.Name] = h.Value
			}
			wantEq(t, "References", got["References"], "<orig-1@clinic.direct.example> <reply-1@direct.example>")
			wantEq(t, "X-Folded", got["X-Folded"], "first line continued here")
			wantEq(t, "Disposition-Notification-Options", got["Disposition-Notification-Options"], "X-DIRECT-FINAL-DESTINATION-DELIVERY=optional,true")
		},
	},
	{
		name:       "tuser-direct-address",
		sender:     "FrontDesk@Clinic.Direct.Example",
		env:        Envelope{From: addrClinic, Recipients: []string{addrBob}},
		messageID:  "<tuser-1@clinic.direct.example>",
		headers:    []string{"Message-ID"},
		recipients: "bob@direct.example:TO",
		check: func(t *testing.T, s *Submission) {
			wantEq(t, "sender", s.Message.Sender, addrClinic)
		},
	},

	// Real messages (see testdata/README.md), with the sender of their From
	// field and an envelope that adds one Bcc recipient.
	{
		name:        "real-direct-attachment-png",
		sender:      "gm2552@securehealthemail.com",
		env:         Envelope{From: "gm2552@securehealthemail.com", Recipients: []string{"ryan@securehealthemail.com", "records@securehealthemail.com"}},
		messageID:   "<4C07A6B7.6020205@securehealthemail.com>",
		headers:     []string{"Message-ID"},
		recipients:  "ryan@securehealthemail.com:TO records@securehealthemail.com:BCC",
		attachments: map[string]string{"iMac-icon.png": "c6f240870a7d0ebd7950298999980bd8ccaedf3b54460d7f1efae093c573c4c5"},
	},
	{
		name:   "real-direct-complicated-ccd-attachment",
		sender: "toby@redmond.hsgincubator.com",
		// gussie is twice in the To field and once in the envelope.
		env:        Envelope{From: "toby@redmond.hsgincubator.com", Recipients: []string{"gussie@nhind.hsgincubator.com", "biff@nhind.hsgincubator.com", "bob@nhind.hsgincubator.com"}},
		headers:    []string{"X-Priority", "X-MSMail-Priority", "X-Unsent", "X-MimeOLE"},
		recipients: "gussie@nhind.hsgincubator.com:TO biff@nhind.hsgincubator.com:TO bob@nhind.hsgincubator.com:TO",
		html:       true,
		// Hashes computed with Python's email package (mimeconv tests).
		attachments: map[string]string{
			"wlEmoticon-smilewithtongueout[1].png": "b50075576dfadab8207b48d65efa412b3522c0c7508e0c79f614f2440bd2b026",
			"toe%20x-ray[1].jpg":                   "71adde737eb78a272e8e3436eb265c2c4a0c36e6c6b61c572f93b86432dee318",
			"wlEmoticon-hotsmile[1].png":           "cedffd3bc20bd5db1612b84e9042b1c1a28539ab36bee51a10fef3616476697e",
			"JohnHalamkaCCDDocument_C32.xml":       "0fc9280108d891d51f44c83c980e6d2cf1b1583f7ad35d862c2e21e165d771c6",
			"report.pdf":                           "e236518cc280f5250a81b42c0a80bc4ea040e8c223533caae7e60707ae36d49c",
			"RonBogart_ccd.html":                   "4f1dbb22477db96e11e892c69d933647ad73eb54d9d010623814bdf7669ccab7",
		},
	},
	{
		name:        "real-direct-single-part-pdf",
		sender:      "llindsey@messaging.cernerdemos.com",
		env:         Envelope{From: "llindsey@messaging.cernerdemos.com", Recipients: []string{"highlandclinic@securehealthemail.com"}},
		messageID:   "<850539186.153.1275928495553.JavaMail.llindsey@cernhsvmail03.cernerasp.com>",
		headers:     []string{"Message-ID", "Disposition-Notification-To", "X-PRIORITY", "X-Enigma-Origination"},
		recipients:  "highlandclinic@securehealthemail.com:TO",
		attachments: map[string]string{"dms_F312F759-A3EC-B735-3494-6A98F9F03834.pdf": "d64cd86a6031040b74a853c0ad8b1a2858895b5da11e40876a1e8f6cb4545cd4"},
		check: func(t *testing.T, s *Submission) {
			wantEq(t, "body", s.Message.Body, "")
		},
	},
	{
		name:       "real-direct-mdn-processed",
		flatten:    true, // refused without it (TestNotCarriableRefused)
		sender:     "externUser1@starugh-stateline.com",
		env:        Envelope{From: "externuser1@starugh-stateline.com", Recipients: []string{"User1@Cerner.com"}},
		messageID:  "0c796d0e-4c76-43e8-be40-2cd5e30c1005",
		headers:    []string{"message-id"},
		recipients: "User1@Cerner.com:TO",
		// The disposition-notification part, which has no closing
		// delimiter; hash computed with Python's hashlib over the bytes.
		attachments: map[string]string{"attachment-1.txt": "9bea511284472cbe0fa0ad9b6f6279b30ac4f1250ccbf5ca94439d715886547b"},
		check: func(t *testing.T, s *Submission) {
			wantEq(t, "sender", s.Message.Sender, "externuser1@starugh-stateline.com")
		},
	},
	{
		name:        "real-hard-8bit-unencoded-filename",
		sender:      "pavel.bazika@some.domain",
		env:         Envelope{From: "pavel.bazika@some.domain", Recipients: []string{"test@dome.domain"}},
		recipients:  "test@dome.domain:TO",
		attachments: map[string]string{"管理.doc": "b53a55383d2f1f040ab010606d7911907f1a17f979f1d475fb4ac226243135e5"},
	},
}

// TestGolden converts every message of the golden corpus and compares the
// provider Message with the recorded JSON, checks the attachments byte for
// byte against their sources, and checks that the sandbox's composer
// accepts the result.
func TestGolden(t *testing.T) {
	names := map[string]bool{}
	for _, tc := range goldenCases {
		names[tc.name] = true
		t.Run(tc.name, func(t *testing.T) {
			raw, err := os.ReadFile(filepath.Join("testdata", "golden", tc.name+".eml"))
			if err != nil {
				t.Fatal(err)
			}
			s, err := Convert(raw, tc.env, tc.sender, Limits{Flatten: tc.flatten})
			if err != nil {
				t.Fatalf("Convert: %v", err)
			}
			checkGoldenCase(t, tc, s, displayName(t, raw))
			compareGolden(t, filepath.Join("testdata", "golden", tc.name+".json"), s.Message)
			composeAccepts(t, s)
		})
	}
	files, _ := filepath.Glob(filepath.Join("testdata", "golden", "*.eml"))
	for _, f := range files {
		if name := strings.TrimSuffix(filepath.Base(f), ".eml"); !names[name] {
			t.Errorf("%s has no golden case", f)
		}
	}
}

func checkGoldenCase(t *testing.T, tc goldenCase, s *Submission, fromName string) {
	t.Helper()
	m := s.Message
	wantEq(t, "sender", m.Sender, strings.ToLower(tc.sender))
	wantEq(t, "MessageID", s.MessageID, tc.messageID)
	// The From field travels, last, exactly when it has a display name
	// (fromWithName); the others as tc.headers says.
	var names []string
	fromPassed := false
	for _, h := range m.Headers {
		if h.Name == "From" {
			fromPassed = true
			continue
		}
		names = append(names, h.Name)
	}
	if !reflect.DeepEqual(names, tc.headers) && !(len(names) == 0 && len(tc.headers) == 0) {
		t.Errorf("headers = %q, want %q", names, tc.headers)
	}
	if fromPassed != (fromName != "") {
		t.Errorf("From passed on = %v with display name %q", fromPassed, fromName)
	}
	if s.UseHeaders() != (len(tc.headers) > 0 || fromPassed) {
		t.Errorf("UseHeaders = %v with headers %q", s.UseHeaders(), names)
	}
	for _, h := range m.Headers {
		switch strings.ToLower(h.Name) {
		case "to", "cc", "bcc", "subject", "date", "mime-version", "received", "return-path", "sender":
			t.Errorf("header %s must not travel", h.Name)
		}
		if strings.HasPrefix(strings.ToLower(h.Name), "content-") {
			t.Errorf("header %s must not travel", h.Name)
		}
	}
	wantEq(t, "recipients", recipientString(m.Recipients), tc.recipients)
	if m.HTMLBody != tc.html {
		t.Errorf("HTMLBody = %v, want %v", m.HTMLBody, tc.html)
	}
	got := map[string]string{}
	for _, a := range m.AttachmentList {
		data, err := base64.StdEncoding.DecodeString(a.Content)
		if err != nil {
			t.Fatalf("attachment %q: content is not base64: %v", a.Filename, err)
		}
		got[a.Filename] = sha256Hex(data)
	}
	if tc.attachments == nil {
		tc.attachments = map[string]string{}
	}
	if !reflect.DeepEqual(got, tc.attachments) {
		t.Errorf("attachments (name: sha256 of the bytes) = %v, want %v", got, tc.attachments)
	}
	if tc.check != nil {
		tc.check(t, s)
	}
}

// compareGolden compares v, as JSON, with the file at path; with -update it
// writes the file instead.
func compareGolden(t *testing.T, path string, v any) {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // keep HTML bodies readable in the file
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	if *updateGolden {
		if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	wantRaw, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -run TestGolden -update)", err)
	}
	var got, want map[string]any
	if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(wantRaw, &want); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if diffs := jsonDiff("", want, got); len(diffs) > 0 {
		if len(diffs) > 10 {
			diffs = append(diffs[:10], "...")
		}
		t.Errorf("%s differs:\n%s", path, strings.Join(diffs, "\n"))
	}
}

// jsonDiff lists the paths where two decoded JSON values differ.
func jsonDiff(path string, want, got any) []string {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			break
		}
		keys := map[string]bool{}
		for k := range w {
			keys[k] = true
		}
		for k := range g {
			keys[k] = true
		}
		var sorted []string
		for k := range keys {
			sorted = append(sorted, k)
		}
		sort.Strings(sorted)
		var out []string
		for _, k := range sorted {
			out = append(out, jsonDiff(path+"."+k, w[k], g[k])...)
		}
		return out
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			break
		}
		var out []string
		for i := range w {
			out = append(out, jsonDiff(fmt.Sprintf("%s[%d]", path, i), w[i], g[i])...)
		}
		return out
	}
	if reflect.DeepEqual(want, got) {
		return nil
	}
	return []string{fmt.Sprintf("%s: want %.200v, got %.200v", path, want, got)}
}

// composeAccepts checks that the sandbox's composer, which stands for the
// provider, can send the Submission as it is: headers and attachments that
// it would refuse must have been refused by Convert.
func composeAccepts(t *testing.T, s *Submission) {
	t.Helper()
	_, err := mimeconv.Compose(s.Message.Message, mimeconv.ComposeOptions{
		MessageID: "golden@sandbox.example",
		Date:      time.Date(2025, 3, 3, 12, 0, 0, 0, time.UTC),
		Headers:   s.Message.Headers,
	})
	if err != nil {
		t.Errorf("mimeconv.Compose refuses the submission: %v", err)
	}
}

func recipientString(rs []directapi.Recipient) string {
	s := make([]string, len(rs))
	for i, r := range rs {
		s[i] = r.Email + ":" + string(r.Type)
	}
	return strings.Join(s, " ")
}

func wantEq(t *testing.T, what, got, want string) {
	t.Helper()
	if got != want {
		t.Errorf("%s = %q, want %q", what, got, want)
	}
}

func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// crlf turns the "\n" of a Go literal into the CRLF of the wire.
func crlfText(s string) string { return strings.ReplaceAll(s, "\n", "\r\n") }

// base64Lines encodes data in lines of 76 characters (RFC 2045 §6.8).
func base64Lines(data []byte) string {
	enc := base64.StdEncoding.EncodeToString(data)
	var b strings.Builder
	for len(enc) > 76 {
		b.WriteString(enc[:76] + "\r\n")
		enc = enc[76:]
	}
	b.WriteString(enc + "\r\n")
	return b.String()
}

// TestGenerateGoldenInputs writes the generated messages of the golden
// corpus (all but real-*.eml, which are copies) when run with -generate.
// They are committed; this records how they were made.
func TestGenerateGoldenInputs(t *testing.T) {
	if !*generateGolden {
		t.Skip("run with -generate to rewrite the generated .eml files")
	}
	const shared = "/work/shared/testdata"
	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join(shared, name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	logo, err := base64.StdEncoding.DecodeString(logoPNG)
	if err != nil {
		t.Fatal(err)
	}
	hdr := func(id, subject string) string {
		return "Date: Mon, 03 Mar 2025 09:15:00 -0500\n" +
			"From: Alice Example <alice@direct.example>\n" +
			"To: Bob Example <bob@direct.example>\n" +
			"Subject: " + subject + "\n" +
			"Message-ID: <" + id + "@direct.example>\n" +
			"MIME-Version: 1.0\n"
	}
	inputs := map[string]string{
		"plain-text": crlfText(`Return-Path: <alice@direct.example>
Received: from [192.0.2.10] (client.direct.example [192.0.2.10])
	by bridge.direct.example with ESMTPSA id 4f2a
	for <bob@direct.example>; Mon, 03 Mar 2025 09:15:01 -0500
` + hdr("plain-1", "Lab results for follow-up") + `Content-Type: text/plain; charset=us-ascii; format=flowed
Content-Transfer-Encoding: 7bit
User-Agent: Mozilla Thunderbird

Hello Bob,

The lab results are in the portal.

-- 
Alice
`),
		"no-passthrough-headers": crlfText(`Return-Path: <alice@direct.example>
Received: from [192.0.2.10] by bridge.direct.example; Mon, 03 Mar 2025 09:15:01 -0500
Date: Mon, 03 Mar 2025 09:15:00 -0500
From: Alice Example <alice@direct.example>
Sender: alice@direct.example
To: Bob Example <bob@direct.example>
Cc: carol@direct.example
Subject: No custom headers
Organization: Example Clinic
Importance: normal
User-Agent: legacy-ehr/2.1
MIME-Version: 1.0
Content-Type: text/plain; charset=utf-8
Content-Transfer-Encoding: 7bit
Content-Language: en

This message has no header that needs SendWithHeader.
`),
		"html-only": crlfText(hdr("html-1", "HTML only") + `Content-Type: text/html; charset=utf-8
Content-Transfer-Encoding: quoted-printable

<html><body><p>R=C3=A9sultats disponibles =E2=9C=93 =E2=80=93 voir le portai=
l. Cette ligne est assez longue pour =C3=AAtre coup=C3=A9e par l'encodage.</=
p></body></html>
`),
		"alternative": crlfText(hdr("alt-1", "Alternative") + `Content-Type: multipart/alternative; boundary="alt-b"

This is a multi-part message in MIME format.
--alt-b
Content-Type: text/plain; charset=utf-8; format=flowed
Content-Transfer-Encoding: 7bit

PLAIN ALTERNATIVE of the message.

--alt-b
Content-Type: text/html; charset=utf-8
Content-Transfer-Encoding: 7bit

<html><body><p>The <b>HTML</b> alternative of the message.</p></body></html>

--alt-b--
`),
		"attachment-pdf": crlfText(hdr("pdf-1", "Discharge summary (PDF)")+`Content-Type: multipart/mixed; boundary="mixed-b"

--mixed-b
Content-Type: text/plain; charset=us-ascii
Content-Transfer-Encoding: 7bit

The PDF is attached.

--mixed-b
Content-Type: application/pdf; name="McBee_L1_20151116_Embedded.pdf"
Content-Disposition: attachment; filename="McBee_L1_20151116_Embedded.pdf"
Content-Transfer-Encoding: base64

`) + base64Lines(read("ccda/unstructured-embedded-pdf.decoded.pdf")) + "--mixed-b--\r\n",
		"inline-image": crlfText(hdr("inline-1", "Inline image")+`Content-Type: multipart/alternative; boundary="alt-b"

--alt-b
Content-Type: text/plain; charset=us-ascii

See our logo.

--alt-b
Content-Type: multipart/related; type="text/html"; boundary="rel-b"

--rel-b
Content-Type: text/html; charset=us-ascii

<html><body><p>See our logo: <img src="cid:logo@direct.example" alt="logo"></p></body></html>

--rel-b
Content-Type: image/png; name="logo.png"
Content-Disposition: inline; filename="logo.png"
Content-ID: <logo@direct.example>
Content-Transfer-Encoding: base64

`) + base64Lines(logo) + "--rel-b--\r\n\r\n--alt-b--\r\n",
		"xdm-zip": crlfText(hdr("xdm-1", "XDM package")+`X-Direct-Final-Destination-Delivery: true
Content-Type: multipart/mixed; boundary="mixed-b"

--mixed-b
Content-Type: text/plain; charset=us-ascii

XDM package attached (IHE ITI TF-2b 3.32).
--mixed-b
Content-Type: application/zip; name="CCDA_Inpatient_in_XDM.zip"
Content-Disposition: attachment; filename="CCDA_Inpatient_in_XDM.zip"
Content-Transfer-Encoding: base64

`) + base64Lines(read("xdm/ccda-inpatient-xdm.zip")) + "--mixed-b--\r\n",
		"ccda-xml": crlfText(hdr("ccda-1", "C-CDA document")+`Content-Type: multipart/mixed; boundary="mixed-b"

--mixed-b
Content-Type: text/plain; charset=us-ascii

Continuity of Care Document attached.
--mixed-b
Content-Type: text/xml; charset=UTF-8; name="CCD.xml"
Content-Disposition: attachment; filename="CCD.xml"
Content-Transfer-Encoding: base64

`) + base64Lines(read("ccda/ccd.xml")) + "--mixed-b--\r\n",
		"nested-rfc822": crlfText(hdr("fwd-1", "Fwd: Referral: cardiology consult")+`Content-Type: multipart/mixed; boundary="outer-b"

--outer-b
Content-Type: text/plain; charset=us-ascii

Forwarding the referral below.

--outer-b
Content-Type: message/rfc822
Content-Disposition: inline

`) + forwardedMessage + "\r\n--outer-b--\r\n",
		"charset-latin1": crlfText(hdr("latin1-1", "=?windows-1252?Q?Befund_f=FCr_Herrn_M=FCller_=96_=80_50_=84Zuzahlung=93?=")+`Content-Type: text/plain; charset=ISO-8859-1
Content-Transfer-Encoding: 8bit

`) + crlfText("Sehr geehrter Herr M\xfcller,\n\nTemperatur 38,5 \xb0C, Gr\xf6\xdfe 1,82 m.\n\nMit freundlichen Gr\xfc\xdfen\n"),
		"charset-iso-2022-jp": crlfText(hdr("jis-1", "=?ISO-2022-JP?B?GyRCOCE6OjdrMkwkTiQqQ04kaSQ7IUo7M0VEQkBPOk1NIUsbKEI=?=")+`Content-Type: text/plain; charset=ISO-2022-JP
Content-Transfer-Encoding: 7bit

`) + crlfText("\x1b$B;3EDB@O:MM\x1b(B\n\n\x1b$B8!::7k2L$r$*Aw$j$7$^$9!#\x1b(B\n\x1b$BMh=5$NM=Ls$r$43NG'$/$@$5$$!#\x1b(B\n\n\x1b$B:4F#%/%j%K%C%/\x1b(B\n"),
		"charset-shift-jis": crlfText(hdr("sjis-1", "=?Shift_JIS?B?j9CJ7o/zgsyRl5V0gsmCwoKigsQ=?=") + `Content-Type: text/html; charset=Shift_JIS
Content-Transfer-Encoding: base64

PGh0bWw+PGJvZHk+PHA+k2OShpDmkLY8L3A+PHA+j9CJ7o/zgvCTWZV0gqKCvYK1gtyCt4FCgrKNgpR6gsyC2YLHguaC64K1gq2CqIrogqKQXIK1j+OCsILcgreBQjwvcD48L2JvZHk+PC9odG1sPg0K
`),
		"rfc2047-subject": crlfText(`Date: Mon, 03 Mar 2025 09:15:00 -0500
From: =?UTF-8?Q?Ren=C3=A9e_Example?= <alice@direct.example>
To: =?ISO-8859-1?Q?J=F6rg?= <bob@direct.example>
Subject: =?UTF-8?B?w5xiZXJ3ZWlzdW5nOg==?= Dr.
 =?utf-8?q?Sch=C3=A4fer_=E2=80=93_?= =?utf-8?q?Kardiologie_=E2=9C=93?= (dringend)
Message-ID: <2047-1@direct.example>
MIME-Version: 1.0
Content-Type: text/plain; charset=utf-8

Encoded subject.
`),
		"bcc-envelope-only": crlfText(hdr("bcc-1", "Envelope-only Bcc") + `Content-Type: text/plain; charset=us-ascii

carol is a blind copy: only the envelope names her.
`),
		"bcc-header": crlfText(`Date: Mon, 03 Mar 2025 09:15:00 -0500
From: Alice Example <alice@direct.example>
To: Bob Example <bob@direct.example>
Bcc: carol@direct.example, Dave <dave@direct.example>
Subject: Bcc field present
Message-ID: <bcc-2@direct.example>
X-Direct-Foo: bar
MIME-Version: 1.0
Content-Type: text/plain; charset=us-ascii

The Bcc field must not reach anyone.
`),
		"to-cc-mixed": crlfText(`Date: Mon, 03 Mar 2025 09:15:00 -0500
From: Alice Example <alice@direct.example>
To: "Bob Example" <bob@direct.example>, Dave <dave@direct.example>
Cc: carol@direct.example,
 Care Team: frank@direct.example, Gina <gina@direct.example>;
Subject: To and Cc
Message-ID: <mixed-1@direct.example>
MIME-Version: 1.0
Content-Type: text/plain; charset=us-ascii

To, Cc, a group, and a Bcc.
`),
		"passthrough-headers": crlfText(`Received: from [192.0.2.10] by bridge.direct.example; Mon, 03 Mar 2025 09:15:01 -0500
Return-Path: <alice@direct.example>
Date: Mon, 03 Mar 2025 09:15:00 -0500
From: Alice Example <alice@direct.example>
Sender: Alice Example <alice@direct.example>
To: Bob Example <bob@direct.example>
Bcc: carol@direct.example
Subject: Re: Referral
Message-ID: <reply-2@direct.example>
In-Reply-To: <reply-1@direct.example>
References: <orig-1@clinic.direct.example>
 <reply-1@direct.example>
Reply-To: Front Desk <frontdesk@clinic.direct.example>
Disposition-Notification-To: alice@direct.example
Disposition-Notification-Options: X-DIRECT-FINAL-DESTINATION-DELIVERY=optional,true
X-Direct-Foo: bar
x-lower-case: value
X-Folded: first line
	continued here
X-Empty:
Importance: high
MIME-Version: 1.0
Content-Type: text/plain; charset=us-ascii
Content-Transfer-Encoding: 7bit

Headers that travel through SendWithHeader.
`),
		"tuser-direct-address": crlfText(`Date: Mon, 03 Mar 2025 09:15:00 -0500
From: Clinic Front Desk <FrontDesk@clinic.direct.example>
To: bob@direct.example
Subject: Sent by a T-user for the clinic
Message-ID: <tuser-1@clinic.direct.example>
MIME-Version: 1.0
Content-Type: text/plain; charset=us-ascii

Sent through SendWithTuser.
`),
	}
	for name, s := range inputs {
		if err := os.WriteFile(filepath.Join("testdata", "golden", name+".eml"), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// secret is text that must never appear in an error: it stands for
// protected health information in a subject, body or header.
const secret = "SSN 078-05-1120 Jane Roe HIV+"

// msg builds a CRLF message from header lines and a body, with the secret
// in the subject, an X- header and the body.
func secretMessage(from string, lines ...string) []byte {
	h := "From: " + from + "\r\nTo: bob@direct.example\r\nSubject: " + secret + "\r\nX-Secret: " + secret + "\r\n"
	for _, l := range lines {
		h += l + "\r\n"
	}
	return []byte(h + "\r\nBody: " + secret + "\r\n")
}

// nested returns a message with depth multipart levels.
func nestedMessage(depth int) []byte {
	var b strings.Builder
	b.WriteString("From: alice@direct.example\r\nSubject: " + secret + "\r\n")
	for i := 0; i < depth; i++ {
		fmt.Fprintf(&b, "Content-Type: multipart/mixed; boundary=\"b%d\"\r\n\r\n--b%d\r\n", i, i)
	}
	b.WriteString("Content-Type: text/plain\r\n\r\n" + secret + "\r\n")
	for i := depth - 1; i >= 0; i-- {
		fmt.Fprintf(&b, "--b%d--\r\n", i)
	}
	return []byte(b.String())
}

// manyParts returns a message with n leaf parts.
func manyPartsMessage(n int) []byte {
	var b strings.Builder
	b.WriteString("From: alice@direct.example\r\nSubject: " + secret + "\r\nContent-Type: multipart/mixed; boundary=b\r\n\r\n")
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "--b\r\nContent-Type: text/plain\r\n\r\npart %d %s\r\n", i, secret)
	}
	b.WriteString("--b--\r\n")
	return []byte(b.String())
}

func TestConvertErrors(t *testing.T) {
	env := Envelope{From: addrAlice, Recipients: []string{addrBob}}
	longWord := strings.Repeat("a", 1000)
	cases := []struct {
		name   string
		raw    []byte
		env    Envelope
		sender string
		lim    Limits
		want   error
	}{
		{"smuggling with bare LF", []byte("From: alice@direct.example\r\nTo: bob@direct.example\r\nSubject: x\n\nbody\n.\nMAIL FROM:<mallory@evil.example>\r\nRCPT TO:<bob@direct.example>\r\nDATA\r\n"), env, addrAlice, Limits{}, ErrBareLineEnding},
		{"bare LF dot CRLF", []byte("From: alice@direct.example\r\n\r\nbody\n.\r\nMAIL FROM:<m@evil.example>\r\n"), env, addrAlice, Limits{}, ErrBareLineEnding},
		{"CRLF dot bare LF", []byte("From: alice@direct.example\r\n\r\nbody\r\n.\nMAIL FROM:<m@evil.example>\r\n"), env, addrAlice, Limits{}, ErrBareLineEnding},
		{"bare CR", []byte("From: alice@direct.example\r\n\r\nbody\r.\rMAIL FROM:<m@evil.example>\r\n"), env, addrAlice, Limits{}, ErrBareLineEnding},
		{"CR last", []byte("From: alice@direct.example\r\n\r\nbody\r"), env, addrAlice, Limits{}, ErrBareLineEnding},
		{"LFCR", []byte("From: alice@direct.example\r\n\r\nbody\n\r"), env, addrAlice, Limits{}, ErrBareLineEnding},
		{"CRCRLF", []byte("From: alice@direct.example\r\n\r\nbody\r\r\n"), env, addrAlice, Limits{}, ErrBareLineEnding},

		{"empty input", nil, env, addrAlice, Limits{}, mimeconv.ErrNoHeader},
		{"only CRLF", []byte("\r\n\r\n"), env, addrAlice, Limits{}, mimeconv.ErrNoHeader},
		{"no header", []byte("just some text " + secret + "\r\n"), env, addrAlice, Limits{}, mimeconv.ErrNoHeader},

		{"missing From", []byte("To: bob@direct.example\r\nSubject: " + secret + "\r\n\r\n" + secret + "\r\n"), env, addrAlice, Limits{}, ErrNoFrom},
		{"From without address", secretMessage("undisclosed-sender"), env, addrAlice, Limits{}, ErrNoFrom},
		{"empty From", secretMessage(""), env, addrAlice, Limits{}, ErrNoFrom},
		{"From mismatch", secretMessage("mallory@evil.example"), env, addrAlice, Limits{}, ErrFromMismatch},
		{"display name looks like the sender", secretMessage(`"alice@direct.example" <mallory@evil.example>`), env, addrAlice, Limits{}, ErrFromMismatch},
		{"unquoted display name looks like the sender", secretMessage(`alice@direct.example <mallory@evil.example>`), env, addrAlice, Limits{}, ErrFromMismatch},
		{"encoded display name looks like the sender", secretMessage(`=?utf-8?q?alice=40direct=2Eexample?= <mallory@evil.example>`), env, addrAlice, Limits{}, ErrFromMismatch},
		{"comment looks like the sender", secretMessage(`mallory@evil.example (alice@direct.example)`), env, addrAlice, Limits{}, ErrFromMismatch},
		{"sender as a subdomain", secretMessage(`alice@direct.example.evil.example`), env, addrAlice, Limits{}, ErrFromMismatch},
		{"two From addresses", secretMessage("alice@direct.example, mallory@evil.example"), env, addrAlice, Limits{}, ErrFromMismatch},
		{"two From addresses, sender first", secretMessage("alice@direct.example, alice@direct.example"), env, addrAlice, Limits{}, ErrFromMismatch},
		{"two From fields", secretMessage("alice@direct.example", "From: mallory@evil.example"), env, addrAlice, Limits{}, ErrFromMismatch},
		{"MAIL FROM mismatch", secretMessage(addrAlice), Envelope{From: "mallory@evil.example", Recipients: []string{addrBob}}, addrAlice, Limits{}, ErrFromMismatch},
		{"empty sender", secretMessage(addrAlice), env, "", Limits{}, ErrFromMismatch},

		{"no envelope recipients", secretMessage(addrAlice), Envelope{From: addrAlice}, addrAlice, Limits{}, ErrNoRecipients},
		{"only empty envelope recipients", secretMessage(addrAlice), Envelope{From: addrAlice, Recipients: []string{"", " ", "<>"}}, addrAlice, Limits{}, ErrNoRecipients},

		{"nesting over the default", nestedMessage(mimeconv.DefaultMaxDepth + 1), env, addrAlice, Limits{}, mimeconv.ErrTooComplex},
		{"nesting over a small limit", nestedMessage(4), env, addrAlice, Limits{MaxDepth: 3}, mimeconv.ErrTooComplex},
		{"deep nesting", nestedMessage(5000), env, addrAlice, Limits{}, mimeconv.ErrTooComplex},
		{"parts over the default", manyPartsMessage(mimeconv.DefaultMaxParts + 1), env, addrAlice, Limits{}, mimeconv.ErrTooComplex},
		{"parts over a small limit", manyPartsMessage(11), env, addrAlice, Limits{MaxParts: 10}, mimeconv.ErrTooComplex},

		{"control character in an X- header", secretMessage(addrAlice, "X-Bad: a\x01b"), env, addrAlice, Limits{}, ErrBadHeader},
		{"NUL in Message-ID", secretMessage(addrAlice, "Message-ID: <a\x00b@direct.example>"), env, addrAlice, Limits{}, ErrBadHeader},
		{"unfoldable word", secretMessage(addrAlice, "X-Long: "+longWord), env, addrAlice, Limits{}, ErrBadHeader},
		{"8-bit Reply-To that is no address", secretMessage(addrAlice, "Reply-To: J\xc3\xb6rg"), env, addrAlice, Limits{}, ErrBadHeader},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Convert(tc.raw, tc.env, tc.sender, tc.lim)
			if s != nil {
				t.Errorf("a Submission with the error")
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			var ce *ConvertError
			if !errors.As(err, &ce) {
				t.Fatalf("err %T is not a *ConvertError", err)
			}
			checkReason(t, ce)
		})
	}
}

// checkReason checks that a ConvertError can be an SMTP reply text and
// gives nothing of the message away.
func checkReason(t *testing.T, ce *ConvertError) {
	t.Helper()
	if ce.Reason == "" {
		t.Errorf("empty Reason")
	}
	for i := 0; i < len(ce.Reason); i++ {
		if c := ce.Reason[i]; c < ' ' || c > '~' {
			t.Errorf("Reason %q has a byte %#x an SMTP reply cannot carry", ce.Reason, c)
		}
	}
	for _, s := range []string{ce.Reason, ce.Error()} {
		for _, leak := range []string{"078-05-1120", "Jane Roe", "HIV", "mallory", "evil", "J\xc3\xb6rg", "aaaaaaaa"} {
			if strings.Contains(s, leak) {
				t.Errorf("error %q gives away message content %q", s, leak)
			}
		}
	}
}

func TestConvertAccepts(t *testing.T) {
	env := Envelope{From: addrAlice, Recipients: []string{addrBob}}
	cases := []struct {
		name   string
		raw    []byte
		env    Envelope
		sender string
		lim    Limits
	}{
		{"no final CRLF", []byte("From: alice@direct.example\r\n\r\nbody"), env, addrAlice, Limits{}},
		{"header only", []byte("From: alice@direct.example"), env, addrAlice, Limits{}},
		{"sender case", secretMessage("Alice@DIRECT.example"), env, "ALICE@direct.EXAMPLE", Limits{}},
		{"display name", secretMessage(`"Alice (Clinic)" <alice@direct.example>`), env, addrAlice, Limits{}},
		{"null MAIL FROM", secretMessage(addrAlice), Envelope{Recipients: []string{addrBob}}, addrAlice, Limits{}},
		{"MAIL FROM case", secretMessage(addrAlice), Envelope{From: "ALICE@direct.example", Recipients: []string{addrBob}}, addrAlice, Limits{}},
		{"nesting at the default", nestedMessage(mimeconv.DefaultMaxDepth), env, addrAlice, Limits{}},
		{"nesting at a small limit", nestedMessage(3), env, addrAlice, Limits{MaxDepth: 3}},
		{"parts at a small limit", manyPartsMessage(10), env, addrAlice, Limits{MaxParts: 10}},
		{"word at the fold limit", secretMessage(addrAlice, "X-Long: "+strings.Repeat("a", rfc5322MaxLine-len("X-Long: "))), env, addrAlice, Limits{}},
		{"8-bit Reply-To address list", secretMessage(addrAlice, "Reply-To: J\xc3\xb6rg <joerg@direct.example>"), env, addrAlice, Limits{}},
		{"tab in a header", secretMessage(addrAlice, "X-Tab: a\tb"), env, addrAlice, Limits{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Convert(tc.raw, tc.env, tc.sender, tc.lim)
			if err != nil {
				t.Fatalf("Convert: %v", err)
			}
			wantEq(t, "sender", s.Message.Sender, strings.ToLower(tc.sender))
			composeAccepts(t, s)
		})
	}
}

func TestHasBareLineEnding(t *testing.T) {
	for in, want := range map[string]bool{
		"": false, "abc": false, "\r\n": false, "a\r\nb\r\n": false, "\r\n\r\n": false,
		"\n": true, "\r": true, "a\nb": true, "a\rb": true, "\r\r\n": true, "\n\r": true,
		"\r\n\n": true, "a\r\nb\r": true, "\n\r\n": true, "\r\n.\n": true, "\x00\r\n": false,
	} {
		if got := hasBareLineEnding([]byte(in)); got != want {
			t.Errorf("hasBareLineEnding(%q) = %v, want %v", in, got, want)
		}
	}
}

func TestRecipients(t *testing.T) {
	raw := []byte(crlfText(`From: alice@direct.example
To: Bob <bob@direct.example>, "Carol, RN" <Carol@Direct.Example>
To: dave@direct.example
Cc: bob@direct.example, erin@direct.example, undisclosed-recipients:;
Bcc: frank@direct.example

body
`))
	s, err := Convert(raw, Envelope{Recipients: []string{
		"erin@direct.example", " <carol@direct.example> ", "frank@direct.example", "BOB@direct.example",
		"bob@direct.example", "dave@direct.example", "", "gina@direct.example",
	}}, addrAlice, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	// Envelope order; first spelling; To before Cc; a second To field
	// counts; Bcc-field and unknown recipients are BCC.
	wantEq(t, "recipients", recipientString(s.Message.Recipients),
		"erin@direct.example:CC carol@direct.example:TO frank@direct.example:BCC BOB@direct.example:TO dave@direct.example:TO gina@direct.example:BCC")
	if s.UseHeaders() {
		t.Errorf("headers %v, want none: Bcc must not travel", s.Message.Headers)
	}
}

func TestPassThrough(t *testing.T) {
	raw := []byte(crlfText(`From: alice@direct.example
Message-ID: <first@direct.example>
Message-ID: <second@direct.example>
X-A: 1
X-A: 2
X-UPPER: u
Xno: not an extension field
Disposition-Notification-To: alice@direct.example
Disposition-Notification-To: alice2@direct.example
Resent-Message-ID: <resent@direct.example>
Importance: high
Keywords: none
Comments: none

body
`))
	s, err := Convert(raw, Envelope{Recipients: []string{addrBob}}, addrAlice, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	want := []directapi.MessageHeader{
		{Name: "Message-ID", Value: "<first@direct.example>"},
		{Name: "X-A", Value: "1"},
		{Name: "X-A", Value: "2"},
		{Name: "X-UPPER", Value: "u"},
		{Name: "Disposition-Notification-To", Value: "alice@direct.example"},
		{Name: "Disposition-Notification-To", Value: "alice2@direct.example"},
	}
	if !reflect.DeepEqual(s.Message.Headers, want) {
		t.Errorf("headers = %v, want %v", s.Message.Headers, want)
	}
	wantEq(t, "MessageID", s.MessageID, "<first@direct.example>")
}

// TestRealMessageErrors converts real messages that must be refused.
func TestRealMessageErrors(t *testing.T) {
	for _, tc := range []struct {
		file, sender string
		env          Envelope
		want         error
	}{
		// From names two authors (with a Sender field).
		{"hard-rfc2047-encoded-words.eml", "jamehi03@jamehi03lx.noa.com", Envelope{Recipients: []string{"marczak@inbucket.com"}}, ErrFromMismatch},
	} {
		t.Run(tc.file, func(t *testing.T) {
			raw, err := os.ReadFile(filepath.Join("testdata", "messages", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			_, err = Convert(raw, tc.env, tc.sender, Limits{})
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
		})
	}
}

func TestConvertErrorFormat(t *testing.T) {
	e := &ConvertError{Reason: "because", Err: ErrNoFrom}
	wantEq(t, "Error", e.Error(), "smtpbackend: because: smtpbackend: no From address")
	if !errors.Is(e, ErrNoFrom) || e.Unwrap() != ErrNoFrom {
		t.Errorf("Unwrap does not give the sentinel")
	}
	wantEq(t, "Error without Err", (&ConvertError{Reason: "because"}).Error(), "smtpbackend: because")
}

// TestBareLFNormalised: data with LF line ends (smtplib's sendmail with
// bytes, curl --upload-file) is taken with CRLF line ends, the client's
// dot-stuffing after a bare LF undone; a stuffed lone-dot line is data.
func TestBareLFNormalised(t *testing.T) {
	env := Envelope{From: addrAlice, Recipients: []string{"bob@direct.example"}}
	for _, tc := range []struct{ name, raw, body string }{
		{"LF-only message", "From: alice@direct.example\nTo: bob@direct.example\nSubject: lf\n\nline one\nline two\n", "line one\nline two"},
		{"LF first", "\nFrom: alice@direct.example\r\nSubject: lf\r\n\r\nbody\r\n", ""},
		{"stuffed dots after LF", "From: alice@direct.example\nSubject: dots\n\n..hidden\n..\nend\n", ".hidden\n.\nend"},
		{"mixed", "From: alice@direct.example\r\nSubject: mixed\n\r\nA\r\nB\nC\n", "A\nB\nC"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sub, err := Convert([]byte(tc.raw), env, addrAlice, Limits{})
			if err != nil {
				t.Fatalf("Convert: %v", err)
			}
			// Text bodies come with LF line ends from mimeconv.
			if tc.body != "" && strings.TrimRight(sub.Message.Body, "\r\n") != tc.body {
				t.Errorf("body %q, want %q", sub.Message.Body, tc.body)
			}
		})
	}
	raw, err := os.ReadFile(filepath.Join("testdata", "messages", "direct-multiple-recipients.txt"))
	if err != nil {
		t.Fatal(err)
	}
	// A real Direct message stored with LF line ends.
	if _, err := Convert(raw, Envelope{Recipients: []string{"user1@cerner.com"}}, "externUser1@starugh-stateline.com", Limits{}); err != nil {
		t.Errorf("direct-multiple-recipients.txt: %v", err)
	}
}

// TestNotCarriableRefused: receipts (MDN), bounces (DSN), signed and
// encrypted S/MIME messages, which the provider's model would change into
// something else, are refused with ErrNotCarriable and a reason that says
// why, unless Limits.Flatten.
func TestNotCarriableRefused(t *testing.T) {
	for _, tc := range []struct{ file, sender, why string }{
		{"messages/direct-smime-signed-wrapped.eml", "", "signed"},
		{"messages/direct-encrypted-signed-ccda.txt", "", "encrypted"},
	} {
		t.Run(tc.file, func(t *testing.T) {
			raw, err := os.ReadFile(filepath.Join("testdata", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			_, err = Convert(raw, Envelope{Recipients: []string{"bob@direct.example"}}, "any@direct.example", Limits{})
			var ce *ConvertError
			if !errors.Is(err, ErrNotCarriable) || !errors.As(err, &ce) || !strings.Contains(ce.Reason, tc.why) {
				t.Fatalf("err = %v; want ErrNotCarriable saying %q", err, tc.why)
			}
		})
	}
}

// TestReportsCarried: the receipts and bounces of the shared test
// messages (text, report part, returned headers) convert to their text as
// the body and their report and headers as attachments of their own
// content type, byte for byte; a report of another shape is refused.
func TestReportsCarried(t *testing.T) {
	for _, tc := range []struct{ file, report string }{
		{"messages/direct-mdn-dispatched.txt", "message/disposition-notification"},
		{"messages/direct-dsn-failed.txt", "message/delivery-status"},
		{"golden/real-direct-mdn-processed.eml", "message/disposition-notification"},
	} {
		t.Run(tc.file, func(t *testing.T) {
			raw, err := os.ReadFile(filepath.Join("testdata", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			m, err := netmail.ReadMessage(bytes.NewReader(raw))
			if err != nil {
				t.Fatal(err)
			}
			from, err := netmail.ParseAddress(m.Header.Get("From"))
			if err != nil {
				t.Fatal(err)
			}
			sub, err := Convert(raw, Envelope{Recipients: []string{"bob@direct.example"}}, from.Address, Limits{})
			if err != nil {
				t.Fatalf("Convert: %v", err)
			}
			atts := sub.Message.AttachmentList
			if len(atts) == 0 || atts[0].ContentType != tc.report {
				t.Fatalf("attachments %+v; want the %s part first", atts, tc.report)
			}
			got, _ := base64.StdEncoding.DecodeString(atts[0].Content)
			// Line ends become CRLF (Convert normalises bare LF), and the
			// CRLF before a delimiter, or at the end of a part the
			// message never closes, is not content (RFC 2046 §5.1.1).
			want := bytes.ReplaceAll(bytes.ReplaceAll(reportBody(t, raw, tc.report), []byte("\r\n"), []byte("\n")), []byte("\n"), []byte("\r\n"))
			trim := func(b []byte) []byte { return bytes.TrimRight(b, "\r\n") }
			if !bytes.Equal(trim(got), trim(want)) {
				t.Errorf("report part changed:\n%q\nwant\n%q", got, want)
			}
		})
	}
	odd := "From: a@direct.example\r\nTo: b@direct.example\r\nSubject: odd\r\nContent-Type: multipart/report; report-type=disposition-notification; boundary=b\r\n\r\n" +
		"--b\r\nContent-Type: text/plain\r\n\r\nt\r\n--b\r\nContent-Type: image/png\r\n\r\nx\r\n--b\r\nContent-Type: message/disposition-notification\r\n\r\nDisposition: manual-action/MDN-sent-manually; displayed\r\n--b--\r\n"
	_, err := Convert([]byte(odd), Envelope{Recipients: []string{"b@direct.example"}}, "a@direct.example", Limits{})
	if !errors.Is(err, ErrNotCarriable) {
		t.Fatalf("a report of another shape: err = %v; want ErrNotCarriable", err)
	}
}

// reportBody returns the decoded body of raw's first part of type mt,
// read with go-message (independently of the code under test).
func reportBody(t *testing.T, raw []byte, mt string) []byte {
	t.Helper()
	e, err := gomessage.Read(bytes.NewReader(raw))
	if err != nil && e == nil {
		t.Fatal(err)
	}
	var out []byte
	e.Walk(func(path []int, part *gomessage.Entity, err error) error {
		if typ, _, _ := part.Header.ContentType(); typ == mt && out == nil {
			out, _ = io.ReadAll(part.Body)
		}
		return nil
	})
	return out
}

// displayName is the display name of raw's From field, read with net/mail
// (independently of the code under test), or "".
func displayName(t *testing.T, raw []byte) string {
	t.Helper()
	m, err := netmail.ReadMessage(bytes.NewReader(raw))
	if err != nil {
		return ""
	}
	a, err := netmail.ParseAddress(m.Header.Get("From"))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(a.Name)
}
