package limits

import (
	"bytes"
	"errors"
	"io"
	"testing"
)

func TestBudget(t *testing.T) {
	b := NewBudget(10 << 20)
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
	if !none.Take(1<<40) || NewBudget(0) != nil {
		t.Fatal("no budget must take everything")
	}
}

// TestReaderTakesAsBytesArrive: a DATA read through the budget takes
// what arrives, fails with ErrSpent past the bound, and gives it all back.
func TestReaderTakesAsBytesArrive(t *testing.T) {
	b := NewBudget(8 << 20)
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

// TestReserveCountsTheEncodedSize: once a message's request size is
// known, the reader holds that much, never less than it read; a message
// alone in flight gets it whatever its size, one beside others is
// refused past the bound, and Close gives it all back.
func TestReserveCountsTheEncodedSize(t *testing.T) {
	b := NewBudget(8 << 20)
	r := b.NewReader(bytes.NewReader(make([]byte, 3<<20)))
	if _, err := io.Copy(io.Discard, r); err != nil {
		t.Fatal(err)
	}
	if err := r.Reserve(1 << 20); err != nil || b.InUse() != 3<<20 {
		t.Fatalf("a request smaller than the bytes read: %v, %d in use; want the 3 MiB read kept", err, b.InUse())
	}
	if err := r.Reserve(20 << 20); err != nil || b.InUse() != 20<<20 {
		t.Fatalf("a request of 20 MiB, alone in flight: %v, %d in use; want it taken", err, b.InUse())
	}
	r.Close()
	if b.InUse() != 0 {
		t.Fatalf("%d in use after Close", b.InUse())
	}

	if !b.Take(2 << 20) { // another message in flight
		t.Fatal("take")
	}
	r = b.NewReader(bytes.NewReader(make([]byte, 1<<20)))
	if _, err := io.Copy(io.Discard, r); err != nil {
		t.Fatal(err)
	}
	if err := r.Reserve(6 << 20); err != nil {
		t.Fatalf("6 MiB beside 2 MiB in a budget of 8: %v", err)
	}
	if err := r.Reserve(7 << 20); !errors.Is(err, ErrSpent) || b.InUse() != 8<<20 {
		t.Fatalf("7 MiB beside 2 MiB: %v, %d in use; want ErrSpent and nothing more taken", err, b.InUse())
	}
	r.Close()
	b.Return(2 << 20)
	if b.InUse() != 0 {
		t.Fatalf("%d in use at the end", b.InUse())
	}
}
