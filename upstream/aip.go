package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tidwall/gjson"

	"github.com/agentbridge/bridge/internal/callctx"
	"github.com/agentbridge/bridge/translate"
	"github.com/agentbridge/bridge/translate/aip"
)

// AIP modes (AIPOptions.Mode).
const (
	AIPModeAuto   = ""
	AIPModeStream = "stream"
	AIPModeRPC    = "rpc"
)

// AIPOptions configures an AIP upstream (the bridge as AIP Leader).
type AIPOptions struct {
	// Mode is how tasks are driven: "stream" (SSE with re-stream), "rpc"
	// (rpc plus get polling), or "" ("auto" is accepted too) to use stream
	// when the partner advertises streaming and rpc otherwise.
	Mode string
	// AutoComplete sends `complete` when a task reaches awaiting-completion
	// and the downstream protocol has no such step. Nil means true.
	AutoComplete *bool
	// PollInterval is the get polling interval in rpc mode (default 500ms).
	PollInterval time.Duration
	// Paths overrides the derived sibling URLs by method name
	// ("stream" -> URL), plus "acs" for the capability document. See
	// aipPaths for the derivation.
	Paths map[string]string
	// LeaderID is the AIC the bridge uses as senderId.
	LeaderID string
	// MaxSessions bounds the sessions whose waiting task is remembered for
	// the next request (default 10000; the oldest is forgotten first).
	MaxSessions int
	// ResumeRetries bounds the re-stream attempts after a stream breaks
	// without progress (default 3; negative disables resuming), waiting
	// ResumeBackoff (default 100ms), then twice that, and so on, before each.
	ResumeRetries int
	ResumeBackoff time.Duration
	// CancelTimeout bounds the best-effort cancel sent when the client goes
	// away before the task settled (default 1s).
	CancelTimeout time.Duration
}

