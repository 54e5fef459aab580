package imapbackend

import (
	"context"
	"crypto/tls"
	"net"
	"syscall"
	"time"

	"github.com/directbridge/directbridge/internal/limits"
)

// A command may wait for the provider for up to CallTimeout. A client
// that hangs up meanwhile (imaptest's stalled clients did, and the
// connection then sat in CLOSE-WAIT) should not keep the command running
// nor hold one of the user's connection slots: go-imap reads nothing
// while a command runs, so it cannot notice. Every command's context is
// therefore watched: while it runs, the socket is asked every
// peerCheckInterval whether the client closed its side (a FIN received,
// Linux's POLLRDHUP, which reads nothing of what the client sent). Then
// the command's context is cancelled (its waits and provider calls end at
// once) and the connection's slot is given back.

// peerCheckInterval is how often a running command looks at its socket.
// The first look comes after one interval: most commands end sooner.
const peerCheckInterval = 500 * time.Millisecond

// rawConn finds the socket under c, through TLS and the bridge's own
// wrappers; nil when there is none (a pipe in tests).
func rawConn(c net.Conn) syscall.RawConn {
	for range 8 {
		switch x := c.(type) {
		case *tls.Conn:
			c = x.NetConn()
		case *limits.Conn:
			c = x.Conn
		case interface{ Unwrap() net.Conn }:
			c = x.Unwrap()
		case syscall.Conn:
			rc, err := x.SyscallConn()
			if err != nil {
				return nil
			}
			return rc
		default:
			return nil
		}
	}
	return nil
}

// watchPeer returns a context that is cancelled with ctx, or when the
// client of conn has hung up; gone is then called once, before the
// cancellation. stop ends the watch.
func watchPeer(ctx context.Context, conn net.Conn, gone func()) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	rc := rawConn(conn)
	if rc == nil {
		return ctx, cancel
	}
	go func() {
		t := time.NewTicker(peerCheckInterval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if peerClosed(rc) {
					gone()
					cancel()
					return
				}
			}
		}
	}()
	return ctx, cancel
}
