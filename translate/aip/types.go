package aip

import (
	"encoding/json"

	"github.com/agentbridge/bridge/internal/jsonw"
	"github.com/tidwall/gjson"
)

// Version is the AIP version this package speaks.
const Version = "01.00"

// TaskState is the state of a Task, spelled as on the wire.
type TaskState string

// The v01.00 task states (spec §4.2).
const (
	StateAccepted           TaskState = "accepted"
	StateWorking            TaskState = "working"
	StateAwaitingInput      TaskState = "awaiting-input"
	StateAwaitingCompletion TaskState = "awaiting-completion"
	StateCompleted          TaskState = "completed"
	StateCanceled           TaskState = "canceled"
	StateFailed             TaskState = "failed"
	StateRejected           TaskState = "rejected"
)

// Valid reports whether s is one of the v01.00 states.
func (s TaskState) Valid() bool {
	switch s {
	case StateAccepted, StateWorking, StateAwaitingInput, StateAwaitingCompletion,
		StateCompleted, StateCanceled, StateFailed, StateRejected:
		return true
	}
	return false
}

// Terminal reports whether no state can follow s.
func (s TaskState) Terminal() bool {
	switch s {
	case StateCompleted, StateCanceled, StateFailed, StateRejected:
		return true
	}
	return false
}

// Command is a Leader's command, Message.command on the wire.
type Command string

// The v01.00 commands (spec §4.3).
const (
	CommandGet      Command = "get"
	CommandStart    Command = "start"
	CommandContinue Command = "continue"
	CommandCancel   Command = "cancel"
	CommandComplete Command = "complete"
	CommandReStream Command = "re-stream"
)

// Valid reports whether c is one of the v01.00 commands.
func (c Command) Valid() bool {
	switch c {
	case CommandGet, CommandStart, CommandContinue, CommandCancel, CommandComplete, CommandReStream:
		return true
	}
	return false
}

// Sender roles.
const (
	RoleLeader  = "leader"
	RolePartner = "partner"
)

// Object type discriminators ("type" on the wire).
const (
	TypeTask         = "task"
	TypeMessage      = "message"
	TypeStatusUpdate = "status-update"
	TypeProductChunk = "product-chunk"
)

// DataItem type discriminators.
const (
	ItemText = "text"
	ItemFile = "file"
	ItemData = "data"
)

// Object is a typed AIP object that can stand as an RPC result or a stream
// event's eventData: *Task, *Message, *TaskStatusUpdateEvent or
// *ProductChunkEvent.
type Object interface {
	// ObjectType returns the wire "type".
	ObjectType() string
	// AppendJSON appends the compact JSON encoding.
	AppendJSON(dst []byte) []byte
}

// DataItem is the smallest unit of content (spec §4.5), discriminated by
// Type: "text" uses Text; "file" uses Name, MimeType and URI or Bytes
// (base64); "data" uses Data (a JSON object). Every set field is written
// whatever the type, so an item with surprising members survives a round
// trip; Text of a text item and Data of a data item are always written.
type DataItem struct {
	Type     string
	Text     string
	Name     string
	MimeType string
	URI      string
	Bytes    string
	Data     json.RawMessage
	Metadata json.RawMessage
	// Extra holds members this package does not name, as a raw JSON object.
	Extra json.RawMessage
}

// TextItem returns a text data item.
func TextItem(s string) DataItem { return DataItem{Type: ItemText, Text: s} }

// AppendJSON appends the item's JSON encoding.
func (d *DataItem) AppendJSON(dst []byte) []byte {
	e := newEnc(dst)
	e.str("type", d.Type)
	if d.Type == ItemText || d.Text != "" {
		e.str("text", d.Text)
	}
	e.strOpt("name", d.Name)
	e.strOpt("mimeType", d.MimeType)
	e.strOpt("uri", d.URI)
	e.strOpt("bytes", d.Bytes)
	switch {
	case len(d.Data) > 0:
		e.raw("data", d.Data)
	case d.Type == ItemData:
		e.raw("data", []byte("{}"))
	}
	e.rawOpt("metadata", d.Metadata)
	e.extra(d.Extra)
	return e.done()
}

