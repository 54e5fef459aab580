package state

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
)

// TestChangeFlagsConcurrent: changes of one message made at once by many
// goroutines all hold: each applies to the set kept when it is written.
func TestChangeFlagsConcurrent(t *testing.T) { eachBackend(t, testChangeFlagsConcurrent) }

func testChangeFlagsConcurrent(t *testing.T, open func() (*Store, error)) {
	s, err := open()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	var wg sync.WaitGroup
	for i := range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			kw := fmt.Sprintf("k%d", i)
			if _, err := s.ChangeFlags(ctx, "a@x", "INBOX", 7, []FlagChange{{UID: 1, Add: []string{kw}}}); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	got, err := s.Flags(ctx, "a@x", "INBOX", 7)
	if err != nil {
		t.Fatal(err)
	}
	if len(got[1]) != 40 {
		t.Fatalf("kept %d keywords of 40: %v", len(got[1]), got[1])
	}
	// Removal in another case, replacement, and the empty set.
	out, err := s.ChangeFlags(ctx, "A@X", "INBOX", 7, []FlagChange{{UID: 1, Del: []string{"K1"}}, {UID: 2, Add: []string{`\Flagged`, "$x", "$X"}}})
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(out[1], "k1") || len(out[1]) != 39 || !slices.Equal(out[2], []string{"$x", `\Flagged`}) {
		t.Fatalf("after: %v", out)
	}
	out, err = s.ChangeFlags(ctx, "a@x", "INBOX", 7, []FlagChange{{UID: 1, Replace: true}, {UID: 2, Replace: true, Add: []string{"$y"}}})
	if err != nil {
		t.Fatal(err)
	}
	got, _ = s.Flags(ctx, "a@x", "INBOX", 7)
	if len(out[1]) != 0 || got[1] != nil || !slices.Equal(got[2], []string{"$y"}) {
		t.Fatalf("after replace: %v, stored %v", out, got)
	}
}
