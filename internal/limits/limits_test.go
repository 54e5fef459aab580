package limits

import (
	"errors"
	"strings"
	"testing"
)

// TestDeriveRefusesLimitsThatCannotHold: under a file limit of 200 the
// default total (18, 9 before login) is below the per-address limit of
// 20, so one address could fill it: Derive refuses and names the file
// limit that would do, which then passes; so do the defaults at a large
// limit. Explicit limits that leave users no share, or a prefix smaller
// than an address, are refused too.
func TestDeriveRefusesLimitsThatCannotHold(t *testing.T) {
	lim, err := Derive(Limits{PerAddress: 20}, FileLimit{Soft: 200, Hard: 200})
	if !errors.Is(err, ErrLimits) {
		t.Fatalf("file limit 200: %v; want ErrLimits", err)
	}
	if lim.Total != 18 || lim.PreAuthTotal != 9 {
		t.Errorf("file limit 200: total %d, pre-login %d; want 18 and 9", lim.Total, lim.PreAuthTotal)
	}
	if msg := err.Error(); !strings.Contains(msg, "per-address limit 20") || !strings.Contains(msg, "at least 288") {
		t.Errorf("the error does not say why and what would do: %q", msg)
	}
	if _, err := Derive(Limits{PerAddress: 20}, FileLimit{Soft: 287}); err == nil {
		t.Error("file limit 287 (total 39, 19 before login) was accepted")
	}
	if _, err := Derive(Limits{PerAddress: 20}, FileLimit{Soft: 288}); err != nil {
		t.Errorf("file limit 288, the one the error named: %v", err)
	}

	lim, err = Derive(Limits{}, FileLimit{Soft: 1 << 20, Hard: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	if lim.Total != 10000 || lim.PreAuthTotal != 5000 || lim.PerAddress != 20 || lim.PerPrefix != 80 {
		t.Errorf("defaults: %+v", lim)
	}
	if lim, _ := Derive(Limits{}, FileLimit{Soft: ^uint64(0)}); lim.Total != 10000 {
		t.Errorf("an unlimited file limit gives a total of %d; want 10000", lim.Total)
	}

	big := FileLimit{Soft: 1 << 20}
	for name, l := range map[string]Limits{
		"no share for users":      {Total: 100, PreAuthTotal: 100},
		"pre-login below address": {Total: 100, PreAuthTotal: 10, PerAddress: 20},
		"prefix below address":    {PerPrefix: 10},
		"address above any total": {PerAddress: 100000},
	} {
		_, err := Derive(l, big)
		if !errors.Is(err, ErrLimits) {
			t.Errorf("%s: %v; want ErrLimits", name, err)
		}
		if err != nil && strings.Contains(err.Error(), "would do") {
			t.Errorf("%s: a file limit is named that would not do: %v", name, err)
		}
	}
}

// TestDeriveLowersDefaultPerAddress: with the per-address limit left to
// its default, a file limit of 200 (total 18, 9 before login) lowers it
// to 4 instead of refusing, and says so (Lowered 20); the prefix limit
// stays within the pre-login total. At a large file limit nothing is
// lowered.
func TestDeriveLowersDefaultPerAddress(t *testing.T) {
	lim, err := Derive(Limits{}, FileLimit{Soft: 200, Hard: 200})
	if err != nil {
		t.Fatalf("file limit 200 with the default per-address limit: %v", err)
	}
	if lim.PerAddress != 4 || lim.Lowered != 20 || lim.PreAuthTotal != 9 || lim.PerPrefix != 9 {
		t.Errorf("file limit 200: %+v; want per-address 4 (lowered from 20), pre-login 9, per-prefix 9", lim)
	}
	if got := FileLimitFor(20); got != 288 {
		t.Errorf("FileLimitFor(20) = %d; want 288", got)
	}
	lim, err = Derive(Limits{}, FileLimit{Soft: 288})
	if err != nil || lim.PerAddress != 20 || lim.Lowered != 0 {
		t.Errorf("file limit 288: %+v %v; want the default 20, not lowered", lim, err)
	}
}
