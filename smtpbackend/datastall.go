package smtpbackend

import (
	"net"
	"sync/atomic"
	"time"

	"github.com/directbridge/directbridge/internal/limits"
)

// go-smtp (v0.25, data.go, dataReader.Read: net/textproto's end-of-data
// state machine) loses a CR that follows another CR: after "…\r" and then
// "\r\n.\r\n" it takes the dot line for data and waits for more, while the
// client waits for the reply, until the five-minute read timeout. The
// bytes it holds are out of reach (its read loop keeps them until the
// caller's buffer is full), so the bridge cannot see the end of data
// itself; instead a DATA that receives nothing for Config.DataIdle (30 s)
// is cut short and answered 451 4.4.2, saying that the end of data may
// have been missed after a bare CR. RFC 5321 §4.5.3.2.5 allows a server
// three minutes per data block; 30 s of silence inside a message's data
// is far beyond what a live client pauses.

// DefaultDataIdle is Config.DataIdle's default.
const DefaultDataIdle = 30 * time.Second

// watchData cuts the read of conn short when nothing arrives for idle
// during DATA. It returns whether it did, and a stop function.
func watchData(conn net.Conn, idle time.Duration) (stalled *atomic.Bool, stop func()) {
	stalled = &atomic.Bool{}
	if limits.LastRead(conn).IsZero() {
		return stalled, func() {} // not a guarded connection: no clock to read
	}
	done := make(chan struct{})
	since := time.Now()
	go func() {
		t := time.NewTicker(min(idle/4, time.Second))
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
			}
			last := limits.LastRead(conn)
			if last.Before(since) {
				last = since
			}
			if time.Since(last) >= idle {
				stalled.Store(true)
				conn.SetReadDeadline(time.Now()) // the blocked read returns
				return
			}
		}
	}()
	return stalled, func() { close(done) }
}
