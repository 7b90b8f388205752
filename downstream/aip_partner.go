package downstream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tidwall/gjson"
	"github.com/valyala/fasthttp"

	"github.com/agentbridge/bridge/internal/store"
	"github.com/agentbridge/bridge/translate"
	"github.com/agentbridge/bridge/translate/aip"
)

// The AIP Partner role: the bridge answers AIP v01.00 Leaders on the shared
// listener and fronts whatever upstream agent the route names.
//
// Endpoints. Every path dispatches on the JSON-RPC method of the body, so
// clients that mount one path per method ({Prefix}/rpc, /stream,
// /notification/set|get|delete|start, /group, /group/rpc) and clients that
// post everything to one URL (any POST on the Prefix root whose body has a
// top-level "jsonrpc") both work. GET /.well-known/acs.json (at the root and
// under Prefix) serves an ACS document of the fronted agent. Answers are
// HTTP 200 with a JSON-RPC body, errors included (spec §5.2 codes, always
// echoing the request id); only a body over the size limit is HTTP 413
// (fasthttp's ErrorHandler) and a method other than POST HTTP 405.
//
// Tasks. An AIP task is an exchange of the store (Downstream aip,
// ClientID = taskId, Session = sessionId, alias "aip:task:<taskId>"), and
// its event log is the whole truth about it: the upstream's events (logged
// by runTurn), the Leader's accepted messages (logged as KindMessageEnd
// events of role user whose Ext carries the AIP message, so that a replay
// knows where each turn starts), and the states the bridge sets itself
// (accepted, canceled, completed). The Task a Leader sees is the log folded
// through an aip.TaskBuilder. The partner keeps one builder per task in a
// bounded map, folded incrementally from the log (by the turn hook and
// before every answer, so it is never behind): ids the builder has to invent
// stay stable between polls. An entry whose exchange the store dropped is
// removed when the map is full; one that is missing (evicted, or a new
// process over a shared store) is rebuilt from the log, and when the log's
// head has expired, from the exchange's state alone.
//
// Choices where the spec is silent or ambiguous:
//   - Commands that do not apply in the current state are ignored and answer
//     the current task (spec §4.2); start on an existing task answers it;
//     continue without data items is ignored (as the reference does); cancel
//     on a terminal task is ignored too, unless AIPOptions.StrictCancel asks
//     for -32002. get messages are not added to messageHistory (a polling
//     Leader would grow it without bound).
//   - An upstream "completed" becomes awaiting-completion with the products
//     (the Leader's complete is settled in the bridge), unless
//     AIPOptions.CompleteDirectly. A start with no routed agent, or while the
//     server shuts down, is rejected.
//   - rpc start and continue answer when the task settles or after the
//     response timeout; notification/start answers once the task is working
//     (as the spec's example shows), callbacks tell the rest. Answers to
//     start/continue/cancel/complete and callbacks carry the Task without
//     messageHistory and statusHistory, as the spec's examples do; get
//     carries both, filtered by its commandParams.
//   - Streams: the accepted state is folded silently, so the first frame is
//     the Task in working, as the spec's example shows. A stream closes
//     after a terminal state and after awaiting-input (the Leader answers
//     with a continue, which on the stream method opens the next stream). In
//     awaiting-completion it stays open (§6.2.6(2): the Leader sends complete
//     or cancel on another connection and the Partner then closes the stream
//     after the final state); an rpc continue makes it carry the next turn,
//     while a newer stream of the same task (continue or re-stream) ends it,
//     so no event goes out twice. A start or continue the state ignores gets
//     one Task frame (eventSeq = the log position) and the stream closes.
//   - Notifications go to every config registered for the task, on the
//     states notification/start asked for (all changes when it named none,
//     or when the task was started otherwise), consecutive repeats of a
//     state excepted.
type AIPOptions struct {
	// Prefix is put before every AIP path ("/acps-aip-v1" serves
	// /acps-aip-v1/rpc, …); empty serves /rpc, /stream, /notification/….
	Prefix string

	// AIC is the Partner's Agent Identity Code: the senderId of the partner
	// messages it writes and the aic of its ACS document.
	AIC string
	// Name, Description and Version describe the fronted agent in the ACS
	// document (defaults: the route's upstream name, a generic description,
	// "1.0.0").
	Name        string
	Description string
	Version     string
	// Skills are the ACS skills of the fronted agent.
	Skills []ACSSkill
	// InputModes and OutputModes are the ACS default modes (default
	// ["text/plain"]). When InputModes is set, a start or continue whose file
	// items have a MIME type outside it gets -32005.
	InputModes  []string
	OutputModes []string

	// DisableNotifications turns notification/* off: those methods answer
	// -32003 and the ACS says notification:false. Notifications are on by
	// default.
	DisableNotifications bool
	// CompleteDirectly completes a task when its upstream completes, instead
	// of waiting in awaiting-completion for the Leader's complete.
	CompleteDirectly bool
	// StrictCancel answers cancel on a terminal task with -32002 instead of
	// ignoring it.
	StrictCancel bool

	// ResponseTimeout bounds how long rpc start and continue wait for the
	// task to settle before answering (default 5s). A start's
	// responseTimeout overrides it, up to MaxResponseTimeout (default 60s).
	ResponseTimeout    time.Duration
	MaxResponseTimeout time.Duration
	// AwaitingInputTimeout and AwaitingCompletionTimeout apply when a start
	// names none (0: wait for ever). A task that waits for input longer is
	// canceled; one that waits for completion longer is completed.
	AwaitingInputTimeout      time.Duration
	AwaitingCompletionTimeout time.Duration
	// TurnTimeout bounds one upstream turn (0: no bound beyond the
	// upstream's own timeouts).
	TurnTimeout time.Duration

	// MaxTasks bounds the tasks whose builders are kept in memory and the
	// tasks with notification configs (default 10000).
	MaxTasks int
	// MaxNotificationConfigs bounds the configs of one task (default 8).
	MaxNotificationConfigs int
	// NotifyAttempts (default 3), NotifyBackoff (default 200ms, doubling,
	// at most 1s) and NotifyTimeout (default 5s per attempt) shape callback
	// deliveries.
	NotifyAttempts int
	NotifyBackoff  time.Duration
	NotifyTimeout  time.Duration
}

