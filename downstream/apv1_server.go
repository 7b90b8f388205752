package downstream

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/agentbridge/bridge/internal/store"
	"github.com/agentbridge/bridge/translate"
	v1 "github.com/agentbridge/bridge/translate/agentprotocol/v1"
)

// The agentprotocol.ai v1 API (AI-Engineer-Foundation/agent-protocol,
// schemas/openapi.yml): /ap/v1/agent/tasks…, served on the shared listener
// in front of the route's upstream agent, whatever its protocol.
//
// Endpoints, exactly as the spec has them: POST and GET /ap/v1/agent/tasks,
// GET …/tasks/{task_id}, GET and POST …/{task_id}/steps, GET
// …/steps/{step_id}, GET and POST …/{task_id}/artifacts and GET
// …/artifacts/{artifact_id}. A trailing slash is tolerated. List answers
// are paginated (current_page, page_size; see v1.ParsePage) with the spec's
// envelope, the artifact list included.
//
// Tasks. A task is an exchange of the store (Downstream agentprotocol,
// Meta dialect "v1", ClientID = Session = the task id, alias
// "apv1:task:<task_id>"); its event log holds every turn of the upstream
// (logged by runTurn) and the user input of each step (a user message). The
// server keeps, beside it, a bounded index of the tasks it created
// (APv1Options.MaxTasks, the oldest dropped first) with their input,
// steps and artifacts. A task whose exchange the store dropped (count or age
// bound) is gone: every path answers 404 for it and lists omit it. Tasks
// belong to the route they were created under: another route's paths do not
// see them.
//
// Steps. A step is one turn of the upstream agent: the first starts the
// session (with the task's input when the step has none), every later one
// continues it. POST waits until the turn settles, at most
// APv1Options.StepTimeout, and answers the Step folded by a v1.StepBuilder:
// output is the reply text (then the agent's question, or "Error:
// <message>" for a failure), status completed, is_last unless the agent
// waits for input. additional_output holds {"state", "error", "usage"} and,
// when the agent used tools, "tool_calls": [{call_id, name, kind,
// arguments, output, is_error}] (the builder leaves tools out of the text).
//
// Choices where the spec is silent:
//   - A step posted after the last one (is_last true) is a new turn in the
//     same session: the agent gets the input as a continuation of the
//     conversation, and the Step is last again when that turn ends. (The
//     conformance suite requires 200 there.)
//   - A step that outlives StepTimeout is answered as it stands, status
//     running and is_last false; its turn goes on (up to TurnTimeout) and GET
//     …/steps/{step_id} shows it complete later. A POST of a step while the
//     previous one still runs answers 409 with {"message"}.
//   - Bad bodies and query values answer 400 {"message"} (the spec names
//     422 for bodies; the bridge answers 400 for every malformed request,
//     as on its other protocols); wrong methods 405 with Allow; a step when
//     no upstream agent is routed, or while the server shuts down, 503.
//   - Uploads (multipart field file, optional relative_path) are kept in a
//     bounded in-memory store owned by the server: a file past
//     MaxArtifactBytes answers 413; past MaxArtifactTotalBytes or
//     MaxArtifacts the oldest stored bytes are dropped. Artifacts stay
//     listed when their bytes were dropped; downloading them answers 404.
//   - Artifacts the agent produced are listed from the steps (agent_created
//     true). Content the bridge holds (inline bytes, text, data, data: URIs)
//     downloads as bytes; an artifact that is only a URI (the reference
//     agent's https://example.com/report.txt) answers 302 Found to that URI,
//     with a small JSON body {artifact_id, file_name, uri}.
//   - Downloads are application/octet-stream with Content-Disposition
//     attachment and the file name. Tasks are listed oldest first.
type APv1Options struct {
	// StepTimeout bounds how long POST …/steps waits for the turn to
	// settle (default 60s).
	StepTimeout time.Duration
	// TurnTimeout bounds the life of one upstream turn (default 10m).
	TurnTimeout time.Duration
	// MaxTasks bounds the tasks indexed (default 10000); MaxStepsPerTask
	// the steps kept per task (default 1000, the oldest dropped).
	MaxTasks        int
	MaxStepsPerTask int
	// MaxArtifactBytes bounds one artifact's bytes (default 2 MiB; larger
	// uploads get 413); MaxArtifactTotalBytes (default 64 MiB) and
	// MaxArtifacts (default 1000) bound what the artifact store holds.
	MaxArtifactBytes      int
	MaxArtifactTotalBytes int64
	MaxArtifacts          int
}

