package agentprotocol

import (
	"bytes"
	"fmt"
	"io"
	"strings"

	"github.com/agentbridge/bridge/internal/ids"
	"github.com/agentbridge/bridge/internal/jsonw"
	"github.com/agentbridge/bridge/internal/sse"
	"github.com/agentbridge/bridge/translate"
	"github.com/tidwall/gjson"
)

// DecoderOptions tune an EventDecoder or a StreamDecoder.
type DecoderOptions struct {
	// Dialect is the dialect expected; DialectUnknown detects it from the
	// events (the first event that tells decides).
	Dialect Dialect
	// MaxEventSize bounds one SSE event's data (StreamDecoder); 0 means
	// sse.DefaultMaxEventSize.
	MaxEventSize int
}

// EventDecoder turns the events of one turn, of any dialect, into canonical
// events (client role). Feed it each event's JSON object, from a getevents
// list, an SSE data line or a WebSocket frame. It keeps the state a turn
// needs: the open reply message, tool calls waiting for their results, the
// highest event id seen. Events it returns are new and owned by the caller.
// An EventDecoder is not safe for concurrent use.
type EventDecoder struct {
	dialect Dialect
	newID   func(prefix string) string

	started, isWorking bool
	settled, done      bool
	lastID             uint64

	msgOpen bool
	msgID   string
	msgRole translate.Role
	msgText []byte
	replied bool // any reply text was decoded this turn

	calls []decCall // calls without a result yet, oldest first
}

type decCall struct{ id, name string }

// maxOpenCalls bounds the calls remembered for pairing with results.
const maxOpenCalls = 256

// NewEventDecoder returns an EventDecoder for one turn.
func NewEventDecoder(opts DecoderOptions) *EventDecoder {
	return &EventDecoder{
		dialect: opts.Dialect,
		newID:   func(prefix string) string { return prefix + ids.UUID() },
	}
}

// Dialect returns the dialect expected or detected so far.
func (d *EventDecoder) Dialect() Dialect { return d.dialect }

// Settled reports whether the turn has ended or waits for input: a client
// stops polling or reading then.
func (d *EventDecoder) Settled() bool { return d.settled }

// Done reports whether the turn has ended (not merely paused for input).
func (d *EventDecoder) Done() bool { return d.done }

// LastID returns the highest event id decoded: the since= of the next poll.
// Agentic events carry no id: it stays 0.
func (d *EventDecoder) LastID() uint64 { return d.lastID }

func (d *EventDecoder) emit(dst []*translate.Event, k translate.Kind) ([]*translate.Event, *translate.Event) {
	ev := &translate.Event{Kind: k}
	return append(dst, ev), ev
}

func (d *EventDecoder) stateEv(dst []*translate.Event, s translate.State) ([]*translate.Event, *translate.Event) {
	dst, ev := d.emit(dst, translate.KindState)
	ev.State = s
	return dst, ev
}

