package readall

import (
	"bytes"
	"strings"
	"testing"
	"testing/iotest"
)

func TestSized(t *testing.T) {
	data := strings.Repeat("x", 100000)
	got, err := Sized(strings.NewReader(data), int64(len(data)), 1<<20)
	if err != nil || string(got) != data {
		t.Fatalf("read %d bytes, %v", len(got), err)
	}
	if cap(got) >= len(data)*5/4 { // the allocator rounds to whole pages; doubling would show
		t.Errorf("buffer of %d for %d bytes: grown instead of sized", cap(got), len(data))
	}
	over, _ := Sized(strings.NewReader(data), 10, 1000)
	if len(over) != 1001 {
		t.Errorf("over the limit: %d bytes; want limit+1", len(over))
	}
	unknown, err := Sized(bytes.NewReader([]byte("abc")), 0, 10)
	if err != nil || string(unknown) != "abc" {
		t.Errorf("unknown size: %q, %v", unknown, err)
	}
}

// TestSizedGrowsOnceToTheAnnouncedSize: a body larger than what is
// reserved up front costs one buffer of its size (and the first
// reservation), not a doubling series.
func TestSizedGrowsOnceToTheAnnouncedSize(t *testing.T) {
	n := maxUpFront*2 + 12345
	data := bytes.Repeat([]byte("y"), n)
	got, err := Sized(iotest.HalfReader(bytes.NewReader(data)), int64(n), int64(n)*2)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read %d bytes, %v", len(got), err)
	}
	if cap(got) > n+4096 {
		t.Errorf("buffer of %d for %d announced bytes", cap(got), n)
	}
	// A client announcing much and sending little holds maxUpFront at most.
	small, err := Sized(strings.NewReader("abc"), 40<<20, 50<<20)
	if err != nil || string(small) != "abc" || cap(small) > maxUpFront+1 {
		t.Errorf("announced 40 MiB, sent 3 bytes: %q, cap %d, %v", small, cap(small), err)
	}
	// No size announced (SMTP without SIZE): a small body costs about
	// its size, not a large piece.
	tenK := bytes.Repeat([]byte("z"), 10_000)
	if got, err := Sized(bytes.NewReader(tenK), 0, int64(n)); err != nil || !bytes.Equal(got, tenK) || cap(got) > 64<<10 {
		t.Errorf("10 KB without a size: %d bytes in a buffer of %d, %v", len(got), cap(got), err)
	}
	// Sent more than announced: still read whole, up to the limit.
	more, err := Sized(bytes.NewReader(data), 1000, int64(n))
	if err != nil || !bytes.Equal(more, data) || cap(more) != n {
		t.Errorf("announced 1000, sent %d: read %d (buffer %d), %v", n, len(more), cap(more), err)
	}
}