func (o APv1Options) withDefaults() APv1Options {
	if o.StepTimeout <= 0 {
		o.StepTimeout = 60 * time.Second
	}
	if o.TurnTimeout <= 0 {
		o.TurnTimeout = 10 * time.Minute
	}
	if o.MaxTasks <= 0 {
		o.MaxTasks = 10000
	}
	if o.MaxStepsPerTask <= 0 {
		o.MaxStepsPerTask = 1000
	}
	if o.MaxArtifactBytes <= 0 {
		o.MaxArtifactBytes = 2 << 20
	}
	if o.MaxArtifactTotalBytes <= 0 {
		o.MaxArtifactTotalBytes = 64 << 20
	}
	if o.MaxArtifacts <= 0 {
		o.MaxArtifacts = 1000
	}
	if int64(o.MaxArtifactBytes) > o.MaxArtifactTotalBytes {
		o.MaxArtifactBytes = int(o.MaxArtifactTotalBytes)
	}
	return o
}

const (
	apv1Base    = "/ap/v1/agent/tasks"
	apv1TaskKey = "apv1:task:"
)

// matchAPv1 reports whether the request is for the agentprotocol.ai v1
// API under /ap/v1/.
func (s *Server) matchAPv1(rest []byte) bool {
	return bytes.HasPrefix(rest, []byte("/ap/v1/"))
}

// serveAPv1 answers an agentprotocol.ai v1 request.
func (s *Server) serveAPv1(ctx *fasthttp.RequestCtx, route *Route, rest []byte) {
	p := string(rest)
	if len(p) > 1 {
		p = strings.TrimSuffix(p, "/")
	}
	tail, ok := strings.CutPrefix(p, apv1Base)
	if !ok || (tail != "" && tail[0] != '/') {
		apv1Message(ctx, fasthttp.StatusNotFound, "no endpoint at "+string(ctx.Path()))
		return
	}
	var segs []string
	if tail != "" {
		segs = strings.Split(tail[1:], "/")
	}
	for _, sg := range segs {
		if sg == "" {
			apv1Message(ctx, fasthttp.StatusNotFound, "no endpoint at "+string(ctx.Path()))
			return
		}
	}
	get := ctx.IsGet() || ctx.IsHead()
	post := ctx.IsPost()
	switch {
	case len(segs) == 0:
		switch {
		case post:
			s.apv1CreateTask(ctx, route)
		case get:
			s.apv1ListTasks(ctx, route)
		default:
			apv1NotAllowed(ctx, "GET, POST")
		}
		return
	case len(segs) == 1:
		if !get {
			apv1NotAllowed(ctx, "GET")
			return
		}
	case len(segs) == 2 && (segs[1] == "steps" || segs[1] == "artifacts"):
		if !get && !post {
			apv1NotAllowed(ctx, "GET, POST")
			return
		}
	case len(segs) == 3 && (segs[1] == "steps" || segs[1] == "artifacts"):
		if !get {
			apv1NotAllowed(ctx, "GET")
			return
		}
	default:
		apv1Message(ctx, fasthttp.StatusNotFound, "no endpoint at "+string(ctx.Path()))
		return
	}
	t := s.apv1Task(route, segs[0])
	if t == nil {
		apv1NotFound(ctx, "Task", segs[0])
		return
	}
	switch {
	case len(segs) == 1:
		apv1JSON(ctx, fasthttp.StatusOK, t.task())
	case segs[1] == "steps" && len(segs) == 2 && post:
		s.apv1ExecuteStep(ctx, route, t)
	case segs[1] == "steps" && len(segs) == 2:
		s.apv1ListSteps(ctx, t)
	case segs[1] == "steps":
		st, ok := t.step(segs[2])
		if !ok {
			apv1NotFound(ctx, "Step", segs[2])
			return
		}
		apv1JSON(ctx, fasthttp.StatusOK, st)
	case len(segs) == 2 && post:
		s.apv1Upload(ctx, t)
	case len(segs) == 2:
		s.apv1ListArtifacts(ctx, t)
	default:
		s.apv1Download(ctx, t, segs[2])
	}
}