// Decode appends the canonical events for one Agent Protocol event (a JSON
// object of any dialect) to dst. Unknown event types give no events; a body
// that is not a JSON object is an error wrapping translate.ErrMalformed. A
// wait_for_input resumes the turn: later events decode as its continuation.
func (d *EventDecoder) Decode(dst []*translate.Event, obj []byte) ([]*translate.Event, error) {
	if !gjson.ValidBytes(obj) {
		return dst, malformed("event is not valid JSON")
	}
	root := gjson.ParseBytes(obj)
	if !root.IsObject() {
		return dst, malformed("event is not a JSON object")
	}
	if d.done {
		return dst, nil
	}
	if d.dialect == DialectUnknown {
		d.dialect = detectEvent(root)
	}
	if id := root.Get("id"); id.Type == gjson.Number && id.Uint() > d.lastID {
		d.lastID = id.Uint()
	}
	if d.settled && !d.done {
		d.settled = false // a continuation after wait_for_input
	}
	typ := root.Get("type").Str
	if p := root.Get("payload"); p.Exists() && !root.Get("id").Exists() {
		return d.agentic(dst, typ, root, p), nil
	}
	switch typ {
	case TypeRequestStarted, TypeRunStarted:
		if !d.started {
			d.started = true
			dst, _ = d.stateEv(dst, translate.StateSubmitted)
		}
	case TypeTextOutput:
		dst = d.text(dst, translate.RoleAssistant, root.Get("content").Str)
	case TypeToolTextOutput:
		dst = d.text(dst, translate.RoleTool, root.Get("content").Str)
	case TypeToolCall:
		dst = d.toolCall(dst, root.Get("tool_call_id").Str, root.Get("function_name").Str, root.Get("args"))
	case TypeToolResult:
		dst = d.toolResult(dst, root.Get("tool_call_id").Str, root.Get("function_name").Str, root.Get("text_result").Str, false)
	case TypeToolError:
		dst = d.toolResult(dst, root.Get("tool_call_id").Str, root.Get("function_name").Str, root.Get("content").Str, true)
	case TypeArtifactGenerated:
		dst = d.artifact(dst, root)
	case TypeWaitForInput:
		dst = d.waitForInput(dst, root.Get("request_keys"))
	case TypeCompletionResult:
		if u := root.Get("usage"); u.IsObject() {
			dst = d.working(dst)
			var ev *translate.Event
			dst, ev = d.emit(dst, translate.KindUsage)
			ev.Data = jsonw.AppendCompact(nil, u.Raw)
		}
	case TypeRequestCompleted, TypeRunCompleted, TypeOperationComplete:
		var err *translate.Error
		if e := root.Get("error"); e.Exists() && e.Type != gjson.Null {
			err = errorOf(e)
		}
		dst = d.end(dst, FinishReason(root.Get("finish_reason").Str), resultOf(root.Get("result")), err)
	}
	return dst, nil
}

// agentic decodes an event of the agentic reference server. Chat output
// and the end markers count only at depth 0 (the top agent); tool events
// count at every depth.
func (d *EventDecoder) agentic(dst []*translate.Event, typ string, root, p gjson.Result) []*translate.Event {
	top := root.Get("depth").Int() == 0
	switch typ {
	case AgenticPromptStarted:
		if top && !d.started {
			d.started = true
			dst, _ = d.stateEv(dst, translate.StateSubmitted)
		}
	case AgenticChatOutput:
		if !top {
			return dst
		}
		if p.Type == gjson.String {
			return d.text(dst, translate.RoleAssistant, p.Str)
		}
		role := translate.RoleAssistant
		if r := p.Get("role").Str; r == "tool" {
			role = translate.RoleTool
		}
		return d.text(dst, role, p.Get("content").Str)
	case AgenticToolCall:
		return d.toolCall(dst, p.Get("tool_call_id").Str, p.Get("name").Str, p.Get("arguments"))
	case AgenticToolResult:
		if p.Type == gjson.String {
			return d.toolResult(dst, "", "", p.Str, false)
		}
		out := p.Get("result")
		if !out.Exists() {
			out = root.Get("result")
		}
		return d.toolResult(dst, p.Get("tool_call_id").Str, p.Get("name").Str, textOf(out), false)
	case AgenticToolError:
		if p.Type == gjson.String {
			return d.toolResult(dst, "", "", p.Str, true)
		}
		return d.toolResult(dst, p.Get("tool_call_id").Str, p.Get("name").Str, textOf(p.Get("error")), true)
	case AgenticCompletionEnd:
		if u := p.Get("usage"); u.IsObject() {
			dst = d.working(dst)
			var ev *translate.Event
			dst, ev = d.emit(dst, translate.KindUsage)
			ev.Data = jsonw.AppendCompact(nil, u.Raw)
		}
	case AgenticWaitForInput:
		if top {
			return d.waitForInput(dst, p)
		}
	case AgenticTurnEnd:
		if !top {
			return dst
		}
		var result *string
		if p.Type == gjson.String {
			result = &p.Str
		} else if ms := p.Get("messages").Array(); len(ms) > 0 {
			s := textOf(ms[len(ms)-1].Get("content"))
			result = &s
		}
		var err *translate.Error
		if e := p.Get("error"); e.Exists() && e.Type != gjson.Null {
			err = errorOf(e)
		}
		reason := FinishSuccess
		if err != nil {
			reason = FinishError
		}
		return d.end(dst, reason, result, err)
	case AgenticTurnCancelled:
		if top {
			return d.end(dst, FinishCanceled, nil, nil)
		}
	}
	return dst
}

// textOf reads a value as text: a string as is, anything else as its JSON.
func textOf(v gjson.Result) string {
	switch v.Type {
	case gjson.String:
		return v.Str
	case gjson.Null:
		return ""
	case gjson.JSON:
		return string(jsonw.AppendCompact(nil, v.Raw))
	}
	return v.Raw
}

