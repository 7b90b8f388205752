// Package aip is the ACPs Agent Interaction Protocol (AIP) v01.00 codec of
// the bridge: the data model, the JSON-RPC 2.0 envelope, the stream frames,
// and the mapping to and from the canonical model in package translate. It
// is pure code over bytes and imports no HTTP library; the Partner server
// and the Leader client are built on it elsewhere.
//
// # What it owns
//
//   - Wire types with the v01.00 JSON names: Task, TaskStatus, Message,
//     Product, DataItem, TaskStatusUpdateEvent, ProductChunkEvent,
//     NotificationConfig, NotificationIDParams, and the command params
//     StartParams, GetParams, ReStreamParams, NotificationStartParams.
//     Encoding is reflection-free (AppendJSON on every type; MarshalJSON and
//     UnmarshalJSON delegate to it for encoding/json users); decoding uses
//     gjson. Members a type does not name are kept in its Extra field (a raw
//     JSON object) and written back, so a decode→encode round trip of a spec
//     example loses nothing. JSON null is read as absent everywhere (FastAPI
//     peers write "senderId": null, "error": null, "metadata": null, …), so
//     explicit nulls do not survive a round trip; that is the one
//     difference. Nil slices are absent and empty ones are written as [],
//     so "products": [] survives.
//   - Timestamps (Timestamp): written as RFC 3339 with milliseconds and a
//     numeric offset, "2025-09-01T12:00:00.000+08:00"; read leniently ("Z",
//     "+00:00", "+08:00", "+0800", no fraction, microseconds, a space for
//     "T", no offset = Beijing time, the spec's default zone). A decoded
//     Timestamp re-encodes its original text. Comparisons are by instant
//     (FilterHistory implements get's lastMessageSentAt/lastStateChangedAt
//     that way, unlike the reference server's string comparison).
//   - JSON-RPC: Request (id kept as raw JSON and echoed byte for byte),
//     Response, Error with every code of spec §5.2 (CodeParseError …
//     CodeAccessTokenInvalid, ErrorMessage, ErrorName), and ParseRequest,
//     which turns any body into a checked Request or the right *Error.
//   - Mapping to the canonical model, both ways, for the Partner role
//     (RequestFromMessage, TaskBuilder, StreamEncoder) and the Leader role
//     (MessageFromRequest, Tracker, StreamDecoder, DecodeRPCResponse).
//
// # Mapping choices
//
// States: accepted ↔ submitted, awaiting-input ↔ input-required, the
// others keep their names. Commands: start, continue, cancel, complete, get
// as named; re-stream ↔ CommandResume with Request.After = lastEventSeq.
// Roles: leader ↔ user, partner ↔ assistant.
//
// Data items: text ↔ PartText, file ↔ PartFile (uri, bytes, name, mimeType),
// data ↔ PartData; metadata ↔ Part.Meta. Image, audio and video parts are
// sent as file items; a refusal as text; a canonical FileID has no AIP
// field. Items of unknown types are dropped when mapping to canonical.
//
// Tool calls and results have no AIP type. They travel as data items of a
// partner message: {"type":"data","data":{"toolCall":{"id","name","kind",
// "arguments"}}} and {"type":"data","data":{"toolResult":{"id","name",
// "output","isError"}}} (ToolItem, ToolFromItem). A data item keeps them
// visible to any AIP Leader as structured data while the bridge's own
// Leader side turns them back into KindToolCall / KindToolResult.
//
// Assistant text goes into a partner Message in messageHistory. When the
// state settles it also goes where AIP Leaders look: the awaiting-input
// question and a failure text go into the status dataItems, and a turn that
// ends in awaiting-completion or completed without a product gets a text
// Product "reply-<message id>" (the v01.00 demo partners answer with a text
// product; TaskBuilder.NoReplyProduct turns it off). Errors become a failed
// status with a text item whose metadata carries {"code": …}; agent
// failures are failed tasks, never JSON-RPC errors, as the reference does.
//
// Streams: AIP v01.00 has no text deltas, so StreamEncoder sends a partner
// Message once it is complete (KindMessageEnd), state changes as
// status-update (or a whole Task when it must also carry messages not yet
// sent, and as the first frame, as the spec's example does), artifacts as
// product-chunk. Each canonical event yields at most one frame, whose
// eventSeq is the caller's seq (the exchange log's), so re-stream is a log
// replay through a new StreamEncoder with After = lastEventSeq. Frames are
// "data: <compact JSON>\n\n" with no "id:" or "event:" line, as the
// reference stream server writes them.
//
// On the Leader side, Tracker diffs what it is shown (Task snapshots from
// polling, Task frames, notifications) against what it already turned into
// events, so each fact becomes one event however often it is seen.
// status-update is KindState with the data items as reason parts (failed
// and rejected also carry Err); product-chunk is KindArtifact with Append
// and Last; a partner Message is MessageStart, Content (one full part per
// item) and MessageEnd. HTTP error answers, including FastAPI's
// {"detail":{"code":-32001,"message":"…"}}, are KindError (HTTPError).
//
// # v01.00 and v02
//
// The maintained SDK speaks v02.x, which is not wire-compatible: RPC
// params are {"command": TaskCommand} (type "task-command"), results are
// "task-result", status events are "task-status-update", get uses
// lastCommandSentAt. This package speaks v01.00 only, but keeps the seams
// for v02: DetectVersion tells the two apart from a request body (it looks
// at params.message.type and params.command), ParseRequest answers a v02
// body with -32602 and data {"version":"02"}, DecodeObject dispatches on
// "type" and reports unknown types with ErrUnknownType (which the stream
// decoder skips), and the mapping functions work on the canonical model, so
// a v02 codec can sit beside this one and reuse TaskBuilder's folding.
// Group mode (method "group", MQ payloads) is out of scope: ParseRequest
// accepts a group request with raw params so a server can answer -32007.
package aip