// apv1CreateTask answers POST /ap/v1/agent/tasks: the task is created, no
// turn runs until its first step.
func (s *Server) apv1CreateTask(ctx *fasthttp.RequestCtx, route *Route) {
	body, err := v1.DecodeTaskRequest(ctx.PostBody())
	if err != nil {
		apv1Message(ctx, fasthttp.StatusBadRequest, err.Error())
		return
	}
	if s.closing.Load() {
		apv1Message(ctx, fasthttp.StatusServiceUnavailable, "the bridge is shutting down")
		return
	}
	id := newID("")
	x := &store.Exchange{ID: store.NewID(), Downstream: translate.ProtoAgentProtocol, ClientID: id, Session: id,
		State: translate.StateSubmitted, Meta: map[string]string{"dialect": "v1"}}
	if route != nil {
		x.Upstream, x.Route = route.Proto, route.Name
	}
	task := v1.Task{Input: body.Input, AdditionalInput: body.AdditionalInput, TaskID: id}
	x.Request = v1.StepRequest(&task, nil, true)
	x.Request.Exchange = x.ID
	if err := s.store.Create(x); err != nil {
		apv1Message(ctx, fasthttp.StatusInternalServerError, "cannot create the task: "+err.Error())
		return
	}
	if err := s.store.Alias(x.ID, apv1TaskKey+id); err != nil {
		apv1Message(ctx, fasthttp.StatusInternalServerError, "cannot create the task: "+err.Error())
		return
	}
	_, _ = s.store.Append(x.ID, &translate.Event{Kind: translate.KindState, State: translate.StateSubmitted, Time: time.Now()})
	t := newAPv1Task(id, x.ID, routeName(route), body)
	s.apv1State().add(s, t)
	apv1JSON(ctx, fasthttp.StatusOK, t.task())
}

func (s *Server) apv1ListTasks(ctx *fasthttp.RequestCtx, route *Route) {
	page, size, ok := apv1Page(ctx)
	if !ok {
		return
	}
	ts := s.apv1State().list(s, routeName(route))
	items, pg := v1.Page(ts, page, size)
	out := v1.TaskListResponse{Tasks: make([]v1.Task, len(items)), Pagination: pg}
	for i, t := range items {
		out.Tasks[i] = t.task()
	}
	apv1JSON(ctx, fasthttp.StatusOK, out)
}

func (s *Server) apv1ListSteps(ctx *fasthttp.RequestCtx, t *apv1Task) {
	page, size, ok := apv1Page(ctx)
	if !ok {
		return
	}
	all := t.steps()
	items, pg := v1.Page(all, page, size)
	apv1JSON(ctx, fasthttp.StatusOK, v1.StepListResponse{Steps: items, Pagination: pg})
}

func (s *Server) apv1ListArtifacts(ctx *fasthttp.RequestCtx, t *apv1Task) {
	page, size, ok := apv1Page(ctx)
	if !ok {
		return
	}
	items, pg := v1.Page(t.artifacts(), page, size)
	apv1JSON(ctx, fasthttp.StatusOK, v1.ArtifactListResponse{Artifacts: items, Pagination: pg})
}

