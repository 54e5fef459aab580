package directapi

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func TestDateUnmarshalJSON(t *testing.T) {
	noon := time.Date(2024, 3, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name string
		in   string
		want time.Time
	}{
		{"epoch ms number", `1709294400000`, noon},
		{"epoch ms number with millis", `1709294400123`, noon.Add(123 * time.Millisecond)},
		{"epoch ms number negative", `-1000`, time.Date(1969, 12, 31, 23, 59, 59, 0, time.UTC)},
		{"epoch ms number zero is the epoch", `0`, time.Unix(0, 0).UTC()},
		{"epoch ms number in exponent form", `1.709294400123e12`, noon.Add(123 * time.Millisecond)},
		{"epoch ms as string", `"1709294400000"`, noon},
		{"epoch ms as string negative", `"-1000"`, time.Date(1969, 12, 31, 23, 59, 59, 0, time.UTC)},
		{"yyyyMMddHHmmss", `"20240301120000"`, noon},
		{"yyyyMMddHHmmss end of day", `"20241231235959"`, time.Date(2024, 12, 31, 23, 59, 59, 0, time.UTC)},
		{"RFC 3339 Z", `"2024-03-01T12:00:00Z"`, noon},
		{"RFC 3339 fraction Z", `"2024-03-01T12:00:00.123Z"`, noon.Add(123 * time.Millisecond)},
		{"RFC 3339 nano fraction", `"2024-03-01T12:00:00.123456789Z"`, noon.Add(123456789)},
		{"RFC 3339 offset", `"2024-03-01T13:00:00+01:00"`, noon},
		{"RFC 3339 fraction and negative offset", `"2024-03-01T07:00:00.5-05:00"`, noon.Add(500 * time.Millisecond)},
		{"no zone is UTC", `"2024-03-01T12:00:00"`, noon},
		{"no zone with fraction is UTC", `"2024-03-01T12:00:00.250"`, noon.Add(250 * time.Millisecond)},
		{"Java Z offset", `"2024-03-01T13:00:00+0100"`, noon},
		{"Java Z offset with fraction", `"2024-03-01T13:00:00.123+0100"`, noon.Add(123 * time.Millisecond)},
		{"Java Z offset zero", `"2024-03-01T12:00:00.000+0000"`, noon},
		{"space separated with zone", `"2024-03-01 13:00:00+01:00"`, noon},
		{"space separated without zone", `"2024-03-01 12:00:00"`, noon},
		{"date only", `"2024-03-01"`, time.Date(2024, 3, 1, 0, 0, 0, 0, time.UTC)},
		{"RFC 1123", `"Fri, 01 Mar 2024 12:00:00 GMT"`, noon},
		{"RFC 1123Z", `"Fri, 01 Mar 2024 13:00:00 +0100"`, noon},
		{"java.util.Date toString", `"Fri Mar 1 12:00:00 UTC 2024"`, noon},
		{"surrounding spaces", `  "  2024-03-01T12:00:00Z  "  `, noon},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var d Date
			if err := json.Unmarshal([]byte(tt.in), &d); err != nil {
				t.Fatalf("Unmarshal(%s): %v", tt.in, err)
			}
			if !d.Equal(tt.want) {
				t.Fatalf("Unmarshal(%s) = %v; want %v", tt.in, d.Time, tt.want)
			}
		})
	}
}

func TestDateUnmarshalJSONNullAndEmpty(t *testing.T) {
	for _, in := range []string{`null`, ` null `, `""`, `"   "`} {
		d := Date{time.Now()}
		if err := json.Unmarshal([]byte(in), &d); err != nil {
			t.Fatalf("Unmarshal(%s): %v", in, err)
		}
		if !d.IsZero() {
			t.Fatalf("Unmarshal(%s) = %v; want the zero Date", in, d.Time)
		}
	}
	// A null field inside a struct leaves the zero Date, too.
	var l DirectMessageLog
	if err := json.Unmarshal([]byte(`{"ts":null,"status":"Delivered"}`), &l); err != nil {
		t.Fatal(err)
	}
	if !l.TS.IsZero() || l.Status != "Delivered" {
		t.Fatalf("decoded %+v", l)
	}
}

