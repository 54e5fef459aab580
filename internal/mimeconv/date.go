package mimeconv

import (
	"net/mail"
	"strings"
	"time"
)

// parseDate reads a Date field (RFC 5322 §3.3), also in the obsolete forms
// net/mail accepts, and with a trailing zone comment such as "(CDT)";
// the zero time when it cannot.
//
// The common form ("Mon, 2 Jan 2006 15:04:05 -0700") is read by hand
// first: net/mail tries its layouts one after the other and every miss
// allocates an error, which made date parsing the largest allocation of
// FETCH ENVELOPE under load.
func parseDate(v string) time.Time {
	v = strings.TrimSpace(v)
	if v == "" {
		return time.Time{}
	}
	if t, ok := quickDate(v); ok {
		return t
	}
	if t, err := mail.ParseDate(v); err == nil {
		return t
	}
	// A trailing zone comment such as "(CDT)" that net/mail rejects.
	if i := strings.LastIndexByte(v, '('); i > 0 {
		if t, err := mail.ParseDate(strings.TrimSpace(v[:i])); err == nil {
			return t
		}
	}
	return time.Time{}
}

var months = [...]string{"jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"}

// quickDate reads "[Day,] D Mon YYYY HH:MM[:SS] +HHMM [(comment)]", the
// form RFC 5322 §3.3 asks writers to use, with a numeric zone; anything
// else is left to net/mail (ok false).
func quickDate(v string) (t time.Time, ok bool) {
	f := strings.Fields(v)
	if len(f) > 0 && strings.HasSuffix(f[0], ",") {
		f = f[1:]
	}
	if len(f) > 4 && strings.HasPrefix(f[4], "(") {
		f = f[:4]
	} else if len(f) > 5 && strings.HasPrefix(f[5], "(") {
		f = f[:5]
	}
	if len(f) != 5 {
		return time.Time{}, false
	}
	day, ok1 := digits(f[0], 1, 2)
	year, ok2 := digits(f[2], 4, 4)
	if !ok1 || !ok2 || len(f[1]) != 3 {
		return time.Time{}, false
	}
	month := 0
	for i, m := range months {
		if strings.EqualFold(f[1], m) {
			month = i + 1
		}
	}
	clock := f[3]
	if month == 0 || (len(clock) != 5 && len(clock) != 8) || clock[2] != ':' || (len(clock) == 8 && clock[5] != ':') {
		return time.Time{}, false
	}
	hh, ok3 := digits(clock[0:2], 2, 2)
	mm, ok4 := digits(clock[3:5], 2, 2)
	ss, ok5 := 0, true
	if len(clock) == 8 {
		ss, ok5 = digits(clock[6:8], 2, 2)
	}
	zone := f[4]
	if !ok3 || !ok4 || !ok5 || len(zone) != 5 || (zone[0] != '+' && zone[0] != '-') {
		return time.Time{}, false
	}
	zh, ok6 := digits(zone[1:3], 2, 2)
	zm, ok7 := digits(zone[3:5], 2, 2)
	if !ok6 || !ok7 || day < 1 || day > 31 || hh > 23 || mm > 59 || ss > 59 || zh > 23 || zm > 59 {
		return time.Time{}, false
	}
	offset := (zh*60 + zm) * 60
	if zone[0] == '-' {
		offset = -offset
	}
	loc := time.UTC
	if offset != 0 || zone[0] == '-' {
		loc = time.FixedZone("", offset)
	}
	t = time.Date(year, time.Month(month), day, hh, mm, ss, 0, loc)
	if t.Day() != day {
		return time.Time{}, false // 31 Feb: net/mail refuses it too
	}
	return t, true
}

// digits reads a decimal number of between lo and hi digits.
func digits(s string, lo, hi int) (int, bool) {
	if len(s) < lo || len(s) > hi {
		return 0, false
	}
	n := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, true
}
