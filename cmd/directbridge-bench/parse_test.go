package main

import (
	"strings"
	"testing"
	"time"
)

// The figures themselves are never checked in tests; these check the
// parsing the report depends on.

func TestParseMetricsSumsAndLabels(t *testing.T) {
	before, err := parseMetrics(strings.NewReader(`# HELP directbridge_rest_requests_total x
# TYPE directbridge_rest_requests_total counter
directbridge_rest_requests_total{op="GetUIDs",result="ok"} 3
directbridge_rest_requests_total{op="GetRawMessagesByUIDs",result="ok"} 10
directbridge_imap_commands_total{command="FETCH",result="ok"} 7
`))
	if err != nil {
		t.Fatal(err)
	}
	after, err := parseMetrics(strings.NewReader(`directbridge_rest_requests_total{op="GetUIDs",result="ok"} 5
directbridge_rest_requests_total{op="GetRawMessagesByUIDs",result="ok"} 10
directbridge_rest_requests_total{op="GetRawMessagesByUIDs",result="temporary"} 1
directbridge_imap_commands_total{command="FETCH",result="ok"} 9
directbridge_rest_request_duration_seconds_bucket{op="GetUIDs",le="+Inf"} 5
`))
	if err != nil {
		t.Fatal(err)
	}
	if got := restDelta(before, after); got != 3 {
		t.Errorf("restDelta = %d, want 3", got)
	}
	if got := opsText(before, after); got != "GetUIDs 2, GetRawMessagesByUIDs 1" {
		t.Errorf("opsText = %q", got)
	}
	if got := cmdsText(before, after); got != "FETCH 2" {
		t.Errorf("cmdsText = %q", got)
	}
}

func TestTableRowOfImaptestSummary(t *testing.T) {
	sum := "| metric | target | dovecot | target/dovecot |\n|---|---:|---:|---:|\n" +
		"| A logout=0: FETCH/s (Fetc+Fet2) | 60 | 800 | 0.07 |\n| A logout=0: errors | 12 | 0 |  |\n"
	if got := tableRow(sum, "A logout=0: FETCH/s (Fetc+Fet2)"); len(got) != 3 || got[0] != "60" || got[2] != "0.07" {
		t.Errorf("FETCH row = %q", got)
	}
	if got := tableRow(sum, "A logout=0: errors"); len(got) < 2 || got[0] != "12" || got[1] != "0" {
		t.Errorf("errors row = %q", got)
	}
	if got := tableRow(sum, "B default: errors"); got != nil {
		t.Errorf("missing row = %q", got)
	}
}

func TestPercentileNearestRank(t *testing.T) {
	var ds []time.Duration
	for i := 100; i >= 1; i-- {
		ds = append(ds, time.Duration(i)*time.Millisecond)
	}
	for q, want := range map[float64]time.Duration{0.5: 50 * time.Millisecond, 0.95: 95 * time.Millisecond, 0.99: 99 * time.Millisecond, 1: 100 * time.Millisecond} {
		if got := percentile(ds, q); got != want {
			t.Errorf("percentile(%v) = %v, want %v", q, got, want)
		}
	}
	if got := percentile(nil, 0.95); got != 0 {
		t.Errorf("percentile of nothing = %v", got)
	}
}

func TestCorpusIsDeterministicAndSized(t *testing.T) {
	c := loadCorpus(t.TempDir()) // no test data: synthetic attachments
	a, b := c.message(7, "a@direct.example", "b@direct.example"), c.message(7, "a@direct.example", "b@direct.example")
	if string(a) != string(b) {
		t.Fatal("the same index gave different messages")
	}
	if !strings.Contains(string(a), "multipart/mixed") {
		t.Error("message 7 (every 8th) has no attachment")
	}
	plain := c.message(0, "a@direct.example", "b@direct.example")
	if n := len(plain); n < 1500 || n > 5000 {
		t.Errorf("plain message is %d bytes, want a few KB", n)
	}
	if strings.Contains(string(plain), "\n") && strings.Count(string(plain), "\r\n") != strings.Count(string(plain), "\n") {
		t.Error("bare LF in a generated message")
	}
}
