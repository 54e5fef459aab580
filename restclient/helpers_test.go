package restclient

import (
	"time"

	"github.com/directbridge/directbridge/upstream/directapi"
)

// ts is the UTC time written as yyyyMMddHHmmss.
func ts(s string) directapi.Date {
	t, err := time.Parse(directapi.UTCLayout, s)
	if err != nil {
		panic(err)
	}
	return directapi.Date{Time: t}
}

// logsEqual compares logs, the TS fields by instant.
func logsEqual(a, b []directapi.DirectMessageLog) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := a[i], b[i]
		if !x.TS.Equal(y.TS.Time) || x.TS.IsZero() != y.TS.IsZero() {
			return false
		}
		x.TS, y.TS = directapi.Date{}, directapi.Date{}
		if x != y {
			return false
		}
	}
	return true
}
