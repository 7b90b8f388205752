package downstream

import (
	"bufio"
	"context"
	"errors"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/agentbridge/bridge/internal/callctx"
	"github.com/agentbridge/bridge/internal/store"
	"github.com/agentbridge/bridge/internal/tracing"
	"github.com/agentbridge/bridge/translate"
	"github.com/agentbridge/bridge/translate/agentapi"
)

// serveAgentAPI answers POST /process: the request is validated before any
// byte is sent (bad input gets HTTP 400 with a JSON error), then the reply
// always streams as SSE, upstream failures included, as the Agent API's own
// server does.
func (s *Server) serveAgentAPI(ctx *fasthttp.RequestCtx, route *Route) {
	if !ctx.IsPost() {
		ctx.Response.Header.Set("Allow", "POST")
		writeJSONError(ctx, fasthttp.StatusMethodNotAllowed, "METHOD_NOT_ALLOWED", "use POST")
		return
	}
	req, err := agentapi.DecodeRequest(ctx.PostBody())
	if err != nil {
		writeJSONError(ctx, fasthttp.StatusBadRequest, translate.CodeBadRequest, err.Error())
		return
	}
	if route == nil {
		writeJSONError(ctx, fasthttp.StatusNotFound, "NO_ROUTE", "no upstream agent is routed for this request")
		return
	}
	// The response echoes the session, and an agent keys its memory by it:
	// fix one now so the client can continue the conversation.
	if req.Session == "" {
		req.Session = newID("session_")
	}
	if req.ID == "" {
		req.ID = newID("response_")
	}
	x, err := s.begin(ctx, route, translate.ProtoAgentAPI, req)
	if err != nil {
		writeJSONError(ctx, fasthttp.StatusInternalServerError, translate.CodeInternal, err.Error())
		return
	}
	s.frame(x.id, FrameDownIn, ctx.PostBody())
	enc := agentapi.NewEncoder(agentapi.EncoderOptions{ResponseID: req.ID, SessionID: req.Session})
	setSSEHeaders(ctx)
	ctx.SetBodyStreamWriter(func(w *bufio.Writer) { x.stream(w, enc) })
}

// begin registers a new exchange and gives it a context of its own.
func (s *Server) begin(ctx *fasthttp.RequestCtx, route *Route, down string, req *translate.Request) (*exchange, error) {
	xs := &store.Exchange{
		ID:         store.NewID(),
		Downstream: down,
		Upstream:   route.Proto,
		Route:      route.Name,
		ClientID:   req.ID,
		Session:    req.Session,
		User:       req.User,
		State:      translate.StateSubmitted,
		Request:    req,
	}
	if s.opts.RecordStreams {
		if err := s.store.Create(xs); err != nil && !errors.Is(err, store.ErrExists) {
			return nil, err
		}
	}
	req.Exchange = xs.ID
	xctx, cancelCause := context.WithCancelCause(context.Background())
	// Past the drain time of a shutdown, the exchange ends with a proper
	// terminal event rather than a cut connection.
	stopDrain := context.AfterFunc(s.hardStop, func() { cancelCause(errShuttingDown) })
	cancel := func() { stopDrain(); cancelCause(nil) }
	in := forwardHeaders(ctx)
	xctx = callctx.WithHeaders(xctx, tracing.Continue(in))
	if s.opts.Frames != nil {
		xid := xs.ID
		xctx = callctx.WithFrames(xctx, func(dir string, b []byte) { s.opts.Frames.Record(xid, dir, b) })
	}
	return &exchange{
		s:      s,
		id:     xs.ID,
		route:  route.Name,
		down:   down,
		up:     route.Proto,
		agent:  route.Agent,
		req:    req,
		ctx:    xctx,
		cancel: cancel,
		conn:   ctx.Conn(),
		start:  time.Now(),
		parent: in[tracing.HeaderTraceParent],
	}, nil
}

// forwardHeaders returns the client's W3C trace context (traceparent, and
// tracestate), validated, or nil when it sent none or an invalid one. It is
// the parent of the exchange: begin and runTurn continue it with a span of
// the bridge's own (tracing.Continue), or start a trace when it is nil, and
// that span's traceparent is what the upstream receives.
func forwardHeaders(ctx *fasthttp.RequestCtx) map[string]string {
	sc, ok := tracing.Inbound(string(ctx.Request.Header.Peek(tracing.HeaderTraceParent)),
		string(ctx.Request.Header.Peek(tracing.HeaderTraceState)))
	if !ok {
		return nil
	}
	return sc.Headers()
}

func setSSEHeaders(ctx *fasthttp.RequestCtx) {
	ctx.SetContentType("text/event-stream; charset=utf-8")
	ctx.Response.Header.Set("Cache-Control", "no-cache")
	ctx.Response.Header.Set("X-Accel-Buffering", "no")
}
