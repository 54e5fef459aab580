package msgbudget

import (
	"bytes"
	"errors"
	"io"
	"testing"
)

func TestBudget(t *testing.T) {
	b := New(10 << 20)
	if !b.Take(6<<20) || b.Take(6<<20) {
		t.Fatal("two messages of 6 MiB in a budget of 10 MiB: want the first taken, the second refused")
	}
	if !b.Take(4 << 20) {
		t.Fatal("4 MiB more, exactly filling the budget, refused")
	}
	b.Return(10 << 20)
	if b.InUse() != 0 {
		t.Fatalf("in use %d after every message returned", b.InUse())
	}
	if !b.Take(30 << 20) {
		t.Fatal("a message larger than the whole budget refused with nothing in flight")
	}
	b.Return(30 << 20)
	var none *Budget
	if !none.Take(1<<40) || New(0) != nil {
		t.Fatal("no budget must take everything")
	}
}

// TestReaderTakesAsBytesArrive: a DATA read through the budget takes
// what arrives, fails with ErrSpent past the bound, and gives it all back.
func TestReaderTakesAsBytesArrive(t *testing.T) {
	b := New(8 << 20)
	if !b.Take(4 << 20) { // another message in flight
		t.Fatal("take")
	}
	r := b.NewReader(bytes.NewReader(make([]byte, 6<<20)))
	_, err := io.Copy(io.Discard, r)
	if !errors.Is(err, ErrSpent) {
		t.Fatalf("6 MiB with 4 of 8 MiB in use: %v; want ErrSpent", err)
	}
	r.Close()
	b.Return(4 << 20)
	r = b.NewReader(bytes.NewReader(make([]byte, 6<<20)))
	if n, err := io.Copy(io.Discard, r); err != nil || n != 6<<20 {
		t.Fatalf("6 MiB alone: %d, %v", n, err)
	}
	if b.InUse() < 6<<20 {
		t.Errorf("in use %d while the message is held", b.InUse())
	}
	r.Close()
	if b.InUse() != 0 {
		t.Errorf("in use %d after Close", b.InUse())
	}
}
