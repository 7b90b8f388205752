package v1

import (
	"encoding/json"
	"fmt"
	"path"
	"strconv"
	"strings"

	"github.com/agentbridge/bridge/translate"
	"github.com/tidwall/gjson"
)

// StepStatus is a Step's status.
type StepStatus string

// The step statuses (openapi-v1.yaml Step.status enum).
const (
	StatusCreated   StepStatus = "created"
	StatusRunning   StepStatus = "running"
	StatusCompleted StepStatus = "completed"
)

// Object is a JSON object member that is always written: {} when empty
// (additional_input, which the conformance suite requires present).
type Object json.RawMessage

// MarshalJSON writes {} for an empty Object.
func (o Object) MarshalJSON() ([]byte, error) {
	if len(o) == 0 {
		return []byte("{}"), nil
	}
	return json.RawMessage(o).MarshalJSON()
}

// UnmarshalJSON keeps the raw value; null reads as empty.
func (o *Object) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*o = nil
		return nil
	}
	*o = append((*o)[:0], b...)
	return nil
}

// Artifact is a file created by or uploaded to the agent.
type Artifact struct {
	ArtifactID   string  `json:"artifact_id"`
	AgentCreated bool    `json:"agent_created"`
	FileName     string  `json:"file_name"`
	RelativePath *string `json:"relative_path"`
}

// TaskRequestBody is the body of POST /ap/v1/agent/tasks.
type TaskRequestBody struct {
	Input           *string `json:"input"`
	AdditionalInput Object  `json:"additional_input"`
}

// Task is a task as the API returns it.
type Task struct {
	Input           *string    `json:"input"`
	AdditionalInput Object     `json:"additional_input"`
	TaskID          string     `json:"task_id"`
	Artifacts       []Artifact `json:"artifacts"`
}

// MarshalJSON writes artifacts as [] when nil.
func (t Task) MarshalJSON() ([]byte, error) {
	type plain Task
	if t.Artifacts == nil {
		t.Artifacts = []Artifact{}
	}
	return json.Marshal(plain(t))
}

// StepRequestBody is the body of POST /ap/v1/agent/tasks/{task_id}/steps.
type StepRequestBody struct {
	Input           *string `json:"input"`
	AdditionalInput Object  `json:"additional_input"`
}

// Step is one step of a task: for the bridge, one turn of the exchange.
type Step struct {
	Input            *string         `json:"input"`
	AdditionalInput  Object          `json:"additional_input"`
	TaskID           string          `json:"task_id"`
	StepID           string          `json:"step_id"`
	Name             *string         `json:"name"`
	Status           StepStatus      `json:"status"`
	Output           *string         `json:"output"`
	AdditionalOutput json.RawMessage `json:"additional_output"`
	Artifacts        []Artifact      `json:"artifacts"`
	IsLast           bool            `json:"is_last"`
}

// MarshalJSON writes artifacts as [] when nil and additional_output as
// null when empty.
func (s Step) MarshalJSON() ([]byte, error) {
	type plain Step
	if s.Artifacts == nil {
		s.Artifacts = []Artifact{}
	}
	if len(s.AdditionalOutput) == 0 {
		s.AdditionalOutput = json.RawMessage("null")
	}
	return json.Marshal(plain(s))
}

// Pagination is the pagination member of every list answer.
type Pagination struct {
	TotalItems  int `json:"total_items"`
	TotalPages  int `json:"total_pages"`
	CurrentPage int `json:"current_page"`
	PageSize    int `json:"page_size"`
}

// TaskListResponse is GET /ap/v1/agent/tasks.
type TaskListResponse struct {
	Tasks      []Task     `json:"tasks"`
	Pagination Pagination `json:"pagination"`
}

// StepListResponse is GET …/tasks/{task_id}/steps.
type StepListResponse struct {
	Steps      []Step     `json:"steps"`
	Pagination Pagination `json:"pagination"`
}

// ArtifactListResponse is GET …/tasks/{task_id}/artifacts (paginated per
// the spec, although the Python SDK returns a bare list).
type ArtifactListResponse struct {
	Artifacts  []Artifact `json:"artifacts"`
	Pagination Pagination `json:"pagination"`
}

