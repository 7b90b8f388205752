package agentapi

import (
	"bytes"
	"fmt"
	"io"
	"strconv"

	"github.com/agentbridge/bridge/internal/ids"
	"github.com/agentbridge/bridge/internal/sse"
	"github.com/agentbridge/bridge/translate"
	"github.com/tidwall/gjson"
)

// DecoderOptions tune a Decoder.
type DecoderOptions struct {
	// MaxEventSize bounds one SSE event's data; 0 means
	// sse.DefaultMaxEventSize.
	MaxEventSize int
}

// Decoder reads the SSE body an Agent API agent answers POST /process with
// and turns it into canonical events. It is lenient: it accepts everything
// agent_api.md §4.4 and §7 list (see the package doc). A Decoder is not safe
// for concurrent use.
type Decoder struct {
	r *sse.Reader

	// The events decoded from the current frame and the next to return.
	// Their storage is reused frame after frame: an event is valid until the
	// next call to Next, as translate.Stream allows.
	queue []*translate.Event
	qi    int
	slab  []translate.Event
	parts []translate.Part

	newID    func() string // message ids for content that names none; tests replace it
	msgs     map[string]*decMsg
	last     *decMsg // the most recently started message
	created  bool
	working  bool
	finished bool // a terminal response, an error frame or EOF was decoded
	err      error

	// The text of the newest assistant message, the question of an
	// "incomplete" response that carries no output.
	qMsg  string
	qText [][]byte
}

// decMsg is what the decoder knows about a message it has seen.
type decMsg struct {
	id, typ, role string
	ended         bool
	lastIndex     int
	toolDone      bool   // a completed tool content was decoded
	lastSnap      string // the last tool data snapshot, to drop repeats
}

// NewDecoder returns a Decoder reading an Agent API event stream from r.
func NewDecoder(r io.Reader, opts DecoderOptions) *Decoder {
	return &Decoder{
		r:     sse.NewReader(r, opts.MaxEventSize),
		msgs:  make(map[string]*decMsg),
		newID: func() string { return "msg_" + ids.UUID() },
	}
}

// Next returns the next canonical event, or io.EOF after the last. A stream
// that ends without a terminal response yields a canceled State with
// Err.Code translate.CodeStreamIncomplete first. A read error is returned
// wrapped, and again on every later call.
func (d *Decoder) Next() (*translate.Event, error) {
	for {
		if d.qi < len(d.queue) {
			ev := d.queue[d.qi]
			d.qi++
			return ev, nil
		}
		if d.err != nil {
			return nil, d.err
		}
		d.queue, d.qi = d.queue[:0], 0
		d.slab, d.parts = d.slab[:0], d.parts[:0]
		if d.finished {
			// Nothing after a terminal response counts; don't wait for the
			// peer to close.
			d.err = io.EOF
			continue
		}
		sev, err := d.r.Next()
		if err == io.EOF {
			d.finished = true
			ev := d.emit(translate.KindState)
			ev.State = translate.StateCanceled
			ev.Err = &translate.Error{Code: translate.CodeStreamIncomplete, Message: "stream ended before a terminal response"}
			continue
		}
		if err != nil {
			d.err = fmt.Errorf("agentapi: reading event stream: %w", err)
			continue
		}
		d.frame(sev.Data)
	}
}

// emit queues a new event of kind k, built in reused storage.
func (d *Decoder) emit(k translate.Kind) *translate.Event {
	var ev *translate.Event
	if len(d.slab) < cap(d.slab) {
		d.slab = d.slab[:len(d.slab)+1]
		ev = &d.slab[len(d.slab)-1]
		*ev = translate.Event{Kind: k}
	} else {
		// Pointers into the old array stay valid: they keep it alive.
		d.slab = append(d.slab, translate.Event{Kind: k})
		ev = &d.slab[len(d.slab)-1]
	}
	d.queue = append(d.queue, ev)
	return ev
}

// newPart returns reused storage for one part.
func (d *Decoder) newPart(p translate.Part) *translate.Part {
	if len(d.parts) < cap(d.parts) {
		d.parts = d.parts[:len(d.parts)+1]
	} else {
		d.parts = append(d.parts, translate.Part{})
	}
	pp := &d.parts[len(d.parts)-1]
	*pp = p
	return pp
}

