package tracing

import (
	"strings"
	"testing"
)

const (
	tid = "4bf92f3577b34da6a3ce929d0e0e4736"
	sid = "00f067aa0ba902b7"
)

func TestParseTraceParent(t *testing.T) {
	for _, tc := range []struct {
		in    string
		ok    bool
		flags byte
	}{
		{"00-" + tid + "-" + sid + "-01", true, FlagSampled},
		{"00-" + tid + "-" + sid + "-00", true, 0},
		{"00-" + tid + "-" + sid + "-03", true, FlagSampled | FlagRandom},
		{"00-" + tid + "-" + sid + "-ff", true, FlagSampled | FlagRandom}, // unknown flags cleared
		{"01-" + tid + "-" + sid + "-01-more-fields", true, FlagSampled},  // a later version may add fields
		{"01-" + tid + "-" + sid + "-01", true, FlagSampled},
		{"00-" + tid + "-" + sid + "-01-extra", false, 0}, // version 00 is exactly 55 characters
		{"01-" + tid + "-" + sid + "-01x", false, 0},
		{"ff-" + tid + "-" + sid + "-01", false, 0},
		{"00-00000000000000000000000000000000-" + sid + "-01", false, 0},
		{"00-" + tid + "-0000000000000000-01", false, 0},
		{"00-" + strings.ToUpper(tid) + "-" + sid + "-01", false, 0},
		{"00-" + tid + "-" + sid + "-0g", false, 0},
		{"00_" + tid + "-" + sid + "-01", false, 0},
		{"0-" + tid + "-" + sid + "-01", false, 0},
		{"", false, 0},
	} {
		sc, err := ParseTraceParent(tc.in)
		if (err == nil) != tc.ok {
			t.Errorf("%q: err %v, want ok=%v", tc.in, err, tc.ok)
			continue
		}
		if !tc.ok {
			continue
		}
		if sc.TraceID.String() != tid || sc.SpanID.String() != sid || sc.Flags != tc.flags {
			t.Errorf("%q: got %s %s %02x", tc.in, sc.TraceID, sc.SpanID, sc.Flags)
		}
		if want := "00-" + tid + "-" + sid + "-" + string("0123456789abcdef"[tc.flags>>4]) + string("0123456789abcdef"[tc.flags&15]); sc.TraceParent() != want {
			t.Errorf("%q formats as %q, want %q", tc.in, sc.TraceParent(), want)
		}
	}
}

func TestNewAndNewChild(t *testing.T) {
	a, b := New(), New()
	if !a.IsValid() || !a.Sampled() || a.TraceID == b.TraceID || a.SpanID == b.SpanID {
		t.Fatalf("New: %+v %+v", a, b)
	}
	if _, err := ParseTraceParent(a.TraceParent()); err != nil {
		t.Fatalf("New formats an invalid traceparent %q: %v", a.TraceParent(), err)
	}
	parent, _ := Inbound("00-"+tid+"-"+sid+"-00", "k=v")
	c := NewChild(parent)
	if c.TraceID != parent.TraceID || c.SpanID == parent.SpanID || !c.SpanID.IsValid() || c.Flags != 0 || c.State != "k=v" {
		t.Fatalf("child %+v of %+v", c, parent)
	}
	if n := NewChild(SpanContext{}); !n.IsValid() {
		t.Fatalf("child of nothing is not a new trace: %+v", n)
	}
}

func TestContinue(t *testing.T) {
	h := Continue(map[string]string{HeaderTraceParent: "00-" + tid + "-" + sid + "-01", HeaderTraceState: "a=1,b=2"})
	sc, err := ParseTraceParent(h[HeaderTraceParent])
	if err != nil || sc.TraceID.String() != tid || sc.SpanID.String() == sid || h[HeaderTraceState] != "a=1,b=2" {
		t.Fatalf("continued %v (%v)", h, err)
	}
	for _, in := range []map[string]string{
		nil,
		{HeaderTraceState: "a=1"},
		{HeaderTraceParent: "garbage", HeaderTraceState: "a=1"},
	} {
		h := Continue(in)
		if _, err := ParseTraceParent(h[HeaderTraceParent]); err != nil || len(h) != 1 {
			t.Fatalf("Continue(%v) = %v: want a new traceparent alone", in, h)
		}
	}
	// A tracestate too long or with control characters is dropped alone.
	for _, bad := range []string{strings.Repeat("a", 513), "a=1\r\nX-Evil: 1"} {
		h := Continue(map[string]string{HeaderTraceParent: "00-" + tid + "-" + sid + "-01", HeaderTraceState: bad})
		if _, ok := h[HeaderTraceState]; ok || TraceIDOf(h[HeaderTraceParent]) != tid {
			t.Fatalf("tracestate %q: continued %v", bad, h)
		}
	}
}

func TestTraceIDOf(t *testing.T) {
	if got := TraceIDOf("00-" + tid + "-" + sid + "-01"); got != tid {
		t.Fatalf("got %q", got)
	}
	if got := TraceIDOf("nope"); got != "" {
		t.Fatalf("got %q", got)
	}
}

func FuzzParseTraceParent(f *testing.F) {
	f.Add("00-" + tid + "-" + sid + "-01")
	f.Add("cc-" + tid + "-" + sid + "-01-x")
	f.Fuzz(func(t *testing.T, s string) {
		sc, err := ParseTraceParent(s)
		if err != nil {
			return
		}
		again, err := ParseTraceParent(sc.TraceParent())
		if err != nil || again != sc {
			t.Fatalf("%q: round trip %q gives %+v, %v", s, sc.TraceParent(), again, err)
		}
	})
}