// NotFound is the 404 body (components.responses.NotFound).
type NotFound struct {
	Message string `json:"message"`
}

// NotFoundMessage is the Python SDK's 404 message: "Task with <id> not found.".
func NotFoundMessage(item, id string) string { return item + " with " + id + " not found." }

// AppendNotFound writes a 404 body {"message": …} for item and id.
func AppendNotFound(dst []byte, item, id string) []byte {
	b, _ := json.Marshal(NotFound{Message: NotFoundMessage(item, id)})
	return append(dst, b...)
}

// Default and bounds of the list query parameters.
const (
	DefaultPageSize = 10
	MaxPageSize     = 1000 // the spec sets none; the bridge caps what one page costs
)

// ParsePage reads the current_page and page_size query values: empty means
// 1 and DefaultPageSize; each must be an integer ≥ 1 (the spec's minimum),
// and page_size is capped at MaxPageSize. Errors wrap
// translate.ErrBadRequest.
func ParsePage(currentPage, pageSize string) (page, size int, err error) {
	page, size = 1, DefaultPageSize
	if currentPage != "" {
		if page, err = strconv.Atoi(currentPage); err != nil || page < 1 {
			return 0, 0, fmt.Errorf("%w: current_page: must be an integer >= 1", translate.ErrBadRequest)
		}
	}
	if pageSize != "" {
		if size, err = strconv.Atoi(pageSize); err != nil || size < 1 {
			return 0, 0, fmt.Errorf("%w: page_size: must be an integer >= 1", translate.ErrBadRequest)
		}
	}
	return page, min(size, MaxPageSize), nil
}

// Paginate returns the pagination of total items at page (from 1) of size
// items, and the bounds [start, end) of the page's items. total_pages
// rounds up (the Python SDK floors, which loses the last partial page); a
// page past the end is empty. page and size below 1 read as 1 and
// DefaultPageSize.
func Paginate(total, page, size int) (p Pagination, start, end int) {
	if page < 1 {
		page = 1
	}
	if size < 1 {
		size = DefaultPageSize
	}
	total = max(total, 0)
	p = Pagination{TotalItems: total, TotalPages: (total + size - 1) / size, CurrentPage: page, PageSize: size}
	if (page - 1) > total/size {
		return p, total, total
	}
	start = min((page-1)*size, total)
	end = min(start+size, total)
	return p, start, end
}

// Page returns the items of one page and its pagination.
func Page[T any](items []T, page, size int) ([]T, Pagination) {
	p, start, end := Paginate(len(items), page, size)
	return items[start:end:end], p
}

// decodeBody reads an optional request body: empty is the zero body; else
// a JSON object whose input is a string or null and additional_input an
// object or null. Errors wrap translate.ErrBadRequest (the spec answers
// 422).
func decodeBody(body []byte) (input *string, additional Object, err error) {
	if strings.TrimSpace(string(body)) == "" {
		return nil, nil, nil
	}
	if !gjson.ValidBytes(body) {
		return nil, nil, fmt.Errorf("%w: body is not valid JSON", translate.ErrBadRequest)
	}
	root := gjson.ParseBytes(body)
	if !root.IsObject() {
		return nil, nil, fmt.Errorf("%w: body must be a JSON object", translate.ErrBadRequest)
	}
	switch v := root.Get("input"); v.Type {
	case gjson.String:
		s := v.Str
		input = &s
	case gjson.Null:
	default:
		return nil, nil, fmt.Errorf("%w: input: must be a string or null", translate.ErrBadRequest)
	}
	switch v := root.Get("additional_input"); {
	case v.IsObject():
		additional = Object(v.Raw)
	case v.Type == gjson.Null:
	default:
		return nil, nil, fmt.Errorf("%w: additional_input: must be an object", translate.ErrBadRequest)
	}
	return input, additional, nil
}