func (o AIPOptions) withDefaults() AIPOptions {
	if o.Mode == "auto" {
		o.Mode = AIPModeAuto
	}
	if o.PollInterval <= 0 {
		o.PollInterval = 500 * time.Millisecond
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
	return o
}

// AIP calls an AIP v01.00 Partner: the bridge as Leader.
//
// One Open is one exchange. For a start or continue request it drives an
// AIP task until it settles, in stream mode (POST stream, the SSE decoded by
// aip.StreamDecoder, re-stream after a cut) or in rpc mode (POST rpc, then
// get every PollInterval), and returns the task's canonical events:
// states, the content of partner messages, tool calls, artifacts from
// products, and a KindInputRequest before an input-required state. Every
// stream ends with io.EOF right after a settled state.
//
// Sessions: the request's Session is the task's sessionId (a new one when
// empty). Each exchange starts a new task, except that when the previous
// exchange of the same session left its task in awaiting-input, the next one
// sends continue to that task with the new input.
//
// awaiting-completion: with AutoComplete (the default) the bridge sends
// complete itself and the stream shows the completed state the partner
// answers, not awaiting-completion; without it the stream ends on
// awaiting-completion, and a later CommandComplete (or CommandCancel) of the
// same session without an ID is sent to that task.
//
// Other commands: CommandCancel, CommandComplete and CommandGet send one
// rpc call to the task Request.ID (or the session's waiting task) and
// return what it answers; CommandResume re-streams task Request.ID after
// Request.After.
//
// The breaker sees one outcome per exchange, however many HTTP calls it
// took: failures are transport errors, HTTP 5xx and 429, malformed bodies,
// JSON-RPC internal errors (-32603, -32006) and a stream that could not be
// resumed; JSON-RPC and HTTP 4xx errors that are the request's fault are
// not, nor is a client that went away (the task is then cancelled, best
// effort, in the background).
type AIP struct {
	c        *client
	opts     AIPOptions
	paths    map[string]string
	sessions *sessionMap[*aipTask]

	acsMu   sync.Mutex
	acsMode string // AIPModeStream or AIPModeRPC once the ACS was read

	bg sync.WaitGroup // background cancels
}

// NewAIP returns a client for the AIP Partner at cfg.URL: its base URL or
// its rpc URL (see aipPaths).
func NewAIP(cfg Config) (*AIP, error) {
	cfg.Protocol = translate.ProtoAIP
	c, err := newClient(cfg)
	if err != nil {
		return nil, err
	}
	opts := cfg.AIP.withDefaults()
	switch opts.Mode {
	case AIPModeAuto, AIPModeStream, AIPModeRPC:
	default:
		return nil, fmt.Errorf("upstream %q: aip mode %q: want stream, rpc or auto", cfg.Name, cfg.AIP.Mode)
	}
	paths, err := aipPaths(c.url, opts.Paths)
	if err != nil {
		return nil, fmt.Errorf("upstream %q: %w", cfg.Name, err)
	}
	return &AIP{c: c, opts: opts, paths: paths, sessions: newSessionMap[*aipTask](opts.MaxSessions)}, nil
}

// Breaker returns the upstream's breaker.
func (a *AIP) Breaker() *Breaker { return a.c.breaker }

// Endpoint returns the URL the client calls for name: a method name
// ("rpc", "stream", "notification/set", …) or "acs"; "" for another name.
func (a *AIP) Endpoint(name string) string {
	p, ok := a.paths[name]
	if !ok {
		return ""
	}
	u := *a.c.url
	u.Path = p
	return u.String()
}

func (a *AIP) autoComplete() bool { return a.opts.AutoComplete == nil || *a.opts.AutoComplete }

// Open sends req and returns the task's event stream (see AIP).
func (a *AIP) Open(ctx context.Context, req *translate.Request) (translate.Stream, error) {
	release, err := a.c.acquire()
	if err != nil {
		return nil, err
	}
	s := newAIPStream(a, ctx, release)
	session := req.Session
	if session == "" {
		session = aip.NewID("session")
	}
	r := *req
	r.Session = session
	switch req.Command {
	case 0, translate.CommandStart, translate.CommandContinue:
		return s.openTask(&r)
	case translate.CommandCancel, translate.CommandComplete, translate.CommandGet:
		return s.openCommand(&r)
	case translate.CommandResume:
		return s.openResume(&r)
	}
	err = &Error{Code: translate.CodeBadRequest, Err: fmt.Errorf("aip: %w: command %v", translate.ErrUnsupported, req.Command)}
	s.end(nil, err)
	return nil, err
}

// mode returns how this exchange drives its task: the configured mode, or
// in auto mode what the partner's ACS document says (capabilities.streaming),
// read once and cached. A missing or unreadable document means rpc; a
// transport error or 5xx is not cached (rpc is used this time).
func (a *AIP) mode(ctx context.Context, hdr map[string]string) string {
	if a.opts.Mode != AIPModeAuto {
		return a.opts.Mode
	}
	a.acsMu.Lock()
	m := a.acsMode
	a.acsMu.Unlock()
	if m != "" {
		return m
	}
	m, cache := a.fetchMode(ctx, hdr)
	if cache {
		a.acsMu.Lock()
		a.acsMode = m
		a.acsMu.Unlock()
	}
	return m
}

func (a *AIP) fetchMode(ctx context.Context, hdr map[string]string) (mode string, cache bool) {
	ctx, cancel := context.WithTimeout(ctx, a.c.cfg.Timeouts.Total)
	defer cancel()
	resp, err := a.c.do(ctx, request{path: a.paths[AIPPathACS], accept: "application/json", header: hdr, held: true}, true)
	if err != nil {
		var e *Error
		if errors.As(err, &e) && e.Status >= 400 && e.Status < 500 && e.Status != 429 {
			return AIPModeRPC, true // no document: an rpc-only partner
		}
		return AIPModeRPC, false
	}
	body, err := resp.readAll(a.c.cfg.MaxBodyBytes)
	resp.finish(nil)
	if err != nil {
		return AIPModeRPC, false
	}
	if gjson.GetBytes(body, "capabilities.streaming").Bool() {
		return AIPModeStream, true
	}
	return AIPModeRPC, true
}

// newRPCID returns a fresh JSON-RPC id (a quoted UUID).
func newRPCID() json.RawMessage { return json.RawMessage(strconv.Quote(aip.NewID(""))) }

// post sends one JSON-RPC call of the exchange to path and returns the
// answer: the response header read, the body still streaming. The call is
// made as a stream (its read is woken by ctx and bounded by the idle
// timeout); callers bound it further with a deadline on ctx. HTTP error
// answers come back as *Error with the AIP code read from their body.
//
// A call on a pooled connection the partner closed while idle is resent
// once by client.do; that is safe for AIP too: the Leader chooses the task
// id, a repeated start returns the task, and a command in the wrong state
// is ignored (spec §4.2).
func (a *AIP) post(ctx context.Context, path, accept string, body []byte, hdr map[string]string) (*response, error) {
	r := request{path: path, body: body, contentType: "application/json", accept: accept, header: hdr, held: true}
	resp, err := a.c.do(ctx, r, true)
	if err != nil {
		return nil, httpCallError(err)
	}
	return resp, nil
}

// httpCallError turns do's error for an HTTP error status into one that
// carries the AIP error the body holds (FastAPI's {"detail":{"code":…}} or a
// JSON-RPC envelope sent with a 4xx). do keeps the body's start as the
// error's message; that is what aip.HTTPError reads. 5xx errors keep their
// upstream code.
func httpCallError(err error) error {
	var e *Error
	if !errors.As(err, &e) || e.Status == 0 || e.Status >= 500 || e.Status == 429 || e.Err == nil {
		return err
	}
	ce := aip.HTTPError(e.Status, []byte(e.Err.Error()))
	return &Error{Code: ce.Code, Status: e.Status, RetryAfter: e.RetryAfter, Err: errors.New(ce.Message)}
}

// rpcError turns the canonical error of a JSON-RPC error answer (or an
// error frame) into an *Error carrying the AIP code ("-32602").
func rpcError(ce *translate.Error) *Error {
	return &Error{Code: ce.Code, Err: errors.New(ce.Message)}
}

// aipOutcome classifies an exchange's end for the breaker: nil for success
// and for errors that are the request's fault, ErrClientGone for a client
// that went away, the error itself for an upstream failure.
func aipOutcome(err error) error {
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
		if n, convErr := strconv.Atoi(e.Code); convErr == nil && strings.HasPrefix(e.Code, "-") {
			if n == aip.CodeInternalError || n == aip.CodeInvalidAgentResponse {
				return err
			}
			return nil // a JSON-RPC error the request earned
		}
		if e.Code == translate.CodeBadRequest {
			return nil
		}
	}
	return err
}

// cancelTask sends cancel for taskID in the background, best effort, bounded
// by CancelTimeout; ctx supplies the values (trace headers), not the
// cancellation.
func (a *AIP) cancelTask(ctx context.Context, taskID, session string, hdr map[string]string) {
	m, err := aip.MessageFromRequest(&translate.Request{Command: translate.CommandCancel, ID: taskID, Session: session}, a.opts.LeaderID)
	if err != nil {
		return
	}
	body := aip.AppendMessageRequest(nil, aip.MethodRPC, newRPCID(), m)
	a.bg.Add(1)
	go func() {
		defer a.bg.Done()
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), a.opts.CancelTimeout)
		defer cancel()
		resp, err := a.post(cctx, a.paths[aip.MethodRPC], "application/json", body, hdr)
		if err != nil {
			return
		}
		_, _ = resp.readAll(a.c.cfg.MaxBodyBytes)
		resp.finish(nil)
	}()
}

// aipHeaders returns the per-call headers of an exchange (trace context).
func aipHeaders(ctx context.Context) map[string]string { return callctx.Headers(ctx) }
