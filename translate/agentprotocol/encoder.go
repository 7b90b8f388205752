package agentprotocol

import (
	"bytes"
	"encoding/base64"
	"iter"
	"path"
	"strings"
	"time"

	"github.com/agentbridge/bridge/internal/jsonw"
	"github.com/agentbridge/bridge/internal/sse"
	"github.com/agentbridge/bridge/translate"
	"github.com/tidwall/gjson"
)

// EncoderOptions name the turn an Encoder writes events of.
type EncoderOptions struct {
	// Dialect picks the event shapes; DialectUnknown means DialectProcess.
	Dialect Dialect
	// Agent is every event's "agent" member.
	Agent string
	// Turn is the turn id (request_id in DialectProcess, run_id in
	// DialectRun); Session the session id (run_id in DialectProcess,
	// thread_id in DialectRun). Each is written on every event when set; a
	// server that assigned them fills them in.
	Turn, Session string
	// Prompt is the payload of the agentic prompt_started event.
	Prompt string
}

// Encoder writes canonical events as Agent Protocol events for one turn
// (server role). Encode appends zero or more events, each a compact JSON
// object on its own line with the caller's event id; AppendSSE, AppendArray
// and Objects turn those lines into the three output forms. An Encoder is
// not safe for concurrent use.
type Encoder struct {
	opts                EncoderOptions
	started, done, wait bool
	agentic             bool
	typStart, typEnd    string
	turnKey, sessionKey string
	msgs                map[string]textClass
	slots               map[slotKey]*encSlot
	lastSlot            *encSlot
	reply               []byte // the text_output written so far
	sentTools, sentArts map[string]bool
	callNames           map[string]string
	pending             []pendingTool
	lastErr             *translate.Error
	timestamp           time.Time // of the event being encoded
	scratch             []byte
}

type slotKey struct {
	msg   string
	index int
}

type encSlot struct {
	slotKey
	sent []byte
}

type pendingTool struct {
	kind translate.Kind
	tool translate.Tool
	msg  string
}

// textClass tells what the text of a message becomes.
type textClass uint8

const (
	textReply textClass = iota // text_output (and part of the result)
	textTool                   // tool_text_output
	textSkip                   // not written: user, system, reasoning, tool data
)

// NewEncoder returns an Encoder for one turn.
func NewEncoder(opts EncoderOptions) *Encoder {
	opts.Dialect = opts.Dialect.orDefault()
	e := &Encoder{opts: opts}
	switch opts.Dialect {
	case DialectRun:
		e.typStart, e.typEnd, e.turnKey, e.sessionKey = TypeRunStarted, TypeRunCompleted, "run_id", "thread_id"
	case DialectAgentic:
		e.typStart, e.typEnd, e.agentic = AgenticPromptStarted, AgenticTurnEnd, true
	default:
		e.typStart, e.typEnd, e.turnKey, e.sessionKey = TypeRequestStarted, TypeRequestCompleted, "request_id", "run_id"
	}
	return e
}

// Done reports whether the turn's end event was written; nothing is
// written after it.
func (e *Encoder) Done() bool { return e.done }

// Settled reports whether the stream has said all it will say for now: the
// turn ended, or it waits for input (a continuation resumes it, and the
// same Encoder goes on).
func (e *Encoder) Settled() bool { return e.done || e.wait }

// Reply returns the text written as text_output so far: the result of a
// successful turn.
func (e *Encoder) Reply() string { return string(e.reply) }

