package aip

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/agentbridge/bridge/translate"
)

// BenchmarkEncodeStreamEvent encodes one product-chunk frame and one
// status-update frame per iteration, the steady-state stream work.
func BenchmarkEncodeStreamEvent(b *testing.B) {
	enc := NewStreamEncoder(json.RawMessage(`"req-1"`), "task-5678", "session-91011")
	enc.Builder().Now = func() time.Time { return t0 }
	first := &translate.Event{Kind: translate.KindState, State: translate.StateWorking, Time: t0}
	enc.AppendEvent(nil, first, 1)
	art := &translate.Event{Kind: translate.KindArtifact, Time: t0, Artifact: &translate.Artifact{ID: "product-1", Name: "北京文化游行程安排.pdf",
		Parts: []translate.Part{{Kind: translate.PartFile, Name: "part.pdf", MIME: "application/pdf", URI: "https://example.com/files/part.pdf"}}}}
	buf := make([]byte, 0, 4096)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		buf = enc.AppendEvent(buf[:0], art, uint64(i+2))
	}
	b.SetBytes(int64(len(buf)))
}

// BenchmarkEncodeStatusFrame encodes one status-update frame.
func BenchmarkEncodeStatusFrame(b *testing.B) {
	ev := &TaskStatusUpdateEvent{TaskID: "task-5678", SessionID: "session-91011",
		Status: TaskStatus{State: StateWorking, StateChangedAt: At(t0)}}
	buf := make([]byte, 0, 512)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		buf = AppendFrame(buf[:0], json.RawMessage(`"req-1"`), uint64(i), ev)
	}
	b.SetBytes(int64(len(buf)))
}

// BenchmarkDecodeStreamFrame decodes one product-chunk frame into its
// canonical event.
func BenchmarkDecodeStreamFrame(b *testing.B) {
	data := []byte(`{"jsonrpc":"2.0","id":"1","result":{"eventSeq":2,"eventData":{"type":"product-chunk","taskId":"task-5678","product":{"id":"product-1","name":"北京文化游行程安排.pdf","description":"3天北京文化主体游的详细行程安排","dataItems":[{"type":"file","name":"beijing_cultural_tour_part1.pdf","mimeType":"application/pdf","uri":"https://example.com/files/beijing_cultural_tour_part1.pdf"}]},"append":false,"lastChunk":false,"sessionId":"session-91011"}}}`)
	d := NewStreamDecoder(nil, nil, 0)
	b.ReportAllocs()
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		d.lastSeq = 0
		evs, err := d.frameEvents(data)
		if err != nil || len(evs) != 1 {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecodeStatusFrame decodes one status-update frame.
func BenchmarkDecodeStatusFrame(b *testing.B) {
	data := []byte(`{"jsonrpc":"2.0","id":"1","result":{"eventSeq":4,"eventData":{"type":"status-update","taskId":"task-5678","status":{"state":"awaiting-completion","stateChangedAt":"2025-09-01T12:05:00+08:00"},"sessionId":"session-91011"}}}`)
	b.ReportAllocs()
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		d := NewTracker()
		f, err := DecodeStreamFrame(data)
		if err != nil {
			b.Fatal(err)
		}
		if evs := d.ObjectEvents(f.Data); len(evs) != 1 {
			b.Fatal("no event")
		}
	}
}