func (o *AIPOptions) prefix() string { return strings.TrimSuffix(o.Prefix, "/") }

func (o *AIPOptions) responseTimeout(p aip.StartParams) time.Duration {
	d := o.ResponseTimeout
	if d <= 0 {
		d = 5 * time.Second
	}
	if p.ResponseTimeout > 0 {
		d = time.Duration(p.ResponseTimeout) * time.Millisecond
	}
	maxD := o.MaxResponseTimeout
	if maxD <= 0 {
		maxD = time.Minute
	}
	return min(d, maxD)
}

func (o *AIPOptions) maxTasks() int {
	if o.MaxTasks <= 0 {
		return 10000
	}
	return o.MaxTasks
}

// aipTask is the partner's state of one task. Lock order: cmd, then mu,
// then the partner's locks; nothing waits on a turn while holding mu.
type aipTask struct {
	xid     string
	taskID  string
	session string

	// cmd serializes the commands that change the task (start's setup,
	// continue, cancel, complete, timeouts).
	cmd sync.Mutex

	mu       sync.Mutex
	b        *aip.TaskBuilder
	seq      uint64 // last log seq folded into b
	last     aip.TaskState
	timer    *time.Timer
	gen      uint64 // bumped on every disarm; a timer of an older gen does nothing
	params   aip.StartParams
	headers  map[string]string // trace headers of the start, for callbacks
	states   []aip.TaskState   // notifyOnStates of notification/start
	accepted time.Time

	canceling atomic.Bool   // a Leader's cancel is stopping the turn
	streamGen atomic.Uint64 // the newest stream of the task
}

func (t *aipTask) state() aip.TaskState {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.b.State()
}

