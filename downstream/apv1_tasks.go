package downstream

import (
	"container/list"
	"encoding/base64"
	"encoding/json"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/agentbridge/bridge/translate"
	v1 "github.com/agentbridge/bridge/translate/agentprotocol/v1"
)

// apv1Server is the v1 API's state: the index of tasks and the artifact
// bytes. The exchange log stays in the store.
type apv1Server struct {
	once  sync.Once
	opts  APv1Options
	mu    sync.Mutex
	tasks map[string]*apv1Task
	order []*apv1Task // creation order, oldest first
	blobs apv1Blobs
}

// apv1State returns the server's v1 state, set up on first use.
func (s *Server) apv1State() *apv1Server {
	p := &s.apv1
	p.once.Do(func() {
		p.opts = s.opts.APv1.withDefaults()
		p.tasks = map[string]*apv1Task{}
		p.blobs.maxCount, p.blobs.maxTotal = p.opts.MaxArtifacts, p.opts.MaxArtifactTotalBytes
	})
	return p
}

// add indexes a new task, dropping the oldest past MaxTasks.
func (p *apv1Server) add(s *Server, t *apv1Task) {
	var dropped []*apv1Task
	p.mu.Lock()
	p.tasks[t.id] = t
	p.order = append(p.order, t)
	for len(p.order) > p.opts.MaxTasks {
		old := p.order[0]
		p.order[0] = nil
		p.order = p.order[1:]
		delete(p.tasks, old.id)
		dropped = append(dropped, old)
	}
	p.mu.Unlock()
	for _, old := range dropped {
		p.blobs.dropTask(old.id)
	}
}

// remove forgets tasks whose exchange is gone.
func (p *apv1Server) remove(gone ...*apv1Task) {
	if len(gone) == 0 {
		return
	}
	p.mu.Lock()
	drop := make(map[*apv1Task]bool, len(gone))
	for _, t := range gone {
		if p.tasks[t.id] == t {
			delete(p.tasks, t.id)
			drop[t] = true
		}
	}
	if len(drop) > 0 {
		kept := p.order[:0]
		for _, t := range p.order {
			if !drop[t] {
				kept = append(kept, t)
			}
		}
		clear(p.order[len(kept):])
		p.order = kept
	}
	p.mu.Unlock()
	for t := range drop {
		p.blobs.dropTask(t.id)
	}
}

// list returns the live tasks of a route, oldest first.
func (p *apv1Server) list(s *Server, route string) []*apv1Task {
	p.mu.Lock()
	ts := make([]*apv1Task, 0, len(p.order))
	for _, t := range p.order {
		if t.route == route {
			ts = append(ts, t)
		}
	}
	p.mu.Unlock()
	live := ts[:0]
	var gone []*apv1Task
	for _, t := range ts {
		if _, err := s.store.Get(t.xid); err != nil {
			gone = append(gone, t)
			continue
		}
		live = append(live, t)
	}
	p.remove(gone...)
	return live
}

// apv1Task finds a live task of the route, nil when there is none.
func (s *Server) apv1Task(route *Route, id string) *apv1Task {
	p := s.apv1State()
	p.mu.Lock()
	t := p.tasks[id]
	p.mu.Unlock()
	if t == nil || t.route != routeName(route) {
		return nil
	}
	if _, err := s.store.Get(t.xid); err != nil {
		p.remove(t)
		return nil
	}
	return t
}

// apv1Task is one task: its request, its steps and its artifacts.
type apv1Task struct {
	id, xid, route string
	input          *string
	additional     v1.Object

	mu      sync.Mutex
	stepSeq []*apv1Step
	byID    map[string]*apv1Step
	started bool // a first step has run (later ones continue the session)
	arts    []v1.Artifact
	artIdx  map[string]int
	artURI  map[string]string // artifacts only reachable by URI
}

func newAPv1Task(id, xid, route string, body *v1.TaskRequestBody) *apv1Task {
	return &apv1Task{id: id, xid: xid, route: route, input: body.Input, additional: body.AdditionalInput,
		byID: map[string]*apv1Step{}, artIdx: map[string]int{}, artURI: map[string]string{}}
}

// task returns the Task as the API shows it.
func (t *apv1Task) task() v1.Task {
	t.mu.Lock()
	defer t.mu.Unlock()
	return v1.Task{Input: t.input, AdditionalInput: t.additional, TaskID: t.id, Artifacts: append([]v1.Artifact(nil), t.arts...)}
}

func (t *apv1Task) steps() []v1.Step {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]v1.Step, len(t.stepSeq))
	for i, st := range t.stepSeq {
		out[i] = st.snapshot()
	}
	return out
}

func (t *apv1Task) step(id string) (v1.Step, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	st := t.byID[id]
	if st == nil {
		return v1.Step{}, false
	}
	return st.snapshot(), true
}

func (t *apv1Task) stepOf(st *apv1Step) v1.Step {
	t.mu.Lock()
	defer t.mu.Unlock()
	return st.snapshot()
}

func (t *apv1Task) artifacts() []v1.Artifact {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]v1.Artifact(nil), t.arts...)
}