func (d *DataItem) decode(v gjson.Result) error {
	*d = DataItem{}
	return members(v, &d.Extra, func(k string, val gjson.Result) (bool, error) {
		var err error
		switch k {
		case "type":
			d.Type, err = wantString(k, val)
		case "text":
			d.Text, err = wantString(k, val)
		case "name":
			d.Name, err = wantString(k, val)
		case "mimeType":
			d.MimeType, err = wantString(k, val)
		case "uri":
			d.URI, err = wantString(k, val)
		case "bytes":
			d.Bytes, err = wantString(k, val)
		case "data":
			d.Data = rawValue(val)
		case "metadata":
			if err = wantObject(k, val); err == nil {
				d.Metadata = rawValue(val)
			}
		default:
			return false, nil
		}
		return true, err
	})
}

func decodeItems(key string, v gjson.Result) ([]DataItem, error) {
	out := []DataItem{}
	err := eachElem(key, v, func(e gjson.Result) error {
		var it DataItem
		if err := it.decode(e); err != nil {
			return err
		}
		out = append(out, it)
		return nil
	})
	return out, err
}

func appendItems(dst []byte, items []DataItem) []byte {
	dst = append(dst, '[')
	for i := range items {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = items[i].AppendJSON(dst)
	}
	return append(dst, ']')
}

// Product is an output of a task (spec §4.4).
type Product struct {
	ID          string
	Name        string
	Description string
	DataItems   []DataItem
	Extra       json.RawMessage
}

// AppendJSON appends the product's JSON encoding.
func (p *Product) AppendJSON(dst []byte) []byte {
	e := newEnc(dst)
	e.str("id", p.ID)
	e.strOpt("name", p.Name)
	e.strOpt("description", p.Description)
	e.key("dataItems")
	e.b = appendItems(e.b, p.DataItems)
	e.extra(p.Extra)
	return e.done()
}

func (p *Product) decode(v gjson.Result) error {
	*p = Product{}
	return members(v, &p.Extra, func(k string, val gjson.Result) (bool, error) {
		var err error
		switch k {
		case "id":
			p.ID, err = wantString(k, val)
		case "name":
			p.Name, err = wantString(k, val)
		case "description":
			p.Description, err = wantString(k, val)
		case "dataItems":
			p.DataItems, err = decodeItems(k, val)
		default:
			return false, nil
		}
		return true, err
	})
}

// TaskStatus is a state with the time it was entered and the data items
// that explain it (an awaiting-input question, a failure text). DataItems
// nil is absent; an empty non-nil slice is written as [].
type TaskStatus struct {
	State          TaskState
	StateChangedAt Timestamp
	DataItems      []DataItem
	Extra          json.RawMessage
}

// AppendJSON appends the status's JSON encoding.
func (s *TaskStatus) AppendJSON(dst []byte) []byte {
	e := newEnc(dst)
	e.str("state", string(s.State))
	e.ts("stateChangedAt", s.StateChangedAt)
	if s.DataItems != nil {
		e.key("dataItems")
		e.b = appendItems(e.b, s.DataItems)
	}
	e.extra(s.Extra)
	return e.done()
}

func (s *TaskStatus) decode(v gjson.Result) error {
	*s = TaskStatus{}
	return members(v, &s.Extra, func(k string, val gjson.Result) (bool, error) {
		var err error
		switch k {
		case "state":
			var st string
			st, err = wantString(k, val)
			s.State = TaskState(st)
		case "stateChangedAt":
			s.StateChangedAt, err = decodeTimestamp(k, val)
		case "dataItems":
			s.DataItems, err = decodeItems(k, val)
		default:
			return false, nil
		}
		return true, err
	})
}

func decodeTimestamp(k string, val gjson.Result) (Timestamp, error) {
	s, err := wantString(k, val)
	if err != nil {
		return Timestamp{}, err
	}
	ts, err := ParseTimestamp(s)
	if err != nil {
		return Timestamp{}, decodeError("%s: %q: %v", k, s, err)
	}
	return ts, nil
}

// Message is one message between Leader and Partner (spec §4.3). A Leader's
// message carries a Command; CommandParams stays raw (read it with the
// StartParams, GetParams, ReStreamParams and NotificationStartParams
// methods). DataItems is required on the wire and written as [] when nil.
type Message struct {
	ID            string
	SentAt        Timestamp
	SenderRole    string
	SenderID      string
	Mentions      []string
	Command       Command
	CommandParams json.RawMessage
	DataItems     []DataItem
	TaskID        string
	GroupID       string
	SessionID     string
	Extra         json.RawMessage
}

