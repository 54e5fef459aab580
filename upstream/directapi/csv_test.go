package directapi

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"
)

const csvHeader = "From,To,Message ID,Message Size,Status,Sent Time,XDR Message ID,XDR Source ID,XDR Unique ID,XDR Patient ID"

func ts(s string) Date {
	t, err := time.Parse(UTCLayout, s)
	if err != nil {
		panic(err)
	}
	return Date{t}
}

func TestParseStatusCSV(t *testing.T) {
	full := []DirectMessageLog{
		{From: "alice@direct.example", To: "bob@direct.example", MessageID: "<m1@direct.example>", MessageSize: 1234,
			Status: StatusDelivered, TS: ts("20240301120000"), XdrID: "x1", SourceID: "s1", UniqueID: "u1", PatientID: "p1"},
		{From: "alice@direct.example", To: "carol@direct.example", MessageID: "<m1@direct.example>", MessageSize: 1234,
			Status: StatusNoMDNReceived, TS: ts("20240301120001")},
	}
	tests := []struct {
		name string
		in   string
		want []DirectMessageLog
	}{
		{
			name: "header row",
			in: csvHeader + "\n" +
				"alice@direct.example,bob@direct.example,<m1@direct.example>,1234,Delivered*,20240301120000,x1,s1,u1,p1\n" +
				"alice@direct.example,carol@direct.example,<m1@direct.example>,1234,NO MDN Received*,20240301120001,,,,\n",
			want: full,
		},
		{
			name: "no header",
			in: "alice@direct.example,bob@direct.example,<m1@direct.example>,1234,Delivered*,20240301120000,x1,s1,u1,p1\n" +
				"alice@direct.example,carol@direct.example,<m1@direct.example>,1234,NO MDN Received*,20240301120001,,,,\n",
			want: full,
		},
		{
			name: "header in other case, no final newline",
			in: strings.ToUpper(csvHeader) + "\n" +
				"alice@direct.example,bob@direct.example,<m1@direct.example>,1234,Delivered*,20240301120000,x1,s1,u1,p1",
			want: full[:1],
		},
		{
			name: "CRLF line ends",
			in: csvHeader + "\r\n" +
				"alice@direct.example,bob@direct.example,<m1@direct.example>,1234,Delivered*,20240301120000,x1,s1,u1,p1\r\n" +
				"alice@direct.example,carol@direct.example,<m1@direct.example>,1234,NO MDN Received*,20240301120001,,,,\r\n",
			want: full,
		},
		{
			name: "byte order mark before the header",
			in: "\uFEFF" + csvHeader + "\r\n" +
				"alice@direct.example,bob@direct.example,<m1@direct.example>,1234,Delivered*,20240301120000,x1,s1,u1,p1\r\n",
			want: full[:1],
		},
		{
			name: "byte order mark without header",
			in:   "\uFEFFalice@direct.example,bob@direct.example,<m1@direct.example>,1234,Delivered*,20240301120000,x1,s1,u1,p1\n",
			want: full[:1],
		},
		{
			name: "blank lines, also before the header",
			in: "\n   \n" + csvHeader + "\n\n" +
				"alice@direct.example,bob@direct.example,<m1@direct.example>,1234,Delivered*,20240301120000,x1,s1,u1,p1\n" +
				"\n\r\n" +
				"alice@direct.example,carol@direct.example,<m1@direct.example>,1234,NO MDN Received*,20240301120001,,,,\n\n",
			want: full,
		},
		{
			name: "quoted fields with commas, quotes and spaces",
			in: csvHeader + "\n" +
				`"Alice, MD <alice@direct.example>", "bob@direct.example","<a,b""c@x>",42,"Remotely Failed*",20240301120000,"x,1",s1,u1,"p ""1"""` + "\n",
			want: []DirectMessageLog{{From: "Alice, MD <alice@direct.example>", To: "bob@direct.example", MessageID: `<a,b"c@x>`,
				MessageSize: 42, Status: StatusRemotelyFailed, TS: ts("20240301120000"), XdrID: "x,1", SourceID: "s1", UniqueID: "u1", PatientID: `p "1"`}},
		},
		{
			name: "short rows are padded with empty columns",
			in: csvHeader + "\n" +
				"a@x,b@y,<m@x>,10,Waiting*\n" +
				"a@x,c@y,<m@x>\n" +
				"a@x\n",
			want: []DirectMessageLog{
				{From: "a@x", To: "b@y", MessageID: "<m@x>", MessageSize: 10, Status: StatusWaiting},
				{From: "a@x", To: "c@y", MessageID: "<m@x>"},
				{From: "a@x"},
			},
		},
		{
			name: "status without asterisk, several asterisks, spaces",
			in: "a@x,b@y,<m@x>,1,Locally Failed,20240301120000\n" +
				"a@x,b@y,<m@x>,1, Delivered** ,20240301120000\n" +
				"a@x,b@y,<m@x>,1,NO MDN Received *,20240301120000\n",
			want: []DirectMessageLog{
				{From: "a@x", To: "b@y", MessageID: "<m@x>", MessageSize: 1, Status: StatusLocallyFailed, TS: ts("20240301120000")},
				{From: "a@x", To: "b@y", MessageID: "<m@x>", MessageSize: 1, Status: StatusDelivered, TS: ts("20240301120000")},
				{From: "a@x", To: "b@y", MessageID: "<m@x>", MessageSize: 1, Status: StatusNoMDNReceived, TS: ts("20240301120000")},
			},
		},
		{
			name: "sent time in other accepted forms",
			in: "a@x,b@y,<m@x>,1,Delivered*,1709294400000\n" +
				"a@x,b@y,<m@x>,1,Delivered*,2024-03-01T13:00:00+01:00\n",
			want: []DirectMessageLog{
				{From: "a@x", To: "b@y", MessageID: "<m@x>", MessageSize: 1, Status: StatusDelivered, TS: ts("20240301120000")},
				{From: "a@x", To: "b@y", MessageID: "<m@x>", MessageSize: 1, Status: StatusDelivered, TS: ts("20240301120000")},
			},
		},
		{
			name: "extra trailing columns are ignored",
			in:   "a@x,b@y,<m@x>,1,Delivered*,20240301120000,x,s,u,p,extra,more\n",
			want: []DirectMessageLog{{From: "a@x", To: "b@y", MessageID: "<m@x>", MessageSize: 1, Status: StatusDelivered,
				TS: ts("20240301120000"), XdrID: "x", SourceID: "s", UniqueID: "u", PatientID: "p"}},
		},
		{name: "only a header", in: csvHeader + "\r\n", want: nil},
		{name: "empty", in: "", want: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseStatusCSV([]byte(tt.in))
			if err != nil {
				t.Fatalf("ParseStatusCSV: %v", err)
			}
			if !logsEqual(got, tt.want) {
				t.Fatalf("ParseStatusCSV =\n%+v\nwant\n%+v", got, tt.want)
			}
		})
	}
}

