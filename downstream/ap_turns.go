package downstream

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/agentbridge/bridge/internal/store"
	"github.com/agentbridge/bridge/translate"
	ap "github.com/agentbridge/bridge/translate/agentprotocol"
)

const (
	apRequestKey = "ap:request:"
	apRunKey     = "ap:run:"

	apMetaDialect = "ap.dialect"
	apMetaAgent   = "ap.agent"
	apMetaPolled  = "ap.polled"

	// apMaxWait bounds how long process?until=settled and an agentic poll
	// wait for the turn to settle before answering what there is.
	apMaxWait = 5 * time.Minute
)

// apErr is a failed command: an HTTP status and a JSON error body.
type apErr struct {
	status int
	code   string
	msg    string
}

func (e *apErr) Error() string { return e.msg }

func apBad(msg string) *apErr {
	return &apErr{status: http.StatusBadRequest, code: translate.CodeBadRequest, msg: msg}
}

// apSubmission is a parsed request body and the dialect it implies.
type apSubmission struct {
	p       *ap.ParsedRequest
	dialect ap.Dialect
	req     *translate.Request // nil for configure
}

// apParse reads a request body posted to op ("process", "run", "resume",
// "configure", "stream_request", or "ws" for a WebSocket frame); forced,
// when known, overrides the dialect the body implies.
func apParse(body []byte, op string, forced ap.Dialect) (*apSubmission, *apErr) {
	p, err := ap.ParseRequest(body)
	if err != nil {
		return nil, apBad(err.Error())
	}
	d := forced
	if d == ap.DialectUnknown {
		switch op {
		case "run":
			d = ap.DialectRun
		case "resume":
			d = ap.DialectAgentic
		default:
			d = p.Dialect
			if d == ap.DialectUnknown {
				d = ap.DialectProcess
			}
		}
	}
	sub := &apSubmission{p: p, dialect: d}
	if op == "configure" && p.Kind != ap.KindConfigure {
		return nil, apBad("configure takes a ConfigureRequest: {\"args\": {…}}")
	}
	if op == "resume" && p.Kind != ap.KindResume {
		return nil, apBad("resume takes {\"continue_result\": {…}} (or request_keys)")
	}
	if p.Kind == ap.KindConfigure {
		return sub, nil
	}
	sub.req, err = p.Canonical(d)
	if err != nil {
		return nil, apBad(err.Error())
	}
	return sub, nil
}

// apProcess answers POST {agent}/process, /run, /resume and /configure.
//
// The answers follow the README's "POST /process (Request) -> Event|None":
//   - a chat or a resume: the request's start event (request_started, or
//     run_started in the run dialect), which names the request and its run,
//     as soon as the turn is started: 200 with ?wait=true (the README's
//     "ChatRequest(input), wait=True -> RequestStarted"), 202 without
//     (where the README answers only a status code, the body is a bonus);
//   - a cancel: 200 with the request's end (request_completed
//     finish_reason canceled, or the end it had already), since the cancel
//     is carried out before the answer;
//   - a configure: 200 with request_completed success (apConfigured);
//   - agentic dialect: {request_id, thread_id} at once, as its server does.
//
// ?until=settled (alone or with wait=true) is the bridge's convenience, not
// the README's: it answers, once the turn settles (ends or waits for
// input; bounded by apMaxWait), a JSON array of the events the command
// caused (a chat: the request's whole turn from request_started), so that
// one call does what process + getevents do.
func (s *Server) apProcess(ctx *fasthttp.RequestCtx, a apAgent, op string) {
	sub, e := apParse(ctx.PostBody(), op, ap.DialectUnknown)
	if e != nil {
		apError(ctx, e.status, e.code, e.msg)
		return
	}
	if sub.p.Kind == ap.KindConfigure {
		apJSON(ctx, fasthttp.StatusOK, apConfigured(a, sub.dialect))
		return
	}
	args := ctx.QueryArgs()
	wait := apBool(args.Peek("wait"))
	settled := string(args.Peek("until")) == "settled"
	x, after, e := s.apCommand(a, sub, forwardHeaders(ctx))
	if e != nil {
		apError(ctx, e.status, e.code, e.msg)
		return
	}
	d := apDialectOf(x)
	cancel := sub.req.Command == translate.CommandCancel
	switch {
	case d == ap.DialectAgentic && !cancel:
		b, _ := json.Marshal(ap.AgenticStartResponse{RequestID: x.ClientID, ThreadID: &x.Session})
		apJSON(ctx, fasthttp.StatusOK, b)
		return
	case settled && !cancel:
		wctx, stop := apContext(ctx, context.Background())
		wctx, cancelWait := context.WithTimeout(wctx, apMaxWait)
		_ = s.follow(wctx, x.ID, after, nil, func(*translate.Event) error { return nil })
		cancelWait()
		stop()
	case !cancel:
		body, _ := s.apStartedObject(x)
		status := fasthttp.StatusAccepted
		if wait {
			status = fasthttp.StatusOK
		}
		apJSON(ctx, status, body)
		return
	}
	lines, _, err := s.apEncodeLog(x, 0, after)
	if err != nil {
		apStoreError(ctx, err)
		return
	}
	if settled {
		apJSON(ctx, fasthttp.StatusOK, ap.AppendArray(nil, lines))
		return
	}
	// A cancel: the request's end event, the last the log holds.
	var end []byte
	for obj := range ap.Objects(lines) {
		end = obj
	}
	if end == nil {
		body, _ := s.apStartedObject(x)
		end = body
	}
	apJSON(ctx, fasthttp.StatusOK, end)
}