// DecodeTaskRequest reads the body of POST /ap/v1/agent/tasks.
func DecodeTaskRequest(body []byte) (*TaskRequestBody, error) {
	in, add, err := decodeBody(body)
	if err != nil {
		return nil, err
	}
	return &TaskRequestBody{Input: in, AdditionalInput: add}, nil
}

// DecodeStepRequest reads the body of POST …/tasks/{task_id}/steps.
func DecodeStepRequest(body []byte) (*StepRequestBody, error) {
	in, add, err := decodeBody(body)
	if err != nil {
		return nil, err
	}
	return &StepRequestBody{Input: in, AdditionalInput: add}, nil
}

// StepRequest maps a step request to a canonical request (server role). A
// task is a session and its first step a turn that starts it; every later
// step continues it (the answer to a not-last step). The text is the
// step's input, or for the first step without one the task's input (the
// SDKs' pattern: the task carries the prompt). The task id is both
// Request.ID and Request.Session. additional_input rides in Ext (tagged
// agentprotocol) as {"additional_input": …}.
func StepRequest(task *Task, body *StepRequestBody, first bool) *translate.Request {
	req := &translate.Request{Command: translate.CommandContinue, ID: task.TaskID, Session: task.TaskID}
	var text string
	if body != nil && body.Input != nil {
		text = *body.Input
	}
	add := json.RawMessage(nil)
	if body != nil {
		add = json.RawMessage(body.AdditionalInput)
	}
	if first {
		req.Command = translate.CommandStart
		if text == "" && task.Input != nil {
			text = *task.Input
		}
		if len(add) == 0 {
			add = json.RawMessage(task.AdditionalInput)
		}
	}
	req.Input = []translate.Message{{Role: translate.RoleUser, Parts: []translate.Part{translate.TextPart(text)}}}
	if len(add) > 0 {
		req.Ext = translate.Ext{Proto: translate.ProtoAgentProtocol, Raw: append(append([]byte(`{"additional_input":`), add...), '}')}
	}
	return req
}

// StepBuilder folds the canonical events of one turn into a Step (server
// role). The step is "created" until the first event, "running" while
// events flow, and "completed" once the turn settles; it is last when the
// exchange ends (completed, failed, canceled, rejected, or
// awaiting-completion, which the bridge accepts), and not last when the
// agent waits for input: the client's next step is the answer. Output is
// the reply text, then the question of an input request, then, for a
// failure, "Error: <message>", separated by blank lines; additional_output
// holds {"state", "error", "usage"}. A StepBuilder is not safe for
// concurrent use.
type StepBuilder struct {
	step     Step
	state    translate.State
	reply    []byte
	slots    map[slotKey]*slot
	question string
	err      *translate.Error
	usage    json.RawMessage
	arts     []translate.Artifact
	seen     map[string]int // artifact id → index in arts
	newID    func() string
	skipMsgs map[string]bool
}

type slotKey struct {
	msg   string
	index int
}

type slot struct{ text []byte }

// NewStepBuilder starts the step stepID of task taskID for the request body.
func NewStepBuilder(taskID, stepID string, body *StepRequestBody) *StepBuilder {
	b := &StepBuilder{step: Step{TaskID: taskID, StepID: stepID, Status: StatusCreated}, seen: map[string]int{}}
	if body != nil {
		b.step.Input, b.step.AdditionalInput = body.Input, body.AdditionalInput
	}
	b.newID = func() string { return fmt.Sprintf("%s-artifact-%d", stepID, len(b.arts)+1) }
	return b
}

// Settled reports whether the turn has settled: the step is complete.
func (b *StepBuilder) Settled() bool { return b.state.Settled() }

// State returns the canonical state reached so far ("" before any).
func (b *StepBuilder) State() translate.State { return b.state }

// Artifacts returns the canonical artifacts of the step (their parts hold
// the content), in order, chunks merged, with IDs as the Step lists them:
// the server stores them for download.
func (b *StepBuilder) Artifacts() []translate.Artifact { return b.arts }