func (t *apv1Task) artifact(id string) (v1.Artifact, string, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	i, ok := t.artIdx[id]
	if !ok {
		return v1.Artifact{}, "", false
	}
	return t.arts[i], t.artURI[id], true
}

// addArtifact lists an artifact (or renames one listed), keeping at most max.
func (t *apv1Task) addArtifact(a v1.Artifact, uri string, max int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.addArtifactLocked(a, uri, max)
}

func (t *apv1Task) addArtifactLocked(a v1.Artifact, uri string, max int) {
	if uri != "" {
		t.artURI[a.ArtifactID] = uri
	}
	if i, ok := t.artIdx[a.ArtifactID]; ok {
		t.arts[i] = a
		return
	}
	t.artIdx[a.ArtifactID] = len(t.arts)
	t.arts = append(t.arts, a)
	if len(t.arts) > max {
		n := len(t.arts) - max
		for _, old := range t.arts[:n] {
			delete(t.artIdx, old.ArtifactID)
			delete(t.artURI, old.ArtifactID)
		}
		t.arts = slices.Delete(t.arts, 0, n)
		for i, a := range t.arts {
			t.artIdx[a.ArtifactID] = i
		}
	}
}

// begin adds a new step, unless the previous one still runs (busy names it).
// first tells whether the step starts the session.
func (t *apv1Task) begin(s *Server, body *v1.StepRequestBody, maxSteps int) (st *apv1Step, first bool, busy string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if n := len(t.stepSeq); n > 0 {
		cur := t.stepSeq[n-1]
		if !cur.isSettled {
			if !cur.launched || s.turnRunning(t.xid) {
				return nil, false, cur.id
			}
			t.failLocked(s, cur)
		}
	}
	id := newID("")
	st = &apv1Step{id: id, b: v1.NewStepBuilder(t.id, id, body), settled: make(chan struct{}), first: !t.started}
	t.started = true
	t.stepSeq = append(t.stepSeq, st)
	t.byID[id] = st
	if len(t.stepSeq) > maxSteps {
		n := len(t.stepSeq) - maxSteps
		for _, old := range t.stepSeq[:n] {
			delete(t.byID, old.id)
		}
		t.stepSeq = slices.Delete(t.stepSeq, 0, n)
	}
	return st, st.first, ""
}

// abort removes a step whose turn could not start.
func (t *apv1Task) abort(st *apv1Step) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if n := len(t.stepSeq); n > 0 && t.stepSeq[n-1] == st {
		t.stepSeq[n-1] = nil
		t.stepSeq = t.stepSeq[:n-1]
	}
	delete(t.byID, st.id)
	if st.first {
		t.started = false
	}
}

func (t *apv1Task) launched(st *apv1Step) {
	t.mu.Lock()
	st.launched = true
	t.mu.Unlock()
}

// endUnsettled fails a step whose turn ended without a settled event.
func (t *apv1Task) endUnsettled(s *Server, st *apv1Step) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !st.isSettled {
		t.failLocked(s, st)
	}
}

func (t *apv1Task) failLocked(s *Server, st *apv1Step) {
	st.b.Apply(&translate.Event{Kind: translate.KindState, State: translate.StateFailed, Time: time.Now(),
		Err: &translate.Error{Code: translate.CodeStreamIncomplete, Message: "the turn ended without a final state"}})
	t.settleLocked(s, st)
}

// apply folds one logged event of the step's turn (the turn hook).
func (t *apv1Task) apply(s *Server, st *apv1Step, ev *translate.Event) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if st.isSettled {
		return
	}
	st.b.Apply(ev)
	switch ev.Kind {
	case translate.KindToolCall, translate.KindToolResult:
		st.tool(ev)
	case translate.KindArtifact:
		t.syncLocked(s, st, false)
	}
	if st.b.Settled() {
		t.settleLocked(s, st)
	}
}

func (t *apv1Task) settleLocked(s *Server, st *apv1Step) {
	t.syncLocked(s, st, true)
	st.isSettled = true
	close(st.settled)
}

// syncLocked lists the step's artifacts on the task and, once the step
// settles (content), keeps what can be downloaded: bytes the bridge holds,
// else a URI to redirect to.
func (t *apv1Task) syncLocked(s *Server, st *apv1Step, content bool) {
	p := s.apv1State()
	arts := st.b.Artifacts()
	for i := range arts {
		a := &arts[i]
		uri := ""
		if content {
			data, u, ok := artifactContent(a)
			if ok && len(data) <= p.opts.MaxArtifactBytes {
				p.blobs.put(t.id, a.ID, data)
			} else {
				uri = u
			}
		}
		t.addArtifactLocked(v1.Artifact{ArtifactID: a.ID, AgentCreated: true, FileName: v1.FileName(a)}, uri, p.opts.MaxArtifacts)
	}
}

