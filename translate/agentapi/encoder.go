package agentapi

import (
	"time"

	"github.com/agentbridge/bridge/internal/ids"
	"github.com/agentbridge/bridge/internal/jsonw"
	"github.com/agentbridge/bridge/internal/sse"
	"github.com/agentbridge/bridge/translate"
)

// The members the encoder writes itself for each object kind. A carried-over
// Ext never repeats them; the decoder keeps them out of Ext in the first
// place, and the encoder checks again because Ext may come from elsewhere.
var (
	responseKeys = keySet{"sequence_number", "object", "status", "error", "id", "created_at",
		"completed_at", "output", "usage", "session_id"}
	messageKeys = keySet{"sequence_number", "object", "status", "error", "id", "type", "role",
		"content", "code", "message", "usage", "metadata"}
	contentKeys = keySet{"sequence_number", "object", "status", "error", "type", "index", "delta", "msg_id"}
)

// EncoderOptions name the response an Encoder writes.
type EncoderOptions struct {
	// ResponseID is the response id; the Python server uses the request's id
	// when it has one. Empty means "response_<uuid4>".
	ResponseID string
	// SessionID is echoed as session_id; empty writes null.
	SessionID string
	// CreatedAt is created_at in unix seconds; 0 means now.
	CreatedAt int64
}

// Encoder writes canonical events as the SSE body of POST /process, the way
// the Python server writes it: every frame "data: <one-line JSON>\n\n", every
// object with "object" and every field, nulls included, in the server's
// field order, sequence_number from 0. An Encoder serves one response and is
// not safe for concurrent use.
type Encoder struct {
	respID    string
	session   string
	createdAt int64
	// now and newID are replaced by tests for reproducible output.
	now   func() int64
	newID func() string

	seq                       int64
	created, inProgress, done bool
	msgs                      map[string]*encMsg
	open                      []*encMsg // open messages, oldest first
	current                   *encMsg   // where content without a message id goes
	output                    [][]byte  // completed message objects, in order
	usage                     []byte
	lastErr                   *translate.Error
	buf                       []byte // the JSON of the frame being written
	scratch                   []byte // tool data being built
}

// encMsg is a message the encoder announced, with the accumulated value of
// each content slot so it can write the full values when it closes.
type encMsg struct {
	id, typ, role string
	ext           []byte
	open          bool
	// synthetic marks a tool message the encoder opened itself because the
	// event named no open message; it is closed after the call is Done.
	synthetic bool
	callID    string
	slots     []slot
}

type slot struct {
	index     int
	set       bool
	completed bool // a completed content frame carries the current value
	part      translate.Part
	text      []byte // the accumulated text of a text or refusal slot
	ext       []byte
}

// NewEncoder returns an Encoder for one response.
func NewEncoder(opts EncoderOptions) *Encoder {
	e := &Encoder{
		respID:    opts.ResponseID,
		session:   opts.SessionID,
		createdAt: opts.CreatedAt,
		now:       func() int64 { return time.Now().Unix() },
		newID:     func() string { return "msg_" + ids.UUID() },
		msgs:      make(map[string]*encMsg),
	}
	if e.respID == "" {
		e.respID = "response_" + ids.UUID()
	}
	if e.createdAt == 0 {
		e.createdAt = e.now()
	}
	return e
}

// Done reports whether a terminal response was written; Encode and Finish
// write nothing after it.
func (e *Encoder) Done() bool { return e.done }

