package directapi

import (
	"bytes"
	"encoding/base64"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// CSVData is the csvData field of a status report: the bytes of a CSV file.
// A Java byte[] is written by JSON stacks as a base64 string; some write an
// array of numbers instead. Both decode.
type CSVData []byte

// MarshalJSON writes base64, or null when empty.
func (c CSVData) MarshalJSON() ([]byte, error) {
	if len(c) == 0 {
		return []byte("null"), nil
	}
	return json.Marshal(base64.StdEncoding.EncodeToString(c))
}

// UnmarshalJSON accepts null, a base64 string (standard or URL alphabet,
// padded or not) or an array of byte values (-128..255, as Java bytes are signed).
func (c *CSVData) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	switch {
	case bytes.Equal(b, []byte("null")):
		*c = nil
		return nil
	case len(b) > 0 && b[0] == '[':
		var nums []int
		if err := json.Unmarshal(b, &nums); err != nil {
			return fmt.Errorf("directapi: csvData: %w", err)
		}
		out := make([]byte, len(nums))
		for i, n := range nums {
			if n < -128 || n > 255 {
				return fmt.Errorf("directapi: csvData: byte %d out of range", n)
			}
			out[i] = byte(n)
		}
		*c = out
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("directapi: csvData: %w", err)
	}
	data, err := decodeBase64(s)
	if err != nil {
		return fmt.Errorf("directapi: csvData: %w", err)
	}
	*c = data
	return nil
}

// decodeBase64 is liberal about alphabet, padding and embedded line breaks.
func decodeBase64(s string) ([]byte, error) {
	s = strings.Map(func(r rune) rune {
		if r == '\r' || r == '\n' || r == ' ' || r == '\t' {
			return -1
		}
		return r
	}, s)
	s = strings.TrimRight(s, "=")
	if strings.ContainsAny(s, "-_") {
		return base64.RawURLEncoding.DecodeString(s)
	}
	return base64.RawStdEncoding.DecodeString(s)
}

// csvColumns is the documented column order of csvData.
const csvColumns = 10

// ParseStatusCSV decodes a csvData report into DirectMessageLog records.
// Columns, in the documented order: From, To, Message ID, Message Size,
// Status, Sent Time, XDR Message ID, XDR Source ID, XDR Unique ID, XDR
// Patient ID. A header row (first cell "From") is skipped; trailing
// asterisks on status values are removed; missing trailing columns are
// empty; blank lines are ignored. A Message Size or Sent Time that does not
// parse is an error, because a record with a wrong size or time is worse
// than none.
func ParseStatusCSV(data []byte) ([]DirectMessageLog, error) {
	data = bytes.TrimPrefix(data, []byte("\uFEFF"))
	r := csv.NewReader(bytes.NewReader(data))
	r.FieldsPerRecord = -1
	r.LazyQuotes = true
	r.TrimLeadingSpace = true
	var logs []DirectMessageLog
	first := true // no non-blank record seen yet
	for line := 1; ; line++ {
		rec, err := r.Read()
		if errors.Is(err, io.EOF) {
			return logs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("directapi: csvData: %w", err)
		}
		if len(rec) == 1 && strings.TrimSpace(rec[0]) == "" {
			continue
		}
		if first && strings.EqualFold(strings.TrimSpace(rec[0]), "From") {
			first = false
			continue
		}
		first = false
		for len(rec) < csvColumns {
			rec = append(rec, "")
		}
		for i := range rec {
			rec[i] = strings.TrimSpace(rec[i])
		}
		l := DirectMessageLog{
			From:      rec[0],
			To:        rec[1],
			MessageID: rec[2],
			Status:    strings.TrimSpace(strings.TrimRight(rec[4], "*")),
			XdrID:     rec[6],
			SourceID:  rec[7],
			UniqueID:  rec[8],
			PatientID: rec[9],
		}
		if rec[3] != "" {
			n, err := strconv.ParseInt(rec[3], 10, 64)
			if err != nil {
				return nil, fmt.Errorf("directapi: csvData line %d: message size %q: %w", line, rec[3], err)
			}
			l.MessageSize = n
		}
		t, err := ParseDate(rec[5])
		if err != nil {
			return nil, fmt.Errorf("directapi: csvData line %d: sent time: %w", line, err)
		}
		l.TS = Date{t}
		logs = append(logs, l)
	}
}

// Logs returns the report's records whichever form they came in: the
// messageLogs array and the decoded csvData are both read, so a provider
// that fills either (or, against the document, both) is understood.
func (r *DirectMessageStatusReportResponseType) Logs() ([]DirectMessageLog, error) {
	logs := append([]DirectMessageLog(nil), r.MessageLogs...)
	if len(r.CsvData) > 0 {
		fromCSV, err := ParseStatusCSV(r.CsvData)
		if err != nil {
			return nil, err
		}
		logs = append(logs, fromCSV...)
	}
	return logs, nil
}

// FormatStatusCSV writes logs in the documented csvData layout, with a
// header row and the trailing asterisk on status values. The sandbox uses
// it to answer in CSV form; it is the inverse of ParseStatusCSV.
func FormatStatusCSV(logs []DirectMessageLog) []byte {
	var buf bytes.Buffer
	w := csv.NewWriter(&buf)
	w.Write([]string{"From", "To", "Message ID", "Message Size", "Status", "Sent Time",
		"XDR Message ID", "XDR Source ID", "XDR Unique ID", "XDR Patient ID"})
	for _, l := range logs {
		ts := ""
		if !l.TS.IsZero() {
			ts = l.TS.UTC().Format(UTCLayout)
		}
		w.Write([]string{l.From, l.To, l.MessageID, strconv.FormatInt(l.MessageSize, 10),
			l.Status + "*", ts, l.XdrID, l.SourceID, l.UniqueID, l.PatientID})
	}
	w.Flush()
	return buf.Bytes()
}
