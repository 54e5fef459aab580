package imapbackend

import (
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/directbridge/directbridge/internal/director"
	"github.com/directbridge/directbridge/internal/limits"
)

// proxyWriteTimeout bounds one write of relayed bytes: a client, or a
// home, that stops reading for this long has its connection closed, as
// go-imap's own writes would time out.
const proxyWriteTimeout = 5 * time.Minute

// relay is a client connection this replica relays to the user's home
// replica (front.go): its bytes pass unchanged both ways.
type relay struct {
	client net.Conn
	link   *director.Link
	home   string // the home replica's id
	// draining: this replica is shutting down. The link's end frame went
	// to the home, which ends the session after the command it runs,
	// whose answer still comes through; then the client gets BYE.
	draining atomic.Bool
	done     chan struct{}
}

// proxy relays f's connection to link, opened to replica home, until
// either side ends it.
func (s *Server) proxy(f *frontConn, link *director.Link, home string) {
	r := &relay{client: f.c, link: link, home: home, done: make(chan struct{})}
	if !track(s, s.relays, r) {
		f.write("* BYE [UNAVAILABLE] Server shutting down; reconnect later\r\n")
		f.c.Close()
		link.Close()
		return
	}
	f.c.SetDeadline(time.Time{})
	// The home's answers reach the client as they come: the relay's reads
	// of the client wait all along and would never flush a corked
	// connection (only its timer would, corkDelay late, each answer).
	if cc, ok := limits.Under[*corkConn](f.c); ok {
		cc.uncork()
	}
	go func() {
		defer untrack(s, s.relays, r)
		defer close(r.done)
		var wg sync.WaitGroup
		wg.Add(1)
		go func() { // client → home: what the client sent after LOGIN first
			defer wg.Done()
			copyWithDeadline(link, f.br)
			// The home sees the client's clean end (not a broken link,
			// director.Incoming.Broke); the socket's end too, which its
			// check for clients gone (peergone.go) sees mid-command.
			link.CloseWrite()
		}()
		err := copyWithDeadline(r.client, link) // home → client
		switch {
		case r.draining.Load():
			r.client.SetWriteDeadline(time.Now().Add(time.Second))
			r.client.Write([]byte("* BYE [UNAVAILABLE] Server shutting down; reconnect later\r\n"))
		case director.IsBroke(err):
			// The home broke off (killed, its machine or the network
			// gone). The client retries what it had asked: once the
			// home is known dead, the retry finds the home's unfinished
			// change undecided, not under way (director.AwaitGone).
			s.cfg.Director.AwaitGone(home)
		default:
			// The home ended the session, or the client stopped
			// reading: either way the client left, cleanly for the
			// home (what it answered is not taken for lost).
			link.SetWriteDeadline(time.Now().Add(time.Second))
			link.CloseWrite()
		}
		r.client.Close()
		link.Close()
		wg.Wait()
	}()
}

// copyWithDeadline copies src to dst, each write bounded by
// proxyWriteTimeout, and returns the error that ended reading src (nil
// when a write failed).
func copyWithDeadline(dst net.Conn, src io.Reader) error {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			dst.SetWriteDeadline(time.Now().Add(proxyWriteTimeout))
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return nil
			}
		}
		if err != nil {
			return err
		}
	}
}

// drain ends a relay for Shutdown: the home finishes the command it
// runs and ends the session, the client gets its answer, then BYE.
func (r *relay) drain() {
	r.draining.Store(true)
	r.link.End() // the end frame alone: the command under way is not cut
}

// cut ends a relay at once: a Shutdown whose grace ran out.
func (r *relay) cut() {
	r.client.Close()
	r.link.Close()
}