func TestDateUnmarshalJSONGarbage(t *testing.T) {
	for _, in := range []string{
		`"yesterday"`,
		`"2024-13-45T00:00:00Z"`,
		`"20241341000000"`, // 14 digits, but month 13
		`"2024/03/01"`,
		`"12:00:00"`,
		`"1709294400000x"`,
		`true`,
		`{}`,
		`[1709294400000]`,
		`"1e400"`,
		`99999999999999999999999`, // does not fit int64
	} {
		var d Date
		if err := json.Unmarshal([]byte(in), &d); err == nil {
			t.Errorf("Unmarshal(%s) = %v; want an error", in, d.Time)
		}
	}
	// Inside a larger document the error surfaces from json.Unmarshal.
	var m MessageDetail
	if err := json.Unmarshal([]byte(`{"uid":1,"sentDate":"not a date"}`), &m); err == nil {
		t.Fatal("MessageDetail with a bad sentDate decoded without error")
	}
}

func TestDateMarshalJSON(t *testing.T) {
	d := Date{time.Date(2024, 3, 1, 13, 0, 0, 123456789, time.FixedZone("CET", 3600))}
	b, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != "1709294400123" {
		t.Fatalf("Marshal = %s; want epoch milliseconds 1709294400123", b)
	}
	b, err = json.Marshal(Date{})
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != "null" {
		t.Fatalf("Marshal(zero) = %s; want null", b)
	}
	// As a field, pointer or value.
	b, err = json.Marshal(struct {
		A Date  `json:"a"`
		B *Date `json:"b"`
		C Date  `json:"c"`
	}{A: Date{time.UnixMilli(1).UTC()}, B: &Date{time.UnixMilli(2)}})
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != `{"a":1,"b":2,"c":null}` {
		t.Fatalf("Marshal(struct) = %s", b)
	}
}

func TestDateRoundTrip(t *testing.T) {
	orig := NewDate(time.Date(2031, 7, 4, 1, 2, 3, 456789000, time.FixedZone("X", -7*3600)))
	if orig.Nanosecond() != 456000000 {
		t.Fatalf("NewDate kept %dns; want truncation to milliseconds", orig.Nanosecond())
	}
	b, err := json.Marshal(orig)
	if err != nil {
		t.Fatal(err)
	}
	var back Date
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if !back.Equal(orig.Time) {
		t.Fatalf("round trip %v -> %s -> %v", orig.Time, b, back.Time)
	}
	if back.Location() != time.UTC {
		t.Fatalf("decoded location %v; want UTC", back.Location())
	}
}

func TestParseDate(t *testing.T) {
	noon := time.Date(2024, 3, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		in      string
		want    time.Time
		wantErr bool
	}{
		{in: "", want: time.Time{}},
		{in: "  ", want: time.Time{}},
		{in: "1709294400000", want: noon},
		{in: " 1709294400000 ", want: noon},
		{in: "0", want: time.Unix(0, 0).UTC()},
		{in: "-86400000", want: time.Date(1969, 12, 31, 0, 0, 0, 0, time.UTC)},
		{in: "20240301120000", want: noon},
		{in: "19700101000000", want: time.Unix(0, 0).UTC()},
		{in: "2024-03-01T12:00:00Z", want: noon},
		{in: "2024-03-01T12:00:00.999Z", want: noon.Add(999 * time.Millisecond)},
		{in: "2024-03-01T14:30:00+02:30", want: noon},
		{in: "2024-03-01T13:00:00+0100", want: noon},
		{in: "2024-03-01T12:00:00", want: noon},
		{in: "2024-03-01", want: time.Date(2024, 3, 1, 0, 0, 0, 0, time.UTC)},
		{in: "Fri, 01 Mar 2024 12:00:00 GMT", want: noon},
		{in: "20240301", wantErr: false, want: time.UnixMilli(20240301).UTC()}, // 8 digits are milliseconds
		{in: "2024030112000", want: time.UnixMilli(2024030112000).UTC()},       // 13 digits: milliseconds
		{in: "20240230120000", wantErr: true},                                  // 30 February
		{in: "garbage", wantErr: true},
		{in: "-", wantErr: true},
		{in: "--1", wantErr: true},
		{in: "2024-03-01T25:00:00Z", wantErr: true},
		{in: "12345678901234567890", wantErr: true}, // overflows int64
	}
	for _, tt := range tests {
		got, err := ParseDate(tt.in)
		if tt.wantErr {
			if err == nil {
				t.Errorf("ParseDate(%q) = %v; want an error", tt.in, got)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseDate(%q): %v", tt.in, err)
			continue
		}
		if !got.Equal(tt.want) || got.IsZero() != tt.want.IsZero() {
			t.Errorf("ParseDate(%q) = %v; want %v", tt.in, got, tt.want)
		}
	}
}

func TestParseDateErrorNamesInput(t *testing.T) {
	_, err := ParseDate("next tuesday")
	if err == nil || !strings.Contains(err.Error(), "next tuesday") {
		t.Fatalf("ParseDate error %v; want it to quote the input", err)
	}
}
