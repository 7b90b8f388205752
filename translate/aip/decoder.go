package aip

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/agentbridge/bridge/internal/sse"
	"github.com/agentbridge/bridge/translate"
)

// Codes a Leader reports in translate.Error.Code for a partner's failed or
// rejected task whose status item carries no {"code": …} metadata.
const (
	CodeTaskFailed   = "TASK_FAILED"
	CodeTaskRejected = "TASK_REJECTED"
)

// ErrorToCanonical maps a JSON-RPC error: Code is the number as text
// ("-32001"), Retryable for -32603 internal errors.
func ErrorToCanonical(e *Error) *translate.Error {
	msg := e.Message
	if d := gjson.GetBytes(e.Data, "details"); d.Type == gjson.String && d.Str != "" {
		msg += ": " + d.Str
	}
	return &translate.Error{Code: strconv.Itoa(e.Code), Message: msg, Retryable: e.Code == CodeInternalError}
}

// ErrorFromCanonical maps a canonical error to a JSON-RPC error: a numeric
// code is used as is; the bridge's own codes map to -32602 (BAD_REQUEST)
// or -32603 (the rest), with data {"code": <canonical code>, "details":
// <message>} so nothing is lost.
func ErrorFromCanonical(e *translate.Error) *Error {
	if n, err := strconv.Atoi(e.Code); err == nil {
		out := &Error{Code: n, Message: ErrorMessage(n)}
		if e.Message != "" {
			out.Message = e.Message
		}
		return out
	}
	code := CodeInternalError
	if e.Code == translate.CodeBadRequest {
		code = CodeInvalidParams
	}
	w := newEnc(nil)
	w.str("code", e.Code)
	w.strOpt("details", e.Message)
	return &Error{Code: code, Message: ErrorMessage(code), Data: w.done()}
}

// Tracker remembers what a Leader has already turned into canonical events
// for one task, so that a Task seen again — the next poll with get, a Task
// frame after status-update and product-chunk frames, a notification —
// yields only what is new. It is not safe for concurrent use.
type Tracker struct {
	seen     map[string]bool     // state|instant of statuses emitted
	last     Timestamp           // newest status instant emitted
	msgs     map[string][][]byte // partner message id → encoded items
	products map[string][][]byte // product id → encoded items
}

// NewTracker returns an empty Tracker.
func NewTracker() *Tracker {
	return &Tracker{seen: map[string]bool{}, msgs: map[string][][]byte{}, products: map[string][][]byte{}}
}

func statusKey(s *TaskStatus) string {
	return string(s.State) + "|" + strconv.FormatInt(s.StateChangedAt.Time().UnixNano(), 10)
}

// StatusEvents returns the KindState event of st unless it was seen: State
// mapped, Parts the status data items, Time stateChangedAt, and for failed
// and rejected an Err from the first text item (its {"code"} metadata or
// CodeTaskFailed / CodeTaskRejected). Unknown states yield nothing.
func (t *Tracker) StatusEvents(st *TaskStatus) []*translate.Event {
	ev := t.status(st)
	if ev == nil {
		return nil
	}
	return []*translate.Event{ev}
}

func (t *Tracker) status(st *TaskStatus) *translate.Event {
	cs, ok := StateToCanonical(st.State)
	if !ok {
		return nil
	}
	k := statusKey(st)
	if t.seen[k] || (!st.StateChangedAt.IsZero() && st.StateChangedAt.Before(t.last)) {
		return nil
	}
	t.seen[k] = true
	if st.StateChangedAt.After(t.last) {
		t.last = st.StateChangedAt
	}
	ev := &translate.Event{Kind: translate.KindState, State: cs, Parts: PartsFromItems(st.DataItems), Time: st.StateChangedAt.Time()}
	if st.State == StateFailed || st.State == StateRejected {
		code := CodeTaskFailed
		if st.State == StateRejected {
			code = CodeTaskRejected
		}
		err := &translate.Error{Code: code, Message: string(st.State)}
		// The message is the first text item's; the code is the one a text
		// item carries in its metadata (ErrorItem), wherever it stands: a
		// reason text may come before it.
		texts := 0
		for i := range st.DataItems {
			it := &st.DataItems[i]
			if it.Type != ItemText {
				continue
			}
			if c := gjson.GetBytes(it.Metadata, "code"); c.Type == gjson.String && c.Str != "" {
				err.Code, err.Message = c.Str, it.Text
				err.Retryable = gjson.GetBytes(it.Metadata, "retryable").Bool()
				break
			}
			if texts == 0 {
				err.Message = it.Text
			}
			texts++
		}
		ev.Err = err
	}
	return ev
}

