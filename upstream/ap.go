package upstream

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/agentbridge/bridge/internal/callctx"
	"github.com/agentbridge/bridge/translate"
	ap "github.com/agentbridge/bridge/translate/agentprotocol"
)

// Agent Protocol dialects (APOptions.Dialect).
const (
	APDialectAuto    = ""
	APDialectProcess = "process" // 2025 README of 2025-02-21 (PR #1): /process, /getevents
	APDialectRun     = "run"     // 2025 README on main: /run, /get_events
	APDialectAgentic = "agentic" // the reference server supercog-ai/agentic
	APDialectV1      = "v1"      // agentprotocol.ai v1: /ap/v1/agent/tasks…
)

// APOptions configures an Agent Protocol upstream.
type APOptions struct {
	// Dialect is "process" (2025 README, PR #1), "run" (2025 README main),
	// "agentic" (the reference server), "v1" (agentprotocol.ai tasks/steps),
	// or "" ("auto" is accepted too) to detect it (see AgentProtocol).
	Dialect string
	// Agent names the agent under the base URL; "" takes the first that
	// GET / (or /_discovery) lists. A value with a leading slash is the
	// agent's path; a name is matched against the agent list when one is
	// read, else its path is "/name" (agentic: the server's safe name,
	// "Weather Agent" → "/weather_agent"). v1 has no agents: it is ignored.
	Agent string
	// MaxSessions bounds the sessions whose run, thread or task is
	// remembered for the next request (default 10000; the oldest is
	// forgotten first).
	MaxSessions int
	// ResumeRetries bounds the reconnections to the event stream after it
	// breaks without progress (default 3; negative disables resuming),
	// waiting ResumeBackoff (default 100ms), then twice that, and so on.
	ResumeRetries int
	ResumeBackoff time.Duration
	// CancelTimeout bounds the best-effort CancelRequest sent when the
	// client goes away before the turn settled (default 1s).
	CancelTimeout time.Duration
	// MaxSteps bounds the v1 steps one turn posts while the agent answers
	// steps that are not completed yet (default 100).
	MaxSteps int
}

func (o APOptions) withDefaults() APOptions {
	if o.Dialect == "auto" {
		o.Dialect = APDialectAuto
	}
	if o.MaxSessions <= 0 {
		o.MaxSessions = 10000
	}
	if o.ResumeRetries == 0 {
		o.ResumeRetries = 3
	}
	if o.ResumeBackoff <= 0 {
		o.ResumeBackoff = 100 * time.Millisecond
	}
	if o.CancelTimeout <= 0 {
		o.CancelTimeout = time.Second
	}
	if o.MaxSteps <= 0 {
		o.MaxSteps = 100
	}
	return o
}

