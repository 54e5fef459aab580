package mailstore

import (
	"context"
	"sync"
)

// background runs the engine's own goroutines: pollers, the settle timer
// after APPENDs, the read marking that goes out on its own, read-ahead.
// Store.Close ends them and waits for them before the state store is
// closed, so that no timer writes into a closed store.
type background struct {
	mu     sync.Mutex
	closed bool
	wg     sync.WaitGroup
	ctx    context.Context // cancelled by close
	cancel context.CancelFunc
}

func newBackground() *background {
	ctx, cancel := context.WithCancel(context.Background())
	return &background{ctx: ctx, cancel: cancel}
}

// Go runs fn in a goroutine of its own with a context that ends at close;
// after close it runs nothing and returns false.
func (b *background) Go(fn func(ctx context.Context)) bool {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return false
	}
	b.wg.Add(1) // under mu: never after close began to wait
	b.mu.Unlock()
	go func() {
		defer b.wg.Done()
		fn(b.ctx)
	}()
	return true
}

// close cancels the goroutines' context and waits for them, or for ctx.
func (b *background) close(ctx context.Context) error {
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
	b.cancel()
	done := make(chan struct{})
	go func() {
		b.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
