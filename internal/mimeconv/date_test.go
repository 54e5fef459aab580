package mimeconv

import (
	"fmt"
	"math/rand/v2"
	"net/mail"
	"testing"
)

// TestQuickDateAgreesWithNetMail: wherever the hand-written reader
// accepts a date, net/mail reads the same instant and offset; and the
// forms it leaves alone still parse through net/mail.
func TestQuickDateAgreesWithNetMail(t *testing.T) {
	cases := []string{
		"Mon, 02 Jan 2026 15:04:05 +0000",
		"Mon, 2 Jan 2026 15:04:05 -0700",
		"2 Jan 2026 15:04 +0530",
		"Tue, 31 Mar 2026 23:59:59 -0000",
		"Fri, 13 Feb 2026 08:00:00 +0100 (CET)",
		"fri, 13 feb 2026 08:00:00 +0100",
		"Mon, 31 Feb 2026 15:04:05 +0000", // no such day
		"Mon, 02 Jan 2026 24:04:05 +0000",
		"Mon, 02 Jan 2026 15:04:05 GMT",
		"Mon, 02 Jan 26 15:04:05 +0000",
		"Mon, 02 Foo 2026 15:04:05 +0000",
		"Mon, 02 Jan 2026 15:04:05 +00",
		"garbage",
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 2000; i++ {
		zone := fmt.Sprintf("%c%02d%02d", "+-"[rng.IntN(2)], rng.IntN(15), rng.IntN(60))
		cases = append(cases, fmt.Sprintf("%s %d %s %d %02d:%02d:%02d %s",
			[]string{"Mon,", "Tue,", ""}[rng.IntN(3)], 1+rng.IntN(31), months[rng.IntN(12)], 1970+rng.IntN(100),
			rng.IntN(24), rng.IntN(60), rng.IntN(60), zone))
	}
	for _, c := range cases {
		want, werr := mail.ParseDate(c)
		got, ok := quickDate(c)
		if !ok {
			if pd := parseDate(c); werr == nil && !pd.Equal(want) {
				t.Errorf("%q: parseDate %v; net/mail %v", c, pd, want)
			}
			continue
		}
		if werr != nil {
			// net/mail refuses the comment form; without it, it must agree.
			if w2, err2 := mail.ParseDate(c[:len(c)-len(" (CET)")]); err2 == nil && got.Equal(w2) {
				continue
			}
			t.Errorf("%q: quick %v; net/mail refuses: %v", c, got, werr)
			continue
		}
		_, gotOff := got.Zone()
		_, wantOff := want.Zone()
		if !got.Equal(want) || gotOff != wantOff {
			t.Errorf("%q: quick %v; net/mail %v", c, got, want)
		}
	}
}

func BenchmarkParseDate(b *testing.B) {
	for range b.N {
		parseDate("Mon, 2 Jan 2026 15:04:05 -0700")
	}
}
