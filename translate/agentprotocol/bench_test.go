package agentprotocol

import (
	"testing"

	"github.com/agentbridge/bridge/translate"
)

// BenchmarkEncodeTextOutput measures one text delta into one text_output
// object (the lines form, which WebSocket frames carry as is).
func BenchmarkEncodeTextOutput(b *testing.B) {
	e := NewEncoder(EncoderOptions{Agent: "echo", Turn: "5b1c6a0e-1f7e-4d3a-9d55-2f8f3c3b1a77", Session: "run-789"})
	p := translate.TextPart("! My name is Friday")
	ev := &translate.Event{Kind: translate.KindContent, MessageID: "msg_1", Part: &p, Delta: true}
	buf := e.Encode(nil, ev, 1)
	b.ReportAllocs()
	var id uint64 = 1
	for b.Loop() {
		id++
		buf = e.Encode(buf[:0], ev, id)
		if len(e.reply) > 1<<20 {
			e.reply, e.lastSlot.sent = e.reply[:0], e.lastSlot.sent[:0]
		}
	}
	b.SetBytes(int64(len(buf)))
}

// BenchmarkEncodeTextOutputSSE is the same as one SSE frame.
func BenchmarkEncodeTextOutputSSE(b *testing.B) {
	e := NewEncoder(EncoderOptions{Agent: "echo", Turn: "5b1c6a0e-1f7e-4d3a-9d55-2f8f3c3b1a77", Session: "run-789"})
	p := translate.TextPart("! My name is Friday")
	ev := &translate.Event{Kind: translate.KindContent, MessageID: "msg_1", Part: &p, Delta: true}
	buf := e.EncodeSSE(nil, ev, 1)
	b.ReportAllocs()
	var id uint64 = 1
	for b.Loop() {
		id++
		buf = e.EncodeSSE(buf[:0], ev, id)
		if len(e.reply) > 1<<20 {
			e.reply, e.lastSlot.sent = e.reply[:0], e.lastSlot.sent[:0]
		}
	}
	b.SetBytes(int64(len(buf)))
}

var benchEvent = []byte(`{"id":4,"type":"text_output","agent":"echo","depth":0,"role":"assistant","request_id":"5b1c6a0e-1f7e-4d3a-9d55-2f8f3c3b1a77","run_id":"run-789","content":"! My name is Friday"}`)

// BenchmarkDecodeEvent measures one text_output object into its canonical
// content event.
func BenchmarkDecodeEvent(b *testing.B) {
	d := NewEventDecoder(DecoderOptions{})
	evs, _ := d.Decode(nil, benchEvent) // working, message start, content
	b.SetBytes(int64(len(benchEvent)))
	b.ReportAllocs()
	for b.Loop() {
		evs, _ = d.Decode(evs[:0], benchEvent)
		if len(evs) != 1 {
			b.Fatal(len(evs))
		}
		if len(d.msgText) > 1<<20 {
			d.msgText = d.msgText[:0]
		}
	}
}
