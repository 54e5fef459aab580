package peerfetch

import (
	"sync"
	"sync/atomic"
	"time"
)

// nonceSet remembers the nonces of requests answered within MaxSkew, so
// that a request recorded on the network is answered once: a replay
// within the window is refused, and one after it is too old anyway.
// Nonces are forgotten oldest first (order), once older than twice
// MaxSkew or when maxNonces are held.
type nonceSet struct {
	mu    sync.Mutex
	seen  map[[12]byte]bool
	order []seenNonce // in the order added
}

type seenNonce struct {
	nonce [12]byte
	at    time.Time
}

// maxNonces bounds the set. Reaching it takes more requests within
// 2*MaxSkew than the replicas of a cluster make; the oldest is forgotten
// then (only holders of the key can make requests that open).
const maxNonces = 1 << 18

// add records nonce at now and reports whether it was new.
func (s *nonceSet) add(nonce []byte, now time.Time) bool {
	var k [12]byte
	copy(k[:], nonce)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.seen == nil {
		s.seen = map[[12]byte]bool{}
	}
	drop := 0
	for drop < len(s.order) && (now.Sub(s.order[drop].at) > 2*MaxSkew || len(s.order)-drop >= maxNonces) {
		delete(s.seen, s.order[drop].nonce)
		drop++
	}
	if drop > 0 {
		s.order = append(s.order[:0], s.order[drop:]...)
	}
	if s.seen[k] {
		return false
	}
	s.seen[k] = true
	s.order = append(s.order, seenNonce{k, now})
	return true
}

// everyMinute lets something happen at most once a minute.
type everyMinute struct{ last atomic.Int64 }

func (e *everyMinute) allow() bool {
	now := time.Now().UnixNano()
	last := e.last.Load()
	return now-last >= int64(time.Minute) && e.last.CompareAndSwap(last, now)
}
