package aip

import (
	"encoding/json"

	"github.com/agentbridge/bridge/internal/jsonw"
	"github.com/tidwall/gjson"
)

// NotificationConfig is the params of notification/set and its result
// (spec §6.3.1). ID is empty to create a config; the Partner assigns it.
type NotificationConfig struct {
	ID     string
	URL    string
	Token  string
	TaskID string
	Extra  json.RawMessage
}

// Validate checks what the spec requires: a taskId and an absolute http(s)
// url. A missing token is tolerated (it is the Leader's own safeguard).
func (c *NotificationConfig) Validate() *Error {
	if c.TaskID == "" {
		return NewError(CodeInvalidParams, "taskId is required")
	}
	if !validNotifyURL(c.URL) {
		return errorf(CodeInvalidParams, "url must be an absolute http or https URL, got %q", c.URL)
	}
	return nil
}

// AppendJSON appends the config's JSON encoding.
func (c *NotificationConfig) AppendJSON(dst []byte) []byte {
	e := newEnc(dst)
	e.strOpt("id", c.ID)
	e.str("url", c.URL)
	e.str("token", c.Token)
	e.str("taskId", c.TaskID)
	e.extra(c.Extra)
	return e.done()
}

func (c *NotificationConfig) decode(v gjson.Result) error {
	*c = NotificationConfig{}
	return members(v, &c.Extra, func(k string, val gjson.Result) (bool, error) {
		var err error
		switch k {
		case "id":
			c.ID, err = wantString(k, val)
		case "url":
			c.URL, err = wantString(k, val)
		case "token":
			c.Token, err = wantString(k, val)
		case "taskId":
			c.TaskID, err = wantString(k, val)
		default:
			return false, nil
		}
		return true, err
	})
}

// MarshalJSON implements json.Marshaler.
func (c *NotificationConfig) MarshalJSON() ([]byte, error) { return marshalVia(c.AppendJSON) }

// UnmarshalJSON implements json.Unmarshaler.
func (c *NotificationConfig) UnmarshalJSON(b []byte) error { return unmarshalVia(b, c.decode) }

// NotificationIDParams is the params of notification/get and
// notification/delete; an empty NotificationConfigID means every config of
// the task.
type NotificationIDParams struct {
	TaskID               string
	NotificationConfigID string
	Extra                json.RawMessage
}

// AppendJSON appends the params' JSON encoding.
func (n *NotificationIDParams) AppendJSON(dst []byte) []byte {
	e := newEnc(dst)
	e.str("taskId", n.TaskID)
	e.strOpt("notificationConfigId", n.NotificationConfigID)
	e.extra(n.Extra)
	return e.done()
}

func (n *NotificationIDParams) decode(v gjson.Result) error {
	*n = NotificationIDParams{}
	return members(v, &n.Extra, func(k string, val gjson.Result) (bool, error) {
		var err error
		switch k {
		case "taskId":
			n.TaskID, err = wantString(k, val)
		case "notificationConfigId":
			n.NotificationConfigID, err = wantString(k, val)
		default:
			return false, nil
		}
		return true, err
	})
}

// StartParams is the commandParams of start. The spec names
// responseTimeout, awaitingInputTimeout and awaitingCompletionTimeout (ms);
// the v01.00 Python model has timeout instead (unit unstated). Zero is
// absent.
type StartParams struct {
	ResponseTimeout           int64
	AwaitingInputTimeout      int64
	AwaitingCompletionTimeout int64
	MaxProductsBytes          int64
	Timeout                   int64
}

// AppendJSON appends the params' JSON encoding, omitting zero values.
func (p *StartParams) AppendJSON(dst []byte) []byte {
	e := newEnc(dst)
	for _, f := range [...]struct {
		k string
		v int64
	}{
		{"responseTimeout", p.ResponseTimeout},
		{"awaitingInputTimeout", p.AwaitingInputTimeout},
		{"awaitingCompletionTimeout", p.AwaitingCompletionTimeout},
		{"maxProductsBytes", p.MaxProductsBytes},
		{"timeout", p.Timeout},
	} {
		if f.v != 0 {
			e.key(f.k)
			e.b = appendInt(e.b, f.v)
		}
	}
	return e.done()
}

// GetParams is the commandParams of get: return only history newer than
// these instants (zero: all of it).
type GetParams struct {
	LastMessageSentAt  Timestamp
	LastStateChangedAt Timestamp
}

// AppendJSON appends the params' JSON encoding; zero values are null.
func (p *GetParams) AppendJSON(dst []byte) []byte {
	e := newEnc(dst)
	e.ts("lastMessageSentAt", p.LastMessageSentAt)
	e.ts("lastStateChangedAt", p.LastStateChangedAt)
	return e.done()
}

// ReStreamParams is the commandParams of re-stream: replay events after
// LastEventSeq (zero: from the start).
type ReStreamParams struct {
	LastEventSeq uint64
}