// AgentProtocol calls an Agent Protocol agent, in one of four dialects.
//
// One Open is one turn. For a start or continue request it submits the
// turn and returns its canonical events, ending with io.EOF right after a
// settled state (completed, failed, canceled, or input-required preceded by
// a KindInputRequest):
//
//   - process and run (the 2025 README editions): POST {agent}/process (run)
//     with ?wait=true and a ChatRequest, read the turn id from the
//     RequestStarted (RunStarted) answer, then GET
//     {agent}/getevents/{request_id}?stream=true (get_events/{run_id}) and
//     decode the SSE with agentprotocol.EventDecoder. In process the bridge
//     names the turn (request_id "req_<uuid>"), so an agent that answers
//     only a status code works too. The answer's event is the turn's
//     first, unless its id shows it was delivered already (a resume may be
//     answered the start event of the turn it continues). When the stream
//     ends or breaks before the turn settled, it is reopened with since=
//     the last event id, up to ResumeRetries times with doubling backoff
//     (the count restarts after each event); events at or below that id
//     are dropped should the agent ignore since, so every event is
//     delivered once, in order. A turn whose events carry no id cannot be
//     resumed.
//   - agentic (the reference server): POST {agent}/process {prompt,
//     thread_id}, then GET {agent}/getevents?request_id=&stream=true. Its
//     events have no ids and its queue is drained by the reader, so a cut
//     stream is not resumed.
//   - v1: POST /ap/v1/agent/tasks (the input on the task and on its first
//     step, as the official conformance suite sends them), then POST
//     …/steps: a step that is not completed is followed by another (empty)
//     step, up to MaxSteps; a completed step ends the turn
//     (v1.StepEvents: is_last → completed; else input-required with the
//     output as the question). additional_output {"state": "failed",
//     "error": …} (what the bridge's own v1 server writes) makes it failed.
//     Artifacts point at …/tasks/{id}/artifacts/{artifact_id} upstream.
//
// Dialect detection ("" in APOptions.Dialect), once per client and cached
// once it succeeds: GET / listing [name, path] pairs is a 2025 README agent,
// whose {agent}/describe endpoints tell process from run (when they do
// not, the first submit tells: POST process, and run after a 404 or 405;
// the edition the answer shows is cached); else GET /_discovery listing
// ["/path"] is agentic; else GET /ap/v1/agent/tasks answering {tasks} is
// v1. A transport error or a 5xx during detection fails the exchange and
// is not cached.
//
// Sessions: the request's Session keys a bounded map (MaxSessions) to the
// dialect's own session: the run_id (process), thread_id (run, agentic) the
// agent answered, so that the next request of the session continues that
// run or thread. When a turn settles in input-required the map also keeps
// the turn (request_id, run_id, or the v1 task), and the session's next
// start or continue answers it: ResumeWithInput to that turn and its events
// read on from the last id (agentic: POST {agent}/resume with
// continue_result.request_id; v1: the next step of the same task). A
// request without a Session is not remembered. Taking an entry removes it,
// so two concurrent Opens never answer one turn twice.
//
// Other commands: CommandCancel sends a CancelRequest for Request.ID, or the
// session's waiting turn, and returns a canceled state (agentic and v1 have
// no cancel: the bridge forgets the waiting turn and answers canceled
// itself). Other commands are refused with CodeBadRequest (the bridge
// answers get and resume-stream from its exchange log).
//
// Cancel: when the context is cancelled or the stream closed before the
// turn settled, a CancelRequest is sent in the background, best effort,
// bounded by CancelTimeout (process and run; agentic and v1 have none), and
// the breaker is told ErrClientGone.
//
// The breaker sees one outcome per exchange, however many HTTP calls it
// took: failures are transport errors, HTTP 5xx and 429, malformed bodies
// or events, and a cut stream that could not be resumed; HTTP 4xx answers
// (the request's fault) are not, nor is a client that went away.
// callctx.Headers are sent on every call.
type AgentProtocol struct {
	c        *client
	opts     APOptions
	base     string // the configured URL's path, without a trailing slash
	sessions *sessionMap[*apSession]

	mu     sync.Mutex
	target apTarget // what detection found (or the configuration says)

	bg sync.WaitGroup // background cancels
}

// apTarget is where and how to talk to the agent.
type apTarget struct {
	kind  string     // APDialectProcess, Run, Agentic or V1; "" until known
	d     ap.Dialect // the codec's dialect for the 2025 kinds
	agent string     // the agent's path under base ("/echo"); "" for v1
	// probe: a 2025 README agent whose edition is not known: process is
	// tried first, run after a 404 or 405, and the answer decides.
	probe bool
}

func (t apTarget) known() bool { return t.kind != "" && (t.kind == APDialectV1 || t.agent != "") }

// NewAgentProtocol returns a client for the Agent Protocol agent at cfg.URL
// (its base URL: the server root, or a prefix under which / or
// /ap/v1/agent/tasks live).
func NewAgentProtocol(cfg Config) (*AgentProtocol, error) {
	cfg.Protocol = translate.ProtoAgentProtocol
	c, err := newClient(cfg)
	if err != nil {
		return nil, err
	}
	opts := cfg.AP.withDefaults()
	a := &AgentProtocol{c: c, opts: opts, base: strings.TrimRight(c.url.Path, "/"), sessions: newSessionMap[*apSession](opts.MaxSessions)}
	switch opts.Dialect {
	case APDialectAuto:
	case APDialectProcess, APDialectRun, APDialectAgentic:
		a.target = apTarget{kind: opts.Dialect, d: ap.ParseDialect(opts.Dialect)}
		if opts.Agent != "" {
			a.target.agent = apAgentPath(opts.Agent, opts.Dialect)
		}
	case APDialectV1:
		a.target = apTarget{kind: APDialectV1}
	default:
		return nil, fmt.Errorf("upstream %q: agent protocol dialect %q: want process, run, agentic, v1 or auto", cfg.Name, cfg.AP.Dialect)
	}
	return a, nil
}

// Breaker returns the upstream's breaker.
func (a *AgentProtocol) Breaker() *Breaker { return a.c.breaker }

// Dialect returns the dialect in use: the configured one, or what detection
// found ("" before it ran).
func (a *AgentProtocol) Dialect() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.target.probe {
		return ""
	}
	return a.target.kind
}

