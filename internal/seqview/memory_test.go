package seqview

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/emersion/go-imap/v2"
)

// heap is the live heap after a full collection.
func heap() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// TestMemoryPerView measures what each idle connection costs on a
// 10,000-message folder: views share the folder's snapshot instead of
// copying it, so the cost must stay within the target of 50 KiB
// (the cloned message list cost about 150 KB). Heap sizes after a full
// collection are deterministic enough for a bound this far from the
// expected figure (a few hundred bytes).
func TestMemoryPerView(t *testing.T) {
	const msgs, views, limit = 10000, 1000, 50 << 10
	mb := NewMailbox(Config{UIDValidity: 1, UIDNext: 1})
	add := make([]NewMessage, msgs)
	for i := range add {
		fl := []imap.Flag{imap.FlagSeen}
		if i%7 == 0 {
			fl = append(fl, imap.FlagFlagged, "$Work")
		}
		add[i] = NewMessage{UID: imap.UID(2*i + 1), Flags: fl}
	}
	if err := mb.Add(add...); err != nil {
		t.Fatal(err)
	}
	add = nil
	vs := make([]*View, 0, views)
	before := heap()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	allocated := ms.TotalAlloc
	for i := range views {
		v, _, err := mb.Open(ViewOptions{ReadOnly: i%3 == 0})
		if err != nil {
			t.Fatal(err)
		}
		vs = append(vs, v)
	}
	runtime.ReadMemStats(&ms)
	// Everything SELECT allocates, the answer's lists included: the view
	// copies nothing of the folder.
	perOpen := (ms.TotalAlloc - allocated) / views
	t.Logf("SELECT allocates %d bytes", perOpen)
	if perOpen > limit {
		t.Errorf("SELECT allocates %d bytes on a %d-message folder, want at most %d", perOpen, msgs, limit)
	}
	check := func(what string) {
		t.Helper()
		after := heap()
		per := (int64(after) - int64(before)) / views
		t.Logf("%s: %d bytes per view", what, per)
		if per > limit {
			t.Errorf("%s: %d bytes per view on a %d-message folder, want at most %d", what, per, msgs, limit)
		}
	}
	check("after SELECT")

	// The folder changes (new mail, an expunge, flag changes) and every
	// session catches up: they must share the new snapshot too.
	if err := mb.Add(NewMessage{UID: 2*msgs + 1}); err != nil {
		t.Fatal(err)
	}
	mb.Expunge(5)
	for i := range 50 {
		mb.SetFlags(nil, FlagChange{UID: imap.UID(4*i + 1), Op: imap.StoreFlagsAdd, Flags: []imap.Flag{"$Later"}})
	}
	for _, v := range vs {
		if _, err := v.Updates(true); err != nil {
			t.Fatal(err)
		}
	}
	check("after changes and NOOP")
	runtime.KeepAlive(vs)
	runtime.KeepAlive(mb)
}

// BenchmarkUpdatesIdle is the cost of a NOOP with nothing new.
func BenchmarkUpdatesIdle(b *testing.B) {
	mb := NewMailbox(Config{})
	for i := range 10000 {
		if err := mb.Add(NewMessage{UID: imap.UID(i + 1)}); err != nil {
			b.Fatal(err)
		}
	}
	v, _, _ := mb.Open(ViewOptions{})
	b.ReportAllocs()
	for b.Loop() {
		if _, err := v.Updates(true); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkUpdatesFlagChange is the cost of catching up one flag change
// made by another session on a 10,000-message folder.
func BenchmarkUpdatesFlagChange(b *testing.B) {
	for _, n := range []int{100, 10000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			mb := NewMailbox(Config{})
			for i := range n {
				if err := mb.Add(NewMessage{UID: imap.UID(i + 1)}); err != nil {
					b.Fatal(err)
				}
			}
			v, _, _ := mb.Open(ViewOptions{})
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				i++
				mb.SetFlags(nil, FlagChange{UID: imap.UID(i%n + 1), Op: imap.StoreFlagsSet, Flags: []imap.Flag{imap.Flag(fmt.Sprint("k", i%2))}})
				if _, err := v.Updates(true); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