// disarm stops the task's timer; t.mu must be held.
func (t *aipTask) disarm() {
	t.gen++
	if t.timer != nil {
		t.timer.Stop()
		t.timer = nil
	}
}

// aipPartner is the Server's AIP state. Its zero value is ready.
type aipPartner struct {
	startMu sync.Mutex // serializes the creation of tasks

	mu    sync.Mutex
	tasks map[string]*aipTask // by exchange id

	cmu     sync.Mutex
	configs map[string][]aip.NotificationConfig // by task id

	smu     sync.Mutex
	streams map[*aipStreamHandle]struct{}
	sclosed bool

	notifier notifier
}

const aipTaskKey = "aip:task:"

// matchAIP reports whether the request is for the AIP Partner endpoints.
func (s *Server) matchAIP(ctx *fasthttp.RequestCtx, rest []byte) bool {
	p := s.opts.AIP.prefix()
	if isACSPath(rest, p) {
		return ctx.IsGet() || ctx.IsHead()
	}
	if !bytes.HasPrefix(rest, []byte(p)) {
		return false
	}
	switch string(rest[len(p):]) {
	case "/rpc", "/stream", "/notification/set", "/notification/get", "/notification/delete",
		"/notification/start", "/group", "/group/rpc":
		return true
	case "", "/":
		return ctx.IsPost() && gjson.GetBytes(ctx.PostBody(), "jsonrpc").Exists()
	}
	return false
}

func isACSPath(rest []byte, prefix string) bool {
	const wk = "/.well-known/acs.json"
	return string(rest) == wk || (prefix != "" && string(rest) == prefix+wk)
}

// serveAIP answers an AIP request.
func (s *Server) serveAIP(ctx *fasthttp.RequestCtx, route *Route, rest []byte) {
	if isACSPath(rest, s.opts.AIP.prefix()) {
		s.serveACS(ctx, route)
		return
	}
	var id json.RawMessage
	defer func() {
		if r := recover(); r != nil {
			s.log.Error("AIP handler panic", "panic", r, "stack", string(debug.Stack()))
			ctx.ResetBody()
			rpcError(ctx, id, aip.NewError(aip.CodeInternalError, "internal error"))
		}
	}()
	if !ctx.IsPost() {
		ctx.Response.Header.Set("Allow", "POST")
		rpcError(ctx, nil, aip.NewError(aip.CodeInvalidRequest, "use POST"))
		ctx.SetStatusCode(fasthttp.StatusMethodNotAllowed)
		return
	}
	req, perr := aip.ParseRequest(ctx.PostBody())
	id = append(json.RawMessage(nil), req.ResponseID()...)
	if perr != nil {
		rpcError(ctx, id, perr)
		return
	}
	switch req.Method {
	case aip.MethodGroup:
		rpcError(ctx, id, aip.NewError(aip.CodeGroupNotSupported, "this Partner serves the direct mode only"))
	case aip.MethodNotificationSet, aip.MethodNotificationGet, aip.MethodNotificationDelete, aip.MethodNotificationStart:
		if s.opts.AIP.DisableNotifications {
			rpcError(ctx, id, aip.NewError(aip.CodeNotificationNotSupported, ""))
			return
		}
		if req.Method == aip.MethodNotificationStart {
			s.aipRPC(ctx, route, req, id)
			return
		}
		s.aipNotificationConfig(ctx, req, id)
	case aip.MethodStream:
		s.aipStream(ctx, route, req, id)
	default:
		s.aipRPC(ctx, route, req, id)
	}
}

func rpcError(ctx *fasthttp.RequestCtx, id json.RawMessage, e *aip.Error) {
	ctx.SetStatusCode(fasthttp.StatusOK)
	ctx.SetContentType("application/json")
	ctx.SetBody(aip.AppendErrorResponse(nil, id, e))
}

func rpcResult(ctx *fasthttp.RequestCtx, body []byte) {
	ctx.SetStatusCode(fasthttp.StatusOK)
	ctx.SetContentType("application/json")
	ctx.SetBody(body)
}

