package directapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Date is a point in time as the provider writes it. The documents leave the
// wire format of Date values unspecified ("not shown"), so decoding is
// liberal (see the package documentation) and encoding uses epoch
// milliseconds, the default of the Java JSON stacks such services are built
// on. The zero Date means the value was absent or null.
type Date struct {
	time.Time
}

// NewDate wraps t, truncated to the millisecond the wire can carry.
func NewDate(t time.Time) Date { return Date{t.Truncate(time.Millisecond)} }

// UTCLayout is the provider's compact UTC timestamp layout (yyyyMMddHHmmss),
// used by the ...UTC search operations.
const UTCLayout = "20060102150405"

// isoLayouts are tried in order for string values.
var isoLayouts = []string{
	time.RFC3339Nano,
	"2006-01-02T15:04:05.999999999Z0700", // Java's SimpleDateFormat "Z" offset
	"2006-01-02T15:04:05.999999999",      // local date-time without zone: taken as UTC
	"2006-01-02 15:04:05.999999999Z07:00",
	"2006-01-02 15:04:05.999999999",
	"2006-01-02",
	time.RFC1123Z,
	time.RFC1123,
	"Mon Jan 2 15:04:05 MST 2006", // java.util.Date.toString()
}

// MarshalJSON writes epoch milliseconds, or null for the zero Date.
func (d Date) MarshalJSON() ([]byte, error) {
	if d.IsZero() {
		return []byte("null"), nil
	}
	return strconv.AppendInt(nil, d.UnixMilli(), 10), nil
}

// UnmarshalJSON accepts null, a JSON number of epoch milliseconds, or a
// string holding epoch milliseconds, yyyyMMddHHmmss (UTC) or an ISO-8601 /
// RFC 3339 date-time.
func (d *Date) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if bytes.Equal(b, []byte("null")) {
		*d = Date{}
		return nil
	}
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		t, err := ParseDate(s)
		if err != nil {
			return err
		}
		*d = Date{t}
		return nil
	}
	var n json.Number
	if err := json.Unmarshal(b, &n); err != nil {
		return fmt.Errorf("directapi: date %s: not a number or string", b)
	}
	t, err := parseMillis(string(n))
	if err != nil {
		return err
	}
	*d = Date{t}
	return nil
}

// ParseDate decodes a date-time written in any of the forms the package
// accepts for Date values. An empty string gives the zero time.
func ParseDate(s string) (time.Time, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return time.Time{}, nil
	}
	if len(s) == len(UTCLayout) && isDigits(s) {
		return time.ParseInLocation(UTCLayout, s, time.UTC)
	}
	if isDigits(strings.TrimPrefix(s, "-")) {
		return parseMillis(s)
	}
	for _, layout := range isoLayouts {
		if t, err := time.ParseInLocation(layout, s, time.UTC); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("directapi: unrecognised date %q", s)
}

func parseMillis(s string) (time.Time, error) {
	if f, err := strconv.ParseFloat(s, 64); err == nil && strings.ContainsAny(s, ".eE") {
		return time.UnixMilli(int64(f)).UTC(), nil
	}
	ms, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("directapi: date %q: %w", s, err)
	}
	return time.UnixMilli(ms).UTC(), nil
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