// Apply folds one canonical event into the step.
func (b *StepBuilder) Apply(ev *translate.Event) {
	if ev == nil || b.state.Terminal() {
		return
	}
	if b.step.Status == StatusCreated {
		b.step.Status = StatusRunning
	}
	switch ev.Kind {
	case translate.KindState:
		b.state = ev.State
		if ev.Err != nil {
			b.err = ev.Err
		}
		if ev.State == translate.StateInputRequired && b.question == "" {
			b.question = translate.PartsText(ev.Parts)
		}
		if (ev.State == translate.StateFailed || ev.State == translate.StateRejected) && b.err == nil {
			msg := translate.PartsText(ev.Parts)
			if msg == "" {
				msg = string(ev.State)
			}
			b.err = &translate.Error{Message: msg}
		}
	case translate.KindMessageStart:
		if m := ev.Message; m != nil && (m.Role == translate.RoleUser || m.Role == translate.RoleSystem || m.Role == translate.RoleTool ||
			m.Type == "reasoning" || strings.HasSuffix(m.Type, "_call") || strings.HasSuffix(m.Type, "_call_output")) {
			if b.skipMsgs == nil {
				b.skipMsgs = map[string]bool{}
			}
			b.skipMsgs[ev.MessageID] = true
		}
	case translate.KindContent:
		if p := ev.Part; p != nil && p.Kind == translate.PartText && !b.skipMsgs[ev.MessageID] {
			b.text(ev.MessageID, ev.Index, p.Text, ev.Delta)
		}
	case translate.KindMessageEnd:
		if m := ev.Message; m != nil && !b.skipMsgs[ev.MessageID] {
			for i, p := range m.Parts {
				if p.Kind == translate.PartText {
					b.text(ev.MessageID, i, p.Text, false)
				}
			}
		}
	case translate.KindInputRequest:
		b.question = translate.PartsText(ev.Parts)
	case translate.KindArtifact:
		if ev.Artifact != nil {
			b.artifact(ev.Artifact)
		}
	case translate.KindUsage:
		b.usage = ev.Data
	case translate.KindError:
		if ev.Err != nil {
			b.err = ev.Err
		}
	}
}

// text adds a text increment: a delta, or the new suffix of a snapshot.
func (b *StepBuilder) text(msg string, index int, text string, delta bool) {
	if b.slots == nil {
		b.slots = make(map[slotKey]*slot)
	}
	s := b.slots[slotKey{msg, index}]
	if s == nil {
		s = &slot{}
		b.slots[slotKey{msg, index}] = s
	}
	switch {
	case delta:
		s.text = append(s.text, text...)
		b.reply = append(b.reply, text...)
	case len(text) >= len(s.text) && string(s.text) == text[:len(s.text)]:
		b.reply = append(b.reply, text[len(s.text):]...)
		s.text = append(s.text[:0], text...)
	default:
		b.reply = append(b.reply, text...)
		s.text = append(s.text[:0], text...)
	}
}

func (b *StepBuilder) artifact(a *translate.Artifact) {
	if a.ID != "" {
		if i, ok := b.seen[a.ID]; ok {
			if a.Append {
				b.arts[i].Parts = append(b.arts[i].Parts, a.Parts...)
			} else {
				b.arts[i].Parts = a.Parts
			}
			b.arts[i].Last = a.Last
			return
		}
	}
	c := *a
	if c.ID == "" {
		c.ID = b.newID()
	}
	b.seen[c.ID] = len(b.arts)
	b.arts = append(b.arts, c)
}

// FileName returns the file name an artifact is listed under: its name, a
// part's name, the last element of a part's URI, else its id.
func FileName(a *translate.Artifact) string {
	if a.Name != "" {
		return a.Name
	}
	for _, p := range a.Parts {
		if p.Name != "" {
			return p.Name
		}
	}
	for _, p := range a.Parts {
		if p.URI != "" && !strings.HasPrefix(p.URI, "data:") {
			return path.Base(p.URI)
		}
	}
	return a.ID
}