// Encode appends the frames for ev to dst: zero, one or several. The first
// frame of a stream is always preceded by the response "created" and
// "in_progress" frames ("in_progress" waits for the next event when ev is a
// submitted State).
func (e *Encoder) Encode(dst []byte, ev *translate.Event) []byte {
	if e.done || ev == nil {
		return dst
	}
	switch ev.Kind {
	case translate.KindState:
		return e.state(dst, ev)
	case translate.KindMessageStart:
		dst = e.start(dst, true, nil)
		m := ev.Message
		if m == nil {
			m = &translate.Message{ID: ev.MessageID}
		}
		ext := m.Ext.For(translate.ProtoAgentAPI)
		if ext == nil {
			ext = ev.Ext.For(translate.ProtoAgentAPI)
		}
		id := m.ID
		if id == "" {
			id = ev.MessageID
		}
		if x := e.msgs[id]; x != nil && x.open {
			return dst
		}
		_, dst = e.openMessage(dst, id, m.Type, string(m.Role), ext, false)
	case translate.KindMessageEnd:
		dst = e.start(dst, true, nil)
		id := ev.MessageID
		if ev.Message != nil && ev.Message.ID != "" {
			id = ev.Message.ID
		}
		var m *encMsg
		if id == "" {
			m = e.current
			if m == nil {
				return dst
			}
		} else {
			m = e.msgs[id]
		}
		if m == nil {
			var typ, role string
			var ext []byte
			if ev.Message != nil {
				typ, role, ext = ev.Message.Type, string(ev.Message.Role), ev.Message.Ext.For(translate.ProtoAgentAPI)
			}
			m, dst = e.openMessage(dst, id, typ, role, ext, false)
		}
		if m.open {
			dst = e.closeMessage(dst, m, ev.Message)
		}
	case translate.KindContent:
		dst = e.start(dst, true, nil)
		dst = e.content(dst, ev)
	case translate.KindToolCall, translate.KindToolResult:
		dst = e.start(dst, true, nil)
		dst = e.tool(dst, ev)
	case translate.KindArtifact:
		dst = e.start(dst, true, nil)
		dst = e.artifact(dst, ev)
	case translate.KindInputRequest:
		dst = e.start(dst, true, nil)
		dst = e.inputRequest(dst, ev)
	case translate.KindUsage:
		if len(ev.Data) > 0 {
			e.usage = ev.Data
		}
	case translate.KindError:
		if ev.Err != nil {
			err := *ev.Err
			e.lastErr = &err
		}
	}
	return dst
}

// Finish ends a response that has no terminal frame yet: it closes the open
// messages and writes a failed response carrying err, or, when err is nil,
// the last KindError seen, or else a canceled response. After a terminal
// response it appends nothing.
func (e *Encoder) Finish(dst []byte, err *translate.Error) []byte {
	if e.done {
		return dst
	}
	if err == nil {
		err = e.lastErr
	}
	if err != nil {
		return e.terminal(dst, "failed", err, nil)
	}
	return e.terminal(dst, "canceled", nil, nil)
}

func (e *Encoder) state(dst []byte, ev *translate.Event) []byte {
	ext := ev.Ext.For(translate.ProtoAgentAPI)
	switch ev.State {
	case translate.StateSubmitted:
		return e.start(dst, false, ext)
	case translate.StateWorking:
		return e.start(dst, true, ext)
	case translate.StateInputRequired:
		return e.terminal(dst, "incomplete", nil, ext)
	case translate.StateCompleted, translate.StateAwaitingCompletion:
		// The Agent API has no awaiting-completion: the bridge accepts the
		// result on the client's behalf.
		return e.terminal(dst, "completed", nil, ext)
	case translate.StateFailed:
		return e.terminal(dst, "failed", e.errOf(ev, "agent failed"), ext)
	case translate.StateRejected:
		return e.terminal(dst, "rejected", e.errOf(ev, "request rejected"), ext)
	case translate.StateCanceled:
		return e.terminal(dst, "canceled", ev.Err, ext)
	}
	return dst
}

// errOf picks the error of a failed or rejected state: its own, else the
// last KindError, else a generic one built from the reason text.
func (e *Encoder) errOf(ev *translate.Event, fallback string) *translate.Error {
	if ev.Err != nil {
		return ev.Err
	}
	if e.lastErr != nil {
		return e.lastErr
	}
	msg := translate.PartsText(ev.Parts)
	if msg == "" {
		msg = fallback
	}
	return &translate.Error{Code: translate.CodeUpstreamError, Message: msg}
}

// start writes the response "created" frame, and "in_progress" when
// progress is set, unless they were written already. ext goes on the
// frames written for a State event.
func (e *Encoder) start(dst []byte, progress bool, ext []byte) []byte {
	if !e.created {
		e.created = true
		dst = e.response(dst, "created", nil, false, ext)
	}
	if progress && !e.inProgress {
		e.inProgress = true
		dst = e.response(dst, "in_progress", nil, false, ext)
	}
	return dst
}

