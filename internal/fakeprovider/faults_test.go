package fakeprovider_test

import (
	"context"
	"testing"
	"time"

	"github.com/directbridge/directbridge/internal/fakeprovider"
	"github.com/directbridge/directbridge/upstream"
)

// TestUnavailableDoesNothing: an injected ErrTemporary comes before the
// operation runs.
func TestUnavailableDoesNothing(t *testing.T) {
	p := newProvider(t)
	p.SetFaults(fakeprovider.Faults{Unavailable: 1})
	wantClass(t, p.Save(ctx, aliceAuth, "INBOX", [][]byte{msg(1)}), upstream.ErrTemporary)
	_, err := p.UIDs(ctx, aliceAuth, "INBOX")
	wantClass(t, err, upstream.ErrTemporary)
	if n := len(p.Journal()); n != 0 || p.FaultsInjected() != 2 {
		t.Fatalf("journal %d events, %d faults injected", n, p.FaultsInjected())
	}
	p.SetFaults(fakeprovider.Faults{})
	if got := uids(t, p, "INBOX"); len(got) != 0 {
		t.Fatalf("a failed Save saved: %v", got)
	}
}

// TestLostAnswerIsCarriedOut: a change whose answer is lost was made;
// reads are never "lost", they simply answer.
func TestLostAnswerIsCarriedOut(t *testing.T) {
	p := newProvider(t)
	p.SetFaults(fakeprovider.Faults{LostAnswer: 1})
	wantClass(t, p.Save(ctx, aliceAuth, "INBOX", [][]byte{msg(1)}), upstream.ErrUnknownOutcome)
	got := uids(t, p, "INBOX")
	if len(got) != 1 {
		t.Fatalf("UIDs = %v; the lost Save should have saved", got)
	}
	j := p.Journal()
	if len(j) != 1 || !j[0].Lost || j[0].Op != "Save" {
		t.Fatalf("journal %+v", j)
	}
	// A refused change whose answer is lost is unknown to the caller too.
	wantClass(t, p.SetRead(ctx, aliceAuth, "INBOX", []int64{99}, true), upstream.ErrUnknownOutcome)
}

// TestFaultsByMethod: Faults.Methods limits the faults.
func TestFaultsByMethod(t *testing.T) {
	p := newProvider(t)
	p.SetFaults(fakeprovider.Faults{Unavailable: 1, Methods: []string{"Save"}})
	wantClass(t, p.Save(ctx, aliceAuth, "INBOX", [][]byte{msg(1)}), upstream.ErrTemporary)
	must(t, p.CheckCredentials(ctx, aliceAuth))
}

// TestLatency: calls take their latency; a context that ends before the
// operation runs leaves it undone (ErrTemporary), one that ends after
// leaves a change's outcome unknown.
func TestLatency(t *testing.T) {
	p := fakeprovider.New(fakeprovider.Options{Users: map[string]string{alice: alicePW},
		Latency: fakeprovider.Latency{Min: 40 * time.Millisecond, Max: 40 * time.Millisecond}})
	start := time.Now()
	must(t, p.CheckCredentials(ctx, aliceAuth))
	if d := time.Since(start); d < 40*time.Millisecond {
		t.Fatalf("call took %v; want 40ms", d)
	}
	early, cancel := context.WithTimeout(ctx, 5*time.Millisecond)
	defer cancel()
	wantClass(t, p.Save(early, aliceAuth, "INBOX", [][]byte{msg(1)}), upstream.ErrTemporary)
	late, cancel2 := context.WithTimeout(ctx, 30*time.Millisecond)
	defer cancel2()
	wantClass(t, p.Save(late, aliceAuth, "INBOX", [][]byte{msg(2)}), upstream.ErrUnknownOutcome)
	p.SetLatency(fakeprovider.Latency{})
	if got := uids(t, p, "INBOX"); len(got) != 1 {
		t.Fatalf("UIDs = %v; want the second Save only", got)
	}
}

// TestSeedFixesTheDraws: the same seed injects the same faults into the
// same sequence of calls.
func TestSeedFixesTheDraws(t *testing.T) {
	run := func() []bool {
		p := fakeprovider.New(fakeprovider.Options{Users: map[string]string{alice: alicePW}, Seed: 7,
			Faults: fakeprovider.Faults{Unavailable: 0.5}})
		var out []bool
		for range 32 {
			out = append(out, p.CheckCredentials(ctx, aliceAuth) != nil)
		}
		return out
	}
	a, b := run(), run()
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("draw %d differs between two runs of one seed", i)
		}
	}
}
