package upstream

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentbridge/bridge/translate/aip"
)

// aipFake is a scripted AIP v01.00 Partner for the Leader tests. It serves
// {prefix}/rpc (start, continue, get, complete, cancel), {prefix}/stream
// (start, continue, re-stream) and {prefix}/.well-known/acs.json, and answers
// as the Python reference peers do: timestamps with microseconds and
// "+00:00" or "+08:00" offsets, explicit nulls, errors as JSON-RPC errors
// with HTTP 200 or as FastAPI {"detail":{…}} bodies with HTTP 4xx.
//
// A task's script follows the user's text as the reference agent does:
// "echo: T" by default; [tool] adds a tool call and result; [file] a
// product report.txt; [ask] waits in awaiting-input and answers the
// continue's text; [fail] fails with AGENT_FAILED; [slow] waits slowDelay
// between steps; [badparams] is refused with -32602.
type aipFake struct {
	t      testing.TB
	srv    *httptest.Server
	prefix string

	mu sync.Mutex
	// knobs
	acs             int           // 0: no /.well-known/acs.json, 1: streaming true, 2: streaming false
	awaitCompletion bool          // end a turn in awaiting-completion, not completed
	replies         int           // partner messages per turn (default 1)
	cutAfter        int           // cut the first stream after this many frames
	cutAbort        bool          // cut by resetting the connection, not by a clean end
	restreamError   bool          // answer re-stream with an error frame (events expired)
	restream404     bool          // answer re-stream with HTTP 404 {"detail":…}
	fail500         bool          // answer everything with HTTP 500
	rpc404          bool          // answer rpc with HTTP 404 {"detail":…}
	garbage         bool          // answer with bodies that are not AIP
	slowDelay       time.Duration // the delay of [slow] (default 50ms)

	tasks   map[string]*aipFakeTask
	calls   []aipFakeCall
	cutDone bool
	stamps  int
	cancels chan string
}

type aipFakeCall struct {
	Path, Command, TaskID, SessionID string
	LastEventSeq                     int64 // -1 when absent
	Trace                            string
}

type aipFakeTask struct {
	id, session string
	status      map[string]any
	history     []any
	messages    []any
	products    []any
	log         [][]byte // eventData objects; eventSeq = index+1
	changed     chan struct{}
}

type aipFakeRequest struct {
	JSONRPC string          `json:"jsonrpc"`
	Method  string          `json:"method"`
	ID      json.RawMessage `json:"id"`
	Params  struct {
		Message json.RawMessage `json:"message"`
	} `json:"params"`
}

type aipFakeMessage struct {
	ID            string `json:"id"`
	Command       string `json:"command"`
	TaskID        string `json:"taskId"`
	SessionID     string `json:"sessionId"`
	SenderRole    string `json:"senderRole"`
	CommandParams *struct {
		LastEventSeq *int64 `json:"lastEventSeq"`
	} `json:"commandParams"`
	DataItems []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"dataItems"`
}

func (m *aipFakeMessage) text() string {
	var b strings.Builder
	for _, it := range m.DataItems {
		if it.Type == "text" {
			b.WriteString(it.Text)
		}
	}
	return b.String()
}

func newAIPFake(t testing.TB, prefix string) *aipFake {
	f := &aipFake{t: t, prefix: prefix, acs: 1, replies: 1, slowDelay: 50 * time.Millisecond,
		tasks: map[string]*aipFakeTask{}, cancels: make(chan string, 64)}
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+prefix+"/rpc", f.handleRPC)
	mux.HandleFunc("POST "+prefix+"/stream", f.handleStream)
	mux.HandleFunc("GET "+prefix+"/.well-known/acs.json", f.handleACS)
	f.srv = httptest.NewServer(mux)
	t.Cleanup(f.srv.Close)
	return f
}

// URL returns the fake's base URL (with its prefix).
func (f *aipFake) URL() string { return f.srv.URL + f.prefix }

func (f *aipFake) set(fn func(f *aipFake)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f)
}

// Calls returns the calls received so far.
func (f *aipFake) Calls() []aipFakeCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]aipFakeCall(nil), f.calls...)
}

// commands returns "path command" for each call, in order.
func (f *aipFake) commands() []string {
	var out []string
	for _, c := range f.Calls() {
		out = append(out, strings.TrimPrefix(c.Path, f.prefix)+" "+c.Command)
	}
	return out
}

// stamp returns a timestamp as the Python peers write them, alternating
// "+00:00" and "+08:00", with microseconds. Called with mu held.
func (f *aipFake) stamp() string {
	f.stamps++
	now := time.Now()
	if f.stamps%2 == 0 {
		return now.In(aip.Beijing).Format("2006-01-02T15:04:05.000000-07:00")
	}
	return now.UTC().Format("2006-01-02T15:04:05.000000-07:00")
}

func (f *aipFake) handleACS(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	acs := f.acs
	f.calls = append(f.calls, aipFakeCall{Path: r.URL.Path, Command: "acs", LastEventSeq: -1})
	f.mu.Unlock()
	if acs == 0 {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"aic":"1.2.156.3088.1.1","active":true,"protocolVersion":"01.00","name":"fake","capabilities":{"streaming":%t,"notification":false,"messageQueue":[]},"endPoints":[{"url":%q,"transport":"JSONRPC"}]}`,
		acs == 1, f.URL()+"/rpc")
}

