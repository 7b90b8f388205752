package agentapi

import (
	"testing"

	"github.com/agentbridge/bridge/translate"
)

// loopReader yields head once, then body over and over: an endless stream.
type loopReader struct {
	head, body []byte
	off        int
}

func (r *loopReader) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		if len(r.head) > 0 {
			c := copy(p[n:], r.head)
			r.head = r.head[c:]
			n += c
			continue
		}
		c := copy(p[n:], r.body[r.off:])
		r.off = (r.off + c) % len(r.body)
		n += c
	}
	return n, nil
}

var (
	benchHead = []byte(sseOf(respCreated, respInProgress,
		`{"sequence_number":2,"object":"message","status":"in_progress","error":null,"id":"msg_82c7d470-ef42-4c6e-8b06-f02309a518ea","type":"message","role":"assistant","content":null,"code":null,"message":null,"usage":null,"metadata":null}`))
	benchDelta = []byte(sseOf(`{"sequence_number":3,"object":"content","status":"in_progress","error":null,"type":"text","index":0,"delta":true,"msg_id":"msg_82c7d470-ef42-4c6e-8b06-f02309a518ea","text":"! My name is Friday"}`))
)

func benchDecoder(b *testing.B) *Decoder {
	d := NewDecoder(&loopReader{head: append([]byte(nil), benchHead...), body: benchDelta}, DecoderOptions{})
	for range 3 { // submitted, working, message start
		if _, err := d.Next(); err != nil {
			b.Fatal(err)
		}
	}
	return d
}

// BenchmarkDecodeEvent measures one text-delta frame into one event.
func BenchmarkDecodeEvent(b *testing.B) {
	d := benchDecoder(b)
	b.SetBytes(int64(len(benchDelta)))
	b.ReportAllocs()
	for b.Loop() {
		ev, err := d.Next()
		if err != nil || ev.Kind != translate.KindContent {
			b.Fatal(ev, err)
		}
	}
}

// BenchmarkEncodeEvent measures one content delta into one frame.
func BenchmarkEncodeEvent(b *testing.B) {
	e := NewEncoder(EncoderOptions{ResponseID: "r", SessionID: "s"})
	p := translate.TextPart("! My name is Friday")
	ev := &translate.Event{Kind: translate.KindContent, MessageID: "msg_82c7d470-ef42-4c6e-8b06-f02309a518ea", Part: &p, Delta: true}
	buf := e.Encode(nil, ev)
	b.ReportAllocs()
	for b.Loop() {
		buf = e.Encode(buf[:0], ev)
	}
	b.SetBytes(int64(len(buf)))
}

// BenchmarkPassthrough measures decode plus encode of one text delta, the
// per-event cost of an Agent API to Agent API exchange.
func BenchmarkPassthrough(b *testing.B) {
	d := benchDecoder(b)
	e := NewEncoder(EncoderOptions{ResponseID: "r", SessionID: "s"})
	var buf []byte
	b.SetBytes(int64(len(benchDelta)))
	b.ReportAllocs()
	for b.Loop() {
		ev, err := d.Next()
		if err != nil {
			b.Fatal(err)
		}
		buf = e.Encode(buf[:0], ev)
	}
}
