package load

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

func TestBucketsAreContiguous(t *testing.T) {
	var prevHi uint64
	for i := 0; i < numBuckets; i++ {
		lo, hi := bucketBounds(i)
		if i > 0 && lo != prevHi+1 {
			t.Fatalf("bucket %d starts at %d, previous ended at %d", i, lo, prevHi)
		}
		if hi < lo {
			t.Fatalf("bucket %d: hi %d < lo %d", i, hi, lo)
		}
		for _, v := range []uint64{lo, hi, lo + (hi-lo)/2} {
			if got := bucketOf(v); got != i {
				t.Fatalf("bucketOf(%d) = %d, want %d", v, got, i)
			}
		}
		prevHi = hi
		if hi == ^uint64(0) {
			break
		}
	}
}

func TestQuantilesWithinResolution(t *testing.T) {
	h := NewHistogram()
	r := rand.New(rand.NewPCG(1, 2))
	vals := make([]time.Duration, 20000)
	for i := range vals {
		// Spread over 10µs..100ms, log-uniform.
		vals[i] = time.Duration(1e4 * math.Pow(10, r.Float64()*4))
		h.Record(vals[i])
	}
	slices.Sort(vals)
	if h.Count() != uint64(len(vals)) {
		t.Fatalf("count %d, want %d", h.Count(), len(vals))
	}
	if h.Min() != vals[0] || h.Max() != vals[len(vals)-1] {
		t.Fatalf("min/max %v/%v, want %v/%v", h.Min(), h.Max(), vals[0], vals[len(vals)-1])
	}
	prev := time.Duration(0)
	for _, q := range []float64{0, 0.1, 0.5, 0.9, 0.99, 0.999, 0.9999, 1} {
		got := h.Quantile(q)
		rank := max(int(q*float64(len(vals))+0.999999)-1, 0)
		want := vals[rank]
		if got < want || float64(got-want) > float64(want)/subCount+1 {
			t.Errorf("q%.4f = %v, exact %v: outside one bucket", q, got, want)
		}
		if got < prev {
			t.Errorf("q%.4f = %v below the previous quantile %v", q, got, prev)
		}
		prev = got
	}
}

func TestMergeAndEmpty(t *testing.T) {
	a, b := NewHistogram(), NewHistogram()
	if a.Quantile(0.99) != 0 || a.Min() != 0 || a.Max() != 0 || a.Mean() != 0 {
		t.Fatal("empty histogram should report zeros")
	}
	for i := 1; i <= 100; i++ {
		a.Record(time.Duration(i) * time.Microsecond)
		b.Record(time.Duration(i) * time.Millisecond)
	}
	b.Record(-time.Second) // counts as zero
	a.Merge(b)
	if a.Count() != 201 {
		t.Fatalf("count %d, want 201", a.Count())
	}
	if a.Min() != 0 || a.Max() != 100*time.Millisecond {
		t.Fatalf("min/max %v/%v", a.Min(), a.Max())
	}
	if m := a.Quantile(0.5); m < 100*time.Microsecond || m > 2*time.Millisecond {
		t.Fatalf("median %v, want between the two halves", m)
	}
	var n uint64
	for _, bk := range a.Buckets() {
		n += bk.Count
	}
	if n != a.Count() {
		t.Fatalf("buckets hold %d values, want %d", n, a.Count())
	}
}
