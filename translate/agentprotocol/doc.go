// Package agentprotocol is the codec of the "Agent Protocol, 2025 edition"
// (supercog-ai/agent-protocol), in both roles, and of the wire format of its
// reference server (supercog-ai/agentic). It is pure functions over bytes
// and imports no HTTP library: the HTTP server and the upstream client are
// built on it and do only the plumbing. The original agentprotocol.ai v1
// tasks/steps API is in the subpackage v1.
//
// # Dialects
//
// The 2025 draft has no machine-readable REST spec and three shapes in the
// wild (agent_protocol.md §0, §2.4). Dialect names them:
//
//	                 DialectProcess          DialectRun              DialectAgentic
//	source           README 2025-02-21/PR#1  README main 2025-03-17  agentic api.py
//	agent list       GET /  [[name, path]]   same                    GET /_discovery ["/path"]
//	submit           POST {a}/process        POST {a}/run            POST {a}/process {prompt}
//	resume           ResumeWithInput there   same                    POST {a}/resume {continue_result}
//	cancel           CancelRequest there     same                    none
//	events           GET {a}/getevents/{id}  GET {a}/get_events/{id} GET {a}/getevents?request_id=
//	event shape      flat members + id       same + thread_id        {type, agent, depth, payload}
//	start / end      request_started /       run_started /           prompt_started / turn_end,
//	                 request_completed       run_completed           turn_cancelled, wait_for_input
//	turn / session   request_id / run_id     run_id / thread_id      request_id / thread_id
//
// Event type values are snake_case, as PR #1's scripts/test_models.py and
// its README "Usage" give them (text_output, tool_call, …); the spec never
// enumerates them. The two README editions differ only in the start and
// end events and the ids; PR #1's openapi.yaml still calls the end event
// OperationComplete, whose value operation_complete is read, never
// written. finish_reason is success, error or canceled.
//
// # Server role
//
// ParseRequest reads a request body and tells its kind from its fields
// (the draft gives requests no type member): input or prompt is a
// ChatRequest, request_keys or continue_result a ResumeWithInput, args a
// ConfigureRequest, ids alone a CancelRequest; anything else, two kinds
// at once, or members of the wrong type are errors wrapping
// translate.ErrBadRequest that name the field. DecodeRequest maps it, with
// the dialect the route implies: chat → CommandStart (a session id makes it
// a new turn of that session), resume → CommandContinue, cancel →
// CommandCancel, configure → translate.ErrUnsupported (the server answers
// it itself; the README answers RequestCompleted success).
//
// An Encoder writes the events of one turn. Encode appends zero or more
// event objects, one compact JSON object per line, each carrying the event
// id the caller passes: the bridge passes the exchange log sequence, so
// that getevents?since=N and SSE Last-Event-ID resume from the log. When
// one canonical event yields several objects (the start event ahead of the
// first event of a turn, held tool snapshots flushed with the end) they
// share the id and are always written together. The lines are the
// WebSocket form (Objects yields one frame each); AppendArray makes the
// JSON list of a non-streaming getevents; AppendSSE (or EncodeSSE) frames
// them as "id: N" + "data: <object>" with no event: line, so that
// EventSource.onmessage fires (agentic adds "event: message", as its
// server does). NewDescriptor, AppendDescriptor and AppendAgentList build
// GET {a}/describe and GET /; AppendHTTPError an error body.
//
// # Mapping, canonical → Agent Protocol
//
//   - The turn starts with request_started (run_started, prompt_started):
//     on a submitted State, or ahead of whatever comes first.
//   - Text is written as increments: text deltas as they come; a snapshot
//     only with what it adds to what was written for that message and
//     index (nothing when it repeats it; the whole of it when it does not
//     extend it); a completed message only with text its content events
//     did not carry. So the concatenated text_output contents of a turn are
//     its reply, whether the upstream streamed deltas, snapshots or whole
//     messages. Text of messages with role tool is tool_text_output; text
//     of user, system and reasoning messages and of tool-call data
//     messages is not written.
//   - ToolCall → tool_call {function_name, args, tool_call_id}: args is the
//     arguments' JSON object, {} when empty, {"arguments": "<text>"} when
//     they are not an object. ToolResult → tool_result {function_name,
//     text_result, tool_call_id}, or tool_error {content, function_name,
//     tool_call_id} when IsError. tool_call_id is this codec's addition
//     (agentic's name) so that clients can pair results. A tool event that
//     is not Done is held, newest snapshot only, until it is Done or its
//     message or the turn ends; each call id is written once per kind.
//   - Artifact → artifact_generated {name, artifact_id, url, mime_type},
//     once per artifact id (later chunks add nothing). The spec's "id"
//     member collides with the event index; like PR #1's generated models
//     this codec writes artifact_id (and reads a string id too). url is the
//     first part's URI, else a data: URI of its bytes, text or data; name
//     the artifact's, a part's, the URI's last element, else the id.
//   - InputRequest, or input-required without one → wait_for_input
//     {request_keys}: a data part's object when the question has one (what
//     the decoder keeps), else {"input": "<question text>"}. The turn is
//     paused, not over: after the continuation the same Encoder goes on
//     (a working State resumes it) and Finish writes nothing meanwhile.
//   - Usage → completion_result {usage} (agentic: completion_end).
//     CompletionCall is never written: the model has no such event.
//   - completed (and awaiting-completion, which the bridge accepts) →
//     request_completed {finish_reason: success, result}: result is the
//     "single string result" the README promises, the turn's reply text.
//     failed and rejected → finish_reason error with error {code, message}
//     (the State's Err, else the last Error event, else its reason text);
//     canceled → finish_reason canceled. Finish ends a stream cut short:
//     error with the given or last error, else canceled.
//   - Heartbeats write nothing (the SSE layer sends comments); Error events
//     only remember the error for the end.
//   - Header members: id, type, agent, depth (always 0: the bridge is the
//     top agent), role (assistant, tool or system), the turn and session
//     ids under the dialect's names when set, timestamp (RFC 3339, UTC)
//     when the event has a time. Agentic objects carry type, agent, depth
//     and payload only, as its server's: chat_output {content, role},
//     tool_call {name, arguments, tool_call_id}, tool_result {name,
//     result, is_log, tool_call_id} plus a top-level result, tool_error
//     {name, error, tool_call_id}, turn_end {messages: [{role, content}]}
//     (plus error on failure), turn_cancelled. Agentic has no artifact or
//     tool-text event: those are not written in that dialect.
//
// # Client role
//
// EncodeRequest writes the body a dialect expects for a start, continue or
// cancel; SubmitPath, EventsPath, DescribePath, StreamPath and
// DiscoveryPath give the paths; DecodeSubmitResponse reads the ids of the
// turn from a RequestStarted / RunStarted event or agentic's {request_id,
// thread_id}. DetectDialect tells the dialect of any body it is shown
// (event, event list, submit answer, agent list, descriptor, request), or
// DialectUnknown when the body does not tell (the README editions share
// most shapes).
//
// An EventDecoder turns the events of one turn, of any dialect (detected
// from the first event that tells), into canonical events: started →
// submitted; the first event of work → working; text_output and
// chat_output (depth 0 only) → a MessageStart, text deltas, and a
// MessageEnd with the whole text when a tool event, a pause or the end
// follows; tool_text_output → the same in a tool message; tool_call →
// ToolCall (Kind plugin: Agent Protocol agents run their own tools; a
// call without an id gets one); tool_result and tool_error → ToolResult
// paired by id, else with the oldest open call of that name, else the
// oldest; artifact_generated → Artifact with one file (image when the MIME
// type says so) part; wait_for_input → InputRequest (the descriptions as
// text, and request_keys as a data part unless it is just {"input": q})
// then input-required; completion_result and completion_end usage →
// Usage; the end event → completed (with the result as a whole message
// when no text was streamed), failed with the error member, or canceled.
// Unknown event types are skipped; nothing after the end is decoded.
// DecodeList reads a getevents list; LastID gives the since= of the next
// poll. A StreamDecoder reads an SSE stream (lenient, pings skipped; data
// that is not a JSON object, as agentic's stream_request sends, is reply
// text; "[DONE]" is skipped), stops once the turn settles, and ends a
// stream cut short with a canceled State carrying
// translate.CodeStreamIncomplete.
//
// # What is not carried
//
// Event members the model does not name (agent, depth, role of a peer's
// events) are not kept in Ext: the Encoder writes its own. Request members
// it does not name (logging_level, request_metadata, debug, unknown ones)
// are kept in Request.Ext and spliced back by EncodeRequest;
// request_metadata.user_id is Request.User.
package agentprotocol
