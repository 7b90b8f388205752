package agentprotocol

import (
	"encoding/json"

	"github.com/tidwall/gjson"
)

// Dialect is one of the three shapes of "Agent Protocol 2025" traffic found
// in the wild (agent_protocol.md §0 and §2.4).
type Dialect uint8

// The dialects. The zero value is DialectUnknown; where a function needs a
// dialect and is given DialectUnknown it uses DialectProcess, the one the
// spec in specs/agent-protocol-2025-draft.md describes.
const (
	DialectUnknown Dialect = iota
	// DialectProcess is the README of 2025-02-21 (PR #1 head): POST
	// {agent}/process, GET {agent}/getevents/{request_id}?stream=&since=,
	// events request_started / request_completed, run_id names the session
	// and request_id the turn.
	DialectProcess
	// DialectRun is the README on main since 2025-03-17: POST {agent}/run,
	// GET {agent}/get_events/{run_id}, POST {agent}/configure, events
	// run_started / run_completed, thread_id names the session and run_id
	// the turn.
	DialectRun
	// DialectAgentic is the wire format of the reference server
	// supercog-ai/agentic: GET /_discovery, POST {agent}/process {prompt},
	// POST {agent}/resume {continue_result}, GET
	// {agent}/getevents?request_id=&stream=, events {type, agent, depth,
	// payload} without ids, the turn ends with turn_end, turn_cancelled or
	// wait_for_input at depth 0.
	DialectAgentic
)

var dialectNames = [...]string{DialectUnknown: "unknown", DialectProcess: "process", DialectRun: "run", DialectAgentic: "agentic"}

func (d Dialect) String() string {
	if int(d) < len(dialectNames) {
		return dialectNames[d]
	}
	return "invalid"
}

// ParseDialect is the inverse of Dialect.String; it returns DialectUnknown
// for any other name.
func ParseDialect(s string) Dialect {
	for i, n := range dialectNames {
		if n == s {
			return Dialect(i)
		}
	}
	return DialectUnknown
}

// orDefault returns d, or DialectProcess for DialectUnknown.
func (d Dialect) orDefault() Dialect {
	if d == DialectUnknown || d > DialectAgentic {
		return DialectProcess
	}
	return d
}

// Event type values, as the "type" member carries them. The spec never
// enumerates them; every value found is snake_case (PR #1
// scripts/test_models.py, README "Usage"). The two README editions differ
// only in the start and end events: request_* (2025-02-21) and run_*
// (2025-03-17). operation_complete is the pre-2025-02-18 name of the end
// event, still in PR #1's openapi.yaml; it is read, never written.
const (
	TypeRequestStarted    = "request_started"
	TypeRunStarted        = "run_started"
	TypeTextOutput        = "text_output"
	TypeToolCall          = "tool_call"
	TypeToolResult        = "tool_result"
	TypeToolError         = "tool_error"
	TypeToolTextOutput    = "tool_text_output"
	TypeArtifactGenerated = "artifact_generated"
	TypeWaitForInput      = "wait_for_input"
	TypeCompletionCall    = "completion_call"
	TypeCompletionResult  = "completion_result"
	TypeRequestCompleted  = "request_completed"
	TypeRunCompleted      = "run_completed"
	TypeOperationComplete = "operation_complete"
)

// Event type values of the agentic reference server (events.py) that the
// codec reads or writes. Its other types (prompt, output, subagent_*,
// set_state, add_child, resume_with_input, reset_history, oauth_flow,
// reasoning_content, completion_start) are read and skipped.
const (
	AgenticPromptStarted = "prompt_started"
	AgenticChatOutput    = "chat_output"
	AgenticToolCall      = "tool_call"
	AgenticToolResult    = "tool_result"
	AgenticToolError     = "tool_error"
	AgenticCompletionEnd = "completion_end"
	AgenticWaitForInput  = "wait_for_input"
	AgenticTurnEnd       = "turn_end"
	AgenticTurnCancelled = "turn_cancelled"
)