// terminal closes every open message and writes the last response.
func (e *Encoder) terminal(dst []byte, status string, err *translate.Error, ext []byte) []byte {
	dst = e.start(dst, true, nil)
	for len(e.open) > 0 {
		if status == "completed" || status == "incomplete" {
			dst = e.closeMessage(dst, e.open[0], nil)
		} else {
			dst = e.abortMessage(dst, e.open[0])
		}
	}
	dst = e.response(dst, status, err, true, ext)
	e.done = true
	return dst
}

// begin starts the JSON of a frame: sequence_number, object and status.
func (e *Encoder) begin(object, status string) []byte {
	b := append(e.buf[:0], `{"sequence_number":`...)
	b = appendInt(b, e.seq)
	b = append(b, `,"object":"`...)
	b = append(b, object...)
	b = append(b, `","status":`...)
	return jsonw.AppendString(b, status)
}

// emit frames the JSON in b and counts the frame.
func (e *Encoder) emit(dst, b []byte) []byte {
	e.buf = b
	e.seq++
	return sse.AppendData(dst, 0, b)
}

func (e *Encoder) response(dst []byte, status string, err *translate.Error, final bool, ext []byte) []byte {
	ext = validObject(ext)
	b := e.begin("response", status)
	b = append(b, `,"error":`...)
	if err != nil {
		b = append(b, `{"code":`...)
		b = jsonw.AppendString(b, err.Code)
		b = append(b, `,"message":`...)
		b = jsonw.AppendString(b, err.Message)
		b = append(b, '}')
	} else {
		b = append(b, "null"...)
	}
	b = append(b, `,"id":`...)
	b = jsonw.AppendString(b, e.respID)
	b = append(b, `,"created_at":`...)
	b = appendInt(b, e.createdAt)
	b = append(b, `,"completed_at":`...)
	if status == "completed" {
		b = appendInt(b, e.now())
	} else {
		b = append(b, "null"...)
	}
	b = append(b, `,"output":`...)
	if final && len(e.output) > 0 {
		b = append(b, '[')
		for i, m := range e.output {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, m...)
		}
		b = append(b, ']')
	} else {
		b = append(b, "null"...)
	}
	b = append(b, `,"usage":`...)
	if final {
		b = appendRaw(b, e.usage)
	} else {
		b = append(b, "null"...)
	}
	b = append(b, `,"session_id":`...)
	b = appendStringOrNull(b, e.session)
	b = appendExt(b, ext, responseKeys, nil)
	b = append(b, '}')
	return e.emit(dst, b)
}

// openMessage announces a message with an in_progress frame. An empty id, or
// one already used, gets a fresh "msg_<uuid4>".
func (e *Encoder) openMessage(dst []byte, id, typ, role string, ext []byte, synthetic bool) (*encMsg, []byte) {
	if id == "" {
		id = e.newID()
	} else if x := e.msgs[id]; x != nil && x.open {
		id = e.newID()
	}
	if typ == "" {
		typ = "message"
	}
	if role == "" {
		role = string(translate.RoleAssistant)
		if isOutputType(typ) {
			role = string(translate.RoleTool)
		}
	}
	m := &encMsg{id: id, typ: typ, role: role, ext: validObject(ext), open: true, synthetic: synthetic}
	e.msgs[id] = m
	e.open = append(e.open, m)
	if role == string(translate.RoleAssistant) && toolKindOf(typ) == "" {
		e.current = m
	}
	b := e.appendMessage(e.begin("message", "in_progress"), m, "")
	return m, e.emit(dst, b)
}

