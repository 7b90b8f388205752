package downstream

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/tidwall/gjson"
	"github.com/valyala/fasthttp"

	"github.com/agentbridge/bridge/internal/store"
	"github.com/agentbridge/bridge/translate"
	"github.com/agentbridge/bridge/translate/agentapi"
)

// Options configures a Server. The zero value of each field gives the
// default noted.
type Options struct {
	// Accept lists the protocols served (translate.Proto*); empty means all.
	Accept []string
	// AgentAPIPath is the Agent API endpoint (default "/process").
	AgentAPIPath string
	// AIP configures the AIP Partner endpoints.
	AIP AIPOptions
	// APv1 configures the agentprotocol.ai v1 API (/ap/v1/agent/tasks).
	APv1 APv1Options
	// MaxBodyBytes bounds a request body (default 4 MiB); larger gets 413.
	MaxBodyBytes int
	// ReadTimeout bounds reading a request (default 30s); a connection that
	// sends nothing for that long is closed.
	ReadTimeout time.Duration
	// MaxStreams bounds the exchanges streaming back to clients at once,
	// over all upstreams (default 4096); past it clients get BUSY at once.
	// Each upstream has its own bound too (upstream.Config.MaxConcurrent).
	MaxStreams int
	// KeepAlive is the interval of SSE keep-alive comments on a quiet
	// stream (default 15s; negative disables them).
	KeepAlive time.Duration
	// Store logs exchanges and their events (default: in memory, default bounds).
	Store store.Store
	// Logger receives errors and access lines (default slog.Default()).
	Logger *slog.Logger
	// Observer sees exchanges and events (metrics, traces); nil: none.
	Observer Observer
	// Frames, when set, keeps the raw frames of each exchange.
	Frames FrameRecorder
	// RecordStreams logs the exchanges streamed straight back to their
	// client (the Agent API path) and every event of them in the Store, for
	// the admin view. Exchanges that outlive their call (AIP tasks, Agent
	// Protocol requests) are always logged: replay reads the log. Off, the
	// streamed path touches no store at all, which is most of its cost.
	RecordStreams bool
}

// Server serves every accepted protocol on one listener.
type Server struct {
	opts    Options
	routing atomic.Pointer[Routing]
	srv     *fasthttp.Server
	log     *slog.Logger
	store   store.Store
	active  atomic.Int64 // exchanges streaming now
	closing atomic.Bool
	turns   turns // detached turns (AIP tasks, Agent Protocol requests)
	// hardStop ends when a shutdown's drain time is over: open exchanges
	// then end with a terminal event in their protocol.
	hardStop    context.Context
	endHardStop context.CancelFunc
	aip         aipPartner
	ap          apState
	apv1        apv1Server
}

// New returns a server that routes with rt until SetRouting replaces it.
func New(opts Options, rt *Routing) *Server {
	if opts.AgentAPIPath == "" {
		opts.AgentAPIPath = "/process"
	}
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = 4 << 20
	}
	if opts.MaxStreams <= 0 {
		opts.MaxStreams = 4096
	}
	if opts.ReadTimeout <= 0 {
		opts.ReadTimeout = 30 * time.Second
	}
	if opts.KeepAlive == 0 {
		opts.KeepAlive = 15 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Observer == nil {
		opts.Observer = nopObserver{}
	}
	if opts.Store == nil {
		opts.Store = store.NewMemory(store.Limits{}, nil)
	}
	s := &Server{opts: opts, log: opts.Logger, store: opts.Store}
	s.hardStop, s.endHardStop = context.WithCancel(context.Background())
	s.routing.Store(rt)
	s.srv = &fasthttp.Server{
		Handler:                       s.handle,
		Name:                          "agent-bridge",
		MaxRequestBodySize:            opts.MaxBodyBytes,
		ReadTimeout:                   opts.ReadTimeout,
		IdleTimeout:                   2 * time.Minute,
		NoDefaultServerHeader:         true,
		DisablePreParseMultipartForm:  true,
		CloseOnShutdown:               true,
		DisableHeaderNamesNormalizing: false,
		ErrorHandler:                  s.transportError,
	}
	return s
}

// SetRouting swaps the routing table; requests already routed keep theirs.
func (s *Server) SetRouting(rt *Routing) { s.routing.Store(rt) }

// Store returns the exchange store.
func (s *Server) Store() store.Store { return s.store }

// Handler returns the request handler, for tests and embedding.
func (s *Server) Handler() fasthttp.RequestHandler { return s.handle }

// Serve accepts connections on ln until Shutdown.
func (s *Server) Serve(ln net.Listener) error { return s.srv.Serve(ln) }