// FinishReason is RequestCompleted's finish_reason: one "l" in canceled, in
// both README editions and the openapi FinishReason enum.
type FinishReason string

// The finish reasons.
const (
	FinishSuccess  FinishReason = "success"
	FinishError    FinishReason = "error"
	FinishCanceled FinishReason = "canceled"
)

// AgentOperation is one operation an agent advertises.
type AgentOperation struct {
	Name         string          `json:"name"`
	Description  string          `json:"description"`
	InputSchema  json.RawMessage `json:"input_schema,omitempty"`
	OutputSchema json.RawMessage `json:"output_schema,omitempty"`
}

// UnmarshalJSON also accepts a bare string, the agentic server's form
// ("operations": ["chat"]).
func (o *AgentOperation) UnmarshalJSON(b []byte) error {
	r := gjson.ParseBytes(b)
	if r.Type == gjson.String {
		*o = AgentOperation{Name: r.Str}
		return nil
	}
	type plain AgentOperation
	return json.Unmarshal(b, (*plain)(o))
}

// ChatOperation is the default operation every agent is assumed to support
// (README "DefaultChatOperation").
var ChatOperation = AgentOperation{
	Name:         "chat",
	Description:  "send a chat request",
	InputSchema:  json.RawMessage(`{"type":"object","properties":{"input":{"type":"string"}},"required":["input"]}`),
	OutputSchema: json.RawMessage(`{"type":"object","properties":{"output":{"type":"string"}}}`),
}

// AgentDescriptor is the answer of GET {agent}/describe.
type AgentDescriptor struct {
	Name       string           `json:"name"`
	Purpose    string           `json:"purpose"`
	Endpoints  []string         `json:"endpoints"`
	Operations []AgentOperation `json:"operations"`
	Tools      []string         `json:"tools"`
	// Prompts is the agentic server's extra member (name → prompt text).
	Prompts map[string]string `json:"prompts,omitempty"`
}

// AgentRef is one entry of the agent list (GET / or GET /_discovery).
type AgentRef struct {
	Name string `json:"name"`
	// Path is the agent's path, with a leading slash ("/weather_agent").
	Path string `json:"path"`
}

// RequestBase holds the members every 2025 request may carry. Which id
// names what depends on the dialect: in DialectProcess run_id is the
// session and request_id the turn; in DialectRun thread_id is the session
// and run_id the turn.
type RequestBase struct {
	RequestID       string          `json:"request_id,omitempty"`
	RunID           string          `json:"run_id,omitempty"`
	ThreadID        string          `json:"thread_id,omitempty"`
	LoggingLevel    string          `json:"logging_level,omitempty"`
	RequestMetadata json.RawMessage `json:"request_metadata,omitempty"`
}

// ChatRequest sends the agent a text prompt. Readers also accept "prompt"
// (the agentic server's name) for Input.
type ChatRequest struct {
	RequestBase
	Input string `json:"input"`
}

// ResumeWithInput answers a WaitForInput: request_keys holds key → value.
type ResumeWithInput struct {
	RequestBase
	RequestKeys json.RawMessage `json:"request_keys"`
}

// CancelRequest cancels the turn its ids name.
type CancelRequest struct {
	RequestBase
}

// ConfigureRequest passes configuration to the agent.
type ConfigureRequest struct {
	RequestBase
	Args json.RawMessage `json:"args"`
}

// AgenticProcessRequest is the agentic server's POST {agent}/process and
// {agent}/stream_request body. Thread "NEW" asks for a fresh thread.
type AgenticProcessRequest struct {
	Prompt   string `json:"prompt"`
	Debug    string `json:"debug,omitempty"`
	ThreadID string `json:"thread_id,omitempty"`
}

// AgenticResumeRequest is the agentic server's POST {agent}/resume body;
// continue_result.request_id names the paused request.
type AgenticResumeRequest struct {
	ContinueResult map[string]string `json:"continue_result"`
	Debug          string            `json:"debug,omitempty"`
	ThreadID       string            `json:"thread_id,omitempty"`
}

