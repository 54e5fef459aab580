package mailstore

import (
	"container/list"
	"sync"

	"github.com/emersion/go-imap/v2"
)

// rawCache keeps raw messages in memory, least recently used out first,
// up to a byte budget. The raw bytes of a UID never change while its
// UIDVALIDITY holds, so entries need no invalidation beyond that key. The
// cache holds health data: memory only, never written to disk.
type rawCache struct {
	mu    sync.Mutex
	limit int64
	size  int64
	order *list.List // of *rawEntry, most recent at the front
	items map[rawKey]*list.Element
	// onLookup, when set, is told of every hit and miss (for metrics).
	onLookup func(hit bool)
}

type rawKey struct {
	user     string
	folder   string
	validity uint32
	uid      imap.UID
}

type rawEntry struct {
	key rawKey
	raw []byte
}

func newRawCache(limit int64) *rawCache {
	return &rawCache{limit: limit, order: list.New(), items: map[rawKey]*list.Element{}}
}

func (c *rawCache) get(k rawKey) ([]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.items[k]
	if c.onLookup != nil {
		c.onLookup(ok)
	}
	if !ok {
		return nil, false
	}
	c.order.MoveToFront(e)
	return e.Value.(*rawEntry).raw, true
}

// put stores raw; a message larger than the whole budget is not kept.
func (c *rawCache) put(k rawKey, raw []byte) {
	if int64(len(raw)) > c.limit {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.items[k]; ok {
		c.order.MoveToFront(e)
		return
	}
	c.items[k] = c.order.PushFront(&rawEntry{key: k, raw: raw})
	c.size += int64(len(raw))
	for c.size > c.limit {
		last := c.order.Back()
		ent := last.Value.(*rawEntry)
		c.order.Remove(last)
		delete(c.items, ent.key)
		c.size -= int64(len(ent.raw))
	}
}

// peek looks an entry up without counting it or changing its place.
func (c *rawCache) peek(k rawKey) ([]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.items[k]
	if !ok {
		return nil, false
	}
	return e.Value.(*rawEntry).raw, true
}