// artifactContent returns the bytes of an artifact's parts the bridge can
// serve (text, data, inline bytes, data: URIs), or the first other URI.
func artifactContent(a *translate.Artifact) (data []byte, uri string, ok bool) {
	for _, p := range a.Parts {
		switch {
		case p.Bytes != "":
			b, err := base64.StdEncoding.DecodeString(p.Bytes)
			if err != nil {
				b, err = base64.RawStdEncoding.DecodeString(p.Bytes)
			}
			if err == nil {
				data, ok = append(data, b...), true
			}
		case strings.HasPrefix(p.URI, "data:"):
			if b, err := decodeDataURI(p.URI); err == nil {
				data, ok = append(data, b...), true
			}
		case p.URI != "":
			if uri == "" {
				uri = p.URI
			}
		case p.Kind == translate.PartText:
			data, ok = append(data, p.Text...), true
		case p.Kind == translate.PartData && len(p.Data) > 0:
			data, ok = append(data, p.Data...), true
		}
	}
	return data, uri, ok
}

// decodeDataURI decodes an RFC 2397 data: URI.
func decodeDataURI(u string) ([]byte, error) {
	meta, payload, found := strings.Cut(strings.TrimPrefix(u, "data:"), ",")
	if !found {
		return nil, errBadDataURI
	}
	if strings.HasSuffix(meta, ";base64") {
		b, err := base64.StdEncoding.DecodeString(payload)
		if err != nil {
			b, err = base64.RawStdEncoding.DecodeString(payload)
		}
		return b, err
	}
	s, err := url.PathUnescape(payload)
	return []byte(s), err
}

var errBadDataURI = &translate.Error{Code: translate.CodeBadRequest, Message: "malformed data: URI"}

// apv1Step is one step: its builder and the tools its turn used.
type apv1Step struct {
	id        string
	b         *v1.StepBuilder
	first     bool
	tools     []apv1Tool
	launched  bool
	isSettled bool
	settled   chan struct{}
}

// apv1Tool is a tool call of a step as additional_output.tool_calls lists it.
type apv1Tool struct {
	CallID    string  `json:"call_id,omitempty"`
	Name      string  `json:"name,omitempty"`
	Kind      string  `json:"kind,omitempty"`
	Arguments string  `json:"arguments,omitempty"`
	Output    *string `json:"output,omitempty"`
	IsError   bool    `json:"is_error,omitempty"`
}

// tool folds a tool call or result (snapshots replace what they carry).
func (st *apv1Step) tool(ev *translate.Event) {
	tl := ev.Tool
	if tl == nil {
		return
	}
	var e *apv1Tool
	if tl.CallID != "" {
		for i := range st.tools {
			if st.tools[i].CallID == tl.CallID {
				e = &st.tools[i]
				break
			}
		}
	}
	if e == nil {
		st.tools = append(st.tools, apv1Tool{CallID: tl.CallID})
		e = &st.tools[len(st.tools)-1]
	}
	if tl.Name != "" {
		e.Name = tl.Name
	}
	if tl.Kind != "" {
		e.Kind = string(tl.Kind)
	}
	if ev.Kind == translate.KindToolCall {
		if tl.Arguments != "" {
			e.Arguments = tl.Arguments
		}
		return
	}
	out := tl.Output
	e.Output = &out
	e.IsError = tl.IsError
}

// snapshot returns the Step, with tool_calls added to additional_output.
func (st *apv1Step) snapshot() v1.Step {
	s := st.b.Step()
	if len(st.tools) > 0 {
		m := map[string]json.RawMessage{}
		if len(s.AdditionalOutput) > 0 {
			_ = json.Unmarshal(s.AdditionalOutput, &m)
		}
		m["tool_calls"], _ = json.Marshal(st.tools)
		s.AdditionalOutput, _ = json.Marshal(m)
	}
	return s
}

// apv1Blobs holds artifact bytes, bounded in count and total size; the
// oldest go first.
type apv1Blobs struct {
	mu       sync.Mutex
	maxCount int
	maxTotal int64
	total    int64
	lru      list.List // of *apv1Blob, oldest at the front
	byKey    map[string]*list.Element
}

type apv1Blob struct {
	key, task string
	data      []byte
}

func blobKey(task, id string) string { return task + "\x00" + id }

func (b *apv1Blobs) put(task, id string, data []byte) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.byKey == nil {
		b.byKey = map[string]*list.Element{}
	}
	k := blobKey(task, id)
	if e := b.byKey[k]; e != nil {
		b.removeLocked(e)
	}
	b.byKey[k] = b.lru.PushBack(&apv1Blob{key: k, task: task, data: data})
	b.total += int64(len(data))
	for b.lru.Len() > 0 && (b.total > b.maxTotal || b.lru.Len() > b.maxCount) {
		b.removeLocked(b.lru.Front())
	}
}

func (b *apv1Blobs) get(task, id string) ([]byte, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	e := b.byKey[blobKey(task, id)]
	if e == nil {
		return nil, false
	}
	return e.Value.(*apv1Blob).data, true
}

func (b *apv1Blobs) dropTask(task string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for e := b.lru.Front(); e != nil; {
		next := e.Next()
		if e.Value.(*apv1Blob).task == task {
			b.removeLocked(e)
		}
		e = next
	}
}

func (b *apv1Blobs) removeLocked(e *list.Element) {
	bl := b.lru.Remove(e).(*apv1Blob)
	delete(b.byKey, bl.key)
	b.total -= int64(len(bl.data))
}