// logsEqual compares logs, the TS fields by instant.
func logsEqual(a, b []DirectMessageLog) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := a[i], b[i]
		if !x.TS.Equal(y.TS.Time) || x.TS.IsZero() != y.TS.IsZero() {
			return false
		}
		x.TS, y.TS = Date{}, Date{}
		if x != y {
			return false
		}
	}
	return true
}

func TestParseStatusCSVErrors(t *testing.T) {
	for name, in := range map[string]string{
		"bad size":          "a@x,b@y,<m@x>,big,Delivered*,20240301120000\n",
		"negative-ish size": "a@x,b@y,<m@x>,1.5,Delivered*,20240301120000\n",
		"bad size after ok": "a@x,b@y,<m@x>,1,Delivered*,20240301120000\na@x,b@y,<m@x>,x,Delivered*,20240301120000\n",
		"bad sent time":     "a@x,b@y,<m@x>,1,Delivered*,yesterday\n",
		"header not first":  "a@x,b@y,<m@x>,1,Delivered*,20240301120000\n" + csvHeader + "\n",
	} {
		t.Run(name, func(t *testing.T) {
			logs, err := ParseStatusCSV([]byte(in))
			if err == nil {
				t.Fatalf("ParseStatusCSV = %+v; want an error", logs)
			}
			if logs != nil {
				t.Fatalf("ParseStatusCSV returned %d records along with the error", len(logs))
			}
		})
	}
}

