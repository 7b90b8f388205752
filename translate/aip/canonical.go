package aip

import (
	"crypto/rand"
	"encoding/json"
	"fmt"
	"time"

	"github.com/tidwall/gjson"

	"github.com/agentbridge/bridge/internal/jsonw"
	"github.com/agentbridge/bridge/translate"
)

// StateToCanonical maps an AIP state to the canonical one: accepted is
// submitted, awaiting-input is input-required, the rest keep their names.
func StateToCanonical(s TaskState) (translate.State, bool) {
	switch s {
	case StateAccepted:
		return translate.StateSubmitted, true
	case StateWorking:
		return translate.StateWorking, true
	case StateAwaitingInput:
		return translate.StateInputRequired, true
	case StateAwaitingCompletion:
		return translate.StateAwaitingCompletion, true
	case StateCompleted:
		return translate.StateCompleted, true
	case StateCanceled:
		return translate.StateCanceled, true
	case StateFailed:
		return translate.StateFailed, true
	case StateRejected:
		return translate.StateRejected, true
	}
	return "", false
}

// StateFromCanonical is the inverse of StateToCanonical.
func StateFromCanonical(s translate.State) (TaskState, bool) {
	switch s {
	case translate.StateSubmitted:
		return StateAccepted, true
	case translate.StateWorking:
		return StateWorking, true
	case translate.StateInputRequired:
		return StateAwaitingInput, true
	case translate.StateAwaitingCompletion:
		return StateAwaitingCompletion, true
	case translate.StateCompleted:
		return StateCompleted, true
	case translate.StateCanceled:
		return StateCanceled, true
	case translate.StateFailed:
		return StateFailed, true
	case translate.StateRejected:
		return StateRejected, true
	}
	return "", false
}

// CommandToCanonical maps an AIP command; re-stream is CommandResume.
func CommandToCanonical(c Command) (translate.Command, bool) {
	switch c {
	case CommandStart:
		return translate.CommandStart, true
	case CommandContinue:
		return translate.CommandContinue, true
	case CommandCancel:
		return translate.CommandCancel, true
	case CommandComplete:
		return translate.CommandComplete, true
	case CommandGet:
		return translate.CommandGet, true
	case CommandReStream:
		return translate.CommandResume, true
	}
	return 0, false
}

// CommandFromCanonical is the inverse of CommandToCanonical.
func CommandFromCanonical(c translate.Command) (Command, bool) {
	switch c {
	case translate.CommandStart:
		return CommandStart, true
	case translate.CommandContinue:
		return CommandContinue, true
	case translate.CommandCancel:
		return CommandCancel, true
	case translate.CommandComplete:
		return CommandComplete, true
	case translate.CommandGet:
		return CommandGet, true
	case translate.CommandResume:
		return CommandReStream, true
	}
	return "", false
}

// PartFromItem maps a data item to a canonical part: text → PartText,
// file → PartFile (URI, Bytes, Name, MIME), data → PartData; metadata
// becomes Meta. An item of an unknown type gives ok=false. Tool items (see
// ToolItem) map to PartData here; use ToolFromItem to recognise them.
func PartFromItem(it *DataItem) (p translate.Part, ok bool) {
	switch it.Type {
	case ItemText:
		p = translate.Part{Kind: translate.PartText, Text: it.Text}
	case ItemFile:
		p = translate.Part{Kind: translate.PartFile, URI: it.URI, Bytes: it.Bytes, Name: it.Name, MIME: it.MimeType}
	case ItemData:
		p = translate.Part{Kind: translate.PartData, Data: it.Data}
	default:
		return p, false
	}
	p.Meta = it.Metadata
	return p, true
}

// PartsFromItems maps items with PartFromItem, dropping unknown types.
func PartsFromItems(items []DataItem) []translate.Part {
	if len(items) == 0 {
		return nil
	}
	out := make([]translate.Part, 0, len(items))
	for i := range items {
		if p, ok := PartFromItem(&items[i]); ok {
			out = append(out, p)
		}
	}
	return out
}

// ItemFromPart maps a canonical part to a data item. AIP has only text,
// file and data: image, audio and video parts become file items (audio
// with MIME "audio/<format>" when it has only a format), a refusal becomes
// text. A file id has no AIP field and is dropped.
func ItemFromPart(p *translate.Part) DataItem {
	var it DataItem
	switch p.Kind {
	case translate.PartFile, translate.PartImage, translate.PartAudio, translate.PartVideo:
		it = DataItem{Type: ItemFile, Name: p.Name, MimeType: p.MIME, URI: p.URI, Bytes: p.Bytes}
		if it.MimeType == "" && p.Format != "" && p.Kind == translate.PartAudio {
			it.MimeType = "audio/" + p.Format
		}
	case translate.PartData:
		it = DataItem{Type: ItemData, Data: p.Data}
	default:
		it = DataItem{Type: ItemText, Text: p.Text}
	}
	it.Metadata = p.Meta
	return it
}

// ItemsFromParts maps parts with ItemFromPart; nil for none.
func ItemsFromParts(ps []translate.Part) []DataItem {
	if len(ps) == 0 {
		return nil
	}
	out := make([]DataItem, len(ps))
	for i := range ps {
		out[i] = ItemFromPart(&ps[i])
	}
	return out
}

