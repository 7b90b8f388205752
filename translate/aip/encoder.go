package aip

import (
	"encoding/json"
	"strconv"

	"github.com/agentbridge/bridge/internal/sse"
	"github.com/agentbridge/bridge/translate"
)

// AppendStreamResponse appends the JSON of one StreamResponse:
// {"jsonrpc":"2.0","id":<id>,"result":{"eventSeq":seq,"eventData":obj}}.
func AppendStreamResponse(dst []byte, id json.RawMessage, seq uint64, obj Object) []byte {
	dst = append(dst, `{"jsonrpc":"2.0","id":`...)
	dst = appendID(dst, id)
	dst = append(dst, `,"result":{"eventSeq":`...)
	dst = strconv.AppendUint(dst, seq, 10)
	dst = append(dst, `,"eventData":`...)
	dst = obj.AppendJSON(dst)
	return append(dst, '}', '}')
}

// AppendFrame appends one SSE frame "data: <StreamResponse>\n\n" as the
// AIP reference stream server writes it: compact one-line JSON, no "id:"
// or "event:" line.
func AppendFrame(dst []byte, id json.RawMessage, seq uint64, obj Object) []byte {
	dst = append(dst, "data: "...)
	dst = AppendStreamResponse(dst, id, seq, obj)
	return append(dst, '\n', '\n')
}

// AppendErrorFrame appends the in-stream error frame
// "data: {"jsonrpc":"2.0","id":<id>,"error":{…}}\n\n", which the spec uses
// when a re-stream cannot be served; the stream ends after it.
func AppendErrorFrame(dst []byte, id json.RawMessage, err *Error) []byte {
	return sse.AppendData(dst, 0, AppendErrorResponse(nil, id, err))
}

// StreamEncoder turns the canonical events of one task into the SSE frames
// of an AIP stream response. It owns a TaskBuilder that it feeds every
// event, so the task it streams is also the one rpc/get would return.
//
// Each event yields at most one frame, whose eventSeq is the seq the caller
// gives (the bridge's exchange log seq, so re-stream's lastEventSeq is a
// log position):
//
//   - a state change (KindState, KindInputRequest, KindError) is a
//     status-update, or a whole Task when the stream has not sent one yet
//     or when partner messages or a reply product are waiting to be sent,
//     so that nothing is lost and no event needs two frames;
//   - KindMessageEnd of a partner message is a Message with its complete
//     data items (AIP has no deltas: KindContent yields nothing and is
//     accumulated);
//   - a tool call or result outside an open message is a Message holding
//     the tool item once it is Done; inside one it waits for the message's
//     end;
//   - KindArtifact is a product-chunk carrying the event's parts with its
//     Append and Last flags;
//   - usage, heartbeat and events of other roles yield nothing.
type StreamEncoder struct {
	// ID is the JSON-RPC id of the stream (or re-stream) request; every
	// frame echoes it.
	ID json.RawMessage
	// After suppresses output for events with seq <= After while still
	// folding them: replaying the log from the start through a new encoder
	// with After = lastEventSeq serves a re-stream.
	After uint64

	b        *TaskBuilder
	sentTask bool
	sent     map[string]bool // partner message ids sent
	buf      []byte
	status   TaskStatusUpdateEvent
	chunk    ProductChunkEvent
}

// NewStreamEncoder returns an encoder for the task taskID of session
// sessionID answering the request with JSON-RPC id id.
func NewStreamEncoder(id json.RawMessage, taskID, sessionID string) *StreamEncoder {
	return &StreamEncoder{ID: id, b: NewTaskBuilder(taskID, sessionID), sent: map[string]bool{}}
}

// Builder returns the encoder's TaskBuilder (set its SenderID and Now,
// AddMessage the Leader's messages, read Task for notifications).
func (e *StreamEncoder) Builder() *TaskBuilder { return e.b }

// AppendEvent folds ev into the task and appends the frame it yields, if
// any, to dst.
func (e *StreamEncoder) AppendEvent(dst []byte, ev *translate.Event, seq uint64) []byte {
	obj := e.Encode(ev)
	if obj == nil || (e.After > 0 && seq <= e.After) {
		return dst
	}
	e.buf = AppendStreamResponse(e.buf[:0], e.ID, seq, obj)
	return sse.AppendData(dst, 0, e.buf)
}

// Encode folds ev into the task and returns the object the stream sends
// for it, or nil. The object is valid until the next call.
func (e *StreamEncoder) Encode(ev *translate.Event) Object {
	ch := e.b.apply(ev)
	t := &e.b.task
	switch {
	case ch.status:
		if !e.sentTask || ch.reply || e.unsent() {
			e.sentTask = true
			for i := range t.MessageHistory {
				if t.MessageHistory[i].SenderRole == RolePartner {
					e.sent[t.MessageHistory[i].ID] = true
				}
			}
			return t
		}
		e.status = TaskStatusUpdateEvent{TaskID: t.ID, Status: t.Status, SessionID: t.SessionID}
		return &e.status
	case ch.message >= 0:
		m := &t.MessageHistory[ch.message]
		e.sent[m.ID] = true
		return m
	case ch.product != "":
		a := ev.Artifact
		p := ProductFromArtifact(a)
		p.ID = ch.product
		e.chunk = ProductChunkEvent{TaskID: t.ID, Product: p, Append: a.Append, LastChunk: a.Last, SessionID: t.SessionID}
		return &e.chunk
	}
	return nil
}

// unsent reports whether a partner message with content has not been sent.
func (e *StreamEncoder) unsent() bool {
	for i := range e.b.task.MessageHistory {
		m := &e.b.task.MessageHistory[i]
		if m.SenderRole == RolePartner && len(m.DataItems) > 0 && !e.sent[m.ID] {
			return true
		}
	}
	return false
}
