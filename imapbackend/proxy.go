package imapbackend

import (
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/directbridge/directbridge/internal/director"
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
	// draining: this replica is shutting down. The link was closed for
	// writing, so that the home ends the session after the command it
	// runs, whose answer still comes through; then the client gets BYE.
	draining atomic.Bool
	done     chan struct{}
}

// proxy relays f's connection to link until either side ends it.
func (s *Server) proxy(f *frontConn, link *director.Link) {
	r := &relay{client: f.c, link: link, done: make(chan struct{})}
	if !s.addRelay(r) {
		f.write("* BYE [UNAVAILABLE] Server shutting down; reconnect later\r\n")
		f.c.Close()
		link.Close()
		return
	}
	f.c.SetDeadline(time.Time{})
	go func() {
		defer s.dropRelay(r)
		defer close(r.done)
		var wg sync.WaitGroup
		wg.Add(1)
		go func() { // client → home: what the client sent after LOGIN first
			defer wg.Done()
			copyWithDeadline(link, f.br)
			link.CloseWrite() // the home sees the client's end
		}()
		copyWithDeadline(r.client, link) // home → client
		if r.draining.Load() {
			r.client.SetWriteDeadline(time.Now().Add(time.Second))
			r.client.Write([]byte("* BYE [UNAVAILABLE] Server shutting down; reconnect later\r\n"))
		}
		r.client.Close()
		link.Close()
		wg.Wait()
	}()
}

// copyWithDeadline copies src to dst, each write bounded by
// proxyWriteTimeout.
func copyWithDeadline(dst net.Conn, src io.Reader) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			dst.SetWriteDeadline(time.Now().Add(proxyWriteTimeout))
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// addRelay registers r for Shutdown; false once shut down.
func (s *Server) addRelay(r *relay) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.relays[r] = struct{}{}
	return true
}

func (s *Server) dropRelay(r *relay) {
	s.mu.Lock()
	delete(s.relays, r)
	s.mu.Unlock()
}

// drain ends a relay for Shutdown: the home finishes the command it
// runs and ends the session, the client gets its answer, then BYE.
func (r *relay) drain() {
	r.draining.Store(true)
	r.link.CloseWrite()
}
