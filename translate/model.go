package translate

import (
	"encoding/json"
	"time"
)

// Protocol names, as used on the command line, in config and in Ext tags.
const (
	ProtoAgentAPI      = "agentapi"
	ProtoAIP           = "aip"
	ProtoAgentProtocol = "agentprotocol"
)

// Kind tells what an Event carries.
type Kind uint8

// The event kinds. The zero Kind is invalid so that a forgotten Kind is caught.
const (
	_ Kind = iota
	// KindState reports a change of the exchange's State (Event.State), with
	// optional Reason parts (AIP status data items, a failure text).
	KindState
	// KindMessageStart announces a message (Event.Message) before its content.
	KindMessageStart
	// KindMessageEnd closes a message; Event.Message holds the complete
	// message when the origin protocol sent it, else only its id.
	KindMessageEnd
	// KindContent is one part of a message: Event.Part at Event.Index of
	// message Event.MessageID, either a Delta to append or a full value.
	KindContent
	// KindToolCall is a call of a tool (Event.Tool) by the agent.
	KindToolCall
	// KindToolResult is a tool's output or error (Event.Tool).
	KindToolResult
	// KindArtifact is a product of the exchange (Event.Artifact): a file or
	// data the agent made, as opposed to its conversational reply.
	KindArtifact
	// KindInputRequest asks the client for more input (Event.Parts hold the
	// question); the exchange is input-required until the client continues.
	KindInputRequest
	// KindUsage reports token or cost usage (Event.Data, a free-form object).
	KindUsage
	// KindHeartbeat keeps a quiet stream alive and carries nothing.
	KindHeartbeat
	// KindError reports an error (Event.Err). A stream that ends with an
	// Error event and no terminal State is failed.
	KindError
)

var kindNames = [...]string{
	KindState:        "state",
	KindMessageStart: "message_start",
	KindMessageEnd:   "message_end",
	KindContent:      "content",
	KindToolCall:     "tool_call",
	KindToolResult:   "tool_result",
	KindArtifact:     "artifact",
	KindInputRequest: "input_request",
	KindUsage:        "usage",
	KindHeartbeat:    "heartbeat",
	KindError:        "error",
}

func (k Kind) String() string {
	if int(k) < len(kindNames) && kindNames[k] != "" {
		return kindNames[k]
	}
	return "invalid"
}

// ParseKind is the inverse of Kind.String; it returns 0 for an unknown name.
func ParseKind(s string) Kind {
	for k, name := range kindNames {
		if name == s && name != "" {
			return Kind(k)
		}
	}
	return 0
}

// State is the lifecycle state of an Exchange. The values are the canonical
// names, which are also AIP's where AIP has the state.
type State string

// The canonical states; DESIGN.md's table maps each to every protocol.
const (
	StateSubmitted          State = "submitted"
	StateWorking            State = "working"
	StateInputRequired      State = "input-required"
	StateAwaitingCompletion State = "awaiting-completion"
	StateCompleted          State = "completed"
	StateFailed             State = "failed"
	StateCanceled           State = "canceled"
	StateRejected           State = "rejected"
)

// Terminal reports whether no further state can follow s.
func (s State) Terminal() bool {
	switch s {
	case StateCompleted, StateFailed, StateCanceled, StateRejected:
		return true
	}
	return false
}

// Settled reports whether an exchange in state s waits on the client, or is
// over: terminal, input-required or awaiting-completion. A stream that reaches
// a settled state has said all it will say for this turn.
func (s State) Settled() bool {
	return s.Terminal() || s == StateInputRequired || s == StateAwaitingCompletion
}

// Role is who wrote a message.
type Role string

// The message roles, lowercase as every protocol here spells them.
const (
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
	RoleSystem    Role = "system"
	RoleTool      Role = "tool"
)

// PartKind tells what a Part holds.
type PartKind string

// The part kinds, named as the Agent API's content types.
const (
	PartText    PartKind = "text"
	PartImage   PartKind = "image"
	PartFile    PartKind = "file"
	PartData    PartKind = "data"
	PartAudio   PartKind = "audio"
	PartRefusal PartKind = "refusal"
	PartVideo   PartKind = "video"
)

// Part is one piece of content.
type Part struct {
	Kind PartKind `json:"kind"`
	// Text is the text of a text part, or the reason of a refusal.
	Text string `json:"text,omitempty"`
	// URI locates an image, file, video or audio (a URL or a data: URI).
	URI string `json:"uri,omitempty"`
	// Bytes is inline content, base64-encoded as it travels on the wire
	// (Agent API file_data and audio data, AIP file bytes).
	Bytes string `json:"bytes,omitempty"`
	// Name is a file name; FileID a protocol's own file handle.
	Name   string `json:"name,omitempty"`
	FileID string `json:"file_id,omitempty"`
	// MIME is the media type; Format an audio format such as "wav".
	MIME   string `json:"mime,omitempty"`
	Format string `json:"format,omitempty"`
	// Data is the JSON value of a data part.
	Data json.RawMessage `json:"data,omitempty"`
	// Meta is free-form metadata attached to the part (a JSON object).
	Meta json.RawMessage `json:"meta,omitempty"`
}