// ObjectType returns "message".
func (m *Message) ObjectType() string { return TypeMessage }

// AppendJSON appends the message's JSON encoding.
func (m *Message) AppendJSON(dst []byte) []byte {
	e := newEnc(dst)
	e.str("type", TypeMessage)
	e.str("id", m.ID)
	e.ts("sentAt", m.SentAt)
	e.str("senderRole", m.SenderRole)
	e.str("senderId", m.SenderID)
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
	e.strOpt("command", string(m.Command))
	e.rawOpt("commandParams", m.CommandParams)
	e.key("dataItems")
	e.b = appendItems(e.b, m.DataItems)
	e.strOpt("taskId", m.TaskID)
	e.strOpt("groupId", m.GroupID)
	e.strOpt("sessionId", m.SessionID)
	e.extra(m.Extra)
	return e.done()
}

func (m *Message) decode(v gjson.Result) error {
	*m = Message{}
	return members(v, &m.Extra, func(k string, val gjson.Result) (bool, error) {
		var err error
		var s string
		switch k {
		case "type":
			if s, err = wantString(k, val); err == nil && s != TypeMessage {
				err = decodeError("type: want %q, got %q", TypeMessage, s)
			}
		case "id":
			m.ID, err = wantString(k, val)
		case "sentAt":
			m.SentAt, err = decodeTimestamp(k, val)
		case "senderRole":
			m.SenderRole, err = wantString(k, val)
		case "senderId":
			m.SenderID, err = wantString(k, val)
		case "mentions":
			// v01.00 models also allow the bare string "all".
			if val.Type == gjson.String {
				m.Mentions = []string{val.Str}
			} else {
				m.Mentions, err = wantStrings(k, val)
			}
		case "command":
			s, err = wantString(k, val)
			m.Command = Command(s)
		case "commandParams":
			if err = wantObject(k, val); err == nil {
				m.CommandParams = rawValue(val)
			}
		case "dataItems":
			m.DataItems, err = decodeItems(k, val)
		case "taskId":
			m.TaskID, err = wantString(k, val)
		case "groupId":
			m.GroupID, err = wantString(k, val)
		case "sessionId":
			m.SessionID, err = wantString(k, val)
		default:
			return false, nil
		}
		return true, err
	})
}

// Task is the unit of work (spec §4.2); its ID is the task id the Leader
// chose. Products, MessageHistory and StatusHistory nil are absent; empty
// non-nil slices are written as [].
type Task struct {
	ID             string
	SenderID       string
	Status         TaskStatus
	Products       []Product
	MessageHistory []Message
	StatusHistory  []TaskStatus
	GroupID        string
	SessionID      string
	Extra          json.RawMessage
}

// ObjectType returns "task".
func (t *Task) ObjectType() string { return TypeTask }

// AppendJSON appends the task's JSON encoding.
func (t *Task) AppendJSON(dst []byte) []byte {
	e := newEnc(dst)
	e.str("type", TypeTask)
	e.str("id", t.ID)
	e.strOpt("senderId", t.SenderID)
	e.key("status")
	e.b = t.Status.AppendJSON(e.b)
	if t.Products != nil {
		e.key("products")
		e.b = append(e.b, '[')
		for i := range t.Products {
			if i > 0 {
				e.b = append(e.b, ',')
			}
			e.b = t.Products[i].AppendJSON(e.b)
		}
		e.b = append(e.b, ']')
	}
	if t.MessageHistory != nil {
		e.key("messageHistory")
		e.b = append(e.b, '[')
		for i := range t.MessageHistory {
			if i > 0 {
				e.b = append(e.b, ',')
			}
			e.b = t.MessageHistory[i].AppendJSON(e.b)
		}
		e.b = append(e.b, ']')
	}
	if t.StatusHistory != nil {
		e.key("statusHistory")
		e.b = append(e.b, '[')
		for i := range t.StatusHistory {
			if i > 0 {
				e.b = append(e.b, ',')
			}
			e.b = t.StatusHistory[i].AppendJSON(e.b)
		}
		e.b = append(e.b, ']')
	}
	e.strOpt("groupId", t.GroupID)
	e.str("sessionId", t.SessionID)
	e.extra(t.Extra)
	return e.done()
}