// apConfigured is the answer to a ConfigureRequest: the canonical model
// has no configure command, so the bridge acknowledges it itself (the
// README answers RequestCompleted success) and forwards nothing upstream.
func apConfigured(a apAgent, d ap.Dialect) []byte {
	enc := ap.NewEncoder(ap.EncoderOptions{Dialect: d, Agent: a.name})
	lines := enc.Encode(nil, &translate.Event{Kind: translate.KindState, State: translate.StateCompleted}, 0)
	var last []byte
	for obj := range ap.Objects(lines) {
		last = obj
	}
	return last
}

// apCommand carries out a chat, resume or cancel. It returns the request's
// exchange and the log position the command's events follow.
func (s *Server) apCommand(a apAgent, sub *apSubmission, headers map[string]string) (*store.Exchange, uint64, *apErr) {
	req := sub.req
	switch req.Command {
	case translate.CommandStart:
		x, e := s.apStart(a, sub.dialect, req, headers)
		return x, 0, e
	case translate.CommandContinue:
		x, e := s.apLookupCommand(a, req)
		if e != nil {
			return nil, 0, e
		}
		after, e := s.apResume(a, x, req, headers)
		return x, after, e
	case translate.CommandCancel:
		x, e := s.apLookupCommand(a, req)
		if e != nil {
			return nil, 0, e
		}
		after, e := s.apCancel(x)
		return x, after, e
	}
	return nil, 0, apBad("unsupported request")
}

// apLookupCommand finds the request a resume or cancel names.
func (s *Server) apLookupCommand(a apAgent, req *translate.Request) (*store.Exchange, *apErr) {
	var keys []string
	if req.ID != "" {
		keys = append(keys, apRequestKey+req.ID)
	}
	if req.Session != "" {
		keys = append(keys, apRunKey+req.Session, apRequestKey+req.Session)
	}
	if req.ID != "" {
		keys = append(keys, apRunKey+req.ID)
	}
	if len(keys) == 0 {
		return nil, apBad("name the request: request_id (or run_id / thread_id)")
	}
	for _, k := range keys {
		if x, err := s.store.Find(k); err == nil && x.Route == a.route.Name {
			return x, nil
		}
	}
	id := req.ID
	if id == "" {
		id = req.Session
	}
	return nil, &apErr{status: http.StatusNotFound, code: "REQUEST_NOT_FOUND", msg: "no request " + id + " at agent " + a.name + ", or it expired"}
}

// apStart creates the exchange of a new request and starts its turn.
func (s *Server) apStart(a apAgent, d ap.Dialect, req *translate.Request, headers map[string]string) (*store.Exchange, *apErr) {
	if req.ID == "" {
		req.ID = newID("")
	}
	if req.Session == "" {
		req.Session = newID("")
	}
	req.Agent = a.name
	x := &store.Exchange{
		Downstream: translate.ProtoAgentProtocol,
		Upstream:   a.route.Proto,
		Route:      a.route.Name,
		ClientID:   req.ID,
		Session:    req.Session,
		User:       req.User,
		State:      translate.StateSubmitted,
		Request:    req,
		Meta:       map[string]string{apMetaDialect: d.String(), apMetaAgent: a.name},
	}
	p := &s.ap
	p.cmd.Lock()
	defer p.cmd.Unlock()
	if _, err := s.store.Find(apRequestKey + req.ID); err == nil {
		return nil, &apErr{status: http.StatusConflict, code: "REQUEST_EXISTS", msg: "request_id " + req.ID + " is taken: send a ResumeWithInput or CancelRequest for it, or a new id"}
	}
	if err := s.store.Create(x); err != nil {
		return nil, &apErr{status: http.StatusInternalServerError, code: translate.CodeInternal, msg: err.Error()}
	}
	req.Exchange = x.ID
	for _, k := range []string{apRequestKey + req.ID, apRunKey + req.Session} {
		if err := s.store.Alias(x.ID, k); err != nil {
			return nil, &apErr{status: http.StatusInternalServerError, code: translate.CodeInternal, msg: err.Error()}
		}
	}
	if _, err := s.store.Append(x.ID, &translate.Event{Kind: translate.KindState, State: translate.StateSubmitted, Time: time.Now()}); err != nil {
		return nil, &apErr{status: http.StatusInternalServerError, code: translate.CodeInternal, msg: err.Error()}
	}
	s.apRunTurn(x, a, req, headers)
	x, _ = s.store.Get(x.ID)
	if x == nil {
		return nil, &apErr{status: http.StatusInternalServerError, code: translate.CodeInternal, msg: "the request expired at once"}
	}
	return x, nil
}