func resultOf(v gjson.Result) *string {
	if !v.Exists() || v.Type == gjson.Null {
		return nil
	}
	s := textOf(v)
	return &s
}

// errorOf reads an error member: an object {code, message} or a string.
func errorOf(v gjson.Result) *translate.Error {
	if v.IsObject() {
		e := &translate.Error{Code: v.Get("code").Str, Message: textOf(v.Get("message"))}
		if e.Message == "" {
			e.Message = v.Raw
		}
		return e
	}
	return &translate.Error{Message: textOf(v)}
}

// working emits the working State before the first event that shows the
// agent at work.
func (d *EventDecoder) working(dst []*translate.Event) []*translate.Event {
	if d.isWorking {
		return dst
	}
	d.isWorking = true
	dst, _ = d.stateEv(dst, translate.StateWorking)
	return dst
}

// DecodeText appends the canonical events for a chunk of reply text that
// came without an event object: the agentic stream_request sends its
// chat output as plain SSE data.
func (d *EventDecoder) DecodeText(dst []*translate.Event, text string) []*translate.Event {
	if d.done {
		return dst
	}
	return d.text(dst, translate.RoleAssistant, text)
}

func (d *EventDecoder) text(dst []*translate.Event, role translate.Role, text string) []*translate.Event {
	if text == "" {
		return dst
	}
	dst = d.working(dst)
	if d.msgOpen && d.msgRole != role {
		dst = d.closeMsg(dst)
	}
	if !d.msgOpen {
		d.msgOpen, d.msgID, d.msgRole, d.msgText = true, d.newID("msg_"), role, d.msgText[:0]
		var ev *translate.Event
		dst, ev = d.emit(dst, translate.KindMessageStart)
		ev.MessageID = d.msgID
		ev.Message = &translate.Message{ID: d.msgID, Role: role}
	}
	if role == translate.RoleAssistant {
		d.replied = true
	}
	d.msgText = append(d.msgText, text...)
	dst, ev := d.emit(dst, translate.KindContent)
	ev.MessageID = d.msgID
	ev.Part = &translate.Part{Kind: translate.PartText, Text: text}
	ev.Delta = true
	return dst
}

// closeMsg ends the open message with its whole text.
func (d *EventDecoder) closeMsg(dst []*translate.Event) []*translate.Event {
	if !d.msgOpen {
		return dst
	}
	d.msgOpen = false
	dst, ev := d.emit(dst, translate.KindMessageEnd)
	ev.MessageID = d.msgID
	ev.Message = &translate.Message{ID: d.msgID, Role: d.msgRole, Parts: []translate.Part{translate.TextPart(string(d.msgText))}}
	return dst
}

func (d *EventDecoder) toolCall(dst []*translate.Event, callID, name string, args gjson.Result) []*translate.Event {
	dst = d.working(dst)
	dst = d.closeMsg(dst)
	if callID == "" {
		callID = d.newID("call_")
	}
	if len(d.calls) >= maxOpenCalls {
		d.calls = append(d.calls[:0], d.calls[1:]...) // forget the oldest
	}
	d.calls = append(d.calls, decCall{id: callID, name: name})
	var a string
	switch {
	case args.IsObject() || args.IsArray():
		a = string(jsonw.AppendCompact(nil, args.Raw))
	case args.Type == gjson.String:
		a = args.Str
	case args.Exists() && args.Type != gjson.Null:
		a = args.Raw
	}
	dst, ev := d.emit(dst, translate.KindToolCall)
	ev.Tool = &translate.Tool{CallID: callID, Name: name, Kind: translate.ToolPlugin, Arguments: a}
	ev.Done = true
	return dst
}

// toolResult pairs a result with its call: by id, else the oldest open
// call of that name, else the oldest open call.
func (d *EventDecoder) toolResult(dst []*translate.Event, callID, name, out string, isErr bool) []*translate.Event {
	dst = d.working(dst)
	dst = d.closeMsg(dst)
	match := -1
	for i, c := range d.calls {
		if callID != "" && c.id == callID || callID == "" && name != "" && c.name == name {
			match = i
			break
		}
	}
	if match < 0 && callID == "" && name == "" && len(d.calls) > 0 {
		match = 0
	}
	if match >= 0 {
		c := d.calls[match]
		d.calls = append(d.calls[:match], d.calls[match+1:]...)
		if callID == "" {
			callID = c.id
		}
		if name == "" {
			name = c.name
		}
	}
	dst, ev := d.emit(dst, translate.KindToolResult)
	ev.Tool = &translate.Tool{CallID: callID, Name: name, Kind: translate.ToolPlugin, Output: out, IsError: isErr}
	ev.Done = true
	return dst
}

