// Package loadagent is the benchmark's load-test agent: a minimal, fast
// Agent API agent on fasthttp. POST /process answers every request with a
// valid Agent API SSE stream (response created and in_progress, one
// assistant message, N text content deltas of S bytes each, the message
// completed, the response completed), writing the frames directly and
// flushing after each event, as an agent that streams tokens does.
//
// N and S come from a marker in the request, "[bench events=N size=S]"
// anywhere in the body (the user text carries it, so it survives any proxy
// that forwards the text), else from Options. The agent does not parse the
// JSON otherwise, so its cost per request is small and nearly constant:
// the benchmark measures the proxies, not the agent.
package loadagent
