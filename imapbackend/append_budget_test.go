package imapbackend_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"

	"github.com/directbridge/directbridge/imapbackend"
	"github.com/directbridge/directbridge/internal/limits"
	"github.com/directbridge/directbridge/internal/memwatch"
	"github.com/directbridge/directbridge/restclient"
	"github.com/directbridge/directbridge/sandbox"
)

// TestAppendBudgetCountsEncodedBytes: while an APPEND is with the
// provider, the budget of message bytes in flight counts the size of the
// SaveRawMessages request that carries it (base64, a third more than
// the literal), and gives it all back afterwards.
func TestAppendBudgetCountsEncodedBytes(t *testing.T) {
	budget := limits.NewBudget(32 << 20)
	e := newEnv(t, options{cfg: func(c *imapbackend.Config) { c.Messages = budget }})
	c := e.login(alice, alicePW)
	raw := testMessage("budget") + strings.Repeat("x", 300_000) + "\r\n"
	want, err := restclient.SaveSize(auth(alice), int64(len(raw)))
	if err != nil {
		t.Fatal(err)
	}
	e.sandbox.InjectFault("SaveRawMessages", sandbox.Fault{Latency: 700 * time.Millisecond, Times: 1})
	done := make(chan error, 1)
	go func() {
		_, err := appendMsg(c, "INBOX", raw)
		done <- err
	}()
	var seen int64
	deadline := time.Now().Add(5 * time.Second)
	for seen != want && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
		seen = budget.InUse()
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if seen != want {
		t.Errorf("in flight while the provider had the message: %d bytes; want its request's %d (the literal is %d bytes)", seen, want, len(raw))
	}
	if budget.InUse() != 0 {
		t.Errorf("%d bytes still counted in flight", budget.InUse())
	}
	if n := e.count(alice, "INBOX"); n != 1 {
		t.Errorf("INBOX has %d messages; want 1", n)
	}
}

// BenchmarkAppendMemory measures a 20 MB APPEND over a real IMAP
// connection on the sandbox provider (in the same process, so its cost
// counts too; SaveRawMessages is read as it streams in). Run with
//
//	go test -run NONE -bench AppendMemory -benchtime 1x ./imapbackend/
//
// It reports peak-heap-MB, the highest Go heap in use above the heap
// before the APPEND (the client's copy of the message excluded), and
// VmHWM-MB, the rise of the process's peak resident memory (SQLite's
// copies of the stored blob, outside the Go heap, included). The target
// is 100 MB.
func BenchmarkAppendMemory(b *testing.B) {
	e := newEnv(b, options{})
	var sb strings.Builder
	sb.WriteString("From: alice@direct.example\r\nSubject: a large document\r\n\r\n")
	for i := 0; sb.Len() < 20_000_000-80; i++ {
		fmt.Fprintf(&sb, "line %07d of a long clinical document, plain ASCII text\r\n", i)
	}
	raw := []byte(sb.String())
	var peak, hwm int64
	for range b.N {
		c := e.login(alice, alicePW)
		if _, err := c.Select("INBOX", nil).Wait(); err != nil {
			b.Fatal(err)
		}
		w := memwatch.Start()
		cmd := c.Append("INBOX", int64(len(raw)), &imap.AppendOptions{})
		cmd.Write(raw)
		cmd.Close()
		_, err := cmd.Wait()
		p, h := w.Stop()
		if err != nil {
			b.Fatalf("APPEND of %d bytes: %v", len(raw), err)
		}
		peak, hwm = max(peak, p), max(hwm, h)
		c.Close()
	}
	b.ReportMetric(float64(peak)/1e6, "peak-heap-MB")
	b.ReportMetric(float64(hwm)/1e6, "VmHWM-MB")
	b.Logf("APPEND of %d bytes: peak heap +%.1f MB, VmHWM +%.1f MB", len(raw), float64(peak)/1e6, float64(hwm)/1e6)
}
