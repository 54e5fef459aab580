package cluster

import (
	"sync"
	"time"
)

// DownFor is how long a replica that failed to answer another's request
// is not asked again: one whose pod died stays in the heartbeats for up
// to LiveFor, and each request would wait for its dial to fail.
const DownFor = 10 * time.Second

// DownSet remembers replicas that failed to answer lately. The zero
// value is empty and ready.
type DownSet struct {
	mu    sync.Mutex
	until map[string]time.Time
}

// Mark records that replica failed to answer now.
func (d *DownSet) Mark(replica string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	now := time.Now()
	if d.until == nil {
		d.until = map[string]time.Time{}
	}
	for r, t := range d.until { // replicas' ids are per process: forget the past
		if now.After(t) {
			delete(d.until, r)
		}
	}
	d.until[replica] = now.Add(DownFor)
}

// IsDown reports whether replica failed to answer within DownFor.
func (d *DownSet) IsDown(replica string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	t, ok := d.until[replica]
	if ok && time.Now().After(t) {
		delete(d.until, replica)
		return false
	}
	return ok
}