// AgenticStartResponse is the agentic server's answer to process and resume.
type AgenticStartResponse struct {
	RequestID string  `json:"request_id"`
	ThreadID  *string `json:"thread_id"`
}

// EventBase holds the members of every 2025 event. ID is the event index,
// increasing within a run. The openapi draft types run_id as a string (the
// PR #1 README says int); this codec writes strings and reads both.
type EventBase struct {
	ID        uint64 `json:"id"`
	Type      string `json:"type"`
	Agent     string `json:"agent"`
	Depth     int    `json:"depth"`
	Role      string `json:"role,omitempty"`
	RunID     string `json:"run_id,omitempty"`
	RequestID string `json:"request_id,omitempty"`
	ThreadID  string `json:"thread_id,omitempty"`
	Timestamp string `json:"timestamp,omitempty"`
}

// RequestStarted (DialectRun: run_started) opens a turn; RequestID (or
// RunID) names it.
type RequestStarted struct{ EventBase }

// TextOutput is text the agent produced. The Encoder writes increments:
// the concatenated contents of a turn's TextOutputs are its reply.
type TextOutput struct {
	EventBase
	Content string `json:"content"`
}

// ToolCall reports the agent calling a tool. ToolCallID is this codec's
// addition (the agentic name), so that results can be paired.
type ToolCall struct {
	EventBase
	FunctionName string          `json:"function_name"`
	Args         json.RawMessage `json:"args"`
	ToolCallID   string          `json:"tool_call_id,omitempty"`
}

// ToolResult is a tool's result as text.
type ToolResult struct {
	EventBase
	FunctionName string `json:"function_name"`
	TextResult   string `json:"text_result"`
	ToolCallID   string `json:"tool_call_id,omitempty"`
}

// ToolError is a tool's failure; the spec gives only content.
type ToolError struct {
	EventBase
	Content      string `json:"content"`
	FunctionName string `json:"function_name,omitempty"`
	ToolCallID   string `json:"tool_call_id,omitempty"`
}

// ToolTextOutput is text a tool produced while running.
type ToolTextOutput struct {
	EventBase
	Content string `json:"content"`
}

// ArtifactGenerated announces an artifact. The spec names the artifact's
// id "id", which collides with the event index; like the PR #1 generated
// models this codec writes artifact_id, and reads a string "id" too.
type ArtifactGenerated struct {
	EventBase
	Name       string `json:"name"`
	ArtifactID string `json:"artifact_id"`
	URL        string `json:"url"`
	MIMEType   string `json:"mime_type"`
}

// WaitForInput pauses the turn; request_keys maps each requested key to its
// description.
type WaitForInput struct {
	EventBase
	RequestKeys json.RawMessage `json:"request_keys"`
}

// CompletionCall reports an LLM call; the spec gives it no fields.
type CompletionCall struct{ EventBase }

// CompletionResult reports an LLM call's result; the spec gives it no
// fields. This codec writes token usage in Usage.
type CompletionResult struct {
	EventBase
	Usage json.RawMessage `json:"usage,omitempty"`
}

// RequestCompleted (DialectRun: run_completed) ends the turn. Result is the
// "single string result" the README promises for chat (success only);
// Error is this codec's addition on finish_reason error.
type RequestCompleted struct {
	EventBase
	FinishReason FinishReason `json:"finish_reason"`
	Result       *string      `json:"result,omitempty"`
	Error        *EventError  `json:"error,omitempty"`
}

// EventError is the error member of a failed RequestCompleted.
type EventError struct {
	Code    string `json:"code,omitempty"`
	Message string `json:"message"`
}

// AgenticEvent is one event of the agentic reference server. Result repeats
// a tool_result's payload at the top level, as its getevents does.
type AgenticEvent struct {
	Type    string          `json:"type"`
	Agent   string          `json:"agent"`
	Depth   int             `json:"depth"`
	Payload json.RawMessage `json:"payload"`
	Result  json.RawMessage `json:"result,omitempty"`
}