// read decodes a request and records the call. It answers the request
// itself and returns nil when the call is refused.
func (f *aipFake) read(w http.ResponseWriter, r *http.Request) (*aipFakeRequest, *aipFakeMessage) {
	var req aipFakeRequest
	var m aipFakeMessage
	err := json.NewDecoder(r.Body).Decode(&req)
	if err == nil {
		err = json.Unmarshal(req.Params.Message, &m)
	}
	call := aipFakeCall{Path: r.URL.Path, Command: m.Command, TaskID: m.TaskID, SessionID: m.SessionID,
		LastEventSeq: -1, Trace: r.Header.Get("Traceparent")}
	if m.CommandParams != nil && m.CommandParams.LastEventSeq != nil {
		call.LastEventSeq = *m.CommandParams.LastEventSeq
	}
	f.mu.Lock()
	f.calls = append(f.calls, call)
	fail500, garbage := f.fail500, f.garbage
	f.mu.Unlock()
	if m.Command == "cancel" {
		f.cancels <- m.TaskID
	}
	switch {
	case fail500:
		http.Error(w, "Internal Server Error", http.StatusInternalServerError)
		return nil, nil
	case garbage && strings.HasSuffix(r.URL.Path, "/stream"):
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "data: {\"jsonrpc\":\"2.0\",\"result\":{oops\n\n")
		return nil, nil
	case garbage:
		w.Header().Set("Content-Type", "text/html")
		_, _ = io.WriteString(w, "<html>oops</html>")
		return nil, nil
	case err != nil:
		aipFakeDetail(w, http.StatusBadRequest, aip.CodeParseError, err.Error())
		return nil, nil
	case m.TaskID == "":
		aipFakeDetail(w, http.StatusBadRequest, aip.CodeInvalidParams, "taskId is required")
		return nil, nil
	case strings.Contains(m.text(), "[badparams]"):
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":null,"error":{"code":-32602,"message":"Invalid params","data":null}}`, req.ID)
		return nil, nil
	}
	return &req, &m
}

func aipFakeDetail(w http.ResponseWriter, status, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	b, _ := json.Marshal(map[string]any{"detail": map[string]any{"code": code, "message": msg}})
	_, _ = w.Write(b)
}

func (f *aipFake) handleRPC(w http.ResponseWriter, r *http.Request) {
	req, m := f.read(w, r)
	if req == nil {
		return
	}
	f.mu.Lock()
	if f.rpc404 {
		f.mu.Unlock()
		aipFakeDetail(w, http.StatusNotFound, aip.CodeTaskNotFound, "Task not found: "+m.TaskID)
		return
	}
	t := f.tasks[m.TaskID]
	switch m.Command {
	case "start":
		if t == nil {
			t = f.create(m)
		}
	case "continue":
		if t != nil {
			f.continueTask(t, m)
		}
	case "complete":
		if t != nil && t.state() == "awaiting-completion" {
			f.setStatus(t, "completed", nil)
		}
	case "cancel":
		if t != nil && !aip.TaskState(t.state()).Terminal() {
			f.setStatus(t, "canceled", nil)
		}
	}
	var body []byte
	if t == nil {
		body = fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%s,"result":null,"error":{"code":-32001,"message":"Task not found","data":null}}`, req.ID)
	} else {
		task, _ := json.Marshal(f.taskObject(t))
		body = fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%s,"result":%s,"error":null}`, req.ID, task)
	}
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(body)
}