// appendMessage writes the members of a message object after its status.
// contentStatus is the status of the content items, or "" for content null.
func (e *Encoder) appendMessage(b []byte, m *encMsg, contentStatus string) []byte {
	b = append(b, `,"error":`...)
	b = appendExtOrNull(b, m.ext, "error")
	b = append(b, `,"id":`...)
	b = jsonw.AppendString(b, m.id)
	b = append(b, `,"type":`...)
	b = jsonw.AppendString(b, m.typ)
	b = append(b, `,"role":`...)
	b = jsonw.AppendString(b, m.role)
	b = append(b, `,"content":`...)
	if contentStatus != "" {
		b = append(b, '[')
		n := 0
		for i := range m.slots {
			s := &m.slots[i]
			if !s.set {
				continue
			}
			if n > 0 {
				b = append(b, ',')
			}
			n++
			b = append(b, `{"sequence_number":null,"object":"content","status":`...)
			b = jsonw.AppendString(b, contentStatus)
			b = appendContent(b, m, s, false)
		}
		b = append(b, ']')
	} else {
		b = append(b, "null"...)
	}
	for _, k := range [...]string{"code", "message", "usage", "metadata"} {
		b = append(b, ',', '"')
		b = append(b, k...)
		b = append(b, '"', ':')
		b = appendExtOrNull(b, m.ext, k)
	}
	b = appendExt(b, m.ext, messageKeys, nil)
	return append(b, '}')
}

// appendContent writes the members of a content object after its status,
// with the full value of slot s.
func appendContent(b []byte, m *encMsg, s *slot, delta bool) []byte {
	p := s.part
	if p.Kind == translate.PartText || p.Kind == translate.PartRefusal {
		p.Text = string(s.text)
	}
	return appendContentPart(b, m.id, s.index, &p, delta, s.ext)
}

func appendContentPart(b []byte, msgID string, index int, p *translate.Part, delta bool, ext []byte) []byte {
	typ := contentType(p)
	b = append(b, `,"error":`...)
	b = appendExtOrNull(b, ext, "error")
	b = append(b, `,"type":`...)
	b = jsonw.AppendString(b, typ)
	b = append(b, `,"index":`...)
	b = appendInt(b, int64(index))
	if delta {
		b = append(b, `,"delta":true,"msg_id":`...)
	} else {
		b = append(b, `,"delta":false,"msg_id":`...)
	}
	b = jsonw.AppendString(b, msgID)
	b = appendPartFields(b, typ, p)
	b = appendExt(b, ext, contentKeys, partFieldKeys(typ))
	return append(b, '}')
}

// contentFrame writes one content frame for slot index of m.
func (e *Encoder) contentFrame(dst []byte, m *encMsg, index int, status string, p *translate.Part, delta bool, ext []byte) []byte {
	b := e.begin("content", status)
	b = appendContentPart(b, m.id, index, p, delta, ext)
	return e.emit(dst, b)
}

// closeMessage writes the completed frames still owed for m's slots and then
// the completed message with its full content, which the final response's
// output lists. final, when the origin sent the whole message, supplies
// values: all of them for a message that streamed no content, else (when the
// counts agree) the final values of the streamed slots.
func (e *Encoder) closeMessage(dst []byte, m *encMsg, final *translate.Message) []byte {
	if final != nil {
		if ext := validObject(final.Ext.For(translate.ProtoAgentAPI)); ext != nil {
			m.ext = ext
		}
		e.applyFinal(m, final.Parts)
	}
	for i := range m.slots {
		s := &m.slots[i]
		if s.set && !s.completed {
			s.completed = true
			b := e.begin("content", "completed")
			b = appendContent(b, m, s, false)
			dst = e.emit(dst, b)
		}
	}
	b := e.appendMessage(e.begin("message", "completed"), m, "completed")
	e.output = append(e.output, append([]byte(nil), b...))
	dst = e.emit(dst, b)
	e.forget(m)
	return dst
}

// abortMessage closes a message cut short by a failure or cancellation with
// status "incomplete" and the content it got so far. Like the Python
// server's, the final output lists only messages that completed, so it
// leaves this one out.
func (e *Encoder) abortMessage(dst []byte, m *encMsg) []byte {
	b := e.appendMessage(e.begin("message", "incomplete"), m, "incomplete")
	dst = e.emit(dst, b)
	e.forget(m)
	return dst
}

// forget removes m from the open messages.
func (e *Encoder) forget(m *encMsg) {
	m.open = false
	for i, x := range e.open {
		if x == m {
			e.open = append(e.open[:i], e.open[i+1:]...)
			break
		}
	}
	if e.current == m {
		e.current = nil
	}
}

