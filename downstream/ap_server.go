package downstream

import (
	"bytes"
	"context"
	"runtime/debug"
	"strings"
	"sync"

	"github.com/valyala/fasthttp"

	"github.com/agentbridge/bridge/translate"
	ap "github.com/agentbridge/bridge/translate/agentprotocol"
)

// The Agent Protocol 2025 draft, server role: the bridge answers Agent
// Protocol clients on the shared listener and fronts whatever upstream agent
// a route names. The codec (translate/agentprotocol) writes every byte of
// every event; this file and the other ap_*.go files do the plumbing.
//
// # Agents and paths
//
// The agents of a listener are the routes of the routing table (those whose
// Host, when set, is the request's host). GET / lists them as [name, path]
// pairs (GET /_discovery as the agentic server's ["/path"] list). An agent's
// name is its route's Upstream name, else the route's Name: in the
// one-upstream sidecar case that is the upstream agent's own name. Its path
// is the route's PathPrefix when it has one, else "/" + the name as
// agentprotocol.AgentPath spells it ("Weather Agent" → "/weather_agent").
// The segment of /{agent}/… resolves to the first route whose Name or
// Upstream equals it, or whose path it is; on a route with a PathPrefix the
// operations also answer right under the prefix ({prefix}/describe, …), and
// when the listener fronts exactly one agent they answer at the root too
// (/describe, /run, /getevents/{id}, …). An unknown agent is a 404 with a
// JSON body. Caveat: {prefix}/process on a prefixed route, and /process at
// the root, are the Agent API endpoint (server.go tries it first); Agent
// Protocol clients of such a route name the agent in the path
// (/{agent}/process) or use /run or /stream_request.
//
// # Endpoints (relative to the agent's path)
//
//	GET  /describe                 AgentDescriptor (a chat operation)
//	POST /process, /run            a Request: chat, resume, cancel or configure;
//	                               answers one event (below), 202 without wait
//	     ?wait=true                200 with the event (README: "wait=True ->
//	                               RequestStarted"), as soon as it is started
//	     ?until=settled            the bridge's: once the turn settles, a JSON
//	                               array of the events the command caused
//	POST /resume                   the agentic server's resume ({continue_result})
//	POST /configure                acknowledged: RequestCompleted success
//	POST /stream_request           process + stream (SSE) in one call
//	GET  /getevents/{id}, /get_events/{id}, /events/{id},
//	     /getevents?request_id=…   events; ?stream=true for SSE, ?since=N
//	GET  /request/{id}, /runs/{id} the state of a request
//	GET  /runs, /threads           the agent's recent requests, newest first
//	GET  /ws                       the WebSocket transport (ap_ws.go)
//
// # What a submit answers
//
// The README: "/process (Request) -> Event|None", wait "wait for the agent
// response. Agent will return an Event response, otherwise the agent
// returns only the HTTP status code", and its flows "POST /process
// (ChatRequest(input), wait=True) -> RequestStarted (contains 'request_id'
// and 'run_id')", "POST /process (ConfigureRequest(args), wait=True) ->
// RequestCompleted"; the events then come from getevents. So a chat or a
// resume is answered the request's start event (request_started, or
// run_started in the run dialect: event 1 of the request, as getevents
// writes it) as soon as the request is started: 200 with wait=true, 202
// without (the same body, where the README needs none). A cancel is
// carried out before the answer, which is the request's end event
// (request_completed finish_reason canceled), 200; a configure is
// request_completed success, 200. The agentic dialect answers
// {request_id, thread_id}, as its server does. The bridge adds
// ?until=settled (with or without wait=true): the answer waits until the
// turn settles (ends, or waits for input) and is a JSON array of the
// events the command caused, a chat's from its request_started: process
// and getevents in one call. It is not the README's; clients of the README
// leave it out.
//
// # Requests, runs and ids
//
// One Agent Protocol request (a turn, in the README of 2025-02-21) is one
// exchange of the store: ClientID is its request id, Session its run id (the
// session), alias keys "ap:request:<request id>" and "ap:run:<run id>" (the
// latter follows the run's newest request). Those nouns are the README's of
// 2025-02-21; in the run dialect (README of 2025-03-17) the same two ids are
// called run_id and thread_id, and are stored the same way. Ids the client
// does not choose are assigned (random UUIDs) and returned. A chat naming a
// run continues that session in a new request; a chat whose request id is
// already taken is a 409. A ResumeWithInput continues the request (the same
// exchange, a new upstream turn with Command continue and the same Session),
// so its events follow in the same log and getevents goes on streaming
// them; it needs the request to wait for input (else 409). A CancelRequest
// stops the running turn (s.cancelTurn) and the request ends with
// request_completed finish_reason canceled; cancelling a request that waits
// for input ends it the same way; cancelling one that is over changes
// nothing. Resume and cancel find the request by request_id, else by the
// run's newest request; either id is tried under both keys, so a
// run-dialect run_id works on /process too.
//
// # Dialects
//
// Both README dialects are accepted everywhere, and the agentic server's
// where it costs nothing. The dialect of a request's events is fixed when it
// is submitted and kept with the exchange (Meta "ap.dialect"), so every
// later read, whatever path it uses, answers in the client's dialect:
//   - POST …/run (and a WebSocket frame with "dialect":"run") → run
//     (run_started / run_completed, run_id = the request, thread_id = the run);
//   - POST …/resume, or a body with prompt, continue_result or debug →
//     agentic ({type, agent, depth, payload}; process answers
//     {request_id, thread_id} at once, as the agentic server does);
//   - a body with thread_id (and no request_id) → run;
//   - otherwise → process (request_started / request_completed).
//
// # Events
//
// An event's id is the exchange log sequence, so getevents?since=N and SSE
// Last-Event-ID: N resume exactly after event N (the codec gives every
// object it writes for one logged event the same id). Reads re-encode the
// log from its start, so ids and texts are the same on every read. A
// stream follows the log until the request ends (request_completed): it
// goes on through a wait_for_input, since the resumed turn's events are the
// same request's (the README: events are streamed "until RequestCompleted");
// only agentic-dialect streams stop at wait_for_input, as its clients
// expect. A non-streaming getevents without since answers the events
// logged since the previous non-streaming getevents of that request (the
// README's "basic polling mechanism"; the cursor is kept with the exchange),
// with since the events after since; agentic-dialect polls first wait until
// the turn settles, as its server does. getevents of a run id (not a request
// id) answers the events of every request of the run in time order, each
// request encoded on its own, with ids renumbered by their place in the
// run (the ids of earlier requests' logs added).
//
// Errors are JSON ({"detail": …, "code": …}, the codec's AppendHTTPError):
// 404 unknown agent or request, 400 a body of no known request type (the
// message names the fields expected) or a since / Last-Event-ID that is not
// a number, 405 a wrong method, 409 a command the request's state does not
// allow, 410 events that expired from the log.
//
// The turns run detached from the HTTP calls (s.runTurn): a client that
// goes away ends only its stream, and may come back with since or
// Last-Event-ID.