func (d *EventDecoder) artifact(dst []*translate.Event, root gjson.Result) []*translate.Event {
	dst = d.working(dst)
	id := root.Get("artifact_id").Str
	if v := root.Get("id"); id == "" && v.Type == gjson.String {
		id = v.Str // the spec's own name, where it is not the event index
	}
	name := root.Get("name").Str
	p := translate.Part{Kind: translate.PartFile, URI: root.Get("url").Str, MIME: root.Get("mime_type").Str, Name: name}
	if strings.HasPrefix(p.MIME, "image/") {
		p.Kind = translate.PartImage
	}
	dst, ev := d.emit(dst, translate.KindArtifact)
	ev.Artifact = &translate.Artifact{ID: id, Name: name, Parts: []translate.Part{p}, Last: true}
	return dst
}

// keyParts is the question of a wait_for_input: a text part holding the
// descriptions, newline-joined, and a data part holding request_keys
// itself (what an Agent Protocol encoder writes back). {"input": q} alone
// is just the text q.
func keyParts(keys gjson.Result) []translate.Part {
	if !keys.IsObject() {
		return []translate.Part{translate.TextPart(textOf(keys))}
	}
	var texts []string
	n := 0
	single := ""
	keys.ForEach(func(k, v gjson.Result) bool {
		n++
		single = k.Str
		texts = append(texts, textOf(v))
		return true
	})
	if n == 1 && single == "input" {
		return []translate.Part{translate.TextPart(texts[0])}
	}
	ps := make([]translate.Part, 0, 2)
	if len(texts) > 0 {
		ps = append(ps, translate.TextPart(strings.Join(texts, "\n")))
	}
	return append(ps, translate.Part{Kind: translate.PartData, Data: jsonw.AppendCompact(nil, keys.Raw)})
}

func (d *EventDecoder) waitForInput(dst []*translate.Event, keys gjson.Result) []*translate.Event {
	dst = d.working(dst)
	dst = d.closeMsg(dst)
	dst, ev := d.emit(dst, translate.KindInputRequest)
	ev.Parts = keyParts(keys)
	dst, _ = d.stateEv(dst, translate.StateInputRequired)
	d.settled, d.isWorking, d.replied = true, false, false
	return dst
}

// end closes the turn. A successful end whose result was not streamed as
// text delivers it as a whole message first.
func (d *EventDecoder) end(dst []*translate.Event, reason FinishReason, result *string, err *translate.Error) []*translate.Event {
	dst = d.closeMsg(dst)
	if reason != FinishError && reason != FinishCanceled && result != nil && *result != "" && !d.replied {
		id := d.newID("msg_")
		var ev *translate.Event
		dst, ev = d.emit(dst, translate.KindMessageStart)
		ev.MessageID, ev.Message = id, &translate.Message{ID: id, Role: translate.RoleAssistant}
		dst, ev = d.emit(dst, translate.KindContent)
		ev.MessageID, ev.Part, ev.Done = id, &translate.Part{Kind: translate.PartText, Text: *result}, true
		dst, ev = d.emit(dst, translate.KindMessageEnd)
		ev.MessageID = id
		ev.Message = &translate.Message{ID: id, Role: translate.RoleAssistant, Parts: []translate.Part{translate.TextPart(*result)}}
	}
	d.settled, d.done = true, true
	var ev *translate.Event
	switch reason {
	case FinishError:
		if err == nil {
			err = &translate.Error{Code: translate.CodeUpstreamError, Message: "agent finished with an error"}
		}
		dst, ev = d.stateEv(dst, translate.StateFailed)
		ev.Err = err
	case FinishCanceled:
		dst, ev = d.stateEv(dst, translate.StateCanceled)
		ev.Err = err
	default: // success, or a reason this codec does not know
		dst, _ = d.stateEv(dst, translate.StateCompleted)
	}
	return dst
}