func (e *Encoder) applyFinal(m *encMsg, parts []translate.Part) {
	if len(parts) == 0 {
		return
	}
	n := 0
	for i := range m.slots {
		if m.slots[i].set {
			n++
		}
	}
	switch n {
	case 0:
		// Sent only as a completed message: no content frames were owed.
		for i := range parts {
			s := m.slot(i)
			s.set, s.completed = true, true
			s.setValue(&parts[i])
		}
	case len(parts):
		j := 0
		for i := range m.slots {
			s := &m.slots[i]
			if !s.set {
				continue
			}
			if !s.completed && !samePart(s, &parts[j]) {
				s.setValue(&parts[j])
			}
			j++
		}
	}
}

// samePart reports whether slot s already holds p's value.
func samePart(s *slot, p *translate.Part) bool {
	if p.Kind != s.part.Kind {
		return false
	}
	if p.Kind == translate.PartText || p.Kind == translate.PartRefusal {
		return string(s.text) == p.Text
	}
	return false
}

// slot returns the slot at index i of m, adding it if needed. Slots are
// kept sparse and in index order: an index comes from the peer, and a huge
// one must not allocate a huge slice.
func (m *encMsg) slot(i int) *slot {
	if i < 0 {
		i = 0
	}
	j := len(m.slots)
	for j > 0 && m.slots[j-1].index >= i {
		if m.slots[j-1].index == i {
			return &m.slots[j-1]
		}
		j--
	}
	m.slots = append(m.slots, slot{})
	copy(m.slots[j+1:], m.slots[j:])
	m.slots[j] = slot{index: i}
	return &m.slots[j]
}

// setValue replaces the slot's value by p.
func (s *slot) setValue(p *translate.Part) {
	s.set = true
	s.part = *p
	if p.Kind == translate.PartText || p.Kind == translate.PartRefusal {
		s.text = append(s.text[:0], p.Text...)
		s.part.Text = ""
	}
}

// content writes a KindContent event. Text (and refusal) deltas append to
// the slot; a delta of any other kind replaces it, as the WebUI reads it.
func (e *Encoder) content(dst []byte, ev *translate.Event) []byte {
	p := ev.Part
	if p == nil {
		return dst
	}
	var m *encMsg
	if ev.MessageID == "" {
		m = e.current
	} else {
		m = e.msgs[ev.MessageID]
	}
	if m == nil {
		// The WebUI drops content for a message it has not seen: announce one.
		m, dst = e.openMessage(dst, ev.MessageID, "", "", nil, false)
	}
	ext := validObject(ev.Ext.For(translate.ProtoAgentAPI))
	s := m.slot(ev.Index)
	index := s.index // ev.Index, clamped
	s.ext = ext
	if ev.Delta {
		if s.set && s.part.Kind == p.Kind && (p.Kind == translate.PartText || p.Kind == translate.PartRefusal) {
			s.text = append(s.text, p.Text...)
		} else {
			s.setValue(p)
		}
		s.completed = false
		dst = e.contentFrame(dst, m, index, "in_progress", p, true, ext)
		if ev.Done {
			s.completed = true
			b := e.begin("content", "completed")
			b = appendContent(b, m, s, false)
			dst = e.emit(dst, b)
		}
		return dst
	}
	s.setValue(p)
	s.completed = ev.Done
	status := "in_progress"
	if ev.Done {
		status = "completed"
	}
	return e.contentFrame(dst, m, index, status, p, false, ext)
}