// Shutdown stops accepting, waits for open exchanges until ctx ends, then
// closes what is left.
func (s *Server) Shutdown(ctx context.Context) error {
	s.closing.Store(true)
	s.aipCloseStreams()
	s.apShutdown()
	err := s.srv.ShutdownWithContext(ctx)
	if ctx.Err() != nil {
		// Drain time is over: end what is still open with a terminal
		// event, and give those writes a moment.
		s.endHardStop()
		for deadline := time.Now().Add(2 * time.Second); s.active.Load() > 0 && time.Now().Before(deadline); {
			time.Sleep(5 * time.Millisecond)
		}
	}
	if werr := s.waitTurns(ctx); err == nil {
		err = werr
	}
	s.endHardStop()
	s.aipShutdown()
	return err
}

func (s *Server) accepts(proto string) bool {
	return len(s.opts.Accept) == 0 || slices.Contains(s.opts.Accept, proto)
}

func (s *Server) handle(ctx *fasthttp.RequestCtx) {
	path := ctx.Path()
	if string(path) == "/health" || string(path) == "/healthz" {
		s.health(ctx)
		return
	}
	route, rest := s.routing.Load().match(ctx.Host(), path)
	proto := ""
	defer func() {
		if st := ctx.Response.StatusCode(); st >= 400 {
			s.opts.Observer.RequestRejected(proto, st)
		}
	}()
	switch {
	case s.accepts(translate.ProtoAgentAPI) && string(rest) == s.opts.AgentAPIPath &&
		!(s.accepts(translate.ProtoAgentProtocol) && agentAtPrefix(route) && looksLikeAgentProtocol(ctx.PostBody())):
		proto = translate.ProtoAgentAPI
		s.serveAgentAPI(ctx, route)
	case s.accepts(translate.ProtoAIP) && s.matchAIP(ctx, rest):
		proto = translate.ProtoAIP
		s.serveAIP(ctx, route, rest)
	case s.accepts(translate.ProtoAgentProtocol) && s.matchAPv1(rest):
		proto = translate.ProtoAgentProtocol
		s.serveAPv1(ctx, route, rest)
	case s.accepts(translate.ProtoAgentProtocol) && s.matchAP(ctx, rest):
		proto = translate.ProtoAgentProtocol
		s.serveAP(ctx, route, rest)
	default:
		writeJSONError(ctx, fasthttp.StatusNotFound, "NOT_FOUND", "no endpoint at "+string(path))
	}
}

func (s *Server) health(ctx *fasthttp.RequestCtx) {
	ctx.SetContentType("application/json")
	if s.closing.Load() {
		ctx.SetStatusCode(fasthttp.StatusServiceUnavailable)
		ctx.SetBodyString(`{"status":"draining","runner":"not_ready"}`)
		return
	}
	ctx.SetBodyString(`{"status":"healthy","runner":"ready"}`)
}

// agentAtPrefix reports whether the route's path prefix is where an Agent
// Protocol client finds the agent: only there does {agent}/process share
// its path with the Agent API endpoint. At the root, /process is the Agent
// API's alone, and a malformed Agent API request gets its own 400.
func agentAtPrefix(r *Route) bool {
	return r != nil && r.PathPrefix != "" && r.PathPrefix != "/"
}

// looksLikeAgentProtocol tells an Agent Protocol request posted to
// {agent}/process from an Agent API one when the agent's path makes them
// share a path: the Agent API's input is a list of messages, the Agent
// Protocol's a string (or a prompt, or a resume, cancel or configure).
func looksLikeAgentProtocol(body []byte) bool {
	if !gjson.ValidBytes(body) {
		return false
	}
	r := gjson.ParseBytes(body)
	if in := r.Get("input"); in.Exists() {
		return in.Type == gjson.String
	}
	return r.Get("prompt").Exists() || r.Get("request_keys").Exists() || r.Get("args").Exists() ||
		r.Get("request_id").Exists() || r.Get("run_id").Exists() || r.Get("thread_id").Exists()
}

// transportError answers what fasthttp rejects before the handler: a body
// over the limit, a malformed request line.
func (s *Server) transportError(ctx *fasthttp.RequestCtx, err error) {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		// A connection that sent nothing before the read timeout (an HTTP
		// client's spare dial, a slowloris): close it quietly, as for an
		// idle one; an answer would reach the client unasked.
		_ = ctx.Conn().Close()
		return
	}
	if errors.Is(err, fasthttp.ErrBodyTooLarge) {
		writeJSONError(ctx, fasthttp.StatusRequestEntityTooLarge, "BODY_TOO_LARGE",
			"request body is larger than the limit of "+strconv.Itoa(s.opts.MaxBodyBytes)+" bytes")
		return
	}
	writeJSONError(ctx, fasthttp.StatusBadRequest, translate.CodeBadRequest, err.Error())
}

// writeJSONError answers with a JSON error body of the form
// {"error":{"code":..,"message":..}}.
func writeJSONError(ctx *fasthttp.RequestCtx, status int, code, msg string) {
	ctx.SetStatusCode(status)
	ctx.SetContentType("application/json")
	ctx.SetBody(agentapi.AppendHTTPError(nil, code, msg))
}