func (f *aipFake) handleStream(w http.ResponseWriter, r *http.Request) {
	req, m := f.read(w, r)
	if req == nil {
		return
	}
	f.mu.Lock()
	t := f.tasks[m.TaskID]
	from, cut := 0, 0
	switch m.Command {
	case "start":
		if t == nil {
			t = f.create(m)
		}
		if f.cutAfter > 0 && !f.cutDone {
			f.cutDone, cut = true, f.cutAfter
		}
	case "continue":
		if t == nil {
			f.mu.Unlock()
			aipFakeDetail(w, http.StatusNotFound, aip.CodeTaskNotFound, "Task not found: "+m.TaskID)
			return
		}
		from = len(t.log)
		f.continueTask(t, m)
	case "re-stream":
		if t == nil || f.restream404 {
			f.mu.Unlock()
			aipFakeDetail(w, http.StatusNotFound, aip.CodeTaskNotFound, "Stream not found: "+m.TaskID)
			return
		}
		if f.restreamError {
			f.mu.Unlock()
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprintf(w, "data: {\"jsonrpc\":\"2.0\",\"id\":%s,\"error\":{\"code\":-32002,\"message\":\"Cannot re-stream: buffer overflow, please restart\"}}\n\n", req.ID)
			return
		}
		if m.CommandParams != nil && m.CommandParams.LastEventSeq != nil {
			from = int(*m.CommandParams.LastEventSeq)
		}
	default:
		f.mu.Unlock()
		aipFakeDetail(w, http.StatusBadRequest, aip.CodeInvalidParams, "unsupported stream command "+m.Command)
		return
	}
	abort := f.cutAbort
	f.mu.Unlock()
	f.serve(w, r, t, req.ID, from, cut, abort)
}

// serve streams t's events after from, then follows the task until it ends
// or the client leaves. cut > 0 ends the connection after that many frames.
func (f *aipFake) serve(w http.ResponseWriter, r *http.Request, t *aipFakeTask, id json.RawMessage, from, cut int, abort bool) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	fl := w.(http.Flusher)
	fl.Flush()
	sent := 0
	for i := from; ; {
		f.mu.Lock()
		for i < len(t.log) {
			frame := fmt.Appendf(nil, "data: {\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":{\"eventSeq\":%d,\"eventData\":%s}}\n\n", id, i+1, t.log[i])
			f.mu.Unlock()
			if _, err := w.Write(frame); err != nil {
				return
			}
			fl.Flush()
			i++
			sent++
			if cut > 0 && sent == cut {
				if abort {
					panic(http.ErrAbortHandler)
				}
				return
			}
			f.mu.Lock()
		}
		if aip.TaskState(t.state()).Terminal() {
			f.mu.Unlock()
			return
		}
		ch := t.changed
		f.mu.Unlock()
		select {
		case <-ch:
		case <-r.Context().Done():
			return
		}
	}
}

// create makes the task of a start and runs its script. Called with mu held.
func (f *aipFake) create(m *aipFakeMessage) *aipFakeTask {
	t := &aipFakeTask{id: m.TaskID, session: m.SessionID, changed: make(chan struct{})}
	f.tasks[t.id] = t
	t.messages = append(t.messages, f.leaderMessage(m))
	t.status = map[string]any{"state": "accepted", "stateChangedAt": f.stamp(), "dataItems": nil}
	t.history = append(t.history, t.status)
	f.appendLog(t, f.taskObject(t)) // the first frame is the whole task, as the spec shows
	go f.run(t, m.text(), false)
	return t
}

// continueTask gives a waiting task its input. Called with mu held.
func (f *aipFake) continueTask(t *aipFakeTask, m *aipFakeMessage) {
	if t.state() != "awaiting-input" || m.text() == "" {
		return // ignored, as the spec says for a command in the wrong state
	}
	t.messages = append(t.messages, f.leaderMessage(m))
	go f.run(t, m.text(), true)
}

func (f *aipFake) leaderMessage(m *aipFakeMessage) map[string]any {
	return map[string]any{"type": "message", "id": m.ID, "sentAt": f.stamp(), "senderRole": "leader",
		"senderId": nil, "command": m.Command, "commandParams": nil, "taskId": m.TaskID, "sessionId": m.SessionID,
		"dataItems": []any{map[string]any{"type": "text", "text": m.text(), "metadata": nil}}}
}

func (t *aipFakeTask) state() string { return t.status["state"].(string) }

