package downstream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fasthttp/websocket"
	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"
	"github.com/valyala/fasthttp"

	"github.com/agentbridge/bridge/internal/store"
	"github.com/agentbridge/bridge/translate"
	ap "github.com/agentbridge/bridge/translate/agentprotocol"
)

// The Agent Protocol WebSocket: GET {agent}/ws upgrades (the draft names
// WebSocket as an optional transport and defines nothing more; this framing
// is the bridge's, see README.md, "Agent Protocol over WebSocket").
//
// Client → server: one JSON object per text (or binary) frame, the body a
// REST POST {agent}/process takes (ChatRequest {input}, ResumeWithInput
// {request_keys}, CancelRequest {request_id}, ConfigureRequest {args}; the
// kind is read from the fields, as over REST), plus envelope members that
// are removed before the body is read:
//
//	"op"       "process" (default), "run" (the run dialect's names), or
//	           "getevents" (replay and follow a request: its request_id,
//	           and "since"), or "describe"
//	"since"    for getevents: the last event id the client has
//	"dialect"  "process", "run" or "agentic": the names of the events
//	"ref"      any JSON value, echoed in the ack and error frames
//
// A chat may carry its own request_id; without one the server assigns it.
//
// Server → client: one JSON object per text frame.
//   - {"type":"ack","op":…,"request_id":…,"run_id":…,"ref":…} answers each
//     accepted frame, before any event it causes (so the ack is how a
//     client learns an assigned id; acks come in the order of the frames).
//     The id members are named as in the request's dialect.
//   - The request's events, exactly as getevents writes them: each carries
//     its id (the log sequence) and the request's id (request_id, or run_id
//     in the run dialect), so any number of requests multiplex on one
//     socket. A chat's events follow from its request_started to its
//     request_completed, through a wait_for_input (a resume on the socket
//     then goes on in the same subscription); a resume or cancel of a
//     request the socket does not follow subscribes from that point; a
//     getevents replays the events after since and follows to the end. A
//     socket follows a request at most once: a new subscription to it
//     replaces the old one without losing or repeating an event (except
//     that getevents replays from since, as asked).
//   - {"type":"error","code":…,"detail":…,"request_id":…,"ref":…} for a
//     frame that cannot be served: not JSON, an unknown op, a bad body
//     (the codes and texts of the REST errors), an unknown request. The
//     socket goes on serving the other requests.
//   - The descriptor for op describe.
//
// Keep-alive: the server pings every Options.KeepAlive (default 15 s,
// negative: never) and closes the socket (1001) when two pings in a row
// went unanswered. Frames above Options.MaxBodyBytes close the socket
// (1009). Closing the socket, or losing it, ends its subscriptions only:
// the turns run on, and a new socket (or SSE, or a poll) gets their events
// with getevents and since. Origin: the upgrader's default, same origin or
// none (agents send none).

// apWriteTimeout bounds one frame write.
const apWriteTimeout = 10 * time.Second

var errMissedPongs = errors.New("two keep-alive pings went unanswered")

// apWebSocket upgrades GET {agent}/ws.
func (s *Server) apWebSocket(ctx *fasthttp.RequestCtx, a apAgent) {
	if !ctx.IsGet() {
		ctx.Response.Header.Set("Allow", "GET")
		apError(ctx, fasthttp.StatusMethodNotAllowed, "METHOD_NOT_ALLOWED", "use GET with a WebSocket upgrade")
		return
	}
	if !websocket.FastHTTPIsWebSocketUpgrade(ctx) {
		apError(ctx, fasthttp.StatusBadRequest, translate.CodeBadRequest, "this is the WebSocket endpoint: send a WebSocket upgrade")
		return
	}
	// The upgrade callback runs after this handler returned: copy now.
	k := &apSocket{s: s, a: a, headers: forwardHeaders(ctx), out: make(chan []byte, 16), subs: map[string]*apSub{}}
	up := websocket.FastHTTPUpgrader{ReadBufferSize: 4096, WriteBufferSize: 4096}
	if err := up.Upgrade(ctx, k.serve); err != nil {
		status := ctx.Response.StatusCode()
		if status < 400 {
			status = fasthttp.StatusBadRequest
		}
		ctx.Response.Header.Del("Upgrade")
		ctx.Response.Header.Del("Sec-WebSocket-Accept")
		apError(ctx, status, "BAD_HANDSHAKE", err.Error())
	}
}