func encodeItems(items []DataItem) [][]byte {
	out := make([][]byte, len(items))
	for i := range items {
		out[i] = items[i].AppendJSON(nil)
	}
	return out
}

// MessageEvents returns the events of a partner message not seen before:
// KindMessageStart, then per data item a KindContent (a full, Done part at
// the item's index) or, for a tool item, KindToolCall / KindToolResult,
// then KindMessageEnd with the complete canonical message. A message seen
// before yields content snapshots of the items that changed and a
// KindMessageEnd, or nothing when none did. Leader messages yield nothing.
func (t *Tracker) MessageEvents(m *Message) []*translate.Event {
	if m.SenderRole != RolePartner {
		return nil
	}
	enc := encodeItems(m.DataItems)
	prev, seen := t.msgs[m.ID]
	if seen && len(prev) == len(enc) {
		same := true
		for i := range enc {
			if !bytes.Equal(prev[i], enc[i]) {
				same = false
				break
			}
		}
		if same {
			return nil
		}
	}
	t.msgs[m.ID] = enc
	cm := MessageToCanonical(m)
	// Tool items travel as KindToolCall/KindToolResult, not as data parts.
	cm.Parts = cm.Parts[:0]
	for i := range m.DataItems {
		if _, _, tool := ToolFromItem(&m.DataItems[i]); tool {
			continue
		}
		if p, ok := PartFromItem(&m.DataItems[i]); ok {
			cm.Parts = append(cm.Parts, p)
		}
	}
	if len(cm.Parts) == 0 {
		cm.Parts = nil
	}
	at := m.SentAt.Time()
	var evs []*translate.Event
	if !seen {
		start := &translate.Message{ID: m.ID, Role: cm.Role, Ext: cm.Ext}
		evs = append(evs, &translate.Event{Kind: translate.KindMessageStart, MessageID: m.ID, Message: start, Time: at})
	}
	for i := range m.DataItems {
		if seen && i < len(prev) && bytes.Equal(prev[i], enc[i]) {
			continue
		}
		it := &m.DataItems[i]
		if tool, result, ok := ToolFromItem(it); ok {
			kind := translate.KindToolCall
			if result {
				kind = translate.KindToolResult
			}
			evs = append(evs, &translate.Event{Kind: kind, MessageID: m.ID, Tool: tool, Done: true, Time: at})
			continue
		}
		p, ok := PartFromItem(it)
		if !ok {
			continue
		}
		evs = append(evs, &translate.Event{Kind: translate.KindContent, MessageID: m.ID, Index: i, Part: &p, Done: true, Time: at})
	}
	evs = append(evs, &translate.Event{Kind: translate.KindMessageEnd, MessageID: m.ID, Message: &cm, Time: at})
	return evs
}

// ChunkEvents returns the KindArtifact event of a product chunk and
// records it: Append extends the product seen so far, otherwise it is
// replaced.
func (t *Tracker) ChunkEvents(p *Product, appendChunk, last bool) []*translate.Event {
	enc := encodeItems(p.DataItems)
	if appendChunk {
		t.products[p.ID] = append(t.products[p.ID], enc...)
	} else {
		t.products[p.ID] = enc
	}
	a := ArtifactFromProduct(p)
	a.Append, a.Last = appendChunk, last
	return []*translate.Event{{Kind: translate.KindArtifact, Artifact: &a}}
}