func taskNotFound(taskID string) *aip.Error {
	e := aip.NewError(aip.CodeTaskNotFound, "")
	b, _ := json.Marshal(map[string]string{"taskId": taskID, "details": "no such task, or it expired"})
	e.Data = b
	return e
}

// aipRPC serves the rpc method and notification/start.
func (s *Server) aipRPC(ctx *fasthttp.RequestCtx, route *Route, req *aip.Request, id json.RawMessage) {
	m := req.Message
	if m.Command == aip.CommandStart {
		var sub *aipSubscription
		if req.Method == aip.MethodNotificationStart {
			np, _ := m.NotificationStartParams()
			if _, ok := s.aip.config(m.TaskID, np.NotificationConfigID); !ok {
				e := aip.NewError(aip.CodeTaskNotFound, "")
				b, _ := json.Marshal(map[string]string{"taskId": m.TaskID, "notificationConfigId": np.NotificationConfigID,
					"details": "no such notification config for this task; register it with notification/set"})
				e.Data = b
				rpcError(ctx, id, e)
				return
			}
			sub = &aipSubscription{states: np.NotifyOnStates}
		}
		t, seq, started, aerr := s.aipStart(ctx, route, req.Method, m, sub)
		if aerr != nil {
			rpcError(ctx, id, aerr)
			return
		}
		if started {
			stop := func(ev *translate.Event) bool { return ev.Kind == translate.KindState && ev.State.Settled() }
			if sub != nil {
				stop = func(ev *translate.Event) bool {
					return ev.Kind == translate.KindState && ev.State != translate.StateSubmitted
				}
			}
			s.aipWait(t, seq, s.opts.AIP.responseTimeout(t.params), stop)
		}
		rpcResult(ctx, s.aipAnswer(t, id, nil))
		return
	}
	t, err := s.aipLookup(m.TaskID)
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			rpcError(ctx, id, taskNotFound(m.TaskID))
		} else {
			rpcError(ctx, id, aip.NewError(aip.CodeInternalError, err.Error()))
		}
		return
	}
	switch m.Command {
	case aip.CommandGet:
		gp, _ := m.GetParams()
		s.aipSync(t)
		rpcResult(ctx, s.aipAnswer(t, id, &gp))
		return
	case aip.CommandContinue:
		seq, began, aerr := s.aipContinue(ctx, route, req.Method, t, m)
		if aerr != nil {
			rpcError(ctx, id, aerr)
			return
		}
		if began {
			s.aipWait(t, seq, s.opts.AIP.responseTimeout(t.params), nil)
		}
	case aip.CommandCancel:
		if aerr := s.aipCancel(t, m); aerr != nil {
			rpcError(ctx, id, aerr)
			return
		}
	case aip.CommandComplete:
		s.aipComplete(t, m)
	}
	rpcResult(ctx, s.aipAnswer(t, id, nil))
}

// aipAnswer encodes the response with the task: without histories, or with
// them filtered by gp for get.
func (s *Server) aipAnswer(t *aipTask, id json.RawMessage, gp *aip.GetParams) []byte {
	s.aipSync(t)
	t.mu.Lock()
	defer t.mu.Unlock()
	task := t.b.Task()
	if gp != nil {
		return aip.AppendObjectResponse(nil, id, aip.FilterHistory(task, *gp))
	}
	return aip.AppendObjectResponse(nil, id, briefTask(task))
}

// briefTask is t without its histories, as the spec's examples answer.
func briefTask(t *aip.Task) *aip.Task {
	c := *t
	c.MessageHistory = nil
	c.StatusHistory = nil
	return &c
}

// aipWait follows the task's log after seq until stop (nil: a settled
// state) is the newest event, or d passes.
func (s *Server) aipWait(t *aipTask, after uint64, d time.Duration, stop func(*translate.Event) bool) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	_ = s.follow(ctx, t.xid, after, stop, func(*translate.Event) error { return nil })
}

// aipLookup returns the task with the Leader's id.
func (s *Server) aipLookup(taskID string) (*aipTask, error) {
	x, err := s.store.Find(aipTaskKey + taskID)
	if err != nil {
		return nil, err
	}
	return s.aip.entry(s, x), nil
}