// The operations of an agent, the path segment after the agent's.
var apOps = map[string]bool{
	"describe": true, "process": true, "run": true, "configure": true, "resume": true,
	"getevents": true, "get_events": true, "events": true, "stream_request": true,
	"request": true, "runs": true, "threads": true, "ws": true,
}

// apState is the Server's Agent Protocol state. Its zero value is ready.
type apState struct {
	// cmd serializes the commands that change a request (start, resume,
	// cancel), so that a state check and the command it allows are one step.
	cmd sync.Mutex

	mu      sync.Mutex
	closers map[*apCloser]struct{}
	closed  bool
	// sockets counts the WebSockets being served: they are hijacked, so
	// fasthttp's Shutdown does not wait for them, and one may be starting a
	// turn. apShutdown waits for them before Shutdown waits for the turns.
	sockets sync.WaitGroup
}

// apCloser ends one stream or socket at Shutdown.
type apCloser struct{ close func() }

// track registers close to be called at Shutdown; the returned func
// unregisters it. After Shutdown began, close runs at once.
func (p *apState) track(close func()) (untrack func()) {
	c := &apCloser{close: close}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		close()
		return func() {}
	}
	if p.closers == nil {
		p.closers = map[*apCloser]struct{}{}
	}
	p.closers[c] = struct{}{}
	p.mu.Unlock()
	return func() {
		p.mu.Lock()
		delete(p.closers, c)
		p.mu.Unlock()
	}
}

// trackSocket registers a WebSocket like track, and counts it until done
// is called; ok is false (and nothing is registered) after Shutdown began.
func (p *apState) trackSocket(close func()) (done func(), ok bool) {
	c := &apCloser{close: close}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, false
	}
	if p.closers == nil {
		p.closers = map[*apCloser]struct{}{}
	}
	p.closers[c] = struct{}{}
	p.sockets.Add(1)
	return func() {
		p.mu.Lock()
		delete(p.closers, c)
		p.mu.Unlock()
		p.sockets.Done()
	}, true
}

