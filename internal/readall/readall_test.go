package readall

import (
	"bytes"
	"strings"
	"testing"
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