// ArtifactFromProduct maps a product; Append and Last are the caller's.
func ArtifactFromProduct(p *Product) translate.Artifact {
	return translate.Artifact{ID: p.ID, Name: p.Name, Description: p.Description, Parts: PartsFromItems(p.DataItems)}
}

// ProductFromArtifact maps an artifact; DataItems is never nil.
func ProductFromArtifact(a *translate.Artifact) Product {
	p := Product{ID: a.ID, Name: a.Name, Description: a.Description, DataItems: ItemsFromParts(a.Parts)}
	if p.DataItems == nil {
		p.DataItems = []DataItem{}
	}
	return p
}

// Tool data items. AIP has no tool calls, so the bridge carries them as data
// items of a partner message:
//
//	{"type":"data","data":{"toolCall":{"id":…,"name":…,"kind":…,"arguments":<JSON>}}}
//	{"type":"data","data":{"toolResult":{"id":…,"name":…,"output":"…","isError":true}}}
//
// arguments is embedded as JSON when it is valid JSON, else as a string.
const (
	toolCallKey   = "toolCall"
	toolResultKey = "toolResult"
)

// ToolItem returns the data item of a tool call (result=false) or result.
func ToolItem(t *translate.Tool, result bool) DataItem {
	e := newEnc(make([]byte, 0, 64+len(t.Arguments)+len(t.Output)))
	if result {
		e.key(toolResultKey)
	} else {
		e.key(toolCallKey)
	}
	in := newEnc(e.b)
	in.strOpt("id", t.CallID)
	in.strOpt("name", t.Name)
	in.strOpt("kind", string(t.Kind))
	in.strOpt("server", t.Server)
	if result {
		in.str("output", t.Output)
		if t.IsError {
			in.boolean("isError", true)
		}
	} else if t.Arguments != "" {
		if json.Valid([]byte(t.Arguments)) {
			in.key("arguments")
			in.b = jsonw.AppendCompact(in.b, t.Arguments)
		} else {
			in.str("arguments", t.Arguments)
		}
	}
	e.b = in.done()
	return DataItem{Type: ItemData, Data: e.done()}
}

// ToolFromItem recognises a tool data item made by ToolItem (or a peer that
// follows the same shape). ok is false for any other item.
func ToolFromItem(it *DataItem) (t *translate.Tool, result bool, ok bool) {
	if it.Type != ItemData || len(it.Data) == 0 {
		return nil, false, false
	}
	d := gjson.ParseBytes(it.Data)
	if !d.IsObject() {
		return nil, false, false
	}
	v := d.Get(toolCallKey)
	if !v.IsObject() {
		if v = d.Get(toolResultKey); !v.IsObject() {
			return nil, false, false
		}
		result = true
	}
	t = &translate.Tool{
		CallID: v.Get("id").String(),
		Name:   v.Get("name").String(),
		Kind:   translate.ToolKind(v.Get("kind").String()),
		Server: v.Get("server").String(),
	}
	if result {
		t.Output = v.Get("output").String()
		t.IsError = v.Get("isError").Bool()
	} else if a := v.Get("arguments"); a.Exists() && a.Type != gjson.Null {
		if a.Type == gjson.String {
			t.Arguments = a.Str
		} else {
			t.Arguments = string(rawValue(a))
		}
	}
	return t, result, true
}

// RoleToCanonical maps senderRole: partner is the assistant, anything else
// (leader) the user.
func RoleToCanonical(senderRole string) translate.Role {
	if senderRole == RolePartner {
		return translate.RoleAssistant
	}
	return translate.RoleUser
}

// MessageToCanonical maps a message. Ext (proto "aip") carries what the
// canonical message does not name — sentAt, senderId, mentions,
// commandParams, groupId and unknown members — so MessageFromRequest can
// restore them; taskId, sessionId and command belong to the Request.
func MessageToCanonical(m *Message) translate.Message {
	cm := translate.Message{ID: m.ID, Role: RoleToCanonical(m.SenderRole), Parts: PartsFromItems(m.DataItems)}
	e := newEnc(nil)
	if !m.SentAt.IsZero() {
		e.ts("sentAt", m.SentAt)
	}
	e.strOpt("senderId", m.SenderID)
	if m.Mentions != nil {
		e.key("mentions")
		e.b = append(e.b, '[')
		for i, s := range m.Mentions {
			if i > 0 {
				e.b = append(e.b, ',')
			}
			e.b = jsonw.AppendString(e.b, s)
		}
		e.b = append(e.b, ']')
	}
	e.rawOpt("commandParams", m.CommandParams)
	e.strOpt("groupId", m.GroupID)
	e.extra(m.Extra)
	if !e.first {
		cm.Ext = translate.Ext{Proto: translate.ProtoAIP, Raw: e.done()}
	}
	return cm
}