// apRunTurn runs one upstream turn of the request, or settles it when no
// turn can run.
func (s *Server) apRunTurn(x *store.Exchange, a apAgent, req *translate.Request, headers map[string]string) {
	reject := func(st translate.State, code, msg string) {
		_, _ = s.store.Append(x.ID, &translate.Event{Kind: translate.KindState, State: st, Time: time.Now(),
			Err: &translate.Error{Code: code, Message: msg}, Parts: []translate.Part{translate.TextPart(msg)}})
	}
	if a.route.Agent == nil {
		reject(translate.StateRejected, "NO_ROUTE", "no upstream agent is routed for this request")
		return
	}
	if s.closing.Load() {
		reject(translate.StateRejected, translate.CodeUpstreamUnavailable, "the bridge is shutting down")
		return
	}
	r := *a.route
	r.Agent = apTurnAgent{inner: a.route.Agent}
	if err := s.runTurn(x.ID, &r, req, headers, 0, nil); err != nil {
		reject(translate.StateFailed, translate.CodeInternal, err.Error())
	}
}

// apWaitIdle waits (briefly) for the previous turn's goroutine to finish
// after its settled event was logged.
func (s *Server) apWaitIdle(xid string) {
	for deadline := time.Now().Add(2 * time.Second); s.turnRunning(xid) && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
}

// apResume continues a request that waits for input: a new upstream turn
// on the same exchange, in the same session.
func (s *Server) apResume(a apAgent, x *store.Exchange, req *translate.Request, headers map[string]string) (uint64, *apErr) {
	p := &s.ap
	p.cmd.Lock()
	defer p.cmd.Unlock()
	x, err := s.store.Get(x.ID)
	if err == nil && x.State != translate.StateInputRequired && s.turnRunning(x.ID) {
		// wait_for_input goes out with the agent's question, a moment
		// before the turn logs its input-required state: a client quick
		// to answer must not be turned away in between.
		s.apWaitIdle(x.ID)
		x, err = s.store.Get(x.ID)
	}
	if err != nil {
		return 0, &apErr{status: http.StatusNotFound, code: "REQUEST_NOT_FOUND", msg: "the request expired"}
	}
	if x.State != translate.StateInputRequired {
		return 0, &apErr{status: http.StatusConflict, code: "NOT_WAITING_FOR_INPUT",
			msg: "request " + x.ClientID + " is " + string(x.State) + "; ResumeWithInput needs a request that waits for input"}
	}
	s.apWaitIdle(x.ID)
	if s.turnRunning(x.ID) {
		return 0, &apErr{status: http.StatusConflict, code: "TURN_RUNNING", msg: ErrTurnRunning.Error()}
	}
	req.Command = translate.CommandContinue
	req.Exchange, req.ID, req.Session, req.Agent = x.ID, x.ClientID, x.Session, a.name
	if req.User == "" {
		req.User = x.User
	}
	after := x.LastSeq
	s.apRunTurn(x, a, req, headers)
	return after, nil
}

// apCancel stops the request: its running turn ends canceled, and a
// request that waits for input is canceled by the bridge. A request that
// is over is left as it is.
func (s *Server) apCancel(x *store.Exchange) (uint64, *apErr) {
	p := &s.ap
	p.cmd.Lock()
	defer p.cmd.Unlock()
	x, err := s.store.Get(x.ID)
	if err != nil {
		return 0, &apErr{status: http.StatusNotFound, code: "REQUEST_NOT_FOUND", msg: "the request expired"}
	}
	after := x.LastSeq
	if x.State.Terminal() {
		// Answer its end: the last event.
		if after > 0 {
			after--
		}
		return after, nil
	}
	s.cancelTurn(x.ID)
	if x, err = s.store.Get(x.ID); err == nil && !x.State.Terminal() {
		_, _ = s.store.Append(x.ID, &translate.Event{Kind: translate.KindState, State: translate.StateCanceled,
			Parts: []translate.Part{translate.TextPart("canceled by the client")}, Time: time.Now()})
	}
	return after, nil
}