// entry returns the partner's state of exchange x, making it (to be
// rebuilt from the log) when there is none.
func (p *aipPartner) entry(s *Server, x *store.Exchange) *aipTask {
	p.mu.Lock()
	if t := p.tasks[x.ID]; t != nil {
		p.mu.Unlock()
		return t
	}
	p.mu.Unlock()
	return p.add(s, x)
}

// add registers a new entry for x (or returns the one a racing caller
// added), evicting entries when the map is full.
func (p *aipPartner) add(s *Server, x *store.Exchange) *aipTask {
	t := &aipTask{xid: x.ID, taskID: x.ClientID, session: x.Session}
	t.b = aip.NewTaskBuilder(t.taskID, t.session)
	t.b.SenderID = s.opts.AIP.AIC
	var victims []*aipTask
	p.mu.Lock()
	if p.tasks == nil {
		p.tasks = map[string]*aipTask{}
	}
	if old := p.tasks[x.ID]; old != nil {
		p.mu.Unlock()
		return old
	}
	if len(p.tasks) >= s.opts.AIP.maxTasks() {
		victims = p.evictLocked(s)
	}
	p.tasks[x.ID] = t
	p.mu.Unlock()
	for _, v := range victims {
		v.mu.Lock()
		v.disarm()
		v.mu.Unlock()
	}
	return t
}

// evictLocked frees room in the task map: entries whose exchange is gone
// first (their configs go too), then entries of terminal tasks (they can be
// rebuilt from the log), then, if need be, any idle entry. p.mu is held.
func (p *aipPartner) evictLocked(s *Server) []*aipTask {
	var out []*aipTask
	var gone []string
	for id, t := range p.tasks {
		x, err := s.store.Get(id)
		switch {
		case errors.Is(err, store.ErrNotFound):
			gone = append(gone, t.taskID)
		case err == nil && x.State.Terminal():
		default:
			continue
		}
		delete(p.tasks, id)
		out = append(out, t)
	}
	for id, t := range p.tasks {
		if len(p.tasks) < s.opts.AIP.maxTasks() {
			break
		}
		if s.turnRunning(id) {
			continue
		}
		delete(p.tasks, id)
		out = append(out, t)
	}
	if len(gone) > 0 {
		p.cmu.Lock()
		for _, id := range gone {
			delete(p.configs, id)
		}
		p.cmu.Unlock()
	}
	return out
}

// aipSync folds the log events the task's builder has not seen yet.
func (s *Server) aipSync(t *aipTask) {
	t.mu.Lock()
	defer t.mu.Unlock()
	evs, err := s.store.Events(t.xid, t.seq)
	if errors.Is(err, store.ErrExpired) && t.seq == 0 {
		// The head of the log is gone: start from the exchange's state.
		if x, gerr := s.store.Get(t.xid); gerr == nil {
			if st, ok := aip.StateFromCanonical(x.State); ok {
				t.b.SetState(st, nil, x.Updated)
				t.last = st
			}
			t.seq = x.LastSeq
			evs, _ = s.store.Events(t.xid, t.seq)
		}
	}
	for _, ev := range evs {
		msTime(ev)
		if m, ok := leaderMessage(ev); ok {
			t.b.AddMessage(m)
		} else {
			t.b.Apply(ev)
		}
		t.seq = ev.Seq
		if st := t.b.State(); st != t.last {
			t.last = st
			s.aipStateChanged(t, st)
		}
	}
}

// msTime cuts an event's time to the milliseconds the wire shows, so that
// a Leader passing a stateChangedAt or sentAt it saw back to get's filters
// does not get that entry again.
func msTime(ev *translate.Event) { ev.Time = ev.Time.Truncate(time.Millisecond) }