// apv1ExecuteStep answers POST …/{task_id}/steps: one turn of the upstream.
func (s *Server) apv1ExecuteStep(ctx *fasthttp.RequestCtx, route *Route, t *apv1Task) {
	body, err := v1.DecodeStepRequest(ctx.PostBody())
	if err != nil {
		apv1Message(ctx, fasthttp.StatusBadRequest, err.Error())
		return
	}
	if s.closing.Load() {
		apv1Message(ctx, fasthttp.StatusServiceUnavailable, "the bridge is shutting down")
		return
	}
	if route == nil || route.Agent == nil {
		apv1Message(ctx, fasthttp.StatusServiceUnavailable, "no upstream agent is routed for this request")
		return
	}
	opts := s.apv1State().opts
	st, first, busy := t.begin(s, body, opts.MaxStepsPerTask)
	if busy != "" {
		apv1Message(ctx, fasthttp.StatusConflict, "step "+busy+" of task "+t.id+" is still running")
		return
	}
	task := t.task()
	creq := v1.StepRequest(&task, body, first)
	creq.Exchange = t.xid
	if m := creq.LastInput(); m != nil {
		um := *m
		um.ID = "msg_" + st.id
		_, _ = s.store.Append(t.xid, &translate.Event{Kind: translate.KindMessageEnd, MessageID: um.ID, Message: &um,
			Ext: creq.Ext, Time: time.Now()})
	}
	// The previous turn has settled; its goroutine is about to end.
	select {
	case <-s.turnDone(t.xid):
	case <-time.After(2 * time.Second):
	}
	if err := s.runTurn(t.xid, route, creq, forwardHeaders(ctx), opts.TurnTimeout, func(ev *translate.Event) { t.apply(s, st, ev) }); err != nil {
		t.abort(st)
		code := fasthttp.StatusInternalServerError
		if errors.Is(err, ErrTurnRunning) {
			code = fasthttp.StatusConflict
		}
		apv1Message(ctx, code, err.Error())
		return
	}
	done := s.turnDone(t.xid)
	t.launched(st)
	timer := time.NewTimer(opts.StepTimeout)
	defer timer.Stop()
	select {
	case <-st.settled:
	case <-done:
		// The turn ended; when no settled event reached the hook (the
		// exchange log refused it), the step ends failed here.
		t.endUnsettled(s, st)
	case <-timer.C:
	}
	apv1JSON(ctx, fasthttp.StatusOK, t.stepOf(st))
}

// apv1Upload answers POST …/{task_id}/artifacts (multipart/form-data).
func (s *Server) apv1Upload(ctx *fasthttp.RequestCtx, t *apv1Task) {
	form, err := ctx.MultipartForm()
	if err != nil {
		apv1Message(ctx, fasthttp.StatusBadRequest, "the body must be multipart/form-data with a file field: "+err.Error())
		return
	}
	fhs := form.File["file"]
	if len(fhs) == 0 {
		apv1Message(ctx, fasthttp.StatusBadRequest, "the multipart body has no file field")
		return
	}
	fh := fhs[0]
	st := s.apv1State()
	limit := st.opts.MaxArtifactBytes
	if fh.Size > int64(limit) {
		apv1Message(ctx, fasthttp.StatusRequestEntityTooLarge, "the file is larger than the artifact limit of "+strconv.Itoa(limit)+" bytes")
		return
	}
	f, err := fh.Open()
	if err != nil {
		apv1Message(ctx, fasthttp.StatusBadRequest, "cannot read the file: "+err.Error())
		return
	}
	data, err := io.ReadAll(io.LimitReader(f, int64(limit)+1))
	f.Close()
	if err != nil {
		apv1Message(ctx, fasthttp.StatusBadRequest, "cannot read the file: "+err.Error())
		return
	}
	if len(data) > limit {
		apv1Message(ctx, fasthttp.StatusRequestEntityTooLarge, "the file is larger than the artifact limit of "+strconv.Itoa(limit)+" bytes")
		return
	}
	var rel *string
	if v := form.Value["relative_path"]; len(v) > 0 && v[0] != "" {
		r := v[0]
		rel = &r
	}
	a := v1.Artifact{ArtifactID: newID(""), FileName: cleanFileName(fh.Filename), RelativePath: rel}
	st.blobs.put(t.id, a.ArtifactID, data)
	t.addArtifact(a, "", st.opts.MaxArtifacts)
	apv1JSON(ctx, fasthttp.StatusOK, a)
}