// tool writes a tool call or result as the data content of a message of
// type <kind>_call or <kind>_call_output, the only way the Agent API has.
// Snapshots that are not Done go out as in_progress delta:false content, the
// form every client reads as "replace".
func (e *Encoder) tool(dst []byte, ev *translate.Event) []byte {
	t := ev.Tool
	if t == nil {
		return dst
	}
	result := ev.Kind == translate.KindToolResult
	kind := t.Kind
	if kind == "" {
		kind = translate.ToolPlugin
	}
	typ := string(kind) + "_call"
	role := string(translate.RoleAssistant)
	if result {
		typ += "_output"
		role = string(translate.RoleTool)
	}
	var m *encMsg
	if x := e.msgs[ev.MessageID]; ev.MessageID != "" && x != nil && x.open && x.typ == typ {
		m = x
	}
	if m == nil && t.CallID != "" {
		for _, x := range e.open {
			if x.synthetic && x.typ == typ && x.callID == t.CallID {
				m = x
				break
			}
		}
	}
	if m == nil {
		id := ev.MessageID
		if e.msgs[id] != nil {
			id = ""
		}
		m, dst = e.openMessage(dst, id, typ, role, nil, true)
		m.callID = t.CallID
	}
	b := append(e.scratch[:0], `{"call_id":`...)
	b = jsonw.AppendString(b, t.CallID)
	b = append(b, `,"name":`...)
	b = jsonw.AppendString(b, t.Name)
	if result {
		b = append(b, `,"output":`...)
		b = jsonw.AppendString(b, t.Output)
	} else {
		b = append(b, `,"arguments":`...)
		b = jsonw.AppendString(b, t.Arguments)
	}
	if kind == translate.ToolMCP && (!result || t.Server != "") {
		b = append(b, `,"server_label":`...)
		b = jsonw.AppendString(b, t.Server)
	}
	b = append(b, '}')
	e.scratch = b
	p := translate.Part{Kind: translate.PartData, Data: append([]byte(nil), b...)}
	ext := validObject(ev.Ext.For(translate.ProtoAgentAPI))
	s := m.slot(0)
	s.setValue(&p)
	s.ext = ext
	s.completed = ev.Done
	status := "in_progress"
	if ev.Done {
		status = "completed"
	}
	dst = e.contentFrame(dst, m, 0, status, &p, false, ext)
	if ev.Done && m.synthetic {
		dst = e.closeMessage(dst, m, nil)
	}
	return dst
}

// artifact writes an artifact's parts as content: into its message when
// that message is open (from ev.Index on), else as an assistant message of
// its own, completed at once.
func (e *Encoder) artifact(dst []byte, ev *translate.Event) []byte {
	a := ev.Artifact
	if a == nil || len(a.Parts) == 0 {
		return dst
	}
	m := e.msgs[ev.MessageID]
	standalone := m == nil || !m.open
	if standalone {
		id := ev.MessageID
		if m != nil {
			id = ""
		}
		m, dst = e.openMessage(dst, id, "", "", nil, false)
	}
	status := "in_progress"
	if a.Last || standalone {
		status = "completed"
	}
	ext := validObject(ev.Ext.For(translate.ProtoAgentAPI))
	base := 0
	if !standalone {
		base = ev.Index
	}
	for i := range a.Parts {
		p := a.Parts[i]
		if p.Name == "" && a.Name != "" && contentType(&p) == "file" {
			p.Name = a.Name
		}
		s := m.slot(base + i)
		s.setValue(&p)
		s.ext = ext
		s.completed = status == "completed"
		dst = e.contentFrame(dst, m, s.index, status, &p, false, ext)
	}
	if standalone {
		dst = e.closeMessage(dst, m, nil)
	}
	return dst
}

// inputRequest writes the question as an assistant message. When the event
// names a message the encoder already wrote (a passthrough of an Agent API
// "incomplete"), the question is already there and nothing is written.
func (e *Encoder) inputRequest(dst []byte, ev *translate.Event) []byte {
	if ev.MessageID != "" && e.msgs[ev.MessageID] != nil {
		return dst
	}
	if len(ev.Parts) == 0 {
		return dst
	}
	m, dst := e.openMessage(dst, ev.MessageID, "", "", nil, false)
	for i := range ev.Parts {
		s := m.slot(i)
		s.setValue(&ev.Parts[i])
		s.completed = true
		dst = e.contentFrame(dst, m, i, "completed", &ev.Parts[i], false, nil)
	}
	return e.closeMessage(dst, m, nil)
}

// toolKindOf returns the tool kind of an Agent API message type, or "" for
// a type that is not a tool call or output.
func toolKindOf(typ string) translate.ToolKind {
	switch typ {
	case "function_call", "function_call_output":
		return translate.ToolFunction
	case "plugin_call", "plugin_call_output":
		return translate.ToolPlugin
	case "mcp_call", "mcp_call_output":
		return translate.ToolMCP
	}
	return ""
}

func isOutputType(typ string) bool {
	return len(typ) > 7 && typ[len(typ)-7:] == "_output"
}