func (t *Task) decode(v gjson.Result) error {
	*t = Task{}
	return members(v, &t.Extra, func(k string, val gjson.Result) (bool, error) {
		var err error
		var s string
		switch k {
		case "type":
			if s, err = wantString(k, val); err == nil && s != TypeTask {
				err = decodeError("type: want %q, got %q", TypeTask, s)
			}
		case "id":
			t.ID, err = wantString(k, val)
		case "senderId":
			t.SenderID, err = wantString(k, val)
		case "status":
			err = t.Status.decode(val)
		case "products":
			t.Products = []Product{}
			err = eachElem(k, val, func(e gjson.Result) error {
				var p Product
				if err := p.decode(e); err != nil {
					return err
				}
				t.Products = append(t.Products, p)
				return nil
			})
		case "messageHistory":
			t.MessageHistory = []Message{}
			err = eachElem(k, val, func(e gjson.Result) error {
				var m Message
				if err := m.decode(e); err != nil {
					return err
				}
				t.MessageHistory = append(t.MessageHistory, m)
				return nil
			})
		case "statusHistory":
			t.StatusHistory = []TaskStatus{}
			err = eachElem(k, val, func(e gjson.Result) error {
				var st TaskStatus
				if err := st.decode(e); err != nil {
					return err
				}
				t.StatusHistory = append(t.StatusHistory, st)
				return nil
			})
		case "groupId":
			t.GroupID, err = wantString(k, val)
		case "sessionId":
			t.SessionID, err = wantString(k, val)
		default:
			return false, nil
		}
		return true, err
	})
}

// TaskStatusUpdateEvent reports a state change in a stream (spec §6.2.3).
type TaskStatusUpdateEvent struct {
	TaskID    string
	Status    TaskStatus
	SessionID string
	Extra     json.RawMessage
}

// ObjectType returns "status-update".
func (s *TaskStatusUpdateEvent) ObjectType() string { return TypeStatusUpdate }

// AppendJSON appends the event's JSON encoding.
func (s *TaskStatusUpdateEvent) AppendJSON(dst []byte) []byte {
	e := newEnc(dst)
	e.str("type", TypeStatusUpdate)
	e.str("taskId", s.TaskID)
	e.key("status")
	e.b = s.Status.AppendJSON(e.b)
	e.str("sessionId", s.SessionID)
	e.extra(s.Extra)
	return e.done()
}

func (s *TaskStatusUpdateEvent) decode(v gjson.Result) error {
	*s = TaskStatusUpdateEvent{}
	return members(v, &s.Extra, func(k string, val gjson.Result) (bool, error) {
		var err error
		switch k {
		case "type":
		case "taskId":
			s.TaskID, err = wantString(k, val)
		case "status":
			err = s.Status.decode(val)
		case "sessionId":
			s.SessionID, err = wantString(k, val)
		default:
			return false, nil
		}
		return true, err
	})
}

// ProductChunkEvent carries a product or a piece of one in a stream (spec
// §6.2.4). Append means the items extend the product already sent with the
// same id; LastChunk means no more pieces of it follow.
type ProductChunkEvent struct {
	TaskID    string
	Product   Product
	Append    bool
	LastChunk bool
	SessionID string
	Extra     json.RawMessage
}

// ObjectType returns "product-chunk".
func (p *ProductChunkEvent) ObjectType() string { return TypeProductChunk }

// AppendJSON appends the event's JSON encoding.
func (p *ProductChunkEvent) AppendJSON(dst []byte) []byte {
	e := newEnc(dst)
	e.str("type", TypeProductChunk)
	e.str("taskId", p.TaskID)
	e.key("product")
	e.b = p.Product.AppendJSON(e.b)
	e.boolean("append", p.Append)
	e.boolean("lastChunk", p.LastChunk)
	e.str("sessionId", p.SessionID)
	e.extra(p.Extra)
	return e.done()
}

func (p *ProductChunkEvent) decode(v gjson.Result) error {
	*p = ProductChunkEvent{}
	return members(v, &p.Extra, func(k string, val gjson.Result) (bool, error) {
		var err error
		switch k {
		case "type":
		case "taskId":
			p.TaskID, err = wantString(k, val)
		case "product":
			err = p.Product.decode(val)
		case "append":
			p.Append, err = wantBool(k, val)
		case "lastChunk":
			p.LastChunk, err = wantBool(k, val)
		case "sessionId":
			p.SessionID, err = wantString(k, val)
		default:
			return false, nil
		}
		return true, err
	})
}