// apv1Download answers GET …/artifacts/{artifact_id}.
func (s *Server) apv1Download(ctx *fasthttp.RequestCtx, t *apv1Task, id string) {
	a, uri, ok := t.artifact(id)
	if !ok {
		apv1NotFound(ctx, "Artifact", id)
		return
	}
	if data, ok := s.apv1State().blobs.get(t.id, id); ok {
		ctx.SetStatusCode(fasthttp.StatusOK)
		ctx.SetContentType("application/octet-stream")
		ctx.Response.Header.Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": a.FileName}))
		ctx.SetBody(data)
		return
	}
	if uri != "" {
		b, _ := json.Marshal(map[string]string{"artifact_id": a.ArtifactID, "file_name": a.FileName, "uri": uri})
		ctx.Response.Header.Set("Location", uri)
		ctx.SetStatusCode(fasthttp.StatusFound)
		ctx.SetContentType("application/json")
		ctx.SetBody(b)
		return
	}
	apv1NotFound(ctx, "Artifact", id)
}

// apv1Page reads the pagination query values, answering 400 when bad.
func apv1Page(ctx *fasthttp.RequestCtx) (page, size int, ok bool) {
	args := ctx.QueryArgs()
	page, size, err := v1.ParsePage(string(args.Peek("current_page")), string(args.Peek("page_size")))
	if err != nil {
		apv1Message(ctx, fasthttp.StatusBadRequest, err.Error())
		return 0, 0, false
	}
	return page, size, true
}

func apv1JSON(ctx *fasthttp.RequestCtx, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		apv1Message(ctx, fasthttp.StatusInternalServerError, err.Error())
		return
	}
	ctx.SetStatusCode(status)
	ctx.SetContentType("application/json")
	ctx.SetBody(b)
}

// apv1Message answers {"message": msg}, the shape of the spec's 404 body,
// which the v1 API uses for every error.
func apv1Message(ctx *fasthttp.RequestCtx, status int, msg string) {
	b, _ := json.Marshal(v1.NotFound{Message: msg})
	ctx.SetStatusCode(status)
	ctx.SetContentType("application/json")
	ctx.SetBody(b)
}

func apv1NotFound(ctx *fasthttp.RequestCtx, item, id string) {
	ctx.SetStatusCode(fasthttp.StatusNotFound)
	ctx.SetContentType("application/json")
	ctx.SetBody(v1.AppendNotFound(nil, item, id))
}

func apv1NotAllowed(ctx *fasthttp.RequestCtx, allow string) {
	ctx.Response.Header.Set("Allow", allow)
	apv1Message(ctx, fasthttp.StatusMethodNotAllowed, "method "+string(ctx.Method())+" is not allowed here; allowed: "+allow)
}

// cleanFileName keeps the last element of an uploaded file's name.
func cleanFileName(name string) string {
	name = path.Base(strings.ReplaceAll(name, "\\", "/"))
	if name == "." || name == "/" || name == "" {
		return "file"
	}
	return name
}

func routeName(r *Route) string {
	if r == nil {
		return ""
	}
	return r.Name
}

// turnDone returns a channel closed when the exchange's running turn ends
// (already closed when none runs).
func (s *Server) turnDone(xid string) <-chan struct{} {
	s.turns.mu.Lock()
	defer s.turns.mu.Unlock()
	if t := s.turns.running[xid]; t != nil {
		return t.done
	}
	return closedChan
}

var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()
