package framelog

import (
	"fmt"
	"strings"
	"sync"
	"testing"
)

func TestRecordAndFramesInOrder(t *testing.T) {
	l := New(Limits{})
	buf := []byte("request")
	l.Record("x1", "down-in", buf)
	copy(buf, "XXXXXXX") // the caller reuses its buffer at once
	l.Record("x1", "up-out", []byte("to agent"))
	l.Record("x1", "up-in", []byte("from agent"))
	l.Record("x1", "down-out", []byte("to client"))
	l.Record("x1", "down-out", nil) // ignored
	l.Record("", "down-out", []byte("no exchange"))

	got := l.Frames("x1")
	want := []struct{ dir, data string }{
		{"down-in", "request"}, {"up-out", "to agent"}, {"up-in", "from agent"}, {"down-out", "to client"},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d frames, want %d: %+v", len(got), len(want), got)
	}
	for i, w := range want {
		f := got[i]
		if f.Dir != w.dir || string(f.Data) != w.data || f.Seq != uint64(i+1) || f.Size != len(w.data) || f.Truncated {
			t.Errorf("frame %d = %+v, want dir %s data %q seq %d", i, f, w.dir, w.data, i+1)
		}
		if i > 0 && f.Time.Before(got[i-1].Time) {
			t.Errorf("frame %d recorded before frame %d", i, i-1)
		}
	}
	got[0].Data[0] = 'Z' // callers may modify what they get
	if again := l.Frames("x1"); string(again[0].Data) != "request" {
		t.Errorf("Frames shares memory with the log: %q", again[0].Data)
	}
	if l.Frames("nope") != nil {
		t.Error("Frames of an unknown exchange is not nil")
	}
}

func TestFramesPerExchangeBound(t *testing.T) {
	l := New(Limits{MaxFramesPerExchange: 3})
	for i := 1; i <= 7; i++ {
		l.Record("x", "up-in", fmt.Appendf(nil, "f%d", i))
	}
	got := l.Frames("x")
	if len(got) != 3 {
		t.Fatalf("kept %d frames, want 3", len(got))
	}
	for i, f := range got {
		want := fmt.Sprintf("f%d", i+5)
		if string(f.Data) != want || f.Seq != uint64(i+5) {
			t.Errorf("frame %d = %q seq %d, want %q seq %d", i, f.Data, f.Seq, want, i+5)
		}
	}
}

func TestExchangesBoundForgetsLeastRecentlyRecorded(t *testing.T) {
	l := New(Limits{MaxExchanges: 2})
	l.Record("a", "down-in", []byte("a1"))
	l.Record("b", "down-in", []byte("b1"))
	l.Record("a", "down-out", []byte("a2")) // a is now the most recent
	l.Record("c", "down-in", []byte("c1"))  // evicts b
	if l.Len() != 2 {
		t.Fatalf("Len = %d, want 2", l.Len())
	}
	if l.Frames("b") != nil {
		t.Error("b was kept; want it forgotten as the least recently recorded")
	}
	if len(l.Frames("a")) != 2 || len(l.Frames("c")) != 1 {
		t.Errorf("a has %d frames (want 2), c has %d (want 1)", len(l.Frames("a")), len(l.Frames("c")))
	}
}

func TestFrameBytesBound(t *testing.T) {
	l := New(Limits{MaxFrameBytes: 4})
	l.Record("x", "up-in", []byte("abcdefgh"))
	f := l.Frames("x")[0]
	if string(f.Data) != "abcd" || f.Size != 8 || !f.Truncated {
		t.Errorf("frame = %+v, want data abcd, size 8, truncated", f)
	}
}

func TestConcurrentUse(t *testing.T) {
	l := New(Limits{MaxExchanges: 8, MaxFramesPerExchange: 16})
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 200 {
				id := fmt.Sprintf("x%d", (g+i)%12)
				l.Record(id, "up-in", []byte(strings.Repeat("z", i%32+1)))
				_ = l.Frames(id)
			}
		})
	}
	wg.Wait()
	if l.Len() > 8 {
		t.Errorf("Len = %d, over the bound of 8", l.Len())
	}
	for i := range 12 {
		if n := len(l.Frames(fmt.Sprintf("x%d", i))); n > 16 {
			t.Errorf("x%d keeps %d frames, over the bound of 16", i, n)
		}
	}
}