// Encode appends the Agent Protocol events for ev to dst, one compact JSON
// object per line ("\n"-terminated; the objects never hold a raw newline).
// Every object carries id, the caller's event id (the bridge uses the
// exchange log sequence): when one canonical event yields several objects
// they share it, so that since=id skips all of them together. See the
// package doc for the mapping.
func (e *Encoder) Encode(dst []byte, ev *translate.Event, id uint64) []byte {
	if e.done || ev == nil {
		return dst
	}
	e.timestamp = ev.Time
	switch ev.Kind {
	case translate.KindState:
		return e.state(dst, ev, id)
	case translate.KindMessageStart:
		dst = e.start(dst, id)
		if ev.Message != nil {
			mid := ev.Message.ID
			if mid == "" {
				mid = ev.MessageID
			}
			e.setClass(mid, classOf(ev.Message))
		}
	case translate.KindMessageEnd:
		dst = e.start(dst, id)
		dst = e.messageEnd(dst, ev, id)
	case translate.KindContent:
		dst = e.start(dst, id)
		dst = e.content(dst, ev, id)
	case translate.KindToolCall, translate.KindToolResult:
		dst = e.start(dst, id)
		dst = e.tool(dst, ev, id)
	case translate.KindArtifact:
		dst = e.start(dst, id)
		dst = e.artifact(dst, ev, id)
	case translate.KindInputRequest:
		dst = e.start(dst, id)
		dst = e.flush(dst, id)
		if !e.wait {
			dst = e.waitForInput(dst, id, inputKeys(ev.Parts))
		}
	case translate.KindUsage:
		if isObject(ev.Data) {
			dst = e.start(dst, id)
			dst = e.usage(dst, ev.Data, id)
		}
	case translate.KindError:
		if ev.Err != nil {
			x := *ev.Err
			e.lastErr = &x
		}
	}
	return dst
}

// Finish ends a turn whose stream stopped without an end event: it writes
// the end event with finish_reason error carrying err (or the last Error
// event seen), or canceled when there is neither. A turn that waits for
// input is paused, not ended: Finish writes nothing then, nor after the
// end event.
func (e *Encoder) Finish(dst []byte, err *translate.Error, id uint64) []byte {
	if e.done || e.wait {
		return dst
	}
	if err == nil {
		err = e.lastErr
	}
	dst = e.start(dst, id)
	dst = e.flush(dst, id)
	if err != nil {
		return e.end(dst, id, FinishError, err)
	}
	return e.end(dst, id, FinishCanceled, nil)
}

func (e *Encoder) state(dst []byte, ev *translate.Event, id uint64) []byte {
	dst = e.start(dst, id)
	switch ev.State {
	case translate.StateWorking:
		e.wait = false
	case translate.StateInputRequired:
		dst = e.flush(dst, id)
		if !e.wait {
			dst = e.waitForInput(dst, id, inputKeys(ev.Parts))
		}
	case translate.StateCompleted, translate.StateAwaitingCompletion:
		dst = e.flush(dst, id)
		dst = e.end(dst, id, FinishSuccess, nil)
	case translate.StateFailed, translate.StateRejected:
		dst = e.flush(dst, id)
		err := ev.Err
		if err == nil {
			err = e.lastErr
		}
		if err == nil {
			msg := translate.PartsText(ev.Parts)
			if msg == "" {
				msg = string(ev.State)
			}
			err = &translate.Error{Message: msg}
		}
		dst = e.end(dst, id, FinishError, err)
	case translate.StateCanceled:
		dst = e.flush(dst, id)
		dst = e.end(dst, id, FinishCanceled, ev.Err)
	}
	return dst
}

// begin opens an event object: the header members of the dialect.
func (e *Encoder) begin(dst []byte, id uint64, typ, role string) []byte {
	if e.agentic {
		dst = append(dst, `{"type":`...)
		dst = jsonw.AppendString(dst, typ)
		dst = appendStrField(dst, "agent", e.opts.Agent)
		return append(dst, `,"depth":0`...)
	}
	dst = append(dst, `{"id":`...)
	dst = appendUint(dst, id)
	dst = appendStrField(dst, "type", typ)
	dst = appendStrField(dst, "agent", e.opts.Agent)
	dst = append(dst, `,"depth":0`...)
	if role != "" {
		dst = appendStrField(dst, "role", role)
	}
	if e.opts.Turn != "" {
		dst = appendStrField(dst, e.turnKey, e.opts.Turn)
	}
	if e.opts.Session != "" {
		dst = appendStrField(dst, e.sessionKey, e.opts.Session)
	}
	if !e.timestamp.IsZero() {
		dst = appendKey(dst, "timestamp")
		dst = append(dst, '"')
		dst = e.timestamp.UTC().AppendFormat(dst, time.RFC3339Nano)
		dst = append(dst, '"')
	}
	return dst
}

func endObject(dst []byte) []byte { return append(dst, '}', '\n') }