// aipStateChanged arms the timeouts of the new state and sends the
// notifications. t.mu is held.
func (s *Server) aipStateChanged(t *aipTask, st aip.TaskState) {
	t.disarm()
	o := &s.opts.AIP
	switch st {
	case aip.StateAwaitingInput:
		d := o.AwaitingInputTimeout
		if t.params.AwaitingInputTimeout > 0 {
			d = time.Duration(t.params.AwaitingInputTimeout) * time.Millisecond
		}
		if d > 0 {
			s.aipArm(t, d, aip.StateCanceled)
		}
	case aip.StateAwaitingCompletion:
		d := o.AwaitingCompletionTimeout
		if t.params.AwaitingCompletionTimeout > 0 {
			d = time.Duration(t.params.AwaitingCompletionTimeout) * time.Millisecond
		}
		if d > 0 {
			s.aipArm(t, d, aip.StateCompleted)
		}
	}
	if !o.DisableNotifications {
		s.aipNotify(t, st)
	}
}

// aipArm starts the task's timer: after d, a task still in the state it
// was armed in moves to `to`. t.mu is held.
func (s *Server) aipArm(t *aipTask, d time.Duration, to aip.TaskState) {
	if s.closing.Load() {
		return
	}
	gen := t.gen
	t.timer = time.AfterFunc(d, func() { s.aipTimeout(t, gen, to) })
}

func (s *Server) aipTimeout(t *aipTask, gen uint64, to aip.TaskState) {
	if s.closing.Load() {
		return
	}
	t.cmd.Lock()
	defer t.cmd.Unlock()
	s.aipSync(t)
	t.mu.Lock()
	ok := gen == t.gen
	st := t.b.State()
	t.mu.Unlock()
	if !ok {
		return
	}
	ev := &translate.Event{Kind: translate.KindState, Time: time.Now()}
	switch {
	case to == aip.StateCanceled && st == aip.StateAwaitingInput:
		ev.State = translate.StateCanceled
		ev.Parts = []translate.Part{translate.TextPart("canceled: no input came within the awaiting-input timeout")}
	case to == aip.StateCompleted && st == aip.StateAwaitingCompletion:
		ev.State = translate.StateCompleted
	default:
		return
	}
	s.aipAppend(t, ev)
}

// aipAppend logs an event the partner makes itself and folds it.
func (s *Server) aipAppend(t *aipTask, ev *translate.Event) (uint64, error) {
	seq, err := s.store.Append(t.xid, ev)
	if err != nil {
		s.log.Warn("AIP task log append failed", "exchange", t.xid, "task", t.taskID, "error", err)
		return 0, err
	}
	s.aipSync(t)
	return seq, nil
}

// leaderEvent is the log event of a Leader's accepted message.
func leaderEvent(m *aip.Message) *translate.Event {
	cm := aip.MessageToCanonical(m)
	raw := append([]byte(`{"leader":`), m.AppendJSON(nil)...)
	raw = append(raw, '}')
	return &translate.Event{Kind: translate.KindMessageEnd, MessageID: m.ID, Message: &cm,
		Ext: translate.Ext{Proto: translate.ProtoAIP, Raw: raw}, Time: time.Now()}
}

// leaderMessage recognises a leaderEvent.
func leaderMessage(ev *translate.Event) (*aip.Message, bool) {
	if ev.Kind != translate.KindMessageEnd || ev.Ext.Proto != translate.ProtoAIP {
		return nil, false
	}
	r := gjson.GetBytes(ev.Ext.Raw, "leader")
	if !r.IsObject() {
		return nil, false
	}
	m, err := aip.DecodeMessage([]byte(r.Raw))
	if err != nil {
		return nil, false
	}
	return m, true
}

// checkModes answers -32005 when a file item's MIME type is outside the
// configured input modes.
func (s *Server) checkModes(m *aip.Message) *aip.Error {
	modes := s.opts.AIP.InputModes
	if len(modes) == 0 {
		return nil
	}
	for i := range m.DataItems {
		it := &m.DataItems[i]
		if it.Type != aip.ItemFile || it.MimeType == "" || modeAccepted(modes, it.MimeType) {
			continue
		}
		return aip.NewError(aip.CodeContentTypeNotSupported,
			fmt.Sprintf("media type %q is not accepted; accepted: %s", it.MimeType, strings.Join(modes, ", ")))
	}
	return nil
}