// apShutdown ends every Agent Protocol stream and WebSocket, and waits for
// the sockets to be gone, so that none starts a turn once Shutdown waits
// for the turns (which run on: waitTurns is Shutdown's).
func (s *Server) apShutdown() {
	p := &s.ap
	p.mu.Lock()
	p.closed = true
	cs := make([]*apCloser, 0, len(p.closers))
	for c := range p.closers {
		cs = append(cs, c)
	}
	p.mu.Unlock()
	for _, c := range cs {
		c.close()
	}
	p.sockets.Wait()
}

// apPath is a parsed Agent Protocol path.
type apPath struct {
	agent string // the agent segment ("" for the root forms)
	op    string // "" for the agent list
	id    string // the id after the op, when any
	root  bool   // the op came without an agent segment
}

// parseAPPath splits rest into agent, op and id. ok is false for paths
// that are not the Agent Protocol's.
func parseAPPath(rest []byte) (p apPath, ok bool) {
	r := strings.Trim(string(rest), "/")
	if r == "" {
		return apPath{}, true
	}
	if r == "_discovery" {
		return apPath{op: "_discovery"}, true
	}
	seg := strings.Split(r, "/")
	switch {
	case len(seg) >= 2 && len(seg) <= 3 && apOps[seg[1]]:
		p = apPath{agent: seg[0], op: seg[1]}
		if len(seg) == 3 {
			p.id = seg[2]
		}
		return p, seg[0] != ""
	case len(seg) <= 2 && apOps[seg[0]]:
		p = apPath{op: seg[0], root: true}
		if len(seg) == 2 {
			p.id = seg[1]
		}
		return p, true
	}
	return apPath{}, false
}

// matchAP reports whether the request is for the Agent Protocol 2025
// endpoints (GET /, /{agent}/describe, /{agent}/process, …).
func (s *Server) matchAP(ctx *fasthttp.RequestCtx, rest []byte) bool {
	p, ok := parseAPPath(rest)
	if !ok {
		return false
	}
	if p.op == "" || p.op == "_discovery" {
		return ctx.IsGet() || ctx.IsHead()
	}
	return true
}

// apAgent is one agent of the listener.
type apAgent struct {
	name, path string
	route      *Route
}

func routeAgentName(r *Route) string {
	if r.Upstream != "" {
		return r.Upstream
	}
	return r.Name
}

func routeAgentPath(r *Route) string {
	if p := strings.TrimRight(r.PathPrefix, "/"); p != "" {
		return p
	}
	return ap.AgentPath(routeAgentName(r))
}

// apAgents lists the agents a client at host sees, one per path.
func (s *Server) apAgents(host []byte) []apAgent {
	rt := s.routing.Load()
	if rt == nil {
		return nil
	}
	if i := bytes.LastIndexByte(host, ':'); i >= 0 && !bytes.Contains(host[i:], []byte("]")) {
		host = host[:i]
	}
	var out []apAgent
	seen := map[string]bool{}
	for i := range rt.Routes {
		r := &rt.Routes[i]
		if r.Host != "" && !strings.EqualFold(r.Host, string(host)) {
			continue
		}
		a := apAgent{name: routeAgentName(r), path: routeAgentPath(r), route: r}
		if a.name == "" || seen[a.path] {
			continue
		}
		seen[a.path] = true
		out = append(out, a)
	}
	return out
}

// apResolve finds the agent a request addresses: by its path segment, or,
// for the root forms, the prefixed route the path matched or the only agent.
func (s *Server) apResolve(ctx *fasthttp.RequestCtx, route *Route, p apPath) (apAgent, bool) {
	agents := s.apAgents(ctx.Host())
	if p.root {
		if route != nil && strings.Trim(route.PathPrefix, "/") != "" {
			return apAgent{name: routeAgentName(route), path: routeAgentPath(route), route: route}, true
		}
		if len(agents) == 1 {
			return agents[0], true
		}
		return apAgent{}, false
	}
	for _, a := range agents {
		if a.route.Name == p.agent || a.route.Upstream == p.agent || a.path == "/"+p.agent {
			return a, true
		}
	}
	return apAgent{}, false
}

// apError answers with the codec's JSON error body.
func apError(ctx *fasthttp.RequestCtx, status int, code, msg string) {
	ctx.SetStatusCode(status)
	ctx.SetContentType("application/json")
	ctx.SetBody(ap.AppendHTTPError(nil, code, msg))
}