// productEvents diffs a complete product against what was seen: new
// products and changed ones are sent whole, grown ones as an Append chunk
// of the new items. last marks them final.
func (t *Tracker) productEvents(p *Product, last bool) []*translate.Event {
	enc := encodeItems(p.DataItems)
	if id, ok := strings.CutPrefix(p.ID, replyPrefix); ok {
		if _, seen := t.msgs[id]; seen {
			// A bridge partner's reply product repeats a message already
			// turned into events.
			t.products[p.ID] = enc
			return nil
		}
	}
	prev, seen := t.products[p.ID]
	if seen {
		prefix := len(prev) <= len(enc)
		for i := 0; prefix && i < len(prev); i++ {
			prefix = bytes.Equal(prev[i], enc[i])
		}
		if prefix {
			if len(prev) == len(enc) {
				return nil
			}
			t.products[p.ID] = enc
			tail := *p
			tail.DataItems = p.DataItems[len(prev):]
			a := ArtifactFromProduct(&tail)
			a.Append, a.Last = true, last
			return []*translate.Event{{Kind: translate.KindArtifact, Artifact: &a}}
		}
	}
	t.products[p.ID] = enc
	a := ArtifactFromProduct(p)
	a.Last = last
	return []*translate.Event{{Kind: translate.KindArtifact, Artifact: &a}}
}

// TaskEvents returns what is new in a Task snapshot, in this order: states
// from statusHistory not seen yet (except the current one), partner
// messages (MessageEvents), products (whole when new, an Append chunk of
// new items when grown; Last when the task is settled) and last the
// current status. A product "reply-<id>" repeating the partner message
// <id> (what TaskBuilder adds) yields nothing, so the reply is not
// delivered twice.
func (t *Tracker) TaskEvents(task *Task) []*translate.Event {
	var evs []*translate.Event
	curKey := statusKey(&task.Status)
	for i := range task.StatusHistory {
		st := &task.StatusHistory[i]
		if statusKey(st) == curKey {
			continue
		}
		if ev := t.status(st); ev != nil {
			evs = append(evs, ev)
		}
	}
	for i := range task.MessageHistory {
		evs = append(evs, t.MessageEvents(&task.MessageHistory[i])...)
	}
	settled := false
	if cs, ok := StateToCanonical(task.Status.State); ok {
		settled = cs.Settled()
	}
	for i := range task.Products {
		evs = append(evs, t.productEvents(&task.Products[i], settled)...)
	}
	if ev := t.status(&task.Status); ev != nil {
		evs = append(evs, ev)
	}
	return evs
}

// ObjectEvents returns the events of any typed object received as a
// Leader: a Task (TaskEvents), a Message (MessageEvents), a status-update
// (StatusEvents) or a product-chunk (ChunkEvents).
func (t *Tracker) ObjectEvents(obj Object) []*translate.Event {
	switch o := obj.(type) {
	case *Task:
		return t.TaskEvents(o)
	case *Message:
		return t.MessageEvents(o)
	case *TaskStatusUpdateEvent:
		return t.StatusEvents(&o.Status)
	case *ProductChunkEvent:
		return t.ChunkEvents(&o.Product, o.Append, o.LastChunk)
	}
	return nil
}

// StreamFrame is one decoded StreamResponse.
type StreamFrame struct {
	ID       []byte // the JSON-RPC id, raw
	EventSeq uint64 // 0 when absent
	Data     Object // nil for an error frame
	Error    *Error // set for an error frame
}