// apSocket is one Agent Protocol WebSocket.
type apSocket struct {
	s       *Server
	a       apAgent
	headers map[string]string
	out     chan []byte // frames for the write pump

	ctx    context.Context
	missed atomic.Int32 // pings sent since the last pong

	mu   sync.Mutex
	subs map[string]*apSub // by exchange id
	wg   sync.WaitGroup    // the subscriptions' goroutines
}

// apSub is a socket's subscription to one request.
type apSub struct {
	cancel context.CancelFunc
	done   chan struct{}
	sent   atomic.Uint64 // the last event id sent (or the since it began at)
}

// serve runs the socket: a read pump and a write pump report to one errc;
// the first error ends the socket, and the deferred stop (cancel, a past
// read deadline, Close) unblocks the other pump, which is waited for (the
// connection's buffers go back to a pool when serve returns), then the
// subscriptions.
func (k *apSocket) serve(c *websocket.Conn) {
	s := k.s
	s.active.Add(1)
	defer s.active.Add(-1)
	ctx, cancel := context.WithCancel(context.Background())
	k.ctx = ctx
	errc := make(chan error, 2)

	// Close does not end a hijacked fasthttp connection (fasthttp closes
	// it when serve returns): a past deadline unblocks the pumps instead.
	stop := func() {
		cancel()
		_ = c.SetReadDeadline(time.Unix(1, 0))
		_ = c.Close()
	}
	bye := func(reason string) {
		_ = c.WriteControl(websocket.CloseMessage,
			websocket.FormatCloseMessage(websocket.CloseGoingAway, reason), time.Now().Add(time.Second))
	}
	// Shutdown's close must not touch the connection once serve returned
	// (fasthttp reuses it then): ended, under endMu, tells it.
	var endMu sync.Mutex
	ended := false
	done, ok := s.ap.trackSocket(func() {
		endMu.Lock()
		defer endMu.Unlock()
		if !ended {
			bye("the bridge is shutting down")
			stop()
		}
	})
	if !ok {
		bye("the bridge is shutting down")
		stop()
		return
	}
	defer func() {
		endMu.Lock()
		ended = true
		endMu.Unlock()
		done()
	}()
	defer k.wg.Wait()
	defer func() { <-errc }()
	defer stop()

	c.SetReadLimit(int64(s.opts.MaxBodyBytes))
	c.SetPongHandler(func(string) error { k.missed.Store(0); return nil })
	go func() { errc <- k.readPump(c) }()
	go func() { errc <- k.writePump(c) }()
	if err := <-errc; err != nil && !errors.Is(err, context.Canceled) && !websocket.IsCloseError(err, websocket.CloseNormalClosure, websocket.CloseGoingAway) {
		s.log.Debug("Agent Protocol WebSocket closed", "agent", k.a.name, "error", err)
	}
}

func (k *apSocket) readPump(c *websocket.Conn) error {
	for {
		_, data, err := c.ReadMessage()
		if err != nil {
			return err
		}
		k.handle(data)
		if k.ctx.Err() != nil {
			return k.ctx.Err()
		}
	}
}

func (k *apSocket) writePump(c *websocket.Conn) error {
	var tick <-chan time.Time
	if ka := k.s.opts.KeepAlive; ka > 0 {
		t := time.NewTicker(ka)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-k.ctx.Done():
			return k.ctx.Err()
		case b := <-k.out:
			_ = c.SetWriteDeadline(time.Now().Add(apWriteTimeout))
			if err := c.WriteMessage(websocket.TextMessage, b); err != nil {
				return err
			}
		case <-tick:
			if k.missed.Load() >= 2 {
				_ = c.WriteControl(websocket.CloseMessage,
					websocket.FormatCloseMessage(websocket.CloseGoingAway, errMissedPongs.Error()), time.Now().Add(time.Second))
				return errMissedPongs
			}
			k.missed.Add(1)
			if err := c.WriteControl(websocket.PingMessage, nil, time.Now().Add(apWriteTimeout)); err != nil {
				return err
			}
		}
	}
}

