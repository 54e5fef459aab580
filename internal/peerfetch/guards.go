package peerfetch

import (
	"sync"
	"sync/atomic"
	"time"
)

// nonceSet remembers the nonces of requests answered within MaxSkew, so
// that a request recorded on the network is answered once: a replay
// within the window is refused, and one after it is too old anyway.
type nonceSet struct {
	mu    sync.Mutex
	seen  map[[12]byte]time.Time
	swept time.Time
}

// maxNonces bounds the set: a replica making more requests than this
// within MaxSkew has its oldest forgotten early (they are too old a
// minute later all the same).
const maxNonces = 1 << 18

// add records nonce at now and reports whether it was new.
func (s *nonceSet) add(nonce []byte, now time.Time) bool {
	var k [12]byte
	copy(k[:], nonce)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.seen == nil {
		s.seen = map[[12]byte]time.Time{}
	}
	if now.Sub(s.swept) > MaxSkew/4 || len(s.seen) >= maxNonces {
		for n, at := range s.seen {
			if now.Sub(at) > 2*MaxSkew || len(s.seen) >= maxNonces {
				delete(s.seen, n)
			}
		}
		s.swept = now
	}
	if _, dup := s.seen[k]; dup {
		return false
	}
	s.seen[k] = now
	return true
}

// everyMinute lets something happen at most once a minute.
type everyMinute struct{ last atomic.Int64 }

func (e *everyMinute) allow() bool {
	now := time.Now().UnixNano()
	last := e.last.Load()
	return now-last >= int64(time.Minute) && e.last.CompareAndSwap(last, now)
}

// downFor is how long a replica that failed to answer is not asked
// again: one whose pod died stays in the heartbeats for up to
// cluster.LiveFor, and each FETCH would wait for its dial to fail.
const downFor = 10 * time.Second

// downSet remembers replicas that failed to answer.
type downSet struct {
	mu    sync.Mutex
	until map[string]time.Time
}

func (d *downSet) mark(replica string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.until == nil {
		d.until = map[string]time.Time{}
	}
	d.until[replica] = time.Now().Add(downFor)
}

func (d *downSet) isDown(replica string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	t, ok := d.until[replica]
	if ok && time.Now().After(t) {
		delete(d.until, replica)
		return false
	}
	return ok
}