// Open sends req and returns the turn's event stream (see AgentProtocol).
func (a *AgentProtocol) Open(ctx context.Context, req *translate.Request) (translate.Stream, error) {
	release, err := a.c.acquire()
	if err != nil {
		return nil, err
	}
	s := newAPStream(a, ctx, release)
	switch req.Command {
	case 0, translate.CommandStart, translate.CommandContinue:
		return s.openTurn(req)
	case translate.CommandCancel:
		return s.openCancel(req)
	}
	err = &Error{Code: translate.CodeBadRequest, Err: fmt.Errorf("agentprotocol: %w: command %v", translate.ErrUnsupported, req.Command)}
	s.end(nil, err)
	return nil, err
}

// apAgentPath turns the configured agent into its path.
func apAgentPath(agent, kind string) string {
	switch {
	case strings.HasPrefix(agent, "/"):
		return strings.TrimRight(agent, "/")
	case kind == APDialectAgentic:
		return ap.AgentPath(agent)
	}
	return "/" + agent
}

// path returns base + rel, split into the unescaped path and the raw query
// (the codec's paths are escaped and may carry a query).
func (a *AgentProtocol) path(rel string) (path, query string) {
	p, q, _ := strings.Cut(a.base+rel, "?")
	if u, err := url.PathUnescape(p); err == nil {
		p = u
	}
	return p, q
}

// call makes one HTTP call of the exchange (the exchange holds the breaker
// ticket) and returns the answer with its body still streaming. body nil
// is a GET.
func (a *AgentProtocol) call(ctx context.Context, rel string, body []byte, accept string, hdr map[string]string) (*response, error) {
	p, q := a.path(rel)
	r := request{path: p, query: q, body: body, accept: accept, header: hdr, held: true}
	if body != nil {
		r.contentType = "application/json"
	}
	return a.c.do(ctx, r, true)
}

// unary makes a call and reads its answer whole, bounded by the total
// timeout and MaxBodyBytes.
func (a *AgentProtocol) unary(ctx context.Context, rel string, body []byte, hdr map[string]string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, a.c.cfg.Timeouts.Total)
	defer cancel()
	resp, err := a.call(ctx, rel, body, "application/json", hdr)
	if err != nil {
		return nil, err
	}
	return a.readWhole(resp)
}

// readWhole reads a unary answer whole and frees its connection.
func (a *AgentProtocol) readWhole(resp *response) ([]byte, error) {
	body, err := resp.readAll(a.c.cfg.MaxBodyBytes)
	if err != nil {
		e := streamError(err)
		resp.finish(e)
		return nil, e
	}
	if resp.Stream == nil {
		resp.eof = true
	}
	body = append([]byte(nil), body...) // resp's buffer is reused after finish
	resp.finish(nil)
	return body, nil
}

// apOutcome classifies an exchange's end for the breaker: nil for success
// and for the request's faults (HTTP 4xx but 429, CodeBadRequest),
// ErrClientGone for a client that went away, the error itself otherwise.
func apOutcome(err error) error {
	if err == nil || errors.Is(err, io.EOF) {
		return nil
	}
	if errors.Is(err, ErrClientGone) || errors.Is(err, context.Canceled) {
		return ErrClientGone
	}
	var e *Error
	if errors.As(err, &e) {
		if e.Status >= 400 && e.Status < 500 && e.Status != 429 {
			return nil
		}
		if e.Code == translate.CodeBadRequest {
			return nil
		}
	}
	return err
}

// malformedError is an answer that is not the protocol's: a failure.
func malformedError(status int, format string, args ...any) *Error {
	return &Error{Code: translate.CodeUpstreamError, Status: status,
		Err: fmt.Errorf("%w: agentprotocol: %s", translate.ErrMalformed, fmt.Sprintf(format, args...))}
}

// cancelTurn sends a CancelRequest for turn in the background, best effort,
// bounded by CancelTimeout; ctx supplies the values (trace headers), not the
// cancellation. Only the README dialects have a cancel.
func (a *AgentProtocol) cancelTurn(ctx context.Context, t apTarget, turn, session string, hdr map[string]string) {
	if t.kind != APDialectProcess && t.kind != APDialectRun || turn == "" {
		return
	}
	body, err := ap.EncodeRequest(nil, &translate.Request{Command: translate.CommandCancel, ID: turn, Session: session}, t.d)
	if err != nil {
		return
	}
	path, err := t.d.SubmitPath(t.agent, translate.CommandCancel)
	if err != nil {
		return
	}
	a.bg.Add(1)
	go func() {
		defer a.bg.Done()
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), a.opts.CancelTimeout)
		defer cancel()
		_, _ = a.unary(cctx, path, body, hdr)
	}()
}

// apHeaders returns the per-call headers of an exchange (trace context).
func apHeaders(ctx context.Context) map[string]string { return callctx.Headers(ctx) }