// AppendJSON appends the params' JSON encoding.
func (p *ReStreamParams) AppendJSON(dst []byte) []byte {
	e := newEnc(dst)
	e.uint("lastEventSeq", p.LastEventSeq)
	return e.done()
}

// NotificationStartParams is the commandParams of notification/start's
// start. NotifyOnStates empty means every state change.
type NotificationStartParams struct {
	NotificationConfigID string
	NotifyOnStates       []TaskState
}

// AppendJSON appends the params' JSON encoding.
func (p *NotificationStartParams) AppendJSON(dst []byte) []byte {
	e := newEnc(dst)
	e.str("notificationConfigId", p.NotificationConfigID)
	if len(p.NotifyOnStates) > 0 {
		e.key("notifyOnStates")
		e.b = append(e.b, '[')
		for i, s := range p.NotifyOnStates {
			if i > 0 {
				e.b = append(e.b, ',')
			}
			e.b = jsonw.AppendString(e.b, string(s))
		}
		e.b = append(e.b, ']')
	}
	return e.done()
}

// commandParams returns the message's commandParams as a gjson object, or
// an empty object when absent.
func (m *Message) commandParams() gjson.Result {
	if len(m.CommandParams) == 0 {
		return gjson.Parse("{}")
	}
	return gjson.ParseBytes(m.CommandParams)
}

// StartParams reads commandParams as StartParams; unknown members are
// ignored, numbers must be integers.
func (m *Message) StartParams() (StartParams, error) {
	var p StartParams
	err := members(m.commandParams(), nil, func(k string, val gjson.Result) (bool, error) {
		var dst *int64
		switch k {
		case "responseTimeout":
			dst = &p.ResponseTimeout
		case "awaitingInputTimeout":
			dst = &p.AwaitingInputTimeout
		case "awaitingCompletionTimeout":
			dst = &p.AwaitingCompletionTimeout
		case "maxProductsBytes":
			dst = &p.MaxProductsBytes
		case "timeout":
			dst = &p.Timeout
		default:
			return false, nil
		}
		n, err := wantInt(k, val)
		if err == nil && n < 0 {
			err = decodeError("%s: must not be negative", k)
		}
		*dst = n
		return true, err
	})
	return p, err
}

// GetParams reads commandParams as GetParams.
func (m *Message) GetParams() (GetParams, error) {
	var p GetParams
	err := members(m.commandParams(), nil, func(k string, val gjson.Result) (bool, error) {
		var err error
		switch k {
		case "lastMessageSentAt":
			p.LastMessageSentAt, err = decodeTimestamp(k, val)
		case "lastStateChangedAt":
			p.LastStateChangedAt, err = decodeTimestamp(k, val)
		default:
			return false, nil
		}
		return true, err
	})
	return p, err
}

// ReStreamParams reads commandParams as ReStreamParams.
func (m *Message) ReStreamParams() (ReStreamParams, error) {
	var p ReStreamParams
	err := members(m.commandParams(), nil, func(k string, val gjson.Result) (bool, error) {
		if k != "lastEventSeq" {
			return false, nil
		}
		var err error
		p.LastEventSeq, err = wantUint(k, val)
		return true, err
	})
	return p, err
}

// NotificationStartParams reads commandParams as NotificationStartParams.
func (m *Message) NotificationStartParams() (NotificationStartParams, error) {
	var p NotificationStartParams
	err := members(m.commandParams(), nil, func(k string, val gjson.Result) (bool, error) {
		var err error
		switch k {
		case "notificationConfigId":
			p.NotificationConfigID, err = wantString(k, val)
		case "notifyOnStates":
			var ss []string
			ss, err = wantStrings(k, val)
			for _, s := range ss {
				p.NotifyOnStates = append(p.NotifyOnStates, TaskState(s))
			}
		default:
			return false, nil
		}
		return true, err
	})
	return p, err
}

// FilterHistory returns a shallow copy of t whose MessageHistory and
// StatusHistory hold only entries newer than p's instants, as get asks
// (spec §4.3 GetCommandParams). Instants are compared, not strings, so
// "+00:00" and "+08:00" peers agree.
func FilterHistory(t *Task, p GetParams) *Task {
	c := *t
	if !p.LastMessageSentAt.IsZero() && t.MessageHistory != nil {
		c.MessageHistory = []Message{}
		for i := range t.MessageHistory {
			if t.MessageHistory[i].SentAt.After(p.LastMessageSentAt) {
				c.MessageHistory = append(c.MessageHistory, t.MessageHistory[i])
			}
		}
	}
	if !p.LastStateChangedAt.IsZero() && t.StatusHistory != nil {
		c.StatusHistory = []TaskStatus{}
		for i := range t.StatusHistory {
			if t.StatusHistory[i].StateChangedAt.After(p.LastStateChangedAt) {
				c.StatusHistory = append(c.StatusHistory, t.StatusHistory[i])
			}
		}
	}
	return &c
}