func modeAccepted(modes []string, mime string) bool {
	mime = strings.ToLower(strings.TrimSpace(strings.SplitN(mime, ";", 2)[0]))
	for _, m := range modes {
		m = strings.ToLower(m)
		if m == mime || m == "*/*" || (strings.HasSuffix(m, "/*") && strings.HasPrefix(mime, strings.TrimSuffix(m, "*"))) {
			return true
		}
	}
	return false
}

// aipStart starts a new task, or finds the existing one (started=false).
// seq is the log position of the start message: the new turn's events
// follow it.
func (s *Server) aipStart(ctx *fasthttp.RequestCtx, route *Route, method string, m *aip.Message, sub *aipSubscription) (t *aipTask, seq uint64, started bool, aerr *aip.Error) {
	if e := s.checkModes(m); e != nil {
		return nil, 0, false, e
	}
	p := &s.aip
	key := aipTaskKey + m.TaskID
	p.startMu.Lock()
	if x, err := s.store.Find(key); err == nil {
		p.startMu.Unlock()
		return p.entry(s, x), 0, false, nil
	}
	creq, err := aip.RequestFromMessage(method, m)
	if err != nil {
		p.startMu.Unlock()
		return nil, 0, false, aip.NewError(aip.CodeInvalidParams, err.Error())
	}
	if creq.Session == "" {
		creq.Session = m.TaskID
	}
	x := &store.Exchange{Downstream: translate.ProtoAIP, ClientID: m.TaskID, Session: creq.Session,
		User: creq.User, State: translate.StateSubmitted, Request: creq}
	if route != nil {
		x.Upstream, x.Route = route.Proto, route.Name
	}
	if err := s.store.Create(x); err != nil {
		p.startMu.Unlock()
		return nil, 0, false, aip.NewError(aip.CodeInternalError, err.Error())
	}
	if err := s.store.Alias(x.ID, key); err != nil {
		p.startMu.Unlock()
		return nil, 0, false, aip.NewError(aip.CodeInternalError, err.Error())
	}
	t = p.add(s, x)
	t.cmd.Lock()
	p.startMu.Unlock()
	defer t.cmd.Unlock()

	t.mu.Lock()
	t.params, _ = m.StartParams()
	t.headers = forwardHeaders(ctx)
	if sub != nil {
		t.states = sub.states
	}
	t.mu.Unlock()
	creq.Exchange = x.ID

	seq, err = s.aipAppend(t, leaderEvent(m))
	if err != nil {
		return t, 0, false, aip.NewError(aip.CodeInternalError, err.Error())
	}
	if route == nil || route.Agent == nil || s.closing.Load() {
		reason := "no upstream agent is routed for this request"
		if s.closing.Load() {
			reason = "the Partner is shutting down"
		}
		_, _ = s.aipAppend(t, &translate.Event{Kind: translate.KindState, State: translate.StateRejected,
			Parts: []translate.Part{translate.TextPart(reason)}, Time: time.Now()})
		return t, seq, true, nil
	}
	_, _ = s.aipAppend(t, &translate.Event{Kind: translate.KindState, State: translate.StateSubmitted, Time: time.Now()})
	s.aipRunTurn(t, route, creq)
	return t, seq, true, nil
}

// aipRunTurn runs one upstream turn of the task.
func (s *Server) aipRunTurn(t *aipTask, route *Route, creq *translate.Request) {
	r := *route
	r.Agent = &aipAgent{inner: route.Agent, t: t, direct: s.opts.AIP.CompleteDirectly}
	t.mu.Lock()
	headers := t.headers
	t.mu.Unlock()
	err := s.runTurn(t.xid, &r, creq, headers, s.opts.AIP.TurnTimeout, func(*translate.Event) { s.aipSync(t) })
	if err != nil {
		_, _ = s.aipAppend(t, &translate.Event{Kind: translate.KindState, State: translate.StateFailed,
			Err: &translate.Error{Code: translate.CodeInternal, Message: err.Error()}, Time: time.Now()})
	}
}

