// Budget bounds the bytes of message bodies the bridge holds
// at once. A message in flight (an APPEND literal, an SMTP DATA) costs a
// few times its size while it is read, converted and handed to the
// provider. It is counted by its encoded size, the length of the
// provider request that carries it (restclient.SendSize,
// restclient.SaveSize), once that is known, and by the bytes read until
// then (Reader). Without a bound, a handful of clients sending their
// largest messages together would grow the process past its memory
// limit, and the kernel would end every session at once. With it, a
// message that would pass the bound is refused with a "try again later"
// answer (IMAP NO [LIMIT], SMTP 452 4.3.1), which clients retry.

package limits

import (
	"errors"
	"io"
	"sync"
)

// ErrSpent is the answer when the budget cannot take a message now.
var ErrSpent = errors.New("limits: too many message bytes in flight; try again later")

// Budget counts the message bytes in flight. A nil *Budget takes
// everything.
type Budget struct {
	limit int64
	mu    sync.Mutex
	used  int64
}

// NewBudget returns a budget of limit bytes; limit <= 0 means no bound.
func NewBudget(limit int64) *Budget {
	if limit <= 0 {
		return nil
	}
	return &Budget{limit: limit}
}

// Take reserves n bytes, or reports false when they would pass the
// bound. A message larger than the whole budget is taken when nothing
// else is in flight, so the bound never refuses a message for good.
func (b *Budget) Take(n int64) bool { return b.grow(0, n) }

// grow reserves n bytes more for a message that holds held bytes
// already: refused when they would pass the bound, unless the message is
// the only one in flight.
func (b *Budget) grow(held, n int64) bool {
	if b == nil || n <= 0 {
		return true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.used-held > 0 && b.used+n > b.limit {
		return false
	}
	b.used += n
	return true
}

// Return gives back n bytes taken before.
func (b *Budget) Return(n int64) {
	if b == nil || n <= 0 {
		return
	}
	b.mu.Lock()
	b.used -= n
	b.mu.Unlock()
}

// InUse is the number of bytes taken now.
func (b *Budget) InUse() int64 {
	if b == nil {
		return 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}

// step is how much a Reader takes at a time.
const step = 1 << 20

// Reader reads a message of unknown size (SMTP DATA), taking from the
// budget as the bytes arrive; a read past what the budget allows fails
// with ErrSpent. Close gives back what it took.
type Reader struct {
	r     io.Reader
	b     *Budget
	read  int64
	taken int64
}

// NewReader returns a Reader of r on budget b.
func (b *Budget) NewReader(r io.Reader) *Reader { return &Reader{r: r, b: b} }

func (r *Reader) Read(p []byte) (int, error) {
	// A step at a time: some readers (go-smtp's DATA) fill the whole
	// buffer before they return, and the bytes are counted on return.
	if len(p) > step {
		p = p[:step]
	}
	n, err := r.r.Read(p)
	r.read += int64(n)
	for r.read > r.taken {
		if !r.b.Take(step) {
			return n, ErrSpent
		}
		r.taken += step
	}
	return n, err
}

// Reserve makes the reader hold at least n bytes in all, taking what it
// lacks, or fails with ErrSpent. What the budget counts of a message is
// its encoded size, the bytes of the request that carries it to the
// provider (restclient.SendSize), as soon as that is known: JSON may
// make the request several times larger than the message (a control
// character is six bytes), and what the bridge holds of a message grows
// with its request, not with its raw bytes. The raw bytes stay held
// while the request is written, so the count never drops below them.
// A message alone in flight is taken whatever its size, as by Take.
func (r *Reader) Reserve(n int64) error {
	if n <= r.taken {
		return nil
	}
	if !r.b.grow(r.taken, n-r.taken) {
		return ErrSpent
	}
	r.taken = n
	return nil
}

// Close gives back the bytes taken.
func (r *Reader) Close() {
	r.b.Return(r.taken)
	r.taken = 0
}