// DecodeStreamFrame decodes the data of one SSE event of an AIP stream.
// Errors wrap translate.ErrMalformed; an eventData of a type this package
// does not know wraps ErrUnknownType as well.
func DecodeStreamFrame(data []byte) (*StreamFrame, error) {
	v, err := parseObject(data)
	if err != nil {
		return nil, err
	}
	f := new(StreamFrame)
	if id := v.Get("id"); id.Type == gjson.String || id.Type == gjson.Number {
		f.ID = []byte(id.Raw)
	}
	if e := v.Get("error"); e.Exists() && e.Type != gjson.Null {
		f.Error = new(Error)
		if err := f.Error.decode(e); err != nil {
			return nil, err
		}
		return f, nil
	}
	res := v.Get("result")
	if !res.IsObject() {
		return nil, decodeError("stream frame has neither result nor error")
	}
	if s := res.Get("eventSeq"); s.Exists() && s.Type != gjson.Null {
		if f.EventSeq, err = wantUint("eventSeq", s); err != nil {
			return nil, err
		}
	}
	if f.Data, err = decodeObject(res.Get("eventData")); err != nil {
		return nil, err
	}
	return f, nil
}

// StreamDecoder reads an AIP stream response (SSE, lenient framing) and
// returns canonical events, as a Leader consumes a Partner's stream. It
// implements translate.Stream. Every event carries the eventSeq of its
// frame in Seq (the exchange log reassigns Seq when it logs the event; keep
// LastSeq for re-stream). Frames whose eventSeq is not above the last one
// (a replay overlap after re-stream) are skipped. An error frame becomes a
// KindError event. Frames of unknown eventData types (v02, group) are
// skipped; undecodable frames end the stream with an error wrapping
// translate.ErrMalformed.
type StreamDecoder struct {
	r       *sse.Reader
	c       io.Closer
	tr      *Tracker
	queue   []*translate.Event
	lastSeq uint64
	err     error
}

// NewStreamDecoder returns a decoder over r (closed by Close when it is an
// io.Closer) that diffs with tr (a new Tracker when nil). maxEvent bounds
// one SSE event (sse.DefaultMaxEventSize when <= 0).
func NewStreamDecoder(r io.Reader, tr *Tracker, maxEvent int) *StreamDecoder {
	if tr == nil {
		tr = NewTracker()
	}
	d := &StreamDecoder{r: sse.NewReader(r, maxEvent), tr: tr}
	if c, ok := r.(io.Closer); ok {
		d.c = c
	}
	return d
}

// SetLastSeq sets the eventSeq frames must exceed, for a decoder reading a
// re-stream that resumes after seq.
func (d *StreamDecoder) SetLastSeq(seq uint64) { d.lastSeq = seq }

// LastSeq returns the highest eventSeq decoded: the lastEventSeq of a
// re-stream after a cut.
func (d *StreamDecoder) LastSeq() uint64 { return d.lastSeq }

// Tracker returns the decoder's Tracker, to diff later RPC answers with.
func (d *StreamDecoder) Tracker() *Tracker { return d.tr }

// Next returns the next event, or io.EOF after the last.
func (d *StreamDecoder) Next() (*translate.Event, error) {
	for len(d.queue) == 0 {
		if d.err != nil {
			return nil, d.err
		}
		ev, err := d.r.Next()
		if err != nil {
			if err != io.EOF {
				err = fmt.Errorf("aip: %w: %v", translate.ErrMalformed, err)
			}
			d.err = err
			return nil, err
		}
		if len(bytes.TrimSpace(ev.Data)) == 0 {
			continue
		}
		evs, err := d.frameEvents(ev.Data)
		if err != nil {
			d.err = err
			return nil, err
		}
		d.queue = evs
	}
	ev := d.queue[0]
	d.queue[0] = nil
	d.queue = d.queue[1:]
	return ev, nil
}

// frameEvents decodes one frame into events.
func (d *StreamDecoder) frameEvents(data []byte) ([]*translate.Event, error) {
	f, err := DecodeStreamFrame(data)
	if err != nil {
		if isUnknownType(err) {
			return nil, nil
		}
		return nil, err
	}
	if f.Error != nil {
		return []*translate.Event{{Kind: translate.KindError, Err: ErrorToCanonical(f.Error)}}, nil
	}
	if f.EventSeq > 0 {
		if f.EventSeq <= d.lastSeq {
			return nil, nil
		}
		d.lastSeq = f.EventSeq
	}
	evs := d.tr.ObjectEvents(f.Data)
	for _, ev := range evs {
		ev.Seq = f.EventSeq
	}
	return evs, nil
}