// apTurnAgent wraps the upstream agent of a request's turn: a turn the
// client canceled (or Shutdown stopped) ends canceled rather than failed,
// and the upstream's own submitted state is dropped (the request already
// started).
type apTurnAgent struct{ inner translate.Agent }

func (a apTurnAgent) Open(ctx context.Context, req *translate.Request) (translate.Stream, error) {
	st, err := a.inner.Open(ctx, req)
	if err != nil {
		if errors.Is(ctx.Err(), context.Canceled) {
			return translate.NewSliceStream(apCanceledEvent()), nil
		}
		return nil, err
	}
	return &apTurnStream{inner: st, ctx: ctx}, nil
}

func apCanceledEvent() *translate.Event {
	return &translate.Event{Kind: translate.KindState, State: translate.StateCanceled,
		Parts: []translate.Part{translate.TextPart("canceled by the client")}, Time: time.Now()}
}

type apTurnStream struct {
	inner translate.Stream
	ctx   context.Context
	done  bool
}

func (s *apTurnStream) Next() (*translate.Event, error) {
	if s.done {
		return nil, io.EOF
	}
	ev, err := s.inner.Next()
	for err == nil && ev.Kind == translate.KindState && ev.State == translate.StateSubmitted {
		ev, err = s.inner.Next()
	}
	if err != nil && errors.Is(s.ctx.Err(), context.Canceled) {
		s.done = true
		return apCanceledEvent(), nil
	}
	return ev, err
}

func (s *apTurnStream) Close() error { return s.inner.Close() }

// apDialectOf is the dialect a request was submitted in.
func apDialectOf(x *store.Exchange) ap.Dialect {
	if d := ap.ParseDialect(x.Meta[apMetaDialect]); d != ap.DialectUnknown {
		return d
	}
	return ap.DialectProcess
}

// apEncoder returns an encoder for the request's events, as its client
// sees them.
func apEncoder(x *store.Exchange) *ap.Encoder {
	o := ap.EncoderOptions{Dialect: apDialectOf(x), Agent: x.Meta[apMetaAgent], Turn: x.ClientID, Session: x.Session}
	if x.Request != nil {
		if m := x.Request.LastInput(); m != nil {
			o.Prompt = m.Text()
		}
	}
	return ap.NewEncoder(o)
}

// apStartedObject is the request's start event (request_started or
// run_started): it names the request and its run, so it is the answer of a
// process (with or without wait). It is the logged event 1, encoded as
// getevents encodes it (same id, same timestamp); should the head of the
// log be gone, one made from the request's creation.
func (s *Server) apStartedObject(x *store.Exchange) ([]byte, error) {
	ev := &translate.Event{Kind: translate.KindState, State: translate.StateSubmitted, Time: x.Created, Seq: 1}
	if evs, err := s.store.Events(x.ID, 0); err == nil && len(evs) > 0 && evs[0].Seq == 1 &&
		evs[0].Kind == translate.KindState && evs[0].State == translate.StateSubmitted {
		ev = evs[0]
	}
	lines := apEncoder(x).Encode(nil, ev, ev.Seq)
	for obj := range ap.Objects(lines) {
		return obj, nil
	}
	return []byte(`{}`), nil
}

func apStoreError(ctx *fasthttp.RequestCtx, err error) {
	switch {
	case errors.Is(err, store.ErrExpired):
		apError(ctx, fasthttp.StatusGone, "EVENTS_EXPIRED", "the events after since have expired from the log; GET the request's state instead")
	case errors.Is(err, store.ErrNotFound):
		apError(ctx, fasthttp.StatusNotFound, "REQUEST_NOT_FOUND", "the request expired")
	default:
		apError(ctx, fasthttp.StatusInternalServerError, translate.CodeInternal, err.Error())
	}
}

// apBool reads a query flag the way FastAPI does (true, True, 1, yes, on).
func apBool(v []byte) bool {
	switch string(v) {
	case "true", "True", "TRUE", "1", "yes", "on":
		return true
	}
	return false
}

// apUint reads since or Last-Event-ID: absent is 0; ok is false for a value
// that is not a non-negative integer.
func apUint(v []byte) (uint64, bool) {
	if len(v) == 0 {
		return 0, true
	}
	n, err := strconv.ParseUint(string(v), 10, 64)
	return n, err == nil
}
