package fakeprovider_test

import (
	"slices"
	"testing"
)

func TestBehindTheBridgesBack(t *testing.T) {
	p := newProvider(t)
	u1, err := p.Deliver(alice, "INBOX", msg(1))
	must(t, err)
	u2, _ := p.Deliver(alice, "INBOX", msg(2))
	must(t, p.SetReadBehind(alice, "INBOX", u1, true))
	must(t, p.Remove(alice, "INBOX", u2))
	if err := p.Remove(alice, "INBOX", u2); err == nil {
		t.Fatal("removing a removed message succeeded")
	}
	if _, err := p.Deliver("carol@direct.example", "INBOX", msg(3)); err == nil {
		t.Fatal("delivered to a mailbox that does not exist")
	}
	s, err := p.Snapshot(alice, "INBOX")
	must(t, err)
	if !slices.Equal(s.UIDs(), []int64{u1}) || !s.Messages[0].Read || s.NextUID != 3 || s.Clock != 4 {
		t.Fatalf("Snapshot = %+v", s)
	}
	var ops []string
	for _, e := range p.Journal() {
		if !e.Behind {
			t.Errorf("event %+v not marked Behind", e)
		}
		ops = append(ops, e.Op)
	}
	if !slices.Equal(ops, []string{"Deliver", "Deliver", "SetReadBehind", "Remove"}) {
		t.Fatalf("journal ops %v", ops)
	}
	// None of this goes through the provider's methods.
	if n := len(p.CallCounts()); n != 0 {
		t.Fatalf("calls counted: %v", p.CallCounts())
	}
}

// TestJournalBracketsChanges: Clock read before and after a change
// brackets its event; reads advance nothing.
func TestJournalBracketsChanges(t *testing.T) {
	p := newProvider(t)
	c0 := p.Clock()
	must(t, p.Save(ctx, aliceAuth, "INBOX", [][]byte{msg(1), msg(2)}))
	p.UIDs(ctx, aliceAuth, "INBOX")
	must(t, p.Copy(ctx, aliceAuth, "INBOX", "INBOX.Drafts", []int64{2, 1}))
	c1 := p.Clock()
	j := p.Journal()
	if c1-c0 != 2 || len(j) != 2 {
		t.Fatalf("clock %d..%d, journal %+v", c0, c1, j)
	}
	save, cp := j[0], j[1]
	if !slices.Equal(save.New, []int64{1, 2}) || len(save.Raws) != 2 || string(save.Raws[1]) != string(msg(2)) {
		t.Fatalf("Save event %+v", save)
	}
	if cp.Op != "Copy" || cp.Dest != "INBOX.Drafts" || !slices.Equal(cp.UIDs, []int64{1, 2}) || !slices.Equal(cp.New, []int64{1, 2}) {
		t.Fatalf("Copy event %+v", cp)
	}
}
