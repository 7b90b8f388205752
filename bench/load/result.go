package load

import (
	"errors"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// IsFailedResponse reports whether an error kind (a key of ErrorKinds) is
// a well-formed failed terminal response: the system under test answered,
// with an error.
func IsFailedResponse(kind string) bool { return strings.HasPrefix(kind, "failed response") }

// IsStrayBytes reports whether an error kind is a server writing past the
// end of a reply on a keep-alive connection (seen by the next request).
func IsStrayBytes(kind string) bool { return kind == errStrayBytes.Error() }

// Result is what one run measured.
type Result struct {
	Mode        string        // "open" or "closed"
	OfferedRate float64       // requests/s asked for (open loop)
	Conns       int           // connections (closed loop)
	Elapsed     time.Duration // from the first send to the last completion
	Sent        uint64        // requests started
	OK          uint64        // requests that completed correctly
	Errors      uint64        // requests that failed, timed out or were cut
	ErrorKinds  map[string]uint64
	// ErrorSample is the full text of the first error of each kind.
	ErrorSample map[string]string
	Events      uint64 // content deltas received in OK responses
	Frames      uint64 // SSE frames received in OK responses
	Bytes       uint64 // body bytes received in OK responses
	// Total is each OK request's latency to its terminal frame; TTFE its
	// time to the first content delta. In open loop both are measured from
	// the intended send time.
	Total *Histogram
	TTFE  *Histogram
}

// Rate is the achieved rate of OK requests per second.
func (r *Result) Rate() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.OK) / r.Elapsed.Seconds()
}

// EventRate is content deltas received per second.
func (r *Result) EventRate() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Events) / r.Elapsed.Seconds()
}

// TopErrors lists error kinds, most frequent first, for reports.
func (r *Result) TopErrors(n int) string {
	type kv struct {
		k string
		v uint64
	}
	var all []kv
	for k, v := range r.ErrorKinds {
		all = append(all, kv{k, v})
	}
	sort.Slice(all, func(i, j int) bool { return all[i].v > all[j].v || all[i].v == all[j].v && all[i].k < all[j].k })
	var b strings.Builder
	for i, e := range all {
		if i == n {
			break
		}
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(e.k)
	}
	return b.String()
}

// recorder collects outcomes from many goroutines.
type recorder struct {
	total, ttfe                    *Histogram
	sent, ok, errs, events, frames atomic.Uint64
	bytes                          atomic.Uint64
	mu                             sync.Mutex
	kinds                          map[string]uint64
	samples                        map[string]string
	first                          time.Time
	lastDone                       atomic.Int64 // unix nanos of the latest completion
}

func newRecorder(start time.Time) *recorder {
	return &recorder{total: NewHistogram(), ttfe: NewHistogram(), kinds: map[string]uint64{}, samples: map[string]string{}, first: start}
}

// record notes one request that was due at `from` (the intended send time
// in open loop, the actual one in closed loop).
func (r *recorder) record(from time.Time, o outcome, err error) {
	now := time.Now()
	for {
		l := r.lastDone.Load()
		if now.UnixNano() <= l || r.lastDone.CompareAndSwap(l, now.UnixNano()) {
			break
		}
	}
	if err != nil {
		r.errs.Add(1)
		r.mu.Lock()
		if k := errorKind(err); len(r.kinds) < 32 {
			r.kinds[k]++
			if _, ok := r.samples[k]; !ok {
				r.samples[k] = err.Error()
			}
		} else {
			r.kinds["other"]++
		}
		r.mu.Unlock()
		return
	}
	r.ok.Add(1)
	r.events.Add(uint64(o.events))
	r.frames.Add(uint64(o.frames))
	r.bytes.Add(uint64(o.bytes))
	r.total.Record(now.Sub(from))
	if !o.firstEvent.IsZero() {
		r.ttfe.Record(o.firstEvent.Sub(from))
	}
}

// errorKind shortens an error to a stable label to group by: a failed
// response by its error code, the harness's own checks by their sentinel,
// anything else by the start of its text.
func errorKind(err error) string {
	var fe *failedError
	if errors.As(err, &fe) {
		return "failed response " + fe.code
	}
	for _, e := range []error{errIncomplete, errFailed, errCount, errDeadline, errStatus, errStrayBytes} {
		if errors.Is(err, e) {
			return e.Error()
		}
	}
	s := err.Error()
	if len(s) > 80 {
		s = s[:80]
	}
	return s
}

func (r *recorder) result(mode string) *Result {
	res := &Result{
		Mode:        mode,
		Sent:        r.sent.Load(),
		OK:          r.ok.Load(),
		Errors:      r.errs.Load(),
		ErrorKinds:  r.kinds,
		ErrorSample: r.samples,
		Events:      r.events.Load(),
		Frames:      r.frames.Load(),
		Bytes:       r.bytes.Load(),
		Total:       r.total,
		TTFE:        r.ttfe,
	}
	if l := r.lastDone.Load(); l > 0 {
		res.Elapsed = time.Unix(0, l).Sub(r.first)
	}
	return res
}
