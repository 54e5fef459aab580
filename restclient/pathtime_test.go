package restclient

import (
	"testing"
	"time"
)

// TestUTCLayoutFormat checks how the client writes times into paths.
func TestUTCLayoutFormat(t *testing.T) {
	tm := time.Date(2024, 3, 1, 13, 4, 5, 999000000, time.FixedZone("CET", 3600))
	if got := utcStamp(tm); got != "20240301120405" {
		t.Fatalf("utcStamp = %q; want 20240301120405", got)
	}
	if got := millis(tm); got != "1709294645999" {
		t.Fatalf("millis = %q; want 1709294645999", got)
	}
}