// Finish ends a turn whose events stopped before it settled: it closes the
// open message and appends a canceled State with Err.Code
// translate.CodeStreamIncomplete. A settled turn gets nothing.
func (d *EventDecoder) Finish(dst []*translate.Event) []*translate.Event {
	if d.settled {
		return dst
	}
	dst = d.closeMsg(dst)
	d.settled, d.done = true, true
	dst, ev := d.stateEv(dst, translate.StateCanceled)
	ev.Err = &translate.Error{Code: translate.CodeStreamIncomplete, Message: "event stream ended before the turn completed"}
	return dst
}

// DecodeList appends the canonical events for a getevents?stream=false
// answer: a JSON array of events (a single event object is accepted too).
func (d *EventDecoder) DecodeList(dst []*translate.Event, body []byte) ([]*translate.Event, error) {
	if !gjson.ValidBytes(body) {
		return dst, malformed("event list is not valid JSON")
	}
	root := gjson.ParseBytes(body)
	if root.IsObject() {
		return d.Decode(dst, []byte(root.Raw))
	}
	if !root.IsArray() {
		return dst, malformed("event list is not a JSON array")
	}
	var err error
	root.ForEach(func(_, v gjson.Result) bool {
		dst, err = d.Decode(dst, []byte(v.Raw))
		return err == nil
	})
	return dst, err
}

// StreamDecoder reads an Agent Protocol SSE stream (getevents?stream=true,
// stream_request) as canonical events; it is a translate.Stream without
// Close. It is lenient like internal/sse, skips pings, and reads data that
// is not a JSON object (the agentic stream_request's plain text) as reply
// text, except "[DONE]". It stops reading once the turn settles; a stream
// that ends before yields a canceled State with Err.Code
// translate.CodeStreamIncomplete.
type StreamDecoder struct {
	r      *sse.Reader
	d      *EventDecoder
	q      []*translate.Event
	qi     int
	err    error
	lastID string
}

// NewStreamDecoder returns a StreamDecoder reading r.
func NewStreamDecoder(r io.Reader, opts DecoderOptions) *StreamDecoder {
	return &StreamDecoder{r: sse.NewReader(r, opts.MaxEventSize), d: NewEventDecoder(opts)}
}

// Decoder returns the EventDecoder behind s (its dialect, LastID, …).
func (s *StreamDecoder) Decoder() *EventDecoder { return s.d }

// LastEventID returns the last SSE id: line read, for Last-Event-ID.
func (s *StreamDecoder) LastEventID() string { return s.lastID }

// Next returns the next canonical event, or io.EOF after the last. A read
// error is returned wrapped, and again on every later call.
func (s *StreamDecoder) Next() (*translate.Event, error) {
	for {
		if s.qi < len(s.q) {
			ev := s.q[s.qi]
			s.qi++
			return ev, nil
		}
		if s.err != nil {
			return nil, s.err
		}
		s.q, s.qi = s.q[:0], 0
		if s.d.Settled() {
			s.err = io.EOF
			continue
		}
		sev, err := s.r.Next()
		if err == io.EOF {
			s.q = s.d.Finish(s.q)
			s.err = io.EOF
			continue
		}
		if err != nil {
			s.err = fmt.Errorf("agentprotocol: reading event stream: %w", err)
			continue
		}
		if sev.HasID {
			s.lastID = string(sev.ID)
		}
		data := bytes.TrimSpace(sev.Data)
		if len(data) == 0 || string(data) == "[DONE]" {
			continue
		}
		if data[0] == '{' && gjson.ValidBytes(data) {
			s.q, _ = s.d.Decode(s.q, data)
			continue
		}
		s.q = s.d.DecodeText(s.q, string(sev.Data))
	}
}

// detectEvent tells the dialect of one event, or DialectUnknown.
func detectEvent(root gjson.Result) Dialect {
	if root.Get("payload").Exists() && !root.Get("id").Exists() {
		return DialectAgentic
	}
	switch root.Get("type").Str {
	case TypeRunStarted, TypeRunCompleted:
		return DialectRun
	case TypeRequestStarted, TypeRequestCompleted, TypeOperationComplete:
		return DialectProcess
	}
	if root.Get("thread_id").Exists() {
		return DialectRun
	}
	if root.Get("request_id").Exists() {
		return DialectProcess
	}
	return DialectUnknown
}