// Close closes the underlying reader when it is an io.Closer.
func (d *StreamDecoder) Close() error {
	if d.err == nil {
		d.err = io.EOF
	}
	if d.c != nil {
		return d.c.Close()
	}
	return nil
}

// DecodeRPCResponse turns the HTTP answer to an rpc or notification/start
// call into canonical events, diffing a Task result with tr (which must be
// the task's Tracker across calls so that polling with get yields only what
// is new). A JSON-RPC error, an HTTP error status, or an error body such
// as FastAPI's {"detail":{"code":-32001,"message":"…"}} or
// {"detail":[…]} yields one KindError event. The error return is for a 2xx
// body that is not an AIP response at all (wrapping translate.ErrMalformed).
func DecodeRPCResponse(httpStatus int, body []byte, tr *Tracker) ([]*translate.Event, error) {
	if httpStatus >= 300 || httpStatus < 200 {
		return []*translate.Event{{Kind: translate.KindError, Err: HTTPError(httpStatus, body)}}, nil
	}
	if d := gjson.GetBytes(body, "detail"); d.Exists() && !gjson.GetBytes(body, "jsonrpc").Exists() {
		return []*translate.Event{{Kind: translate.KindError, Err: HTTPError(httpStatus, body)}}, nil
	}
	r, err := DecodeResponse(body)
	if err != nil {
		return nil, err
	}
	if r.Error != nil {
		return []*translate.Event{{Kind: translate.KindError, Err: ErrorToCanonical(r.Error)}}, nil
	}
	obj, err := DecodeObject(r.Result)
	if err != nil {
		return nil, err
	}
	switch obj.(type) {
	case *Task, *Message:
	default:
		return nil, decodeError("rpc result is a %s, want a task or a message", obj.ObjectType())
	}
	return tr.ObjectEvents(obj), nil
}

// HTTPError maps an error answer to a canonical error. It reads, in order:
// {"detail":{"code":n,"message":"…"}} (the stream and notification servers'
// HTTPException), a JSON-RPC error envelope, {"detail":[{"msg":…}]} or
// {"detail":"…"} (FastAPI validation and plain errors); else the status and
// the start of the body. The code is the AIP code as text when there is
// one, else BAD_REQUEST for 4xx and UPSTREAM_ERROR otherwise; 408, 429 and
// 5xx are retryable.
func HTTPError(httpStatus int, body []byte) *translate.Error {
	retry := httpStatus == 408 || httpStatus == 429 || httpStatus >= 500
	code := translate.CodeUpstreamError
	if httpStatus >= 400 && httpStatus < 500 && !retry {
		code = translate.CodeBadRequest
	}
	out := &translate.Error{Code: code, Retryable: retry}
	if v := gjson.ParseBytes(body); json.Valid(body) && v.IsObject() {
		d := v.Get("detail")
		switch {
		case d.IsObject() && d.Get("code").Type == gjson.Number:
			out.Code = strconv.FormatInt(d.Get("code").Int(), 10)
			out.Message = d.Get("message").String()
			return out
		case v.Get("error").IsObject():
			e := new(Error)
			if e.decode(v.Get("error")) == nil {
				ce := ErrorToCanonical(e)
				ce.Retryable = ce.Retryable || retry
				return ce
			}
		case d.IsArray():
			out.Message = d.Get("0.msg").String()
			if out.Message == "" {
				out.Message = d.Raw
			}
		case d.Type == gjson.String:
			out.Message = d.Str
		}
	}
	if out.Message == "" {
		snip := bytes.TrimSpace(body)
		if len(snip) > 200 {
			snip = snip[:200]
		}
		out.Message = "HTTP " + strconv.Itoa(httpStatus)
		if len(snip) > 0 {
			out.Message += ": " + string(snip)
		}
	}
	return out
}

func isUnknownType(err error) bool { return errors.Is(err, ErrUnknownType) }