// aipWaitIdle waits (briefly) for the previous turn's goroutine to finish
// after its settled event was logged.
func (s *Server) aipWaitIdle(xid string) {
	for deadline := time.Now().Add(2 * time.Second); s.turnRunning(xid) && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
}

// aipContinue gives the task new input when it waits for it (awaiting-input
// or awaiting-completion); otherwise the command is ignored (began=false).
func (s *Server) aipContinue(ctx *fasthttp.RequestCtx, route *Route, method string, t *aipTask, m *aip.Message) (seq uint64, began bool, aerr *aip.Error) {
	if e := s.checkModes(m); e != nil {
		return 0, false, e
	}
	t.cmd.Lock()
	defer t.cmd.Unlock()
	s.aipSync(t)
	st := t.state()
	if (st != aip.StateAwaitingInput && st != aip.StateAwaitingCompletion) || len(m.DataItems) == 0 {
		return 0, false, nil
	}
	if route == nil || route.Agent == nil {
		return 0, false, aip.NewError(aip.CodeInternalError, "no upstream agent is routed for this request")
	}
	creq, err := aip.RequestFromMessage(method, m)
	if err != nil {
		return 0, false, aip.NewError(aip.CodeInvalidParams, err.Error())
	}
	creq.Command = translate.CommandContinue
	creq.Session = t.session
	creq.Exchange = t.xid
	s.aipWaitIdle(t.xid)
	t.mu.Lock()
	t.disarm()
	if h := forwardHeaders(ctx); h != nil {
		t.headers = h
	}
	t.mu.Unlock()
	seq, err = s.aipAppend(t, leaderEvent(m))
	if err != nil {
		return 0, false, aip.NewError(aip.CodeInternalError, err.Error())
	}
	s.aipRunTurn(t, route, creq)
	return seq, true, nil
}

// aipCancel cancels a task that is not over; a terminal task is left as it
// is (or -32002 with StrictCancel).
func (s *Server) aipCancel(t *aipTask, m *aip.Message) *aip.Error {
	t.cmd.Lock()
	defer t.cmd.Unlock()
	s.aipSync(t)
	st := t.state()
	if st == "" {
		return nil
	}
	if st.Terminal() {
		if s.opts.AIP.StrictCancel {
			e := aip.NewError(aip.CodeTaskNotCancelable, "the task is "+string(st))
			return e
		}
		return nil
	}
	t.mu.Lock()
	t.disarm()
	t.mu.Unlock()
	_, _ = s.aipAppend(t, leaderEvent(m))
	t.canceling.Store(true)
	s.cancelTurn(t.xid)
	t.canceling.Store(false)
	s.aipSync(t)
	if !t.state().Terminal() {
		_, _ = s.aipAppend(t, &translate.Event{Kind: translate.KindState, State: translate.StateCanceled, Time: time.Now()})
	}
	return nil
}

// aipComplete completes a task awaiting completion; otherwise the command
// is ignored.
func (s *Server) aipComplete(t *aipTask, m *aip.Message) {
	t.cmd.Lock()
	defer t.cmd.Unlock()
	s.aipSync(t)
	if t.state() != aip.StateAwaitingCompletion {
		return
	}
	t.mu.Lock()
	t.disarm()
	t.mu.Unlock()
	_, _ = s.aipAppend(t, leaderEvent(m))
	_, _ = s.aipAppend(t, &translate.Event{Kind: translate.KindState, State: translate.StateCompleted, Time: time.Now()})
}

// aipShutdown ends the partner's streams, timers and callback workers.
func (s *Server) aipCloseStreams() { s.aip.closeStreams() }

func (s *Server) aipShutdown() {
	p := &s.aip
	p.mu.Lock()
	ts := make([]*aipTask, 0, len(p.tasks))
	for _, t := range p.tasks {
		ts = append(ts, t)
	}
	p.mu.Unlock()
	for _, t := range ts {
		t.mu.Lock()
		t.disarm()
		t.mu.Unlock()
	}
	p.notifier.stop()
}