// start writes the turn's start event once, before anything else.
func (e *Encoder) start(dst []byte, id uint64) []byte {
	if e.started {
		return dst
	}
	e.started = true
	dst = e.begin(dst, id, e.typStart, "system")
	if e.agentic {
		dst = appendStrField(dst, "payload", e.opts.Prompt)
	}
	return endObject(dst)
}

func (e *Encoder) end(dst []byte, id uint64, reason FinishReason, err *translate.Error) []byte {
	e.done = true
	if e.agentic {
		if reason == FinishCanceled {
			return endObject(append(e.begin(dst, id, AgenticTurnCancelled, ""), `,"payload":{}`...))
		}
		dst = e.begin(dst, id, AgenticTurnEnd, "")
		dst = append(dst, `,"payload":{"messages":[{"role":"assistant","content":`...)
		dst = jsonw.AppendString(dst, string(e.reply))
		dst = append(dst, '}', ']')
		if err != nil {
			dst = appendErr(dst, err)
		}
		return endObject(append(dst, '}'))
	}
	dst = e.begin(dst, id, e.typEnd, "system")
	dst = appendStrField(dst, "finish_reason", string(reason))
	if reason == FinishSuccess {
		dst = appendStrField(dst, "result", string(e.reply))
	}
	if err != nil {
		dst = appendErr(dst, err)
	}
	return endObject(dst)
}

func appendErr(dst []byte, err *translate.Error) []byte {
	dst = appendKey(dst, "error")
	dst = append(dst, '{')
	if err.Code != "" {
		dst = appendStrField(dst, "code", err.Code)
	}
	dst = appendStrField(dst, "message", err.Message)
	return append(dst, '}')
}

// classOf tells what a message's text becomes: assistant text is the
// reply, tool text is tool_text_output; user and system messages,
// reasoning and tool-call data messages are not written.
func classOf(m *translate.Message) textClass {
	switch {
	case m.Role == translate.RoleUser || m.Role == translate.RoleSystem:
		return textSkip
	case m.Type == "reasoning" || strings.HasSuffix(m.Type, "_call") || strings.HasSuffix(m.Type, "_call_output"):
		return textSkip
	case m.Role == translate.RoleTool:
		return textTool
	}
	return textReply
}

func (e *Encoder) setClass(id string, c textClass) {
	if e.msgs == nil {
		e.msgs = make(map[string]textClass)
	}
	e.msgs[id] = c
}

// class returns the class of message id; a message never announced is
// the reply.
func (e *Encoder) class(id string) textClass { return e.msgs[id] }

// slot returns the text slot of a message's content index; the last one
// used is cached, as content streams one slot at a time.
func (e *Encoder) slot(msg string, index int) *encSlot {
	k := slotKey{msg, index}
	if s := e.lastSlot; s != nil && s.slotKey == k {
		return s
	}
	if e.slots == nil {
		e.slots = make(map[slotKey]*encSlot)
	}
	s := e.slots[k]
	if s == nil {
		s = &encSlot{slotKey: k}
		e.slots[k] = s
	}
	e.lastSlot = s
	return s
}

// increment returns what text adds to the slot: a delta as is; a snapshot
// that extends what was sent, the new suffix; any other snapshot, whole
// (the slot starts over).
func (s *encSlot) increment(text string, delta bool) string {
	if delta {
		s.sent = append(s.sent, text...)
		return text
	}
	if len(text) >= len(s.sent) && string(s.sent) == text[:len(s.sent)] {
		inc := text[len(s.sent):]
		s.sent = append(s.sent, inc...)
		return inc
	}
	s.sent = append(s.sent[:0], text...)
	return text
}

func (e *Encoder) content(dst []byte, ev *translate.Event, id uint64) []byte {
	p := ev.Part
	if p == nil || (p.Kind != translate.PartText && p.Kind != translate.PartRefusal) {
		return dst
	}
	c := e.class(ev.MessageID)
	if c == textSkip {
		return dst
	}
	inc := e.slot(ev.MessageID, ev.Index).increment(p.Text, ev.Delta)
	return e.text(dst, id, c, inc)
}

