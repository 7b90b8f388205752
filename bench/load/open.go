package load

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// OpenOptions configures an open-loop run.
type OpenOptions struct {
	Rate     float64       // offered requests per second (> 0)
	Duration time.Duration // sending stops after this long
	MaxReqs  int           // and after this many requests (0: Rate*Duration)
	// MaxInFlight bounds requests outstanding at once (default 4096). When
	// reached, the next request waits; its latency still counts from its
	// intended send time.
	MaxInFlight int
}

// RunOpen sends c's request at a fixed rate and waits for every reply.
// Latencies are measured from each request's intended send time, so a
// stall is charged to every request that was due during it. It returns
// when all requests have finished or failed (each is bounded by the
// target's Timeout), or when ctx ends.
func RunOpen(ctx context.Context, c *Client, o OpenOptions) (*Result, error) {
	if o.Rate <= 0 || o.Duration <= 0 {
		return nil, fmt.Errorf("load: open loop needs a positive rate and duration, got %v/s for %v", o.Rate, o.Duration)
	}
	if o.MaxReqs <= 0 {
		o.MaxReqs = int(o.Rate*o.Duration.Seconds() + 0.5)
	}
	if o.MaxInFlight <= 0 {
		o.MaxInFlight = 4096
	}
	interval := time.Duration(float64(time.Second) / o.Rate)
	start := time.Now()
	rec := newRecorder(start)
	slots := make(chan struct{}, o.MaxInFlight)
	var wg sync.WaitGroup
	for i := 0; i < o.MaxReqs; i++ {
		due := start.Add(time.Duration(i) * interval)
		if due.Sub(start) >= o.Duration {
			break
		}
		if d := time.Until(due); d > 0 {
			t := time.NewTimer(d)
			select {
			case <-ctx.Done():
				t.Stop()
				wg.Wait()
				return rec.result("open"), ctx.Err()
			case <-t.C:
			}
		}
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			wg.Wait()
			return rec.result("open"), ctx.Err()
		}
		rec.sent.Add(1)
		wg.Add(1)
		go func(due time.Time) {
			defer wg.Done()
			out, err := c.do()
			rec.record(due, out, err)
			<-slots
		}(due)
	}
	wg.Wait()
	res := rec.result("open")
	res.OfferedRate = o.Rate
	return res, nil
}
