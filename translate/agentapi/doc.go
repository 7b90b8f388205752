// Package agentapi is the codec of the AgentScope Runtime "Agent API":
// POST /process with an AgentRequest JSON body, answered by a Server-Sent
// Events stream of response, message and content objects. It works in both
// roles and is pure functions over bytes; it imports no HTTP library.
//
// # Server role (the bridge serves the Agent API)
//
// DecodeRequest turns a request body into a translate.Request (CommandStart)
// and validates what the Python server validates before it runs an agent:
// a JSON object, a non-empty input list, roles exactly assistant, user,
// system or tool ("USER" is rejected, as pydantic does), content types from
// the ContentType enum. Errors wrap translate.ErrBadRequest and name the
// field ("input.0.role: ..."); AppendHTTPError writes them as a JSON body.
// Unknown top-level keys (model, tools, biz_params, …) and unknown message
// keys are kept in Ext so that they are forwarded.
//
// An Encoder writes canonical events the way the Python server does, because
// that is what the official clients parse: every frame is exactly
// "data: <compact one-line JSON>\n\n", every object has "object" and all its
// fields (nulls included) in the server's order, sequence_number counts from
// 0, strings are raw UTF-8 without HTML escaping. Content is always preceded
// by its message's in_progress frame (the WebUI drops content for an unknown
// message), and the final response lists every completed message in output.
//
// # Client role (the bridge calls an Agent API agent)
//
// EncodeRequest writes an AgentRequest like the Python client does
// (members that are set only, stream true), splicing Ext members back. A
// Decoder reads the answer. It is lenient and tolerates, as agent_api.md
// §4.4 and §7 list them: "data:" with or without a space, CRLF, comments,
// blank lines, "[DONE]" and any other data that is not a JSON object; the
// out-of-band {"error": ...} frame without "object" (an Error event, a failed
// State, then EOF); EOF without a terminal response (a canceled State with
// Err.Code translate.CodeStreamIncomplete); content whose msg_id was never
// announced (a MessageStart is made up); completed content with msg_id and
// index null (it belongs to the latest message and its latest index); content
// for a message already completed; interleaved messages; tool messages that
// arrive only completed (their call or result is still reported, Done);
// tool outputs whose call_id matches nothing; gaps in index; repeated
// identical tool snapshots (dropped); sequence_number null, missing or out of
// order (ignored); unknown message types (passed through with Type set);
// unknown content types and object kinds (skipped); content without a type
// but with text (read as text, as the docs' examples have it). The final
// response's output is authoritative: messages it lists that the stream did
// not complete are delivered before the terminal State. Frames after a
// terminal response are not read.
//
// # Mapping
//
// response created/in_progress/completed/failed/canceled/rejected are the
// States submitted/working/completed/failed/canceled/rejected; incomplete is
// an InputRequest (the question is the newest assistant message's text)
// followed by input-required. Messages of type plugin_call, function_call and
// mcp_call carry ToolCall events, their *_output types ToolResult events;
// the data content holds call_id, name, arguments or output (and
// server_label for MCP). File content in other messages is an Artifact; all
// other content is Content. usage on the final response is a Usage event.
//
// # Choices where the documents are silent
//
//   - Statuses: the encoder sends response "created", then "in_progress"
//     before anything else (a leading submitted State defers the latter).
//     awaiting-completion is written as "completed": the Agent API has no
//     such state and the bridge accepts the result for the client.
//   - A failure or cancellation closes the messages still open with status
//     "incomplete" and leaves them out of the final output, as the Python
//     server lists only completed messages; completed and incomplete
//     responses close them as "completed" and list them.
//   - Tool events are written as delta:false snapshots (agent_api.md §4.3);
//     a tool event that names no open message of its type gets its own
//     message, closed after the Done event. Canonical Kind "" means plugin.
//   - Text and refusal deltas append; deltas of any other kind replace, as
//     the WebUI reads them. A data content with delta:true from a peer is
//     read as a snapshot.
//   - An Artifact goes into its message when that message is open (from
//     Event.Index on), else into a message of its own, completed at once; a
//     file part without a name takes the artifact's name.
//   - Image and video parts holding only bytes become data: URIs; MIME
//     types have no Agent API field and are dropped otherwise.
//   - An InputRequest that names a message already written (the passthrough
//     of an Agent API incomplete response) writes nothing more: the question
//     is that message.
//   - The members the encoder writes itself never come from Ext, except the
//     ones the model does not name: a message's error, code, message, usage
//     and metadata, and a content's error, are taken from Ext when present
//     and written as null otherwise. Unknown members of content items inside
//     a completed message (and of request content) are dropped, as the
//     Python server's pydantic models drop them.
//   - A message's own status ("incomplete", "failed") is not in the model:
//     the decoder ends the message, and an encoder downstream completes it.
//   - The decoder leaves Event.Time zero; the exchange log stamps events.
//   - Events returned by Decoder.Next live in storage reused by the next
//     call, as translate.Stream allows: Clone one to keep it.
package agentapi