func (e *Encoder) text(dst []byte, id uint64, c textClass, text string) []byte {
	if text == "" {
		return dst
	}
	if c == textReply {
		e.reply = append(e.reply, text...)
	}
	if e.agentic {
		if c != textReply {
			return dst
		}
		dst = e.begin(dst, id, AgenticChatOutput, "")
		dst = append(dst, `,"payload":{"content":`...)
		dst = jsonw.AppendString(dst, text)
		return endObject(append(dst, `,"role":"assistant"}`...))
	}
	if c == textTool {
		dst = e.begin(dst, id, TypeToolTextOutput, "tool")
	} else {
		dst = e.begin(dst, id, TypeTextOutput, "assistant")
	}
	return endObject(appendStrField(dst, "content", text))
}

// messageEnd writes the text of a completed message that its content
// events did not (a message that arrived whole), then flushes its tools.
func (e *Encoder) messageEnd(dst []byte, ev *translate.Event, id uint64) []byte {
	m := ev.Message
	mid := ev.MessageID
	if m != nil && m.ID != "" {
		mid = m.ID
	}
	if m != nil && len(m.Parts) > 0 {
		c := classOf(m)
		if m.Role == "" && m.Type == "" {
			c = e.class(mid)
		}
		if c != textSkip {
			var rest []byte
			for i := range m.Parts {
				p := &m.Parts[i]
				if p.Kind != translate.PartText && p.Kind != translate.PartRefusal {
					continue
				}
				rest = append(rest, e.slot(mid, i).increment(p.Text, false)...)
			}
			dst = e.text(dst, id, c, string(rest))
		}
	}
	return e.flushMsg(dst, id, mid, false)
}

func toolKey(k translate.Kind, callID string) string {
	if k == translate.KindToolCall {
		return "c:" + callID
	}
	return "r:" + callID
}

func (e *Encoder) tool(dst []byte, ev *translate.Event, id uint64) []byte {
	t := ev.Tool
	if t == nil {
		return dst
	}
	if !ev.Done {
		// A snapshot of a call still streaming: keep the newest, write it
		// when it is done or when its message or the turn ends.
		for i := range e.pending {
			if p := &e.pending[i]; p.kind == ev.Kind && p.tool.CallID == t.CallID {
				p.tool = *t
				return dst
			}
		}
		e.pending = append(e.pending, pendingTool{kind: ev.Kind, tool: *t, msg: ev.MessageID})
		return dst
	}
	for i := range e.pending {
		if p := &e.pending[i]; p.kind == ev.Kind && p.tool.CallID == t.CallID {
			e.pending = append(e.pending[:i], e.pending[i+1:]...)
			break
		}
	}
	return e.writeTool(dst, id, ev.Kind, t)
}

// flush writes every pending tool snapshot.
func (e *Encoder) flush(dst []byte, id uint64) []byte { return e.flushMsg(dst, id, "", true) }

func (e *Encoder) flushMsg(dst []byte, id uint64, msg string, all bool) []byte {
	keep := e.pending[:0]
	for _, p := range e.pending {
		if all || p.msg == msg {
			dst = e.writeTool(dst, id, p.kind, &p.tool)
			continue
		}
		keep = append(keep, p)
	}
	e.pending = keep
	return dst
}