// send queues a frame for the write pump; false when ctx ended first.
func (k *apSocket) send(ctx context.Context, b []byte) bool {
	select {
	case k.out <- b:
		return true
	case <-ctx.Done():
		return false
	}
}

// apWSError is an error frame.
type apWSError struct {
	Type      string          `json:"type"`
	Code      string          `json:"code"`
	Detail    string          `json:"detail"`
	RequestID string          `json:"request_id,omitempty"`
	Ref       json.RawMessage `json:"ref,omitempty"`
}

func (k *apSocket) sendError(ref json.RawMessage, reqID, code, msg string) {
	b, _ := json.Marshal(apWSError{Type: "error", Code: code, Detail: msg, RequestID: reqID, Ref: ref})
	k.send(k.ctx, b)
}

func (k *apSocket) sendAck(ref json.RawMessage, op string, x *store.Exchange) {
	turnKey, sessKey := "request_id", "run_id"
	switch apDialectOf(x) {
	case ap.DialectRun:
		turnKey, sessKey = "run_id", "thread_id"
	case ap.DialectAgentic:
		sessKey = "thread_id"
	}
	o := map[string]any{"type": "ack", "op": op, turnKey: x.ClientID, sessKey: x.Session}
	if ref != nil {
		o["ref"] = ref
	}
	b, _ := json.Marshal(o)
	k.send(k.ctx, b)
}

// The envelope members of a client frame.
var apEnvelope = []string{"op", "since", "dialect", "ref"}

// handle serves one client frame.
func (k *apSocket) handle(data []byte) {
	data = bytes.TrimSpace(data)
	if !gjson.ValidBytes(data) || len(data) == 0 || data[0] != '{' {
		k.sendError(nil, "", translate.CodeBadRequest, "a frame must be one JSON object (a request body, or {\"op\":\"getevents\",\"request_id\":…})")
		return
	}
	env := gjson.ParseBytes(data)
	var ref json.RawMessage
	if r := env.Get("ref"); r.Exists() {
		ref = json.RawMessage(r.Raw)
	}
	body := data
	for _, key := range apEnvelope {
		if env.Get(key).Exists() {
			body, _ = sjson.DeleteBytes(body, key)
		}
	}
	forced := ap.DialectUnknown
	if v := env.Get("dialect"); v.Exists() {
		if forced = ap.ParseDialect(v.String()); forced == ap.DialectUnknown {
			k.sendError(ref, "", translate.CodeBadRequest, "dialect must be process, run or agentic")
			return
		}
	}
	op := env.Get("op").String()
	switch op {
	case "", "process", "run", "stream_request":
		k.process(ref, body, op, forced)
	case "getevents", "get_events":
		k.getEvents(ref, env)
	case "describe":
		desc := ap.NewDescriptor(k.a.name, "the agent "+k.a.name+", fronted by the agent bridge", nil, nil, ap.DialectProcess)
		b, _ := ap.AppendDescriptor(nil, desc, ap.DialectProcess)
		k.send(k.ctx, b)
	default:
		k.sendError(ref, "", translate.CodeBadRequest, "unknown op "+env.Get("op").Raw+": want process, run, getevents or describe")
	}
}