func TestCSVDataUnmarshalJSON(t *testing.T) {
	// Bytes whose base64 uses the characters that differ between the
	// standard and URL alphabets (+/ vs -_).
	raw := []byte{0xfb, 0xff, 0xfe, 'a', 'b', 0x00, 0x80}
	std := base64.StdEncoding.EncodeToString(raw)
	url := base64.URLEncoding.EncodeToString(raw)
	if !strings.ContainsAny(std, "+/") || !strings.ContainsAny(url, "-_") || !strings.HasSuffix(std, "=") {
		t.Fatalf("test data does not exercise both alphabets and padding: %q %q", std, url)
	}
	long := bytes.Repeat([]byte(csvHeader+"\r\na@x,b@y,<m@x>,1,Delivered*,20240301120000\r\n"), 4)
	longStd := base64.StdEncoding.EncodeToString(long)
	var wrapped strings.Builder // MIME style: 76 characters a line, CRLF
	for s := longStd; len(s) > 0; {
		n := min(76, len(s))
		wrapped.WriteString(s[:n])
		s = s[n:]
		if len(s) > 0 {
			wrapped.WriteString("\r\n")
		}
	}
	jsonString := func(s string) string {
		b, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}

	tests := []struct {
		name string
		in   string
		want []byte
	}{
		{"standard padded", jsonString(std), raw},
		{"standard unpadded", jsonString(strings.TrimRight(std, "=")), raw},
		{"url-safe padded", jsonString(url), raw},
		{"url-safe unpadded", jsonString(base64.RawURLEncoding.EncodeToString(raw)), raw},
		{"line breaks CRLF", jsonString(wrapped.String()), long},
		{"line breaks LF and spaces", jsonString(strings.ReplaceAll(wrapped.String(), "\r\n", "\n ")), long},
		{"array of signed bytes", `[-5,-1,-2,97,98,0,-128]`, raw},
		{"array of unsigned bytes", `[251,255,254,97,98,0,128]`, raw},
		{"array with spaces", ` [ 251 , -1 ] `, []byte{0xfb, 0xff}},
		{"empty array", `[]`, []byte{}},
		{"empty string", `""`, []byte{}},
		{"null", `null`, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := CSVData("previous")
			if err := json.Unmarshal([]byte(tt.in), &c); err != nil {
				t.Fatalf("Unmarshal(%.60s): %v", tt.in, err)
			}
			if !bytes.Equal(c, tt.want) || (tt.want == nil) != (c == nil) {
				t.Fatalf("Unmarshal(%.60s) = %v; want %v", tt.in, []byte(c), tt.want)
			}
		})
	}
}

func TestCSVDataUnmarshalJSONErrors(t *testing.T) {
	for _, in := range []string{
		`"!!!not base64!!!"`,
		`"QUJD*"`,
		`[256]`,
		`[-129]`,
		`[1.5]`,
		`["a"]`,
		`42`,
		`true`,
		`{"data":"QUJD"}`,
	} {
		var c CSVData
		if err := json.Unmarshal([]byte(in), &c); err == nil {
			t.Errorf("Unmarshal(%s) = %v; want an error", in, []byte(c))
		}
	}
}

func TestCSVDataMarshalJSON(t *testing.T) {
	b, err := json.Marshal(CSVData{0xfb, 0xff, 'a'})
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != `"+/9h"` {
		t.Fatalf("Marshal = %s; want standard base64", b)
	}
	for _, c := range []CSVData{nil, {}} {
		b, err := json.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		if string(b) != "null" {
			t.Fatalf("Marshal(%v) = %s; want null", c, b)
		}
	}
	// Round trip through a whole report.
	in := DirectMessageStatusReportResponseType{APIResponse: APIResponse{Success: true}, HasCvData: true, CsvData: CSVData("From,To\n")}
	b, err = json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	var out DirectMessageStatusReportResponseType
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	if string(out.CsvData) != "From,To\n" || !out.HasCvData || !out.Success {
		t.Fatalf("round trip %s -> %+v", b, out)
	}
}

func TestFormatStatusCSVRoundTrip(t *testing.T) {
	logs := []DirectMessageLog{
		{From: "alice@direct.example", To: "bob@direct.example", MessageID: "<m1@direct.example>", MessageSize: 1234,
			Status: StatusDelivered, TS: ts("20240301120000"), XdrID: "x1", SourceID: "s1", UniqueID: "u1", PatientID: "p1"},
		{From: "alice@direct.example", To: "carol@direct.example", MessageID: `<odd,"id"@x>`, MessageSize: 0,
			Status: StatusNoMDNReceived, TS: ts("20240229235959")},
		{From: "Alice, MD", To: "dave@direct.example", MessageID: "<m3@x>", MessageSize: 1 << 40,
			Status: StatusRemotelyFailed, TS: Date{time.Date(2024, 3, 1, 13, 0, 0, 0, time.FixedZone("CET", 3600))}},
		{From: "a@x", To: "b@y", MessageID: "<m4@x>", Status: StatusWaiting}, // no time
		{From: "a@x", To: "b@y", MessageID: "<m5@x>", Status: StatusLocallyFailed, TS: ts("20240301120000")},
	}
	data := FormatStatusCSV(logs)
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if lines[0] != csvHeader {
		t.Fatalf("first line %q; want the header %q", lines[0], csvHeader)
	}
	if !strings.Contains(lines[2], "NO MDN Received*") || !strings.Contains(lines[1], ",Delivered*,") {
		t.Fatalf("status values lack the trailing asterisk:\n%s", data)
	}
	if !strings.Contains(lines[3], ",20240301120000,") {
		t.Fatalf("sent time not written as UTC yyyyMMddHHmmss: %q", lines[3])
	}
	got, err := ParseStatusCSV(data)
	if err != nil {
		t.Fatalf("ParseStatusCSV(FormatStatusCSV(logs)): %v\n%s", err, data)
	}
	if !logsEqual(got, logs) {
		t.Fatalf("round trip =\n%+v\nwant\n%+v\ncsv:\n%s", got, logs, data)
	}
	// Empty input gives just the header, which parses to no records.
	got, err = ParseStatusCSV(FormatStatusCSV(nil))
	if err != nil || len(got) != 0 {
		t.Fatalf("round trip of nothing = %v, %v", got, err)
	}
}

