package upstream

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// apFake is a scripted Agent Protocol agent for the client tests, speaking
// one dialect:
//
//   - process: GET / [[name, path]], GET /echo/describe, POST
//     /echo/process?wait= (ChatRequest, ResumeWithInput, CancelRequest), GET
//     /echo/getevents/{request_id}?stream=true&since=N (SSE with id: lines).
//     A chat or resume with wait=true is answered the turn's
//     request_started event (the README's "ChatRequest(input), wait=True ->
//     RequestStarted"; a resume names the request it continues the same
//     way), without wait only a status code;
//   - run: the same with /echo/run, /echo/get_events/{run_id}, run_started
//     and run_completed, thread_id as the session;
//   - agentic: GET /_discovery ["/echo"], POST /echo/process {prompt},
//     POST /echo/resume {continue_result}, GET
//     /echo/getevents?request_id=&stream=true: "event: message" frames of
//     {type, agent, depth, payload} without ids, read from a queue that
//     readers drain;
//   - v1: /ap/v1/agent/tasks and …/{task_id}/steps.
//
// The script follows the reference agent: "echo: T" in three text chunks;
// [tool] adds get_weather {"city":"Beijing"} → sunny; [file] an artifact
// report.txt; [ask] waits for input ("need more input") and echoes the
// answer; [fail] fails with AGENT_FAILED; [slow] waits slowDelay between
// events (v1: before answering a step).
type apFake struct {
	t       testing.TB
	srv     *httptest.Server
	dialect string

	mu sync.Mutex
	// knobs
	noDescribe   bool          // 404 on describe: the first submit must tell the edition
	cutAfter     int           // cut the first event stream after this many events
	cutStall     bool          // after the first cut, end every event stream before its first event
	cutAbort     bool          // cut by closing the connection, not by a clean end
	ignoreSince  bool          // replay every event on each GET (a server without since)
	fail500      bool          // answer everything with HTTP 500
	garbage      bool          // answer submits and steps with bodies that are not JSON
	garbageEvent bool          // send an event whose data is not JSON
	slowDelay    time.Duration // the delay of [slow] (default 50ms)
	runningSteps int           // v1: answer this many running steps before completing one
	statusOnly   bool          // answer chats and resumes with only a status, whatever wait says

	turns   map[string]*apFakeTurn
	tasks   map[string]*apFakeTask
	counter map[string]uint64 // event ids, per session
	calls   []apFakeCall
	cutDone bool
	seq     int
	cancels chan string
}

type apFakeCall struct {
	Method, Path, Query, Body, Trace string
}

type apFakeTurn struct {
	id, session string
	log         [][]byte
	ids         []uint64
	ended       bool // the log ends with an end or wait event: readers stop there
	waiting     bool
	read        int // agentic: the drain cursor
	canceled    bool
	changed     chan struct{}
}

type apFakeTask struct {
	id, input string
	steps     int
	running   int
	waiting   bool
	text      string
}

func newAPFake(t testing.TB, dialect string) *apFake {
	f := &apFake{t: t, dialect: dialect, slowDelay: 50 * time.Millisecond,
		turns: map[string]*apFakeTurn{}, tasks: map[string]*apFakeTask{}, counter: map[string]uint64{},
		cancels: make(chan string, 64)}
	mux := http.NewServeMux()
	switch dialect {
	case APDialectProcess, APDialectRun:
		mux.HandleFunc("GET /{$}", f.handleList)
		mux.HandleFunc("GET /echo/describe", f.handleDescribe)
		submit, events := "process", "getevents"
		if dialect == APDialectRun {
			submit, events = "run", "get_events"
		}
		mux.HandleFunc("POST /echo/"+submit, f.handleSubmit)
		mux.HandleFunc("GET /echo/"+events+"/{id}", f.handleEvents)
	case APDialectAgentic:
		mux.HandleFunc("GET /_discovery", f.handleList)
		mux.HandleFunc("GET /echo/describe", f.handleDescribe)
		mux.HandleFunc("POST /echo/process", f.handleSubmit)
		mux.HandleFunc("POST /echo/resume", f.handleSubmit)
		mux.HandleFunc("GET /echo/getevents", f.handleEvents)
	case APDialectV1:
		mux.HandleFunc("GET /ap/v1/agent/tasks", f.handleTaskList)
		mux.HandleFunc("POST /ap/v1/agent/tasks", f.handleCreateTask)
		mux.HandleFunc("POST /ap/v1/agent/tasks/{id}/steps", f.handleStep)
	}
	f.srv = httptest.NewServer(f.record(mux))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *apFake) URL() string { return f.srv.URL }