// Step returns the step as folded so far. The returned value shares no
// mutable state with the builder except the request members.
func (b *StepBuilder) Step() Step {
	s := b.step
	if b.state.Settled() {
		s.Status = StatusCompleted
		s.IsLast = b.state != translate.StateInputRequired
	}
	var out []byte
	add := func(t string) {
		if t == "" {
			return
		}
		if len(out) > 0 {
			out = append(out, "\n\n"...)
		}
		out = append(out, t...)
	}
	add(string(b.reply))
	if b.state == translate.StateInputRequired {
		add(b.question)
	}
	failed := b.state == translate.StateFailed || b.state == translate.StateRejected
	if failed && b.err != nil {
		add("Error: " + b.err.Message)
	}
	if len(out) > 0 || s.Status == StatusCompleted {
		o := string(out)
		s.Output = &o
	}
	s.Artifacts = make([]Artifact, len(b.arts))
	for i := range b.arts {
		s.Artifacts[i] = Artifact{ArtifactID: b.arts[i].ID, AgentCreated: true, FileName: FileName(&b.arts[i])}
	}
	if b.state != "" {
		ao := map[string]any{"state": string(b.state)}
		if b.err != nil && (failed || b.state == translate.StateCanceled) {
			ao["error"] = b.err
		}
		if len(b.usage) > 0 && json.Valid(b.usage) {
			ao["usage"] = json.RawMessage(b.usage)
		}
		s.AdditionalOutput, _ = json.Marshal(ao)
	}
	return s
}

// TaskRequest writes the task body a v1 agent gets for a canonical start
// (client role); the Ext additional_input is restored.
func TaskRequest(req *translate.Request) TaskRequestBody {
	var body TaskRequestBody
	if m := req.LastInput(); m != nil {
		t := m.Text()
		body.Input = &t
	}
	if raw := req.Ext.For(translate.ProtoAgentProtocol); raw != nil {
		if v := gjson.GetBytes(raw, "additional_input"); v.IsObject() {
			body.AdditionalInput = Object(v.Raw)
		}
	}
	return body
}

// StepRequestFor writes the step body for a canonical start or continue
// (client role): the same fields as TaskRequest.
func StepRequestFor(req *translate.Request) StepRequestBody {
	t := TaskRequest(req)
	return StepRequestBody(t)
}

// StepEvents turns a Step a v1 agent answered into canonical events (client
// role): the output as one assistant message, each artifact (its file at
// artifactURL(id), when given), then the state: completed when is_last,
// input-required (with the output as the question) when not, working
// while the step is not completed. Message ids derive from the step id.
func StepEvents(s *Step, artifactURL func(artifactID string) string) []*translate.Event {
	var evs []*translate.Event
	add := func(ev *translate.Event) { evs = append(evs, ev) }
	out := ""
	if s.Output != nil {
		out = *s.Output
	}
	if out != "" && (s.IsLast || s.Status != StatusCompleted) {
		id := "msg_" + s.StepID
		add(&translate.Event{Kind: translate.KindMessageStart, MessageID: id, Message: &translate.Message{ID: id, Role: translate.RoleAssistant}})
		p := translate.TextPart(out)
		add(&translate.Event{Kind: translate.KindContent, MessageID: id, Part: &p, Done: true})
		add(&translate.Event{Kind: translate.KindMessageEnd, MessageID: id, Message: &translate.Message{ID: id, Role: translate.RoleAssistant, Parts: []translate.Part{p}}})
	}
	for _, a := range s.Artifacts {
		p := translate.Part{Kind: translate.PartFile, Name: a.FileName}
		if artifactURL != nil {
			p.URI = artifactURL(a.ArtifactID)
		}
		add(&translate.Event{Kind: translate.KindArtifact, Artifact: &translate.Artifact{ID: a.ArtifactID, Name: a.FileName, Parts: []translate.Part{p}, Last: true}})
	}
	switch {
	case s.IsLast:
		add(&translate.Event{Kind: translate.KindState, State: translate.StateCompleted})
	case s.Status == StatusCompleted:
		q := []translate.Part{translate.TextPart(out)}
		add(&translate.Event{Kind: translate.KindInputRequest, Parts: q})
		add(&translate.Event{Kind: translate.KindState, State: translate.StateInputRequired, Parts: q})
	default:
		add(&translate.Event{Kind: translate.KindState, State: translate.StateWorking})
	}
	return evs
}