func (e *Encoder) writeTool(dst []byte, id uint64, k translate.Kind, t *translate.Tool) []byte {
	if t.CallID != "" {
		key := toolKey(k, t.CallID)
		if e.sentTools[key] {
			return dst
		}
		if e.sentTools == nil {
			e.sentTools = make(map[string]bool)
			e.callNames = make(map[string]string)
		}
		e.sentTools[key] = true
	}
	name := t.Name
	if k == translate.KindToolCall {
		if t.CallID != "" && e.callNames != nil {
			e.callNames[t.CallID] = name
		}
		if e.agentic {
			dst = e.begin(dst, id, AgenticToolCall, "")
			dst = append(dst, `,"payload":{"name":`...)
			dst = jsonw.AppendString(dst, name)
			dst = appendKey(dst, "arguments")
			dst = appendArgs(dst, t.Arguments)
			dst = appendStrField(dst, "tool_call_id", t.CallID)
			return endObject(append(dst, '}'))
		}
		dst = e.begin(dst, id, TypeToolCall, "assistant")
		dst = appendStrField(dst, "function_name", name)
		dst = appendKey(dst, "args")
		dst = appendArgs(dst, t.Arguments)
		if t.CallID != "" {
			dst = appendStrField(dst, "tool_call_id", t.CallID)
		}
		return endObject(dst)
	}
	if name == "" && t.CallID != "" {
		name = e.callNames[t.CallID]
	}
	switch {
	case e.agentic && t.IsError:
		dst = e.begin(dst, id, AgenticToolError, "")
		dst = append(dst, `,"payload":{"name":`...)
		dst = jsonw.AppendString(dst, name)
		dst = appendStrField(dst, "error", t.Output)
		dst = appendStrField(dst, "tool_call_id", t.CallID)
		return endObject(append(dst, '}'))
	case e.agentic:
		dst = e.begin(dst, id, AgenticToolResult, "")
		dst = append(dst, `,"payload":{"name":`...)
		dst = jsonw.AppendString(dst, name)
		dst = appendStrField(dst, "result", t.Output)
		dst = append(dst, `,"is_log":false`...)
		dst = appendStrField(dst, "tool_call_id", t.CallID)
		dst = append(dst, '}')
		return endObject(appendStrField(dst, "result", t.Output))
	case t.IsError:
		dst = e.begin(dst, id, TypeToolError, "tool")
		dst = appendStrField(dst, "content", t.Output)
		if name != "" {
			dst = appendStrField(dst, "function_name", name)
		}
	default:
		dst = e.begin(dst, id, TypeToolResult, "tool")
		dst = appendStrField(dst, "function_name", name)
		dst = appendStrField(dst, "text_result", t.Output)
	}
	if t.CallID != "" {
		dst = appendStrField(dst, "tool_call_id", t.CallID)
	}
	return endObject(dst)
}

// appendArgs writes a call's arguments as the object args must be: the
// JSON object they hold, {} when empty, else {"arguments": "<text>"}.
func appendArgs(dst []byte, args string) []byte {
	switch {
	case strings.TrimSpace(args) == "":
		return append(dst, '{', '}')
	case isObject(args):
		return jsonw.AppendCompact(dst, args)
	}
	return append(appendStrField(append(dst, '{'), "arguments", args), '}')
}

func (e *Encoder) artifact(dst []byte, ev *translate.Event, id uint64) []byte {
	a := ev.Artifact
	if a == nil || e.agentic {
		return dst
	}
	if a.ID != "" {
		if e.sentArts[a.ID] {
			return dst // a later chunk of an artifact already announced
		}
		if e.sentArts == nil {
			e.sentArts = make(map[string]bool)
		}
		e.sentArts[a.ID] = true
	}
	url, mime, name := locate(a)
	dst = e.begin(dst, id, TypeArtifactGenerated, "assistant")
	dst = appendStrField(dst, "name", name)
	dst = appendStrField(dst, "artifact_id", a.ID)
	dst = appendStrField(dst, "url", url)
	dst = appendStrField(dst, "mime_type", mime)
	return endObject(dst)
}

// locate returns an artifact's url, MIME type and name: the first part
// with a URI, else the first with inline bytes, text or data as a data: URI.
func locate(a *translate.Artifact) (url, mime, name string) {
	name = a.Name
	var pick *translate.Part
	for i := range a.Parts {
		if a.Parts[i].URI != "" {
			pick = &a.Parts[i]
			break
		}
	}
	if pick == nil && len(a.Parts) > 0 {
		pick = &a.Parts[0]
	}
	if pick == nil {
		return "", "", name
	}
	mime = pick.MIME
	if name == "" {
		name = pick.Name
	}
	switch {
	case pick.URI != "":
		url = pick.URI
	case pick.Bytes != "":
		if mime == "" {
			mime = "application/octet-stream"
		}
		url = "data:" + mime + ";base64," + pick.Bytes
	case pick.Kind == translate.PartText:
		if mime == "" {
			mime = "text/plain"
		}
		url = "data:" + mime + ";base64," + base64.StdEncoding.EncodeToString([]byte(pick.Text))
	case pick.Kind == translate.PartData:
		if mime == "" {
			mime = "application/json"
		}
		url = "data:" + mime + ";base64," + base64.StdEncoding.EncodeToString(pick.Data)
	}
	if name == "" && pick.URI != "" && !strings.HasPrefix(pick.URI, "data:") {
		name = path.Base(pick.URI)
	}
	if name == "" {
		name = a.ID
	}
	return url, mime, name
}