// RequestFromMessage turns the message a Partner received with rpcMethod
// (rpc, stream, notification/start) into a canonical request: Command from
// the command (re-stream is CommandResume, with After = lastEventSeq), ID =
// taskId, Session = sessionId, User = senderId, Stream for the stream
// method, and Input = [the message as a canonical user message] when it has
// data items or is a start or continue. Ext (proto "aip") records the
// method. Errors wrap translate.ErrBadRequest.
func RequestFromMessage(rpcMethod string, m *Message) (*translate.Request, error) {
	if m == nil {
		return nil, fmt.Errorf("aip: %w: no message", translate.ErrBadRequest)
	}
	cmd, ok := CommandToCanonical(m.Command)
	if !ok {
		return nil, fmt.Errorf("aip: %w: unknown command %q", translate.ErrBadRequest, m.Command)
	}
	if m.TaskID == "" {
		return nil, fmt.Errorf("aip: %w: no taskId", translate.ErrBadRequest)
	}
	r := &translate.Request{
		Command: cmd,
		ID:      m.TaskID,
		Session: m.SessionID,
		User:    m.SenderID,
		Stream:  rpcMethod == MethodStream,
	}
	if len(m.DataItems) > 0 || cmd == translate.CommandStart || cmd == translate.CommandContinue {
		r.Input = []translate.Message{MessageToCanonical(m)}
	}
	if cmd == translate.CommandResume {
		p, err := m.ReStreamParams()
		if err != nil {
			return nil, fmt.Errorf("aip: %w: %v", translate.ErrBadRequest, err)
		}
		r.After = p.LastEventSeq
	}
	if rpcMethod != "" {
		e := newEnc(nil)
		e.str("method", rpcMethod)
		r.Ext = translate.Ext{Proto: translate.ProtoAIP, Raw: e.done()}
	}
	return r, nil
}

// MessageFromRequest builds the message a Leader sends for a canonical
// request: command from r.Command (CommandResume is re-stream with
// commandParams {"lastEventSeq": r.After}), taskId = r.ID (a new
// "task-<uuid>" for a start without one), sessionId = r.Session (a new
// "session-<uuid>" when empty: v01.00 peers require it), dataItems from the
// newest input, senderRole "leader", senderId, and a new id
// ("msg-<uuid>") and sentAt (now, in Beijing time). When the newest input
// came from AIP (Ext proto "aip"), its mentions, commandParams, groupId and
// unknown members are restored; its id, sentAt and senderId are not (the
// bridge speaks for itself). Errors wrap translate.ErrUnsupported or
// translate.ErrBadRequest.
func MessageFromRequest(r *translate.Request, senderID string) (*Message, error) {
	cmd, ok := CommandFromCanonical(r.Command)
	if !ok {
		return nil, fmt.Errorf("aip: %w: command %v", translate.ErrUnsupported, r.Command)
	}
	m := &Message{
		ID:         NewID("msg"),
		SentAt:     At(time.Now().In(Beijing)),
		SenderRole: RoleLeader,
		SenderID:   senderID,
		Command:    cmd,
		TaskID:     r.ID,
		SessionID:  r.Session,
	}
	if m.TaskID == "" {
		if cmd != CommandStart {
			return nil, fmt.Errorf("aip: %w: %s needs a task id", translate.ErrBadRequest, cmd)
		}
		m.TaskID = NewID("task")
	}
	if m.SessionID == "" {
		m.SessionID = NewID("session")
	}
	if in := r.LastInput(); in != nil {
		m.DataItems = ItemsFromParts(in.Parts)
		if raw := in.Ext.For(translate.ProtoAIP); len(raw) > 0 {
			restoreExt(m, raw)
		}
	}
	if m.DataItems == nil {
		m.DataItems = []DataItem{}
	}
	if cmd == CommandReStream {
		p := ReStreamParams{LastEventSeq: r.After}
		m.CommandParams = p.AppendJSON(nil)
	}
	return m, nil
}

// restoreExt copies the AIP-only fields MessageToCanonical put in Ext.
func restoreExt(m *Message, raw []byte) {
	v := gjson.ParseBytes(raw)
	if !v.IsObject() {
		return
	}
	_ = members(v, &m.Extra, func(k string, val gjson.Result) (bool, error) {
		switch k {
		case "sentAt", "senderId":
		case "mentions":
			m.Mentions, _ = wantStrings(k, val)
		case "commandParams":
			if val.IsObject() {
				m.CommandParams = rawValue(val)
			}
		case "groupId":
			m.GroupID = val.String()
		case "method", "type", "id", "senderRole", "command", "dataItems", "taskId", "sessionId":
			// Never let a carried member shadow a field set from the request.
		default:
			return false, nil
		}
		return true, nil
	})
}

// NewID returns prefix-<random UUID v4>, the id style of the reference
// implementation ("msg-…", "task-…", "product-…").
func NewID(prefix string) string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	const hx = "0123456789abcdef"
	out := make([]byte, 0, len(prefix)+37)
	if prefix != "" {
		out = append(out, prefix...)
		out = append(out, '-')
	}
	for i, c := range b {
		if i == 4 || i == 6 || i == 8 || i == 10 {
			out = append(out, '-')
		}
		out = append(out, hx[c>>4], hx[c&0xf])
	}
	return string(out)
}
