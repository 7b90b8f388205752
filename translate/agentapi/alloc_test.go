//go:build !race

package agentapi

import (
	"testing"

	"github.com/agentbridge/bridge/translate"
)

// TestPassthroughAllocations guards the per-event allocations of the Agent
// API passthrough path (decode one frame, encode one frame): the encoder
// allocates nothing per event beyond the amortized growth of the message
// text it must keep for the final output; the decoder makes one copy of
// each frame (the event may be kept until the next call). The goal is zero;
// this keeps it from getting worse.
func TestPassthroughAllocations(t *testing.T) {
	e := NewEncoder(EncoderOptions{ResponseID: "r", SessionID: "s"})
	p := translate.TextPart("! My name is Friday")
	ev := &translate.Event{Kind: translate.KindContent, MessageID: "msg_82c7d470-ef42-4c6e-8b06-f02309a518ea", Part: &p, Delta: true}
	buf := e.Encode(nil, ev)
	if n := testing.AllocsPerRun(2000, func() { buf = e.Encode(buf[:0], ev) }); n > 0.05 {
		t.Errorf("encoding a content delta: %.2f allocations per event, want ~0", n)
	}

	d := NewDecoder(&loopReader{head: append([]byte(nil), benchHead...), body: benchDelta}, DecoderOptions{})
	for range 3 {
		if _, err := d.Next(); err != nil {
			t.Fatal(err)
		}
	}
	e2 := NewEncoder(EncoderOptions{ResponseID: "r", SessionID: "s"})
	var out []byte
	n := testing.AllocsPerRun(2000, func() {
		ev, err := d.Next()
		if err != nil {
			t.Fatal(err)
		}
		out = e2.Encode(out[:0], ev)
	})
	if n > 1.1 {
		t.Errorf("decode+encode of a text delta: %.2f allocations per event, want at most 1", n)
	}
}