// TextPart returns a text part.
func TextPart(s string) Part { return Part{Kind: PartText, Text: s} }

// Message is one turn of conversation: who said it and what.
type Message struct {
	ID   string `json:"id,omitempty"`
	Role Role   `json:"role,omitempty"`
	// Type is the origin protocol's message type where it has one (the
	// Agent API's "message", "reasoning", "plugin_call", …); empty means an
	// ordinary message.
	Type  string `json:"type,omitempty"`
	Parts []Part `json:"parts,omitempty"`
	Ext   Ext    `json:"ext,omitzero"`
}

// Text returns the concatenated text of the message's text parts.
func (m *Message) Text() string { return PartsText(m.Parts) }

// PartsText returns the concatenated text of the text parts in ps.
func PartsText(ps []Part) string {
	switch len(ps) {
	case 0:
		return ""
	case 1:
		if ps[0].Kind == PartText {
			return ps[0].Text
		}
		return ""
	}
	var n int
	for i := range ps {
		if ps[i].Kind == PartText {
			n += len(ps[i].Text)
		}
	}
	b := make([]byte, 0, n)
	for i := range ps {
		if ps[i].Kind == PartText {
			b = append(b, ps[i].Text...)
		}
	}
	return string(b)
}

// ToolKind tells who runs a tool, as the Agent API distinguishes them.
type ToolKind string

// The tool kinds. Function tools are the client's (OpenAI style); plugin
// tools run in the agent; MCP tools are reached over MCP.
const (
	ToolFunction ToolKind = "function"
	ToolPlugin   ToolKind = "plugin"
	ToolMCP      ToolKind = "mcp"
)

// Tool is a tool call or its result.
type Tool struct {
	CallID string   `json:"call_id,omitempty"`
	Name   string   `json:"name,omitempty"`
	Kind   ToolKind `json:"kind,omitempty"`
	// Arguments is the call's arguments as a JSON text (for a call).
	Arguments string `json:"arguments,omitempty"`
	// Output is the result as text, often itself JSON (for a result).
	Output string `json:"output,omitempty"`
	// IsError marks a result that is the tool's failure.
	IsError bool `json:"is_error,omitempty"`
	// Server names the MCP server of an MCP tool.
	Server string `json:"server,omitempty"`
}

// Artifact is a product of an exchange: AIP Product, Agent Protocol
// ArtifactGenerated, an Agent API file or data content.
type Artifact struct {
	ID          string `json:"id,omitempty"`
	Name        string `json:"name,omitempty"`
	Description string `json:"description,omitempty"`
	Parts       []Part `json:"parts,omitempty"`
	// Append means these parts continue an artifact already sent with the
	// same ID; Last means no more chunks of it follow.
	Append bool `json:"append,omitempty"`
	Last   bool `json:"last,omitempty"`
}

