package load

import (
	"math"
	"math/bits"
	"sync/atomic"
	"time"
)

// subBits sets the resolution: each power-of-two range of values is split
// into 2^subBits equal buckets, so a recorded value is off by at most
// 1/2^subBits (0.8%) of itself. Values below 2^subBits are exact.
const (
	subBits  = 7
	subCount = 1 << subBits
	// numBuckets covers every uint64: the exact range, then one row of
	// subCount buckets per power of two from 2^subBits to 2^63.
	numBuckets = subCount + (64-subBits)*subCount
)

// Histogram records durations (as nanoseconds) in log-linear buckets, in
// the manner of HdrHistogram. Record is safe for concurrent use and does
// not allocate; the zero value is not usable, call NewHistogram.
type Histogram struct {
	counts []atomic.Uint64
	total  atomic.Uint64
	sum    atomic.Uint64
	min    atomic.Uint64
	max    atomic.Uint64
}

// NewHistogram returns an empty histogram.
func NewHistogram() *Histogram {
	h := &Histogram{counts: make([]atomic.Uint64, numBuckets)}
	h.min.Store(math.MaxUint64)
	return h
}

// bucketOf returns the index of the bucket that holds v.
func bucketOf(v uint64) int {
	if v < subCount {
		return int(v)
	}
	k := bits.Len64(v) - 1 // v is in [2^k, 2^(k+1)), k >= subBits
	shift := k - subBits
	sub := int(v>>shift) - subCount // in [0, subCount)
	return subCount + shift*subCount + sub
}

// bucketBounds returns the smallest and largest value that fall in bucket i.
func bucketBounds(i int) (lo, hi uint64) {
	if i < subCount {
		return uint64(i), uint64(i)
	}
	shift := (i - subCount) / subCount
	sub := (i - subCount) % subCount
	lo = uint64(subCount+sub) << shift
	return lo, lo + (uint64(1) << shift) - 1
}

// Record adds one duration; negative durations count as zero.
func (h *Histogram) Record(d time.Duration) {
	v := uint64(0)
	if d > 0 {
		v = uint64(d)
	}
	h.counts[bucketOf(v)].Add(1)
	h.total.Add(1)
	h.sum.Add(v)
	for {
		m := h.min.Load()
		if v >= m || h.min.CompareAndSwap(m, v) {
			break
		}
	}
	for {
		m := h.max.Load()
		if v <= m || h.max.CompareAndSwap(m, v) {
			break
		}
	}
}

// Merge adds every value recorded in o to h.
func (h *Histogram) Merge(o *Histogram) {
	if o.Count() == 0 {
		return
	}
	for i := range o.counts {
		if c := o.counts[i].Load(); c != 0 {
			h.counts[i].Add(c)
		}
	}
	h.total.Add(o.total.Load())
	h.sum.Add(o.sum.Load())
	for {
		m, v := h.min.Load(), o.min.Load()
		if v >= m || h.min.CompareAndSwap(m, v) {
			break
		}
	}
	for {
		m, v := h.max.Load(), o.max.Load()
		if v <= m || h.max.CompareAndSwap(m, v) {
			break
		}
	}
}

// Count is the number of values recorded.
func (h *Histogram) Count() uint64 { return h.total.Load() }

// Min and Max are the exact extremes (0 when empty).
func (h *Histogram) Min() time.Duration {
	if h.Count() == 0 {
		return 0
	}
	return time.Duration(h.min.Load())
}

// Max is the largest value recorded, exactly.
func (h *Histogram) Max() time.Duration { return time.Duration(h.max.Load()) }

// Mean is the exact mean (0 when empty).
func (h *Histogram) Mean() time.Duration {
	n := h.Count()
	if n == 0 {
		return 0
	}
	return time.Duration(h.sum.Load() / n)
}

// Quantile returns the value below or at which a fraction q (0..1) of the
// values lie: the upper bound of the bucket that holds the ceil(q*n)-th
// smallest value, clamped to the exact max. It is 0 when empty.
func (h *Histogram) Quantile(q float64) time.Duration {
	n := h.Count()
	if n == 0 {
		return 0
	}
	q = min(max(q, 0), 1)
	rank := uint64(math.Ceil(q * float64(n)))
	rank = max(rank, 1)
	var seen uint64
	for i := range h.counts {
		seen += h.counts[i].Load()
		if seen >= rank {
			_, hi := bucketBounds(i)
			return min(time.Duration(hi), h.Max())
		}
	}
	return h.Max()
}

// Bucket is one non-empty bucket: values in [Lo, Hi] were seen Count times.
type Bucket struct {
	Lo, Hi time.Duration
	Count  uint64
}

// Buckets lists the non-empty buckets in increasing order, for plots.
func (h *Histogram) Buckets() []Bucket {
	var out []Bucket
	for i := range h.counts {
		if c := h.counts[i].Load(); c != 0 {
			lo, hi := bucketBounds(i)
			out = append(out, Bucket{Lo: time.Duration(lo), Hi: time.Duration(hi), Count: c})
		}
	}
	return out
}