func apJSON(ctx *fasthttp.RequestCtx, status int, body []byte) {
	ctx.SetStatusCode(status)
	ctx.SetContentType("application/json")
	ctx.SetBody(body)
}

func apMethod(ctx *fasthttp.RequestCtx, allow string) bool {
	switch allow {
	case "GET":
		if ctx.IsGet() || ctx.IsHead() {
			return true
		}
	case "POST":
		if ctx.IsPost() {
			return true
		}
	}
	ctx.Response.Header.Set("Allow", allow)
	apError(ctx, fasthttp.StatusMethodNotAllowed, "METHOD_NOT_ALLOWED", "use "+allow)
	return false
}

// serveAP answers an Agent Protocol 2025 request.
func (s *Server) serveAP(ctx *fasthttp.RequestCtx, route *Route, rest []byte) {
	defer func() {
		if r := recover(); r != nil {
			s.log.Error("Agent Protocol handler panic", "panic", r, "stack", string(debug.Stack()))
			ctx.ResetBody()
			apError(ctx, fasthttp.StatusInternalServerError, translate.CodeInternal, "internal error")
		}
	}()
	p, _ := parseAPPath(rest)
	switch p.op {
	case "", "_discovery":
		if !apMethod(ctx, "GET") {
			return
		}
		d := ap.DialectProcess
		if p.op == "_discovery" {
			d = ap.DialectAgentic
		}
		agents := s.apAgents(ctx.Host())
		refs := make([]ap.AgentRef, len(agents))
		for i, a := range agents {
			refs[i] = ap.AgentRef{Name: a.name, Path: a.path}
		}
		apJSON(ctx, fasthttp.StatusOK, ap.AppendAgentList(nil, refs, d))
		return
	}
	a, ok := s.apResolve(ctx, route, p)
	if !ok {
		name := p.agent
		if p.root {
			name = "(none named in " + string(ctx.Path()) + ")"
		}
		apError(ctx, fasthttp.StatusNotFound, "AGENT_NOT_FOUND", "Agent '"+name+"' not found; GET / lists the agents")
		return
	}
	switch p.op {
	case "describe":
		if apMethod(ctx, "GET") {
			s.apDescribe(ctx, a)
		}
	case "process", "run", "resume", "configure":
		if apMethod(ctx, "POST") {
			s.apProcess(ctx, a, p.op)
		}
	case "stream_request":
		if apMethod(ctx, "POST") {
			s.apStreamRequest(ctx, a)
		}
	case "getevents", "get_events", "events":
		if apMethod(ctx, "GET") {
			s.apGetEvents(ctx, a, p)
		}
	case "request":
		if apMethod(ctx, "GET") {
			s.apRequestState(ctx, a, p.id)
		}
	case "runs", "threads":
		if !apMethod(ctx, "GET") {
			return
		}
		if p.id != "" {
			s.apRequestState(ctx, a, p.id)
			return
		}
		s.apList(ctx, a)
	case "ws":
		s.apWebSocket(ctx, a)
	}
}

// apDescribe answers GET {agent}/describe.
func (s *Server) apDescribe(ctx *fasthttp.RequestCtx, a apAgent) {
	d := ap.DialectProcess
	if ap.ParseDialect(string(ctx.QueryArgs().Peek("dialect"))) == ap.DialectRun {
		d = ap.DialectRun
	}
	purpose := "the agent " + a.name
	if a.route.Proto != "" {
		purpose += " (" + a.route.Proto + ")"
	}
	purpose += ", fronted by the agent bridge"
	desc := ap.NewDescriptor(a.name, purpose, nil, nil, d)
	desc.Endpoints = append(desc.Endpoints, "/request/{request_id}", "/runs", "/ws")
	body, err := ap.AppendDescriptor(nil, desc, d)
	if err != nil {
		apError(ctx, fasthttp.StatusInternalServerError, translate.CodeInternal, err.Error())
		return
	}
	apJSON(ctx, fasthttp.StatusOK, body)
}

// apContext is a context that ends when the client of ctx goes away; stop
// releases it.
func apContext(ctx *fasthttp.RequestCtx, parent context.Context) (context.Context, func()) {
	c, cancel := context.WithCancel(parent)
	stopWatch := watchDisconnect(ctx.Conn(), cancel)
	return c, func() { stopWatch(); cancel() }
}