func (k *apSocket) process(ref json.RawMessage, body []byte, op string, forced ap.Dialect) {
	if op != "run" {
		op = "process"
	}
	sub, e := apParse(body, op, forced)
	if e != nil {
		k.sendError(ref, gjson.GetBytes(body, "request_id").String(), e.code, e.msg)
		return
	}
	if sub.p.Kind == ap.KindConfigure {
		k.send(k.ctx, apConfigured(k.a, sub.dialect))
		return
	}
	// A resume or cancel goes on in the request's open subscription: stop
	// it before the command can log anything, so that the ack still comes
	// before every event the command causes, and the new subscription
	// starts where the old one stopped.
	var stopped bool
	var stoppedAt uint64
	if sub.req.Command != translate.CommandStart {
		if x0, ok := k.s.apFindRequest(k.a, sub.req.ID); ok {
			stoppedAt, stopped = k.stopSub(x0.ID)
		}
	}
	x, after, e := k.s.apCommand(k.a, sub, k.headers)
	if e != nil {
		k.sendError(ref, sub.req.ID, e.code, e.msg)
		return
	}
	if stopped {
		after = min(after, stoppedAt)
	}
	var name string
	switch sub.req.Command {
	case translate.CommandStart:
		name = "chat"
	case translate.CommandContinue:
		name = "resume"
	default:
		name = "cancel"
	}
	k.subscribe(ref, name, x, after, true)
}

func (k *apSocket) getEvents(ref json.RawMessage, env gjson.Result) {
	var id string
	for _, key := range []string{"request_id", "run_id", "thread_id"} {
		if id == "" {
			id = env.Get(key).String()
		}
	}
	if id == "" {
		k.sendError(ref, "", translate.CodeBadRequest, "getevents needs the request_id")
		return
	}
	var since uint64
	if v := env.Get("since"); v.Exists() {
		n, ok := apUint([]byte(v.String()))
		if !ok || (v.Type != gjson.Number && v.Type != gjson.String) {
			k.sendError(ref, id, translate.CodeBadRequest, "since must be an event id: a non-negative integer")
			return
		}
		since = n
	}
	x, ok := k.s.apFindRequest(k.a, id)
	if !ok {
		k.sendError(ref, id, "REQUEST_NOT_FOUND", "no request "+id+" at agent "+k.a.name+", or it expired")
		return
	}
	k.subscribe(ref, "getevents", x, since, false)
}

// stopSub ends the open subscription to exchange xid, if any, and reports
// the last event it sent.
func (k *apSocket) stopSub(xid string) (sent uint64, ok bool) {
	k.mu.Lock()
	old := k.subs[xid]
	k.mu.Unlock()
	if old == nil {
		return 0, false
	}
	old.cancel()
	<-old.done
	return old.sent.Load(), true
}

// subscribe acks the frame and follows x's events after since. A
// subscription to x already open is stopped first; with keep, the new one
// starts where the old one stopped when that is earlier, so no event is
// lost or repeated.
func (k *apSocket) subscribe(ref json.RawMessage, op string, x *store.Exchange, since uint64, keep bool) {
	k.mu.Lock()
	old := k.subs[x.ID]
	k.mu.Unlock()
	if old != nil {
		old.cancel()
		<-old.done
		if keep {
			since = min(since, old.sent.Load())
		}
	}
	if cur, err := k.s.store.Get(x.ID); err == nil {
		x = cur
	}
	k.sendAck(ref, op, x)
	sctx, cancel := context.WithCancel(k.ctx)
	sub := &apSub{cancel: cancel, done: make(chan struct{})}
	sub.sent.Store(since)
	k.mu.Lock()
	k.subs[x.ID] = sub
	k.mu.Unlock()
	k.wg.Add(1)
	go func() {
		defer k.wg.Done()
		defer close(sub.done)
		defer cancel()
		defer func() {
			k.mu.Lock()
			if k.subs[x.ID] == sub {
				delete(k.subs, x.ID)
			}
			k.mu.Unlock()
		}()
		err := k.s.apReplay(sctx, x, 0, since, true, nil, func(lines []byte, id uint64) error {
			for obj := range ap.Objects(lines) {
				if !k.send(sctx, bytes.Clone(obj)) {
					return sctx.Err()
				}
			}
			sub.sent.Store(id)
			return nil
		})
		switch {
		case errors.Is(err, store.ErrExpired):
			k.sendError(ref, x.ClientID, "EVENTS_EXPIRED", "the events after since have expired from the log")
		case errors.Is(err, store.ErrNotFound):
			k.sendError(ref, x.ClientID, "REQUEST_NOT_FOUND", "the request expired")
		}
	}()
}