func TestStatusReportLogs(t *testing.T) {
	csvLogs := []DirectMessageLog{
		{From: "a@x", To: "csv1@y", MessageID: "<m@x>", MessageSize: 5, Status: StatusDelivered, TS: ts("20240301120000")},
		{From: "a@x", To: "csv2@y", MessageID: "<m@x>", MessageSize: 5, Status: StatusWaiting, TS: ts("20240301120000")},
	}
	jsonLog := DirectMessageLog{From: "a@x", To: "json@y", MessageID: "<m@x>", MessageSize: 5, Status: StatusDelivered,
		StatusDetails: "250 OK", TS: ts("20240301120000")}
	csvData := CSVData(FormatStatusCSV(csvLogs))

	tests := []struct {
		name string
		r    DirectMessageStatusReportResponseType
		want []DirectMessageLog
	}{
		{"hasCvData true, csvData only", DirectMessageStatusReportResponseType{HasCvData: true, CsvData: csvData}, csvLogs},
		{"hasCvData false, messageLogs only", DirectMessageStatusReportResponseType{MessageLogs: []DirectMessageLog{jsonLog}}, []DirectMessageLog{jsonLog}},
		{"hasCvData false but csvData filled", DirectMessageStatusReportResponseType{CsvData: csvData}, csvLogs},
		{"hasCvData true but messageLogs filled", DirectMessageStatusReportResponseType{HasCvData: true, MessageLogs: []DirectMessageLog{jsonLog}}, []DirectMessageLog{jsonLog}},
		{"both filled: messageLogs then csvData", DirectMessageStatusReportResponseType{HasCvData: true, CsvData: csvData, MessageLogs: []DirectMessageLog{jsonLog}},
			append([]DirectMessageLog{jsonLog}, csvLogs...)},
		{"nothing found", DirectMessageStatusReportResponseType{HasCvData: true}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Decode through JSON, as the client does.
			b, err := json.Marshal(tt.r)
			if err != nil {
				t.Fatal(err)
			}
			var r DirectMessageStatusReportResponseType
			if err := json.Unmarshal(b, &r); err != nil {
				t.Fatal(err)
			}
			got, err := r.Logs()
			if err != nil {
				t.Fatal(err)
			}
			if !logsEqual(got, tt.want) {
				t.Fatalf("Logs() =\n%+v\nwant\n%+v", got, tt.want)
			}
		})
	}

	// Logs must not alias the response's slice.
	r := DirectMessageStatusReportResponseType{CsvData: csvData, MessageLogs: make([]DirectMessageLog, 1, 10)}
	r.MessageLogs[0] = jsonLog
	if _, err := r.Logs(); err != nil {
		t.Fatal(err)
	}
	if got := r.MessageLogs[:2][1]; got != (DirectMessageLog{}) {
		t.Fatalf("Logs() wrote into the spare capacity of MessageLogs: %+v", got)
	}

	bad := DirectMessageStatusReportResponseType{HasCvData: true, CsvData: CSVData("a,b,c,notanumber,Delivered*\n")}
	if logs, err := bad.Logs(); err == nil {
		t.Fatalf("Logs() with a bad csvData = %+v; want an error", logs)
	}
}

func TestStatusReportFromProviderJSON(t *testing.T) {
	csvText := "\uFEFF" + csvHeader + "\r\nalice@direct.example,bob@direct.example,<m1@direct.example>,1234,Delivered*,20240301120000,,,,\r\n"
	body := `{"success":true,"code":0,"message":"OK","hasCvData":true,"csvData":"` +
		base64.StdEncoding.EncodeToString([]byte(csvText)) + `","messageLogs":[]}`
	var r DirectMessageStatusReportResponseType
	if err := json.Unmarshal([]byte(body), &r); err != nil {
		t.Fatal(err)
	}
	got, err := r.Logs()
	if err != nil {
		t.Fatal(err)
	}
	want := []DirectMessageLog{{From: "alice@direct.example", To: "bob@direct.example", MessageID: "<m1@direct.example>",
		MessageSize: 1234, Status: StatusDelivered, TS: ts("20240301120000")}}
	if !logsEqual(got, want) {
		t.Fatalf("Logs() = %+v; want %+v", got, want)
	}
	if !reflect.DeepEqual(r.MessageLogs, []DirectMessageLog{}) {
		t.Fatalf("messageLogs decoded as %#v", r.MessageLogs)
	}
}