// ErrUnknownType is wrapped by DecodeObject for a "type" it does not know
// (a v02 "task-result", a group "group-mgmt-message", …).
var ErrUnknownType = decodeError("unknown object type")

// DecodeObject decodes a typed AIP object, dispatching on its "type".
func DecodeObject(b []byte) (Object, error) {
	v, err := parseObject(b)
	if err != nil {
		return nil, err
	}
	return decodeObject(v)
}

func decodeObject(v gjson.Result) (Object, error) {
	if !v.IsObject() {
		return nil, decodeError("%v", errNotObject)
	}
	switch typ := v.Get("type"); typ.Str {
	case TypeTask:
		t := new(Task)
		return t, t.decode(v)
	case TypeMessage:
		m := new(Message)
		return m, m.decode(v)
	case TypeStatusUpdate:
		s := new(TaskStatusUpdateEvent)
		return s, s.decode(v)
	case TypeProductChunk:
		p := new(ProductChunkEvent)
		return p, p.decode(v)
	default:
		return nil, wrapUnknownType(typ.Raw)
	}
}

// DecodeTask decodes a Task (an RPC result, a notification callback body).
func DecodeTask(b []byte) (*Task, error) {
	v, err := parseObject(b)
	if err != nil {
		return nil, err
	}
	t := new(Task)
	if err := t.decode(v); err != nil {
		return nil, err
	}
	return t, nil
}

// DecodeMessage decodes a Message.
func DecodeMessage(b []byte) (*Message, error) {
	v, err := parseObject(b)
	if err != nil {
		return nil, err
	}
	m := new(Message)
	if err := m.decode(v); err != nil {
		return nil, err
	}
	return m, nil
}

// json.Marshaler and json.Unmarshaler for callers that use encoding/json.

// MarshalJSON implements json.Marshaler.
func (t *Task) MarshalJSON() ([]byte, error) { return marshalVia(t.AppendJSON) }

// MarshalJSON implements json.Marshaler.
func (m *Message) MarshalJSON() ([]byte, error) { return marshalVia(m.AppendJSON) }

// MarshalJSON implements json.Marshaler.
func (d *DataItem) MarshalJSON() ([]byte, error) { return marshalVia(d.AppendJSON) }

// MarshalJSON implements json.Marshaler.
func (p *Product) MarshalJSON() ([]byte, error) { return marshalVia(p.AppendJSON) }

// MarshalJSON implements json.Marshaler.
func (s *TaskStatus) MarshalJSON() ([]byte, error) { return marshalVia(s.AppendJSON) }

// MarshalJSON implements json.Marshaler.
func (s *TaskStatusUpdateEvent) MarshalJSON() ([]byte, error) { return marshalVia(s.AppendJSON) }

// MarshalJSON implements json.Marshaler.
func (p *ProductChunkEvent) MarshalJSON() ([]byte, error) { return marshalVia(p.AppendJSON) }

func unmarshalVia(b []byte, decode func(gjson.Result) error) error {
	v, err := parseObject(b)
	if err != nil {
		return err
	}
	return decode(v)
}

// UnmarshalJSON implements json.Unmarshaler.
func (t *Task) UnmarshalJSON(b []byte) error { return unmarshalVia(b, t.decode) }

// UnmarshalJSON implements json.Unmarshaler.
func (m *Message) UnmarshalJSON(b []byte) error { return unmarshalVia(b, m.decode) }

// UnmarshalJSON implements json.Unmarshaler.
func (d *DataItem) UnmarshalJSON(b []byte) error { return unmarshalVia(b, d.decode) }

// UnmarshalJSON implements json.Unmarshaler.
func (p *Product) UnmarshalJSON(b []byte) error { return unmarshalVia(b, p.decode) }

// UnmarshalJSON implements json.Unmarshaler.
func (s *TaskStatus) UnmarshalJSON(b []byte) error { return unmarshalVia(b, s.decode) }

// UnmarshalJSON implements json.Unmarshaler.
func (s *TaskStatusUpdateEvent) UnmarshalJSON(b []byte) error { return unmarshalVia(b, s.decode) }

// UnmarshalJSON implements json.Unmarshaler.
func (p *ProductChunkEvent) UnmarshalJSON(b []byte) error { return unmarshalVia(b, p.decode) }