func ext(b *extBuilder) translate.Ext {
	raw := b.bytes()
	if raw == nil {
		return translate.Ext{}
	}
	return translate.Ext{Proto: translate.ProtoAgentAPI, Raw: raw}
}

// frame decodes one SSE event's data. Data that is not a JSON object
// ("[DONE]", garbage) is skipped.
func (d *Decoder) frame(data []byte) {
	data = bytes.TrimSpace(data)
	if len(data) == 0 || data[0] != '{' || !gjson.ValidBytes(data) {
		return
	}
	// One copy per frame: every string of its events points into it.
	obj := gjson.Parse(string(data))
	switch gjson.Get(obj.Raw, "object").Str {
	case "content":
		d.content(obj)
	case "message":
		d.message(obj, false)
	case "response":
		d.response(obj)
	case "":
		if e := obj.Get("error"); e.Exists() && e.Type != gjson.Null {
			d.errorFrame(obj, e)
		}
	}
}

// errorFrame handles the out-of-band {"error": ...} frame the Python server
// sends for failures outside the run: fatal, reported as an error and a
// failed state.
func (d *Decoder) errorFrame(obj, e gjson.Result) {
	err := &translate.Error{Code: translate.CodeUpstreamError}
	switch {
	case e.IsObject():
		err.Code = orDefault(e.Get("code").Str, err.Code)
		err.Message = e.Get("message").Str
	case e.Type == gjson.String:
		err.Message = e.Str
	default:
		err.Message = e.Raw
	}
	err.Code = orDefault(obj.Get("error_type").Str, err.Code)
	if err.Message == "" {
		err.Message = orDefault(obj.Get("message").Str, "agent error")
	}
	ev := d.emit(translate.KindError)
	ev.Err = err
	ev = d.emit(translate.KindState)
	ev.State = translate.StateFailed
	ev.Err = err
	d.finished = true
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func (d *Decoder) response(obj gjson.Result) {
	var status string
	var errv, output, usage gjson.Result
	var x extBuilder
	obj.ForEach(func(k, v gjson.Result) bool {
		switch k.Str {
		case "status":
			status = v.Str
		case "error":
			errv = v
		case "output":
			output = v
		case "usage":
			usage = v
		case "sequence_number", "object", "id", "created_at", "completed_at", "session_id":
		default:
			x.add(k, v)
		}
		return true
	})
	switch status {
	case "created":
		if !d.created && !d.working {
			d.created = true
			ev := d.emit(translate.KindState)
			ev.State = translate.StateSubmitted
			ev.Ext = ext(&x)
		}
		return
	case "in_progress":
		if !d.working {
			d.working = true
			ev := d.emit(translate.KindState)
			ev.State = translate.StateWorking
			ev.Ext = ext(&x)
		}
		return
	case "completed", "failed", "canceled", "rejected", "incomplete":
	default:
		// queued, unknown, or a status this decoder does not know.
		return
	}
	// The final output is the authoritative record: deliver the messages
	// the stream did not complete.
	if output.IsArray() {
		output.ForEach(func(_, m gjson.Result) bool {
			if m.IsObject() {
				d.message(m, true)
			}
			return true
		})
	}
	if usage.Exists() && usage.Type != gjson.Null {
		ev := d.emit(translate.KindUsage)
		ev.Data = compactString(usage.Raw)
	}
	var err *translate.Error
	if errv.IsObject() {
		err = &translate.Error{Code: errv.Get("code").String(), Message: errv.Get("message").String()}
	} else if errv.Type == gjson.String {
		err = &translate.Error{Message: errv.Str}
	}
	if err != nil && err.Code == "" {
		err.Code = translate.CodeUpstreamError
	}
	ev := d.emit(translate.KindState)
	switch status {
	case "completed":
		ev.State = translate.StateCompleted
	case "failed":
		ev.State = translate.StateFailed
		if err == nil {
			err = &translate.Error{Code: translate.CodeUpstreamError, Message: "agent failed"}
		}
	case "canceled":
		ev.State = translate.StateCanceled
	case "rejected":
		ev.State = translate.StateRejected
		if err == nil {
			err = &translate.Error{Code: translate.CodeUpstreamError, Message: "request rejected"}
		}
	case "incomplete":
		// The question comes before the state that waits on it.
		ev.Kind = translate.KindInputRequest
		ev.MessageID, ev.Parts = d.question(output)
		ev = d.emit(translate.KindState)
		ev.State = translate.StateInputRequired
	}
	ev.Err = err
	ev.Ext = ext(&x)
	d.finished = true
}

// question returns the newest assistant message of output, or else of the
// stream, as the question of an input-required state.
func (d *Decoder) question(output gjson.Result) (string, []translate.Part) {
	if output.IsArray() {
		items := output.Array()
		for i := len(items) - 1; i >= 0; i-- {
			m := items[i]
			if m.Get("role").Str != "assistant" || toolKindOf(m.Get("type").Str) != "" {
				continue
			}
			var b []byte
			m.Get("content").ForEach(func(_, c gjson.Result) bool {
				if c.Get("type").Str == "text" {
					b = append(b, c.Get("text").Str...)
				}
				return true
			})
			if len(b) > 0 {
				return m.Get("id").Str, []translate.Part{translate.TextPart(string(b))}
			}
		}
	}
	if d.qMsg == "" {
		return "", nil
	}
	return d.qMsg, []translate.Part{translate.TextPart(string(bytes.Join(d.qText, nil)))}
}

const maxTrackedSlots = 64

// track records text of the newest assistant message for question.
func (d *Decoder) track(m *decMsg, index int, text string, delta bool) {
	// An index is the peer's to choose: bound what it can make us allocate.
	if m.role != string(translate.RoleAssistant) || toolKindOf(m.typ) != "" || index < 0 || index >= maxTrackedSlots {
		return
	}
	if d.qMsg != m.id {
		d.qMsg = m.id
		d.qText = d.qText[:0]
	}
	for len(d.qText) <= index {
		d.qText = append(d.qText, nil)
	}
	if !delta {
		d.qText[index] = d.qText[index][:0]
	}
	d.qText[index] = append(d.qText[index], text...)
}

// startMessage queues a MessageStart for a message first seen now.
func (d *Decoder) startMessage(id, typ, role string, x translate.Ext) *decMsg {
	if typ == "" {
		typ = "message"
	}
	m := &decMsg{id: id, typ: typ, role: role}
	d.msgs[id] = m
	d.last = m
	ev := d.emit(translate.KindMessageStart)
	ev.MessageID = id
	ev.Message = &translate.Message{ID: id, Role: translate.Role(role), Type: typ, Ext: x}
	ev.Ext = x
	return m
}

// message handles a message object: a frame, or (final) an item of the
// final response's output, which only counts if the stream did not
// complete that message itself.
func (d *Decoder) message(obj gjson.Result, final bool) {
	var id, typ, role, status string
	var contentV gjson.Result
	var x extBuilder
	obj.ForEach(func(k, v gjson.Result) bool {
		switch k.Str {
		case "id":
			id = v.Str
		case "type":
			typ = v.Str
		case "role":
			role = v.Str
		case "status":
			status = v.Str
		case "content":
			contentV = v
		case "sequence_number", "object":
		case "error", "code", "message", "usage", "metadata":
			// Written by the encoder as null when absent: keep only values.
			if v.Type != gjson.Null {
				x.add(k, v)
			}
		default:
			x.add(k, v)
		}
		return true
	})
	if typ == "heartbeat" {
		if !final {
			d.emit(translate.KindHeartbeat)
		}
		return
	}
	if id == "" {
		return // nothing can refer to it
	}
	m := d.msgs[id]
	if final {
		if m != nil && m.ended {
			return
		}
		status = "completed"
	}
	switch status {
	case "completed", "failed", "canceled", "rejected", "incomplete":
	default:
		// created, in_progress: an announcement; repeats are dropped.
		if m == nil {
			d.startMessage(id, typ, role, ext(&x))
		}
		return
	}
	if m == nil {
		m = d.startMessage(id, typ, role, translate.Ext{})
	}
	if m.ended {
		return
	}
	m.ended = true
	if role != "" {
		m.role = role
	}
	if typ != "" {
		m.typ = typ
	}
	msg := &translate.Message{ID: id, Role: translate.Role(m.role), Type: m.typ, Ext: ext(&x)}
	var first gjson.Result
	if contentV.IsArray() {
		contentV.ForEach(func(_, item gjson.Result) bool {
			if !item.IsObject() {
				return true
			}
			var c content
			readContent(item, &c, false)
			if p, ok := c.part(); ok {
				if !first.Exists() {
					first = c.data
				}
				msg.Parts = append(msg.Parts, p)
				if p.Kind == translate.PartText {
					d.track(m, len(msg.Parts)-1, p.Text, false)
				}
			}
			return true
		})
	}
	// A tool message that never streamed a completed call still gives its
	// call or result, so consumers that only read tool events see it.
	if kind := toolKindOf(m.typ); kind != "" && !m.toolDone && len(msg.Parts) > 0 && msg.Parts[0].Kind == translate.PartData {
		m.toolDone = true
		ev := d.emit(toolEventKind(m.typ))
		ev.MessageID = id
		ev.Tool = toolFrom(kind, isOutputType(m.typ), first)
		ev.Done = true
	}
	ev := d.emit(translate.KindMessageEnd)
	ev.MessageID = id
	ev.Message = msg
	ev.Ext = msg.Ext
}

func toolEventKind(typ string) translate.Kind {
	if isOutputType(typ) {
		return translate.KindToolResult
	}
	return translate.KindToolCall
}

// toolFrom reads a tool call or output from the data of a tool message.
func toolFrom(kind translate.ToolKind, result bool, data gjson.Result) *translate.Tool {
	t := &translate.Tool{
		Kind:   kind,
		CallID: data.Get("call_id").String(),
		Name:   data.Get("name").String(),
		Server: data.Get("server_label").String(),
	}
	if result {
		t.Output = stringOrJSON(data.Get("output"))
	} else {
		t.Arguments = stringOrJSON(data.Get("arguments"))
	}
	return t
}

// stringOrJSON returns a string value, or the JSON text of any other value
// (arguments sent as an object rather than a JSON string).
func stringOrJSON(v gjson.Result) string {
	switch v.Type {
	case gjson.String:
		return v.Str
	case gjson.Null:
		return ""
	}
	return string(compactString(v.Raw))
}

func (d *Decoder) content(obj gjson.Result) {
	var c content
	readContent(obj, &c, true)
	p, ok := c.part()
	if !ok {
		return
	}
	var m *decMsg
	if c.msgID == "" {
		// A completed content with msg_id null belongs to the message in
		// progress (seen in a real capture).
		m = d.last
		if m == nil {
			m = d.startMessage(d.newID(), "message", string(translate.RoleAssistant), translate.Ext{})
		}
	} else if m = d.msgs[c.msgID]; m == nil {
		// The text framework streams content for a message it never
		// announces.
		m = d.startMessage(c.msgID, "message", string(translate.RoleAssistant), translate.Ext{})
	}
	index := m.lastIndex
	if c.hasIndex && c.index >= 0 {
		index = c.index
	}
	m.lastIndex = index
	done := c.status == "completed"
	x := ext(&c.ext)

	if kind := toolKindOf(m.typ); kind != "" && p.Kind == translate.PartData {
		if !done && m.lastSnap == c.data.Raw {
			return // a repeated snapshot says nothing new
		}
		m.lastSnap = c.data.Raw
		m.toolDone = m.toolDone || done
		ev := d.emit(toolEventKind(m.typ))
		ev.MessageID = m.id
		ev.Tool = toolFrom(kind, isOutputType(m.typ), c.data)
		ev.Done = done
		ev.Ext = x
		return
	}
	if p.Kind == translate.PartFile {
		ev := d.emit(translate.KindArtifact)
		ev.MessageID = m.id
		ev.Index = index
		ev.Artifact = &translate.Artifact{
			ID:    m.id + ":" + strconv.Itoa(index),
			Name:  p.Name,
			Parts: []translate.Part{p},
			Last:  done,
		}
		ev.Ext = x
		return
	}
	if p.Kind == translate.PartText {
		d.track(m, index, p.Text, c.delta)
	}
	ev := d.emit(translate.KindContent)
	ev.MessageID = m.id
	ev.Index = index
	ev.Part = d.newPart(p)
	ev.Delta = c.delta
	ev.Done = done
	ev.Ext = x
}