func (f *apFake) set(fn func(f *apFake)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f)
}

func (f *apFake) Calls() []apFakeCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]apFakeCall(nil), f.calls...)
}

// record logs every call and applies fail500.
func (f *apFake) record(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(strings.NewReader(string(body)))
		f.mu.Lock()
		f.calls = append(f.calls, apFakeCall{Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery, Body: string(body), Trace: r.Header.Get("traceparent")})
		fail := f.fail500
		f.mu.Unlock()
		if fail {
			http.Error(w, `{"detail":"boom"}`, http.StatusInternalServerError)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func (f *apFake) handleList(w http.ResponseWriter, r *http.Request) {
	if f.dialect == APDialectAgentic {
		writeJSON(w, 200, []string{"/echo", "/other"})
		return
	}
	writeJSON(w, 200, [][]string{{"echo", "/echo"}, {"other", "/other"}})
}

func (f *apFake) handleDescribe(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	no := f.noDescribe
	f.mu.Unlock()
	if no {
		writeJSON(w, 404, map[string]string{"detail": "Not Found"})
		return
	}
	switch f.dialect {
	case APDialectAgentic:
		writeJSON(w, 200, map[string]any{"name": "echo", "purpose": "echoes", "tools": []string{}, "endpoints": []string{"/process", "/getevents", "/describe"}, "operations": []string{"chat"}, "prompts": map[string]string{}})
	case APDialectRun:
		writeJSON(w, 200, map[string]any{"name": "echo", "purpose": "echoes", "tools": []string{}, "endpoints": []string{"/describe", "/run", "/get_events"}, "operations": []any{map[string]any{"name": "chat", "description": "chat"}}})
	default:
		writeJSON(w, 200, map[string]any{"name": "echo", "purpose": "echoes", "tools": []string{}, "endpoints": []string{"/describe", "/process", "/getevents"}, "operations": []any{map[string]any{"name": "chat", "description": "chat"}}})
	}
}

func (f *apFake) newID(prefix string) string {
	f.seq++
	return fmt.Sprintf("%s-%d", prefix, f.seq)
}

// keys returns the dialect's names of the turn and session ids.
func (f *apFake) keys() (turn, session string) {
	if f.dialect == APDialectRun {
		return "run_id", "thread_id"
	}
	return "request_id", "run_id"
}

// appendEvent adds an event to the turn's log (f.mu held). fields are the
// dialect-neutral members; the dialect's header or envelope is added here.
func (f *apFake) appendEvent(t *apFakeTurn, typ string, fields map[string]any) {
	var obj map[string]any
	if f.dialect == APDialectAgentic {
		obj = map[string]any{"type": typ, "agent": "echo", "depth": 0, "payload": fields["payload"]}
		if res, ok := fields["result"]; ok {
			obj["result"] = res
		}
	} else {
		f.counter[t.session]++
		id := f.counter[t.session]
		tk, sk := f.keys()
		obj = map[string]any{"id": id, "type": typ, "agent": "echo", "depth": 0, tk: t.id, sk: t.session}
		for k, v := range fields {
			obj[k] = v
		}
		t.ids = append(t.ids, id)
	}
	b, _ := json.Marshal(obj)
	t.log = append(t.log, b)
	close(t.changed)
	t.changed = make(chan struct{})
}

func (f *apFake) handleSubmit(w http.ResponseWriter, r *http.Request) {
	var body map[string]any
	raw, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.garbage {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"type": "request_started", "id": `)
		return
	}
	if err := json.Unmarshal(raw, &body); err != nil {
		writeJSON(w, 422, map[string]string{"detail": "bad body"})
		return
	}
	str := func(k string) string { s, _ := body[k].(string); return s }
	tk, sk := f.keys()
	switch {
	case body["input"] != nil || body["prompt"] != nil: // a new turn
		text := str("input") + str("prompt")
		t := &apFakeTurn{changed: make(chan struct{})}
		switch f.dialect {
		case APDialectAgentic:
			t.id = f.newID("req")
			t.session = str("thread_id")
			if t.session == "" || t.session == "NEW" {
				t.session = f.newID("thread")
			}
		case APDialectRun:
			t.id = f.newID("run")
			t.session = str("thread_id")
			if t.session == "" {
				t.session = f.newID("thread")
			}
		default:
			t.id = str("request_id")
			if t.id == "" {
				t.id = f.newID("req")
			}
			t.session = str("run_id")
			if t.session == "" {
				t.session = f.newID("run")
			}
		}
		f.turns[t.id] = t
		start := "request_started"
		switch f.dialect {
		case APDialectRun:
			start = "run_started"
		case APDialectAgentic:
			start = "prompt_started"
		}
		f.appendEvent(t, start, map[string]any{"payload": text})
		go f.play(t, text, false)
		if f.dialect == APDialectAgentic {
			writeJSON(w, 200, map[string]any{"request_id": t.id, "thread_id": t.session})
			return
		}
		f.answerStart(w, r, t)
	case body["request_keys"] != nil || body["continue_result"] != nil: // resume
		keys, _ := body["request_keys"].(map[string]any)
		id := str(tk)
		if keys == nil {
			keys, _ = body["continue_result"].(map[string]any)
			id, _ = keys["request_id"].(string)
		}
		t := f.turns[id]
		if t == nil || !t.waiting {
			writeJSON(w, 404, map[string]string{"detail": "no turn " + id + " waits for input"})
			return
		}
		answer, _ := keys["input"].(string)
		t.waiting, t.ended = false, false
		go f.play(t, answer, true)
		if f.dialect == APDialectAgentic {
			writeJSON(w, 200, map[string]any{"request_id": t.id, "thread_id": t.session})
			return
		}
		f.answerStart(w, r, t) // the request goes on: its start event names it
	default: // cancel
		id := str(tk)
		t := f.turns[id]
		if t == nil {
			writeJSON(w, 404, map[string]string{"detail": "no turn " + id})
			return
		}
		_ = sk
		f.cancels <- id
		if !t.ended {
			t.canceled = true
		}
		w.WriteHeader(200)
	}
}

// answerStart answers a chat or a resume as the README has it: with
// ?wait=true the RequestStarted (RunStarted) event, the turn's first,
// which names the turn and its session; without, only a status code. With
// statusOnly (an agent that ignores wait) it is only a status either way.
func (f *apFake) answerStart(w http.ResponseWriter, r *http.Request, t *apFakeTurn) {
	if f.statusOnly || r.URL.Query().Get("wait") != "true" {
		w.WriteHeader(202)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(t.log[0])
}

// play runs the script of a turn (or of its continuation).
func (f *apFake) play(t *apFakeTurn, text string, resumed bool) {
	slow := strings.Contains(text, "[slow]")
	step := func(typ string, fields map[string]any) bool {
		if slow {
			time.Sleep(f.slowDelayValue())
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		if t.canceled && !t.ended {
			f.end(t, "canceled", nil, "")
			return false
		}
		if t.ended {
			return false
		}
		f.appendEvent(t, typ, fields)
		return true
	}
	agentic := f.dialect == APDialectAgentic
	if !resumed {
		if strings.Contains(text, "[fail]") {
			step("noop", nil) // keeps the slow timing
			f.mu.Lock()
			f.end(t, "error", map[string]any{"code": "AGENT_FAILED", "message": "failed on request"}, "")
			f.mu.Unlock()
			return
		}
		if strings.Contains(text, "[tool]") {
			if agentic {
				if !step("tool_call", map[string]any{"payload": map[string]any{"name": "get_weather", "arguments": map[string]any{"city": "Beijing"}, "tool_call_id": "call_1"}}) ||
					!step("tool_result", map[string]any{"payload": map[string]any{"name": "get_weather", "result": "sunny", "is_log": false, "tool_call_id": "call_1"}, "result": "sunny"}) {
					return
				}
			} else if !step("tool_call", map[string]any{"function_name": "get_weather", "args": map[string]any{"city": "Beijing"}, "tool_call_id": "call_1"}) ||
				!step("tool_result", map[string]any{"function_name": "get_weather", "text_result": "sunny", "tool_call_id": "call_1"}) {
				return
			}
		}
		if strings.Contains(text, "[file]") && !agentic {
			if !step("artifact_generated", map[string]any{"name": "report.txt", "artifact_id": "art-1", "url": "https://example.com/report.txt", "mime_type": "text/plain"}) {
				return
			}
		}
		if strings.Contains(text, "[ask]") {
			fields := map[string]any{"request_keys": map[string]any{"input": "need more input"}}
			if agentic {
				fields = map[string]any{"payload": map[string]any{"input": "need more input"}}
			}
			if step("wait_for_input", fields) {
				f.mu.Lock()
				t.ended, t.waiting = true, true
				f.mu.Unlock()
			}
			return
		}
	}
	reply := "echo: " + text
	for _, chunk := range []string{"ec", "ho: ", text} {
		fields := map[string]any{"content": chunk}
		typ := "text_output"
		if agentic {
			typ, fields = "chat_output", map[string]any{"payload": map[string]any{"content": chunk, "role": "assistant"}}
		}
		if !step(typ, fields) {
			return
		}
	}
	if slow {
		time.Sleep(f.slowDelayValue())
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if t.canceled && !t.ended {
		f.end(t, "canceled", nil, "")
		return
	}
	f.end(t, "success", nil, reply)
}

func (f *apFake) slowDelayValue() time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.slowDelay
}

// end appends the turn's end event (f.mu held).
func (f *apFake) end(t *apFakeTurn, reason string, err map[string]any, result string) {
	if t.ended {
		return
	}
	switch {
	case f.dialect == APDialectAgentic && reason == "canceled":
		f.appendEvent(t, "turn_cancelled", map[string]any{"payload": nil})
	case f.dialect == APDialectAgentic:
		payload := map[string]any{"messages": []any{map[string]any{"role": "assistant", "content": result}}}
		if err != nil {
			payload["error"] = err
		}
		f.appendEvent(t, "turn_end", map[string]any{"payload": payload})
	default:
		typ := "request_completed"
		if f.dialect == APDialectRun {
			typ = "run_completed"
		}
		fields := map[string]any{"finish_reason": reason}
		if err != nil {
			fields["error"] = err
		}
		if result != "" {
			fields["result"] = result
		}
		f.appendEvent(t, typ, fields)
	}
	t.ended = true
}

// handleEvents streams a turn's events as SSE: those after since (all of
// them with ignoreSince; agentic: those not drained yet), waiting for more,
// until the turn ends or waits for input.
func (f *apFake) handleEvents(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if f.dialect == APDialectAgentic {
		id = r.URL.Query().Get("request_id")
	}
	since, _ := strconv.ParseUint(r.URL.Query().Get("since"), 10, 64)
	f.mu.Lock()
	t := f.turns[id]
	if t == nil {
		f.mu.Unlock()
		writeJSON(w, 404, map[string]string{"detail": "no turn " + id})
		return
	}
	if f.ignoreSince {
		since = 0
	}
	cut, stall := 0, false
	if f.cutAfter > 0 {
		stall = f.cutDone && f.cutStall
		if !f.cutDone {
			cut, f.cutDone = f.cutAfter, true
		}
	}
	abort, garbage := f.cutAbort, f.garbageEvent
	f.mu.Unlock()

	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(200)
	fl := w.(http.Flusher)
	fl.Flush()
	if stall {
		return
	}
	idx, sent := 0, 0
	if f.dialect != APDialectAgentic {
		f.mu.Lock()
		for idx < len(t.ids) && t.ids[idx] <= since {
			idx++
		}
		f.mu.Unlock()
	}
	for {
		f.mu.Lock()
		if f.dialect == APDialectAgentic {
			idx = t.read
		}
		if idx >= len(t.log) {
			if t.ended {
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
			continue
		}
		obj := t.log[idx]
		var frame string
		if f.dialect == APDialectAgentic {
			t.read++
			frame = "event: message\r\ndata: " + string(obj) + "\r\n\r\n"
		} else {
			frame = fmt.Sprintf("id: %d\ndata: %s\n\n", t.ids[idx], obj)
		}
		idx++
		f.mu.Unlock()
		if garbage && sent == 1 {
			frame = "id: 99\ndata: {\"type\": \"text_output\", \"content\": \n\n"
		}
		_, _ = io.WriteString(w, frame)
		fl.Flush()
		sent++
		if cut > 0 && sent >= cut {
			if abort {
				if hj, ok := w.(http.Hijacker); ok {
					if c, _, err := hj.Hijack(); err == nil {
						_ = c.Close()
					}
				}
			}
			return
		}
		if sent%3 == 0 {
			_, _ = io.WriteString(w, ": ping\n\n")
		}
	}
}

// v1

func (f *apFake) handleTaskList(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	n := len(f.tasks)
	f.mu.Unlock()
	writeJSON(w, 200, map[string]any{"tasks": []any{}, "pagination": map[string]int{"total_items": n, "total_pages": 1, "current_page": 1, "page_size": 1}})
}

func (f *apFake) handleCreateTask(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Input           *string         `json:"input"`
		AdditionalInput json.RawMessage `json:"additional_input"`
	}
	raw, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.garbage {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"task_id": `)
		return
	}
	if len(raw) > 0 && json.Unmarshal(raw, &body) != nil {
		writeJSON(w, 422, map[string]string{"message": "bad body"})
		return
	}
	t := &apFakeTask{id: f.newID("task"), running: f.runningSteps}
	if body.Input != nil {
		t.input = *body.Input
	}
	f.tasks[t.id] = t
	writeJSON(w, 200, map[string]any{"task_id": t.id, "input": body.Input, "additional_input": map[string]any{}, "artifacts": []any{}})
}

func (f *apFake) handleStep(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Input *string `json:"input"`
	}
	raw, _ := io.ReadAll(r.Body)
	_ = json.Unmarshal(raw, &body)
	f.mu.Lock()
	t := f.tasks[r.PathValue("id")]
	if t == nil {
		f.mu.Unlock()
		writeJSON(w, 404, map[string]string{"message": "Task with " + r.PathValue("id") + " not found."})
		return
	}
	if f.garbage {
		f.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"step_id": `)
		return
	}
	t.steps++
	text := t.input
	if body.Input != nil && *body.Input != "" {
		text = *body.Input
	}
	delay := f.slowDelay
	f.mu.Unlock()
	if strings.Contains(text, "[slow]") {
		select {
		case <-time.After(4 * delay):
		case <-r.Context().Done():
			return
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	step := map[string]any{"task_id": t.id, "step_id": fmt.Sprintf("%s-step-%d", t.id, t.steps), "input": body.Input,
		"additional_input": map[string]any{}, "status": "completed", "is_last": true, "artifacts": []any{}, "additional_output": nil, "name": nil}
	switch {
	case t.running > 0:
		t.running--
		step["status"], step["is_last"], step["output"] = "running", false, "working…"
	case t.waiting:
		t.waiting = false
		step["output"] = "echo: " + text
	case strings.Contains(text, "[fail]"):
		step["output"] = "Error: failed on request"
		step["additional_output"] = map[string]any{"state": "failed", "error": map[string]any{"code": "AGENT_FAILED", "message": "failed on request"}}
	case strings.Contains(text, "[ask]"):
		t.waiting = true
		step["is_last"], step["output"] = false, "need more input"
	default:
		step["output"] = "echo: " + text
		if strings.Contains(text, "[file]") {
			step["artifacts"] = []any{map[string]any{"artifact_id": "art-1", "agent_created": true, "file_name": "report.txt", "relative_path": nil}}
		}
	}
	writeJSON(w, 200, step)
}
