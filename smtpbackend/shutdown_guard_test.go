package smtpbackend_test

import (
	"bufio"
	"bytes"
	"context"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/directbridge/directbridge/sandbox"
)

// TestShutdownGraceExpiredKeepsSentRecord: when Shutdown's grace ends while
// a transaction still waits for the provider, Shutdown closes the
// connection and go-smtp calls session.Logout while Data runs on. Logout
// must not clear the credentials Data still uses (the race detector would
// see it): the provider's acceptance is recorded under the right user.
func TestShutdownGraceExpiredKeepsSentRecord(t *testing.T) {
	h := newHarness(t, nil)
	c := h.login(t, aliceAddr)
	subject := h.subject("shutdown race")
	h.sb.InjectFault("Send", sandbox.Fault{Latency: 700 * time.Millisecond, Times: 1})
	done := make(chan error, 1)
	go func() {
		_, err := submit(c, aliceAddr, []string{bobAddr}, simple(subject, "x\n"))
		done <- err
	}()
	time.Sleep(300 * time.Millisecond) // DATA is waiting for the provider
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_ = h.srv.Shutdown(ctx)
	err := <-done
	time.Sleep(time.Second) // let Data finish after its connection was closed
	got := h.withSubject(t, bobAddr, "INBOX", subject)
	rec, err2 := h.store.RecentSent(ctxT(t), aliceAddr, time.Now().Add(-time.Minute), 10)
	t.Logf("client saw %v; bob has %d copies; sent records for alice: %d (%v)", err, len(got), len(rec), err2)
	if len(got) == 1 && len(rec) == 0 {
		t.Errorf("the provider delivered the message but the bridge recorded it under no user (Logout cleared the session mid-Data)")
	}
}

// TestPreAuthDataIsBounded: strangers cannot make the server hold large
// lines: before AUTH a connection may send only a small budget, then it
// is dropped, and the heap does not grow with what they send.
func TestPreAuthDataIsBounded(t *testing.T) {
	h := newHarness(t, nil)
	const conns = 6
	const lineBytes = 30 << 20
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	chunk := bytes.Repeat([]byte("A"), 1<<20)
	for i := 0; i < conns; i++ {
		c, err := net.Dial("tcp", h.subAddr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		br := bufio.NewReader(c)
		if _, err := br.ReadString('\n'); err != nil { // greeting
			t.Fatal(err)
		}
		c.Write([]byte("NOOP "))
		sent := 0
		for ; sent < lineBytes; sent += len(chunk) {
			c.SetWriteDeadline(time.Now().Add(5 * time.Second))
			if _, err := c.Write(chunk); err != nil {
				break
			}
		}
		if sent >= lineBytes {
			t.Fatalf("connection %d: the server read a %d MiB line before authentication", i, lineBytes>>20)
		}
	}
	runtime.GC()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	grown := int64(after.HeapInuse) - int64(before.HeapInuse)
	if grown > 32<<20 {
		t.Errorf("heap grew by %d MiB for %d unauthenticated connections", grown>>20, conns)
	}
	// An authenticated client still may send long lines.
	c := h.login(t, aliceAddr)
	mustSubmit(t, c, aliceAddr, []string{bobAddr}, simple(h.subject("after strangers"), strings.Repeat("B", 1<<20)+"\n"))
}

// TestShutdownRefusesNewTransactions: once a shutdown has begun, an open
// connection may finish the transaction it is in but not start another
// (MAIL gets 421): otherwise a client submitting message after message
// would keep DATA busy until the grace ends, and the last send would be
// cut off after the provider took it, to be submitted again: a duplicate.
func TestShutdownRefusesNewTransactions(t *testing.T) {
	h := newHarness(t, nil)
	c := h.login(t, aliceAddr)
	h.sb.InjectFault("Send", sandbox.Fault{Latency: 800 * time.Millisecond})
	type result struct {
		subject string
		err     error
	}
	results := make(chan result, 3)
	go func() {
		for i := 0; i < 3; i++ {
			s := h.subject("during shutdown")
			_, err := submit(c, aliceAddr, []string{bobAddr}, simple(s, "x\n"))
			results <- result{s, err}
			if err != nil {
				break
			}
		}
		close(results)
	}()
	time.Sleep(200 * time.Millisecond) // first DATA under way
	ctx, cancel := context.WithTimeout(context.Background(), 1200*time.Millisecond)
	defer cancel()
	h.srv.Shutdown(ctx)
	var acked, unacked []string
	for r := range results {
		if r.err == nil {
			acked = append(acked, r.subject)
		} else {
			t.Logf("%q: %v", r.subject, r.err)
			unacked = append(unacked, r.subject)
		}
	}
	time.Sleep(1500 * time.Millisecond) // the provider finishes what it was given
	h.sb.ClearFaults()
	for _, s := range unacked {
		if n := len(h.withSubject(t, bobAddr, "INBOX", s)); n > 0 {
			t.Errorf("message %q was delivered by the provider but the client got no 250 (it will resend it): "+
				"a transaction was started after Shutdown began", s)
		}
	}
	t.Logf("acknowledged after Shutdown began: %d", len(acked))
}