func (f *aipFake) taskObject(t *aipFakeTask) map[string]any {
	return map[string]any{"type": "task", "id": t.id, "senderId": nil, "status": t.status,
		"products": append([]any{}, t.products...), "messageHistory": append([]any{}, t.messages...),
		"statusHistory": append([]any{}, t.history...), "groupId": nil, "sessionId": t.session}
}

func (f *aipFake) appendLog(t *aipFakeTask, obj any) {
	b, err := json.Marshal(obj)
	if err != nil {
		panic(err)
	}
	t.log = append(t.log, b)
	close(t.changed)
	t.changed = make(chan struct{})
}

func (f *aipFake) setStatus(t *aipFakeTask, state string, items []any) {
	t.status = map[string]any{"state": state, "stateChangedAt": f.stamp(), "dataItems": items}
	t.history = append(t.history, t.status)
	f.appendLog(t, map[string]any{"type": "status-update", "taskId": t.id, "status": t.status, "sessionId": t.session})
}

func (f *aipFake) partnerMessage(t *aipFakeTask, items ...any) {
	m := map[string]any{"type": "message", "id": aip.NewID("msg"), "sentAt": f.stamp(), "senderRole": "partner",
		"senderId": nil, "mentions": nil, "command": nil, "commandParams": nil, "taskId": t.id,
		"sessionId": t.session, "groupId": nil, "dataItems": items}
	t.messages = append(t.messages, m)
	f.appendLog(t, m)
}

func aipFakeText(s string) map[string]any {
	return map[string]any{"type": "text", "text": s, "metadata": nil}
}

// run plays a turn's script.
func (f *aipFake) run(t *aipFakeTask, text string, continuing bool) {
	f.mu.Lock()
	delay, replies := time.Duration(0), max(f.replies, 1)
	if strings.Contains(text, "[slow]") {
		delay = f.slowDelay
	}
	f.mu.Unlock()
	step := func(fn func()) bool {
		if delay > 0 {
			time.Sleep(delay)
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		if aip.TaskState(t.state()).Terminal() {
			return false // canceled meanwhile
		}
		fn()
		return true
	}
	if !step(func() { f.setStatus(t, "working", nil) }) {
		return
	}
	if !continuing && strings.Contains(text, "[ask]") {
		step(func() { f.partnerMessage(t, aipFakeText("need more input")) })
		step(func() { f.setStatus(t, "awaiting-input", []any{aipFakeText("need more input")}) })
		return
	}
	if strings.Contains(text, "[tool]") {
		call := map[string]any{"type": "data", "metadata": nil, "data": map[string]any{"toolCall": map[string]any{
			"id": "call_1", "name": "get_weather", "kind": "plugin", "arguments": map[string]any{"city": "Beijing"}}}}
		result := map[string]any{"type": "data", "metadata": nil, "data": map[string]any{"toolResult": map[string]any{
			"id": "call_1", "name": "get_weather", "kind": "plugin", "output": "sunny"}}}
		if !step(func() { f.partnerMessage(t, call, result) }) {
			return
		}
	}
	if strings.Contains(text, "[fail]") {
		item := map[string]any{"type": "text", "text": "failed on request", "metadata": map[string]any{"code": "AGENT_FAILED"}}
		step(func() { f.setStatus(t, "failed", []any{item}) })
		return
	}
	for i := range replies {
		reply := "echo: " + text
		if i > 0 {
			reply = fmt.Sprintf("echo %d: %s", i, text)
		}
		if !step(func() { f.partnerMessage(t, aipFakeText(reply)) }) {
			return
		}
	}
	if strings.Contains(text, "[file]") {
		if !step(func() {
			p := map[string]any{"id": "product-1", "name": "report.txt", "description": nil, "dataItems": []any{
				map[string]any{"type": "file", "name": "report.txt", "mimeType": "text/plain",
					"uri": "https://example.com/report.txt", "bytes": nil, "metadata": nil}}}
			t.products = append(t.products, p)
			f.appendLog(t, map[string]any{"type": "product-chunk", "taskId": t.id, "product": p,
				"append": false, "lastChunk": true, "sessionId": t.session})
		}) {
			return
		}
	}
	f.mu.Lock()
	final := "completed"
	if f.awaitCompletion {
		final = "awaiting-completion"
	}
	f.mu.Unlock()
	step(func() { f.setStatus(t, final, nil) })
}