// inputKeys returns the request_keys of an input request: a data part's
// object (the keys the agent asked for, as the decoder keeps them), else
// {"input": question}.
func inputKeys(ps []translate.Part) []byte {
	for i := range ps {
		if ps[i].Kind == translate.PartData && isObject(ps[i].Data) {
			return jsonw.AppendCompact(nil, ps[i].Data)
		}
	}
	return append(jsonw.AppendString([]byte(`{"input":`), translate.PartsText(ps)), '}')
}

func (e *Encoder) waitForInput(dst []byte, id uint64, keys []byte) []byte {
	e.wait = true
	if e.agentic {
		dst = e.begin(dst, id, AgenticWaitForInput, "")
		dst = append(dst, `,"payload":`...)
		return endObject(appendObject(dst, keys))
	}
	dst = e.begin(dst, id, TypeWaitForInput, "system")
	dst = appendKey(dst, "request_keys")
	return endObject(appendObject(dst, keys))
}

func (e *Encoder) usage(dst []byte, data []byte, id uint64) []byte {
	if e.agentic {
		dst = e.begin(dst, id, AgenticCompletionEnd, "")
		dst = append(dst, `,"payload":{"usage":`...)
		return endObject(append(jsonw.AppendCompact(dst, data), '}'))
	}
	dst = e.begin(dst, id, TypeCompletionResult, "assistant")
	dst = appendKey(dst, "usage")
	return endObject(jsonw.AppendCompact(dst, data))
}

// EncodeSSE is Encode followed by AppendSSE.
func (e *Encoder) EncodeSSE(dst []byte, ev *translate.Event, id uint64) []byte {
	e.scratch = e.Encode(e.scratch[:0], ev, id)
	return AppendSSE(dst, e.scratch, id, e.opts.Dialect)
}

// AppendSSE frames encoded events (Encode's lines) as Server-Sent Events:
// "id: <id>" (so that Last-Event-ID is the since= of a resume) and
// "data: <object>", no event: line, so that EventSource.onmessage fires.
// The agentic dialect adds "event: message", as its server sends. An id of
// 0 writes no id line.
func AppendSSE(dst, lines []byte, id uint64, d Dialect) []byte {
	for obj := range Objects(lines) {
		if d == DialectAgentic {
			dst = sse.AppendNamed(dst, id, "message", obj)
		} else {
			dst = sse.AppendData(dst, id, obj)
		}
	}
	return dst
}

// Objects yields the JSON objects of encoded events one at a time: one
// WebSocket text frame each.
func Objects(lines []byte) iter.Seq[[]byte] {
	return func(yield func([]byte) bool) {
		for len(lines) > 0 {
			i := bytes.IndexByte(lines, '\n')
			if i < 0 {
				i = len(lines)
			}
			obj := lines[:i]
			if i < len(lines) {
				lines = lines[i+1:]
			} else {
				lines = nil
			}
			if len(obj) > 0 && !yield(obj) {
				return
			}
		}
	}
}

// AppendArray writes encoded events as one JSON array, the body of a
// non-streaming getevents.
func AppendArray(dst, lines []byte) []byte {
	dst = append(dst, '[')
	first := true
	for obj := range Objects(lines) {
		if !first {
			dst = append(dst, ',')
		}
		first = false
		dst = append(dst, obj...)
	}
	return append(dst, ']')
}

// EventID returns the id member of an encoded 2025 event, so that a server
// filtering a replay by since= need not parse more.
func EventID(obj []byte) uint64 { return gjson.GetBytes(obj, "id").Uint() }

// AppendHTTPError writes the JSON body of an HTTP error answer: FastAPI's
// {"detail": message}, which the agentic clients read, plus the bridge's
// code.
func AppendHTTPError(dst []byte, code, message string) []byte {
	dst = append(dst, `{"detail":`...)
	dst = jsonw.AppendString(dst, message)
	if code != "" {
		dst = appendStrField(dst, "code", code)
	}
	return append(dst, '}')
}
