// Package v1 is the data and mapping layer of the original agentprotocol.ai
// v1 API (AI-Engineer-Foundation/agent-protocol, schemas/openapi.yml,
// /ap/v1/agent/tasks…): its types with their exact JSON names, request
// body decoding, pagination, the 404 body, and the mapping between steps
// and canonical turns. It has no HTTP and no storage: the server and the
// artifact store are built on it elsewhere.
//
// # Wire rules kept
//
//   - additional_input is always written ({} when empty): the official
//     Postman suite asserts it is present on GET /tasks/{id}.
//   - artifacts is always a list ([] when empty); input, name, output and
//     relative_path are nullable and written as null when unset.
//   - List answers are {tasks|steps|artifacts, pagination{total_items,
//     total_pages, current_page, page_size}}, artifacts included (the
//     Python SDK returns a bare list there; the spec does not).
//     total_pages rounds up. current_page and page_size are integers ≥ 1,
//     defaults 1 and 10; page_size is capped at MaxPageSize.
//   - 404 bodies are {"message": "<Item> with <id> not found."}, the
//     spec's shape with the Python SDK's text.
//   - Request bodies are optional; when present they must be a JSON object
//     with input a string or null and additional_input an object or null.
//     Errors wrap translate.ErrBadRequest (the spec answers 422).
//
// # Mapping (server role)
//
// A task is a session; each step is one turn. StepRequest makes the first
// step a CommandStart (with the task's input when the step has none) and
// every later one a CommandContinue; Request.ID and Request.Session are
// the task id. A StepBuilder folds the turn's canonical events into the
// Step: status created → running → completed; is_last once the exchange
// ends (completed, failed, canceled, rejected; awaiting-completion is
// accepted by the bridge), false when it waits for input, so that the
// client's next step answers the question. output is the reply text (deltas
// appended, snapshots contributing only what they add), then the question,
// then "Error: <message>" for a failure; additional_output is {"state",
// "error", "usage"}. Artifacts are listed with agent_created true and a file
// name from the artifact, its parts or its URI; StepBuilder.Artifacts keeps
// their content for the store. The conformance suite POSTs a step after
// is_last and expects 200: that is the server's choice to make (a new
// turn), not this package's.
//
// # Mapping (client role)
//
// TaskRequest and StepRequestFor write bodies for a canonical request;
// StepEvents turns an answered Step into canonical events (is_last →
// completed, else input-required with the output as the question).
package v1
