package downstream

import (
	"bufio"
	"context"
	"sync"
	"time"

	"github.com/agentbridge/bridge/internal/sse"
)

// keepAlive writes an SSE keep-alive comment every interval until stop is
// called or ctx ends, for streams that follow an exchange log (where the
// writer goroutine blocks on the log, not on a ticker). write must be safe
// to call from another goroutine; gone is called when a write fails (the
// client left). A non-positive interval starts nothing. stop waits for the
// ticker goroutine to end.
func keepAlive(ctx context.Context, interval time.Duration, write func([]byte) error, gone func()) (stop func()) {
	if interval <= 0 {
		return func() {}
	}
	var wg sync.WaitGroup
	done := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-tick.C:
				if write(sse.KeepAlive) != nil {
					gone()
					return
				}
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

// syncWrite returns a write-and-flush to w that is safe to call from two
// goroutines: a stream's own and its keep-alive ticker.
func syncWrite(w *bufio.Writer) func([]byte) error {
	var mu sync.Mutex
	return func(b []byte) error {
		mu.Lock()
		defer mu.Unlock()
		if _, err := w.Write(b); err != nil {
			return err
		}
		return w.Flush()
	}
}
