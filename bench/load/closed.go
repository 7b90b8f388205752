package load

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// ClosedOptions configures a closed-loop run.
type ClosedOptions struct {
	Conns    int           // requests kept in flight, one per connection (> 0)
	Duration time.Duration // no request starts after this long
	MaxReqs  int           // and no more than this many start (0: no bound but Duration)
}

// RunClosed keeps Conns requests in flight, each connection sending its
// next request as soon as its previous reply ended, for Duration: the
// saturation throughput. Latency is measured from the actual send.
func RunClosed(ctx context.Context, c *Client, o ClosedOptions) (*Result, error) {
	if o.Conns <= 0 || o.Duration <= 0 {
		return nil, fmt.Errorf("load: closed loop needs positive conns and duration, got %d for %v", o.Conns, o.Duration)
	}
	start := time.Now()
	stop := start.Add(o.Duration)
	rec := newRecorder(start)
	var budget atomic.Int64
	budget.Store(int64(o.MaxReqs))
	var wg sync.WaitGroup
	for range o.Conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil && time.Now().Before(stop) {
				if o.MaxReqs > 0 && budget.Add(-1) < 0 {
					return
				}
				rec.sent.Add(1)
				t0 := time.Now()
				out, err := c.do()
				rec.record(t0, out, err)
			}
		}()
	}
	wg.Wait()
	res := rec.result("closed")
	res.Conns = o.Conns
	return res, ctx.Err()
}