// Error is a failure as the protocols report it: a code, a message, and
// whether trying again may help.
type Error struct {
	Code      string `json:"code"`
	Message   string `json:"message"`
	Retryable bool   `json:"retryable,omitempty"`
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

// Ext is the carry-over of an origin protocol: the fields of a wire object
// that the canonical model does not name, as a raw JSON object. Only an
// encoder of the same Proto uses it.
type Ext struct {
	Proto string          `json:"proto,omitempty"`
	Raw   json.RawMessage `json:"raw,omitempty"`
}

// IsZero reports whether e carries nothing.
func (e Ext) IsZero() bool { return len(e.Raw) == 0 }

// For returns the raw fields if e came from protocol proto, else nil.
func (e Ext) For(proto string) []byte {
	if e.Proto != proto {
		return nil
	}
	return e.Raw
}

// Event is one step of an exchange, independent of wire protocol. Which
// fields are set depends on Kind; the rest are zero.
type Event struct {
	Kind Kind `json:"kind"`
	// Exchange is the bridge's exchange id; Seq the event's place in the
	// exchange log, from 1, assigned when the event is logged.
	Exchange string    `json:"exchange,omitempty"`
	Seq      uint64    `json:"seq,omitempty"`
	Time     time.Time `json:"time,omitzero"`

	// State and Parts for KindState (Parts: the reason) and
	// KindInputRequest (Parts: the question).
	State State  `json:"state,omitempty"`
	Parts []Part `json:"parts,omitempty"`

	// MessageID links content, tool and artifact events to their message.
	MessageID string `json:"message_id,omitempty"`
	// Message for KindMessageStart and KindMessageEnd.
	Message *Message `json:"message,omitempty"`

	// Index, Part, Delta and Done for KindContent. Delta means Part is an
	// increment to append to what came before at Index; otherwise Part is the
	// whole value so far (a snapshot), and Done means it is final.
	Index int   `json:"index,omitempty"`
	Part  *Part `json:"part,omitempty"`
	Delta bool  `json:"delta,omitempty"`
	Done  bool  `json:"done,omitempty"`

	// Tool for KindToolCall and KindToolResult. Done as for content: a call
	// streamed as snapshots is final only when Done.
	Tool *Tool `json:"tool,omitempty"`

	// Artifact for KindArtifact.
	Artifact *Artifact `json:"artifact,omitempty"`

	// Data is a free-form JSON object: usage for KindUsage.
	Data json.RawMessage `json:"data,omitempty"`

	// Err for KindError, and for a failed or rejected KindState.
	Err *Error `json:"error,omitempty"`

	Ext Ext `json:"ext,omitzero"`
}

// Terminal reports whether e ends the exchange: a terminal state.
func (e *Event) Terminal() bool { return e.Kind == KindState && e.State.Terminal() }

// Clone returns a deep copy of e that shares no memory with it.
func (e *Event) Clone() *Event {
	c := *e
	c.Parts = cloneParts(e.Parts)
	if e.Message != nil {
		m := *e.Message
		m.Parts = cloneParts(m.Parts)
		m.Ext.Raw = cloneBytes(m.Ext.Raw)
		c.Message = &m
	}
	if e.Part != nil {
		p := clonePart(*e.Part)
		c.Part = &p
	}
	if e.Tool != nil {
		t := *e.Tool
		c.Tool = &t
	}
	if e.Artifact != nil {
		a := *e.Artifact
		a.Parts = cloneParts(a.Parts)
		c.Artifact = &a
	}
	if e.Err != nil {
		x := *e.Err
		c.Err = &x
	}
	c.Data = cloneBytes(e.Data)
	c.Ext.Raw = cloneBytes(e.Ext.Raw)
	return &c
}

func cloneParts(ps []Part) []Part {
	if ps == nil {
		return nil
	}
	out := make([]Part, len(ps))
	for i := range ps {
		out[i] = clonePart(ps[i])
	}
	return out
}

func clonePart(p Part) Part {
	p.Data = cloneBytes(p.Data)
	p.Meta = cloneBytes(p.Meta)
	return p
}

func cloneBytes(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append([]byte(nil), b...)
}

// Command is what a client asks of an exchange.
type Command uint8

// The commands. Where the upstream protocol lacks one, the bridge supplies
// it (see DESIGN.md).
const (
	_ Command = iota
	// CommandStart begins a new exchange with Request.Input.
	CommandStart
	// CommandContinue gives new input to an exchange or session that waits
	// for it.
	CommandContinue
	// CommandCancel stops an exchange.
	CommandCancel
	// CommandComplete accepts an exchange awaiting completion.
	CommandComplete
	// CommandGet reads an exchange's state without changing it.
	CommandGet
	// CommandResume replays an exchange's events after Request.After.
	CommandResume
)

var commandNames = [...]string{
	CommandStart:    "start",
	CommandContinue: "continue",
	CommandCancel:   "cancel",
	CommandComplete: "complete",
	CommandGet:      "get",
	CommandResume:   "resume",
}

func (c Command) String() string {
	if int(c) < len(commandNames) && commandNames[c] != "" {
		return commandNames[c]
	}
	return "invalid"
}

// Request is a client's command in canonical form.
type Request struct {
	Command Command `json:"command"`
	// Exchange is the bridge's exchange id once one is assigned.
	Exchange string `json:"exchange,omitempty"`
	// ID is the id the client gave the exchange: an Agent API request id,
	// an AIP task id, an Agent Protocol request id.
	ID string `json:"id,omitempty"`
	// Session and User key the conversation: Agent API session_id and
	// user_id, AIP sessionId, Agent Protocol thread or run id.
	Session string `json:"session,omitempty"`
	User    string `json:"user,omitempty"`
	// Input is the conversation the client sent, oldest first; the last
	// message is the new input. Protocols that carry only the new input
	// send one message.
	Input []Message `json:"input,omitempty"`
	// Stream asks for events as they happen rather than one final answer.
	Stream bool `json:"stream,omitempty"`
	// After is the last event sequence the client has, for CommandResume.
	After uint64 `json:"after,omitempty"`
	// Agent names the agent a client addressed, where the protocol names one.
	Agent string `json:"agent,omitempty"`
	Ext   Ext    `json:"ext,omitzero"`
}

// LastInput returns the newest input message, or nil when there is none.
func (r *Request) LastInput() *Message {
	if len(r.Input) == 0 {
		return nil
	}
	return &r.Input[len(r.Input)-1]
}
