package downstream_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/tidwall/gjson"

	"github.com/agentbridge/bridge/downstream"
	"github.com/agentbridge/bridge/internal/refagent"
	"github.com/agentbridge/bridge/translate"
	"github.com/agentbridge/bridge/upstream"
)

// apBridges returns the agent URLs ({base}/{agent}) of the two set-ups
// every behaviour runs on: the reference agent in-process, and the
// reference agent over the Agent API.
func apBridges(t *testing.T, opts downstream.Options) map[string]string {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = quietLog()
	}
	a := refagent.New()
	a.Delay = 20 * time.Millisecond
	inproc := serve(t, downstream.New(opts, &downstream.Routing{Routes: []downstream.Route{
		{Name: "ref", Upstream: "ref", Proto: translate.ProtoAgentAPI, Agent: a}}}))
	agent := referenceAgent(t, 20*time.Millisecond)
	viaAPI, _ := agentAPIBridge(t, agent+"/process", upstream.Config{}, opts)
	return map[string]string{"inproc": inproc + "/ref", "agentapi": viaAPI + "/up"}
}

func apDo(t *testing.T, method, url, body string, hdr map[string]string) (int, http.Header, []byte) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, raw
}

// apJSONOK asserts a JSON answer with the status and returns it parsed.
func apJSONOK(t *testing.T, status int, h http.Header, raw []byte, want int) gjson.Result {
	t.Helper()
	if status != want || !strings.HasPrefix(h.Get("Content-Type"), "application/json") || !gjson.ValidBytes(raw) {
		t.Fatalf("HTTP %d %s, want %d JSON: %s", status, h.Get("Content-Type"), want, raw)
	}
	return gjson.ParseBytes(raw)
}

// apEvent is one SSE event: its id line and its data.
type apEvent struct {
	id   string
	data gjson.Result
}

// apSSE parses an Agent Protocol SSE body strictly: every event is
// "id: N" then one "data: <JSON object>" line whose id member is N.
func apSSE(t *testing.T, raw []byte) []apEvent {
	t.Helper()
	var out []apEvent
	for _, block := range strings.Split(string(raw), "\n\n") {
		if block == "" || strings.HasPrefix(block, ":") {
			continue
		}
		out = append(out, apSSEBlock(t, block))
	}
	return out
}

func apSSEBlock(t *testing.T, block string) apEvent {
	t.Helper()
	lines := strings.Split(block, "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "id: ") || !strings.HasPrefix(lines[1], "data: ") {
		t.Fatalf("event is not id + data: %q", block)
	}
	js := strings.TrimPrefix(lines[1], "data: ")
	if !gjson.Valid(js) {
		t.Fatalf("data is not JSON: %q", js)
	}
	ev := apEvent{id: strings.TrimPrefix(lines[0], "id: "), data: gjson.Parse(js)}
	if ev.data.Get("id").String() != ev.id {
		t.Fatalf("id line %s, event id %s", ev.id, ev.data.Get("id").Raw)
	}
	return ev
}

// apSSEReader reads SSE events one at a time from a live stream.
type apSSEReader struct {
	t  *testing.T
	br *bufio.Reader
}

func (r *apSSEReader) next() (apEvent, bool) {
	var block []string
	for {
		line, err := r.br.ReadString('\n')
		if err != nil {
			return apEvent{}, false
		}
		line = strings.TrimSuffix(line, "\n")
		if line == "" {
			if len(block) == 0 || strings.HasPrefix(block[0], ":") {
				block = nil
				continue
			}
			return apSSEBlock(r.t, strings.Join(block, "\n")), true
		}
		block = append(block, line)
	}
}

// apOpenSSE opens a getevents stream.
func apOpenSSE(t *testing.T, url string, hdr map[string]string) (*apSSEReader, func()) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		t.Fatalf("GET %s: HTTP %d %s", url, resp.StatusCode, b)
	}
	return &apSSEReader{t: t, br: bufio.NewReader(resp.Body)}, func() { resp.Body.Close() }
}

func apData(evs []apEvent) []gjson.Result {
	out := make([]gjson.Result, len(evs))
	for i, e := range evs {
		out[i] = e.data
	}
	return out
}

func apText(evs []gjson.Result) string {
	var b strings.Builder
	for _, e := range evs {
		if e.Get("type").String() == "text_output" {
			b.WriteString(e.Get("content").String())
		}
	}
	return b.String()
}

// apTextAfterWait is the reply text after the wait_for_input (over the
// Agent API the question itself comes as assistant text before it).
func apTextAfterWait(evs []gjson.Result) string {
	for i, e := range evs {
		if e.Get("type").String() == "wait_for_input" {
			return apText(evs[i+1:])
		}
	}
	return apText(evs)
}

func apTypes(evs []gjson.Result) string {
	var ts []string
	for _, e := range evs {
		ts = append(ts, e.Get("type").String())
	}
	return strings.Join(ts, ",")
}

func apFind(evs []gjson.Result, typ string) gjson.Result {
	for _, e := range evs {
		if e.Get("type").String() == typ {
			return e
		}
	}
	return gjson.Result{}
}

// apCheckTurn asserts what every client of a request relies on, and what
// the reference agent does for the markers in text.
func apCheckTurn(t *testing.T, text string, evs []gjson.Result) {
	t.Helper()
	if len(evs) < 2 || evs[0].Get("type").String() != "request_started" || evs[len(evs)-1].Get("type").String() != "request_completed" {
		t.Fatalf("events %s do not run from request_started to request_completed", apTypes(evs))
	}
	rid := evs[0].Get("request_id").String()
	var last int64
	for _, e := range evs {
		if e.Get("request_id").String() != rid || e.Get("run_id").String() == "" || e.Get("agent").String() == "" {
			t.Fatalf("event without the request's ids: %s", e.Raw)
		}
		if id := e.Get("id").Int(); id < last {
			t.Fatalf("event ids go back: %s", apTypes(evs))
		} else {
			last = id
		}
	}
	end := evs[len(evs)-1]
	if strings.Contains(text, "[fail]") {
		if end.Get("finish_reason").String() != "error" || end.Get("error.code").String() != refagent.FailCode {
			t.Fatalf("end %s", end.Raw)
		}
		return
	}
	if got := apText(evs); got != "echo: "+text || end.Get("finish_reason").String() != "success" || end.Get("result").String() != got {
		t.Fatalf("text %q, end %s", got, end.Raw)
	}
	if strings.Contains(text, "[tool]") {
		call, res := apFind(evs, "tool_call"), apFind(evs, "tool_result")
		if call.Get("function_name").String() != refagent.ToolName || call.Get("args.city").String() != "Beijing" ||
			res.Get("text_result").String() != refagent.ToolOutput || res.Get("tool_call_id").String() != call.Get("tool_call_id").String() {
			t.Fatalf("tool events %s / %s", call.Raw, res.Raw)
		}
	}
	if strings.Contains(text, "[file]") {
		a := apFind(evs, "artifact_generated")
		// The Agent API's file content has no MIME type: over it the type is lost.
		if mime := a.Get("mime_type").String(); a.Get("name").String() != refagent.FileName || a.Get("url").String() != refagent.FileURI || (mime != refagent.FileMIME && mime != "") {
			t.Fatalf("artifact %s", a.Raw)
		}
	}
}

func apChatBody(id, text string) string {
	m := map[string]any{"input": text}
	if id != "" {
		m["request_id"] = id
	}
	b, _ := json.Marshal(m)
	return string(b)
}

var apBehaviours = []string{"hello", "weather [tool]", "report [file]", "x [fail]", "take it [slow]"}

func TestAPAgentListAndDescribe(t *testing.T) {
	for name, agent := range apBridges(t, downstream.Options{}) {
		t.Run(name, func(t *testing.T) {
			base, agentPath := agent[:strings.LastIndex(agent, "/")], agent[strings.LastIndex(agent, "/"):]
			list := apGetJSON(t, base+"/")
			if len(list.Array()) != 1 || list.Get("0.1").String() != agentPath || "/"+list.Get("0.0").String() != agentPath {
				t.Fatalf("agent list %s, want [[name, %s]]", list.Raw, agentPath)
			}
			disc := apGetJSON(t, base+"/_discovery")
			if disc.Get("0").String() != agentPath {
				t.Fatalf("discovery %s", disc.Raw)
			}
			d := apGetJSON(t, agent+"/describe")
			if "/"+d.Get("name").String() != agentPath || d.Get("operations.0.name").String() != "chat" || !d.Get("endpoints").IsArray() {
				t.Fatalf("descriptor %s", d.Raw)
			}
			st, h, raw := apDo(t, "GET", base+"/nobody/describe", "", nil)
			if e := apJSONOK(t, st, h, raw, 404); !strings.Contains(e.Get("detail").String(), "nobody") {
				t.Fatalf("unknown agent: %s", raw)
			}
			// The one agent also answers at the root.
			d = apGetJSON(t, base+"/describe")
			if "/"+d.Get("name").String() != agentPath {
				t.Fatalf("root descriptor %s", d.Raw)
			}
		})
	}
}

// apGetJSON GETs url and asserts a 200 JSON answer.
func apGetJSON(t *testing.T, url string) gjson.Result {
	t.Helper()
	st, h, raw := apDo(t, "GET", url, "", nil)
	return apJSONOK(t, st, h, raw, 200)
}

// TestAPReferenceBehaviours runs every reference behaviour through
// process + getevents (SSE and JSON), stream_request and the WebSocket.
func TestAPReferenceBehaviours(t *testing.T) {
	for name, agent := range apBridges(t, downstream.Options{}) {
		t.Run(name, func(t *testing.T) {
			for _, text := range apBehaviours {
				t.Run("process/"+text, func(t *testing.T) {
					start := time.Now()
					st, h, raw := apDo(t, "POST", agent+"/process", apChatBody("", text), nil)
					started := apJSONOK(t, st, h, raw, 202)
					rid := started.Get("request_id").String()
					if started.Get("type").String() != "request_started" || rid == "" || started.Get("run_id").String() == "" {
						t.Fatalf("process answered %s", raw)
					}
					st, h, raw = apDo(t, "GET", agent+"/getevents/"+rid+"?stream=true", "", nil)
					if st != 200 || !strings.HasPrefix(h.Get("Content-Type"), "text/event-stream") {
						t.Fatalf("stream: HTTP %d %s", st, raw)
					}
					evs := apData(apSSE(t, raw))
					apCheckTurn(t, text, evs)
					if strings.Contains(text, "[slow]") && time.Since(start) < 5*20*time.Millisecond {
						t.Fatalf("slow answer came in %v", time.Since(start))
					}
					js := apGetJSON(t, agent+"/getevents?request_id="+rid+"&since=0")
					if len(js.Array()) != len(evs) {
						t.Fatalf("JSON getevents has %d events, SSE %d", len(js.Array()), len(evs))
					}
					for i, e := range js.Array() {
						if e.Raw != evs[i].Raw {
							t.Fatalf("JSON event %d %s, SSE %s", i, e.Raw, evs[i].Raw)
						}
					}
					state := apGetJSON(t, agent+"/request/"+rid)
					if state.Get("request_id").String() != rid || !state.Get("finish_reason").Exists() {
						t.Fatalf("state %s", state.Raw)
					}
				})
				t.Run("wait/"+text, func(t *testing.T) {
					// The README: wait=True -> RequestStarted, one event.
					st, h, raw := apDo(t, "POST", agent+"/process?wait=true", apChatBody("", text), nil)
					started := apJSONOK(t, st, h, raw, 200)
					rid := started.Get("request_id").String()
					if !started.IsObject() || started.Get("type").String() != "request_started" || rid == "" || started.Get("run_id").String() == "" {
						t.Fatalf("process?wait=true answered %s", raw)
					}
					st, h, raw = apDo(t, "GET", agent+"/getevents/"+rid+"?stream=true", "", nil)
					if st != 200 || !strings.HasPrefix(h.Get("Content-Type"), "text/event-stream") {
						t.Fatalf("stream: HTTP %d %s", st, raw)
					}
					evs := apData(apSSE(t, raw))
					apCheckTurn(t, text, evs)
					if evs[0].Raw != started.Raw {
						t.Fatalf("process answered %s, the stream starts with %s", started.Raw, evs[0].Raw)
					}
				})
				t.Run("settled/"+text, func(t *testing.T) {
					// The bridge's convenience: the whole turn in one call.
					st, h, raw := apDo(t, "POST", agent+"/process?wait=true&until=settled", apChatBody("", text), nil)
					evs := apJSONOK(t, st, h, raw, 200)
					if !evs.IsArray() {
						t.Fatalf("process?until=settled answered %s", raw)
					}
					apCheckTurn(t, text, evs.Array())
				})
				t.Run("stream_request/"+text, func(t *testing.T) {
					st, _, raw := apDo(t, "POST", agent+"/stream_request", apChatBody("", text), nil)
					if st != 200 {
						t.Fatalf("HTTP %d %s", st, raw)
					}
					apCheckTurn(t, text, apData(apSSE(t, raw)))
				})
				t.Run("ws/"+text, func(t *testing.T) {
					c := apDial(t, agent)
					apSend(t, c, apChatBody("", text))
					ack := apRead(t, c)
					if ack.Get("type").String() != "ack" || ack.Get("request_id").String() == "" {
						t.Fatalf("first frame %s", ack.Raw)
					}
					apCheckTurn(t, text, apReadTurn(t, c, ack.Get("request_id").String()))
				})
			}
			t.Run("runs", func(t *testing.T) {
				runs := apGetJSON(t, agent+"/runs")
				if len(runs.Array()) < 4*len(apBehaviours) {
					t.Fatalf("%d runs listed", len(runs.Array()))
				}
			})
		})
	}
}

// apGate holds back every turn of inner until open is closed: its requests
// are started, but their turns have not begun.
func apGate(inner translate.Agent, open <-chan struct{}) translate.Agent {
	return translate.AgentFunc(func(ctx context.Context, req *translate.Request) (translate.Stream, error) {
		select {
		case <-open:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return inner.Open(ctx, req)
	})
}

// TestAPWaitAnswersStarted: process?wait=true answers the start event as
// soon as the request is started (README: "POST /process
// (ChatRequest(input), wait=True) -> RequestStarted"), in both README
// dialects, while the turn is held back; until=settled answers only once
// the turn settles, with the whole turn; a resume with wait=true answers
// the start event of the request it continues; a ConfigureRequest with
// wait=true answers RequestCompleted.
func TestAPWaitAnswersStarted(t *testing.T) {
	ref := refagent.New()
	ref.Delay = 0
	gate := make(chan struct{})
	var once sync.Once
	release := func() { once.Do(func() { close(gate) }) }
	base := serve(t, downstream.New(downstream.Options{Logger: quietLog()},
		&downstream.Routing{Routes: []downstream.Route{{Name: "ref", Upstream: "ref", Proto: translate.ProtoAgentAPI, Agent: apGate(ref, gate)}}}))
	t.Cleanup(release) // before the server's Shutdown
	agent := base + "/ref"
	client := &http.Client{Timeout: 10 * time.Second}

	for _, d := range []struct{ op, typ, turn, session string }{
		{"process", "request_started", "request_id", "run_id"},
		{"run", "run_started", "run_id", "thread_id"},
	} {
		resp, err := client.Post(agent+"/"+d.op+"?wait=true", "application/json", strings.NewReader(apChatBody("", "held")))
		if err != nil {
			t.Fatalf("%s?wait=true did not answer while the turn was held back: %v", d.op, err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		started := apJSONOK(t, resp.StatusCode, resp.Header, raw, 200)
		id := started.Get(d.turn).String()
		if !started.IsObject() || started.Get("type").String() != d.typ || started.Get("id").Int() != 1 || id == "" || started.Get(d.session).String() == "" {
			t.Fatalf("%s?wait=true answered %s", d.op, raw)
		}
		if st := apGetJSON(t, agent+"/request/"+id); st.Get("finish_reason").Exists() || st.Get("state").String() == "completed" {
			t.Fatalf("%s?wait=true answered a request that is over: %s", d.op, st.Raw)
		}
	}

	type answer struct {
		status int
		h      http.Header
		raw    []byte
		err    error
	}
	settled := make(chan answer, 1)
	go func() {
		resp, err := client.Post(agent+"/process?wait=true&until=settled", "application/json", strings.NewReader(apChatBody("whole", "held [tool]")))
		if err != nil {
			settled <- answer{err: err}
			return
		}
		raw, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		settled <- answer{resp.StatusCode, resp.Header, raw, err}
	}()
	select {
	case a := <-settled:
		t.Fatalf("until=settled answered before the turn began: HTTP %d %s %v", a.status, a.raw, a.err)
	case <-time.After(100 * time.Millisecond):
	}
	release()
	a := <-settled
	if a.err != nil {
		t.Fatal(a.err)
	}
	apCheckTurn(t, "held [tool]", apJSONOK(t, a.status, a.h, a.raw, 200).Array())

	// A resume answers the start event of the request it continues.
	st, h, raw := apDo(t, "POST", agent+"/process?until=settled", apChatBody("asker", "x [ask]"), nil)
	first := apJSONOK(t, st, h, raw, 200).Array()
	st, h, raw = apDo(t, "POST", agent+"/process?wait=true", `{"request_id":"asker","request_keys":{"input":"Paris"}}`, nil)
	if res := apJSONOK(t, st, h, raw, 200); res.Raw != first[0].Raw || res.Get("request_id").String() != "asker" {
		t.Fatalf("resume?wait=true answered %s, want %s", raw, first[0].Raw)
	}
	st, _, raw = apDo(t, "GET", agent+"/getevents/asker?stream=true", "", nil)
	evs := apData(apSSE(t, raw))
	if end := evs[len(evs)-1]; st != 200 || end.Get("finish_reason").String() != "success" || apTextAfterWait(evs) != "echo: Paris" {
		t.Fatalf("after the resume: HTTP %d %s", st, apTypes(evs))
	}
	// Configure, the README's "ConfigureRequest(args), wait=True -> RequestCompleted".
	st, h, raw = apDo(t, "POST", agent+"/process?wait=true", `{"args":{"temperature":0}}`, nil)
	if c := apJSONOK(t, st, h, raw, 200); !c.IsObject() || c.Get("type").String() != "request_completed" || c.Get("finish_reason").String() != "success" {
		t.Fatalf("configure?wait=true answered %s", raw)
	}
}

func apDial(t *testing.T, agent string) *websocket.Conn {
	t.Helper()
	c, resp, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(agent, "http")+"/ws", nil)
	if err != nil {
		t.Fatalf("dial: %v (%v)", err, resp)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func apSend(t *testing.T, c *websocket.Conn, frame string) {
	t.Helper()
	if err := c.WriteMessage(websocket.TextMessage, []byte(frame)); err != nil {
		t.Fatal(err)
	}
}

func apRead(t *testing.T, c *websocket.Conn) gjson.Result {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, b, err := c.ReadMessage()
	if err != nil {
		t.Fatal(err)
	}
	if !gjson.ValidBytes(b) {
		t.Fatalf("frame is not JSON: %q", b)
	}
	return gjson.ParseBytes(b)
}

// apReadTurn reads frames until the request's request_completed (or a
// wait_for_input, with pause) and returns the request's events.
func apReadTurn(t *testing.T, c *websocket.Conn, rid string) []gjson.Result {
	t.Helper()
	return apReadUntil(t, c, rid, "request_completed")
}

func apReadUntil(t *testing.T, c *websocket.Conn, rid, last string) []gjson.Result {
	t.Helper()
	var out []gjson.Result
	for {
		f := apRead(t, c)
		if f.Get("request_id").String() != rid {
			t.Fatalf("frame of another request: %s", f.Raw)
		}
		if f.Get("type").String() == "error" {
			t.Fatalf("error frame %s", f.Raw)
		}
		out = append(out, f)
		if f.Get("type").String() == last {
			return out
		}
	}
}

// TestAPAskAndResume: [ask] waits for input; a ResumeWithInput continues
// the same request, and the open stream goes on with its events.
func TestAPAskAndResume(t *testing.T) {
	for name, agent := range apBridges(t, downstream.Options{}) {
		t.Run(name, func(t *testing.T) {
			t.Run("rest", func(t *testing.T) {
				st, h, raw := apDo(t, "POST", agent+"/process?until=settled", apChatBody("", "x [ask]"), nil)
				evs := apJSONOK(t, st, h, raw, 200).Array()
				wait := evs[len(evs)-1]
				if wait.Get("type").String() != "wait_for_input" || wait.Get("request_keys.input").String() != refagent.AskPrompt {
					t.Fatalf("wait answered %s", raw)
				}
				rid := wait.Get("request_id").String()
				state := apGetJSON(t, agent+"/request/"+rid)
				if state.Get("state").String() != "input-required" {
					t.Fatalf("state %s", state.Raw)
				}
				r, stop := apOpenSSE(t, agent+"/getevents/"+rid+"?stream=true", nil)
				defer stop()
				var got []gjson.Result
				for len(got) == 0 || got[len(got)-1].Get("type").String() != "wait_for_input" {
					ev, ok := r.next()
					if !ok {
						var raws []string
						for _, g := range got {
							raws = append(raws, g.Raw)
						}
						t.Fatalf("stream ended before wait_for_input, after %s", strings.Join(raws, "\n"))
					}
					got = append(got, ev.data)
				}
				st, h, raw = apDo(t, "POST", agent+"/process", `{"request_id":"`+rid+`","request_keys":{"input":"Paris"}}`, nil)
				apJSONOK(t, st, h, raw, 202)
				for got[len(got)-1].Get("type").String() != "request_completed" {
					ev, ok := r.next()
					if !ok {
						t.Fatalf("stream ended after %s", apTypes(got))
					}
					got = append(got, ev.data)
				}
				if _, ok := r.next(); ok {
					t.Fatal("events after request_completed")
				}
				end := got[len(got)-1]
				if apTextAfterWait(got) != "echo: Paris" || end.Get("finish_reason").String() != "success" || end.Get("request_id").String() != rid {
					t.Fatalf("continuation %s", apTypes(got))
				}
				// A second resume finds nothing waiting.
				st, h, raw = apDo(t, "POST", agent+"/process", `{"request_id":"`+rid+`","request_keys":{"input":"again"}}`, nil)
				apJSONOK(t, st, h, raw, 409)
			})
			t.Run("stream_request", func(t *testing.T) {
				req, _ := http.NewRequest("POST", agent+"/stream_request", strings.NewReader(apChatBody("", "y [ask]")))
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				r := &apSSEReader{t: t, br: bufio.NewReader(resp.Body)}
				var got []gjson.Result
				for len(got) == 0 || got[len(got)-1].Get("type").String() != "wait_for_input" {
					ev, ok := r.next()
					if !ok {
						var raws []string
						for _, g := range got {
							raws = append(raws, g.Raw)
						}
						t.Fatalf("stream ended before wait_for_input, after %s", strings.Join(raws, "\n"))
					}
					got = append(got, ev.data)
				}
				// The run-dialect ids work on /process too: run_id names the run.
				run := got[0].Get("run_id").String()
				st, h, raw := apDo(t, "POST", agent+"/process?wait=true&until=settled", `{"run_id":"`+run+`","request_keys":{"input":"Rome"}}`, nil)
				cont := apJSONOK(t, st, h, raw, 200).Array()
				if apText(cont) != "echo: Rome" || apTypes(cont[len(cont)-1:]) != "request_completed" {
					t.Fatalf("resume answered %s", raw)
				}
				for got[len(got)-1].Get("type").String() != "request_completed" {
					ev, ok := r.next()
					if !ok {
						t.Fatalf("stream ended after %s", apTypes(got))
					}
					got = append(got, ev.data)
				}
				if apTextAfterWait(got) != "echo: Rome" {
					t.Fatalf("stream text %q", apTextAfterWait(got))
				}
			})
			t.Run("ws", func(t *testing.T) {
				c := apDial(t, agent)
				apSend(t, c, apChatBody("ask-"+name, "z [ask]"))
				if ack := apRead(t, c); ack.Get("request_id").String() != "ask-"+name {
					t.Fatalf("ack %s", ack.Raw)
				}
				evs := apReadUntil(t, c, "ask-"+name, "wait_for_input")
				apSend(t, c, `{"request_id":"ask-`+name+`","request_keys":{"input":"Oslo"},"ref":7}`)
				if ack := apRead(t, c); ack.Get("op").String() != "resume" || ack.Get("ref").Int() != 7 {
					t.Fatalf("ack %s", ack.Raw)
				}
				evs = append(evs, apReadTurn(t, c, "ask-"+name)...)
				if apTextAfterWait(evs) != "echo: Oslo" || evs[len(evs)-1].Get("finish_reason").String() != "success" {
					t.Fatalf("events %s", apTypes(evs))
				}
			})
		})
	}
}

// TestAPCancelSlow cancels a [slow] request mid-way: the stream ends with
// request_completed finish_reason canceled.
func TestAPCancelSlow(t *testing.T) {
	for name, agent := range apBridges(t, downstream.Options{}) {
		t.Run(name, func(t *testing.T) {
			t.Run("rest", func(t *testing.T) {
				st, h, raw := apDo(t, "POST", agent+"/process", apChatBody("", "long [slow]"), nil)
				rid := apJSONOK(t, st, h, raw, 202).Get("request_id").String()
				r, stop := apOpenSSE(t, agent+"/getevents/"+rid+"?stream=true", nil)
				defer stop()
				var got []gjson.Result
				for len(got) == 0 || got[len(got)-1].Get("type").String() != "text_output" {
					ev, ok := r.next()
					if !ok {
						t.Fatal("stream ended early")
					}
					got = append(got, ev.data)
				}
				st, h, raw = apDo(t, "POST", agent+"/process", `{"request_id":"`+rid+`"}`, nil)
				canceled := apJSONOK(t, st, h, raw, 200)
				if !canceled.IsObject() || canceled.Get("type").String() != "request_completed" ||
					canceled.Get("finish_reason").String() != "canceled" || canceled.Get("request_id").String() != rid {
					t.Fatalf("cancel answered %s", raw)
				}
				for {
					ev, ok := r.next()
					if !ok {
						break
					}
					got = append(got, ev.data)
				}
				end := got[len(got)-1]
				if end.Get("type").String() != "request_completed" || end.Get("finish_reason").String() != "canceled" {
					t.Fatalf("stream ended with %s", end.Raw)
				}
				if end.Raw != canceled.Raw {
					t.Fatalf("stream ended with %s, the cancel answered %s", end.Raw, canceled.Raw)
				}
				if apText(got) == "echo: long [slow]" {
					t.Fatal("the whole reply came: nothing was canceled")
				}
				// Canceling again changes nothing.
				st, h, raw = apDo(t, "POST", agent+"/process?wait=true", `{"request_id":"`+rid+`"}`, nil)
				if e := apJSONOK(t, st, h, raw, 200); e.Raw != end.Raw {
					t.Fatalf("second cancel %s, want the request's end %s", raw, end.Raw)
				}
			})
			t.Run("ws", func(t *testing.T) {
				c := apDial(t, agent)
				rid := "slow-" + name
				apSend(t, c, apChatBody(rid, "long [slow]"))
				apRead(t, c) // ack
				evs := apReadUntil(t, c, rid, "text_output")
				apSend(t, c, `{"request_id":"`+rid+`"}`)
				var ack gjson.Result
				for {
					f := apRead(t, c)
					if f.Get("type").String() == "ack" {
						ack = f
						break
					}
					evs = append(evs, f)
				}
				if ack.Get("op").String() != "cancel" {
					t.Fatalf("ack %s", ack.Raw)
				}
				evs = append(evs, apReadTurn(t, c, rid)...)
				if evs[len(evs)-1].Get("finish_reason").String() != "canceled" {
					t.Fatalf("events %s", apTypes(evs))
				}
			})
		})
	}
}

// TestAPResumeStream cuts a live stream after N events and resumes it with
// since=N and with Last-Event-ID: N: exactly the events after N, none twice.
func TestAPResumeStream(t *testing.T) {
	for name, agent := range apBridges(t, downstream.Options{}) {
		t.Run(name, func(t *testing.T) {
			st, h, raw := apDo(t, "POST", agent+"/process", apChatBody("", "cut me [slow] [tool] [file]"), nil)
			rid := apJSONOK(t, st, h, raw, 202).Get("request_id").String()
			url := agent + "/getevents/" + rid + "?stream=true"
			r, stop := apOpenSSE(t, url, nil)
			var head []apEvent
			for len(head) < 3 {
				ev, ok := r.next()
				if !ok {
					t.Fatal("stream ended early")
				}
				head = append(head, ev)
			}
			stop() // cut, while the turn goes on
			n := head[len(head)-1].id
			for _, how := range []struct {
				name string
				url  string
				hdr  map[string]string
			}{
				{"since", url + "&since=" + n, nil},
				{"Last-Event-ID", url, map[string]string{"Last-Event-ID": n}},
			} {
				t.Run(how.name, func(t *testing.T) {
					r, stop := apOpenSSE(t, how.url, how.hdr)
					defer stop()
					all := append([]apEvent(nil), head...)
					for {
						ev, ok := r.next()
						if !ok {
							break
						}
						all = append(all, ev)
					}
					seen := map[string]bool{}
					for _, ev := range all {
						if seen[ev.data.Raw] {
							t.Fatalf("event twice: %s", ev.data.Raw)
						}
						seen[ev.data.Raw] = true
					}
					for _, ev := range all[len(head):] {
						if ev.data.Get("id").Int() <= head[len(head)-1].data.Get("id").Int() {
							t.Fatalf("event %s is not after %s", ev.id, n)
						}
					}
					full := apGetJSON(t, agent+"/getevents/"+rid+"?since=0").Array()
					if len(full) != len(all) {
						t.Fatalf("%d events after the cut and resume, %d in the log", len(all), len(full))
					}
					for i := range full {
						if full[i].Raw != all[i].data.Raw {
							t.Fatalf("event %d: %s, log %s", i, all[i].data.Raw, full[i].Raw)
						}
					}
					apCheckTurn(t, "cut me [slow] [tool] [file]", apData(all))
				})
			}
			// Polling without since answers what came since the last poll.
			st, h, raw = apDo(t, "POST", agent+"/process?until=settled", apChatBody("", "poll"), nil)
			rid = apJSONOK(t, st, h, raw, 200).Get("0.request_id").String()
			first := apGetJSON(t, agent+"/getevents/"+rid).Array()
			again := apGetJSON(t, agent+"/getevents/"+rid).Array()
			if len(first) == 0 || len(again) != 0 {
				t.Fatalf("polls: %d then %d events", len(first), len(again))
			}
		})
	}
}

// TestAPWebSocketMultiplex runs two requests on one socket, replays one
// with getevents and since, and survives a frame that is not JSON.
func TestAPWebSocketMultiplex(t *testing.T) {
	for name, agent := range apBridges(t, downstream.Options{}) {
		t.Run(name, func(t *testing.T) {
			c := apDial(t, agent)
			apSend(t, c, `this is not JSON`)
			if e := apRead(t, c); e.Get("type").String() != "error" || e.Get("code").String() != translate.CodeBadRequest {
				t.Fatalf("bad frame answered %s", e.Raw)
			}
			apSend(t, c, `{"op":"dance"}`)
			if e := apRead(t, c); e.Get("type").String() != "error" {
				t.Fatalf("unknown op answered %s", e.Raw)
			}
			apSend(t, c, `{"foo":1,"ref":"x"}`)
			if e := apRead(t, c); e.Get("type").String() != "error" || !strings.Contains(e.Get("detail").String(), "request_keys") || e.Get("ref").String() != "x" {
				t.Fatalf("no-kind frame answered %s", e.Raw)
			}
			a, b := "mux-a-"+name, "mux-b-"+name
			apSend(t, c, apChatBody(a, "first [slow] [tool]"))
			apSend(t, c, apChatBody(b, "second [slow]"))
			evs := map[string][]gjson.Result{}
			done := 0
			var acks []string
			for done < 2 {
				f := apRead(t, c)
				switch f.Get("type").String() {
				case "ack":
					acks = append(acks, f.Get("request_id").String())
					continue
				case "error":
					t.Fatalf("error frame %s", f.Raw)
				case "request_completed":
					done++
				}
				id := f.Get("request_id").String()
				evs[id] = append(evs[id], f)
			}
			if strings.Join(acks, ",") != a+","+b || len(evs) != 2 {
				t.Fatalf("acks %v, requests %d", acks, len(evs))
			}
			apCheckTurn(t, "first [slow] [tool]", evs[a])
			apCheckTurn(t, "second [slow]", evs[b])
			// Replay the first after its third event.
			n := evs[a][2].Get("id").Int()
			apSend(t, c, fmt.Sprintf(`{"op":"getevents","request_id":%q,"since":%d}`, a, n))
			if ack := apRead(t, c); ack.Get("op").String() != "getevents" {
				t.Fatalf("ack %s", ack.Raw)
			}
			replay := apReadTurn(t, c, a)
			var want []gjson.Result
			for _, e := range evs[a] {
				if e.Get("id").Int() > n {
					want = append(want, e)
				}
			}
			if len(replay) != len(want) {
				t.Fatalf("replay %s, want %s", apTypes(replay), apTypes(want))
			}
			for i := range want {
				if want[i].Raw != replay[i].Raw {
					t.Fatalf("replay event %d %s, want %s", i, replay[i].Raw, want[i].Raw)
				}
			}
			apSend(t, c, `{"op":"getevents","request_id":"nope"}`)
			if e := apRead(t, c); e.Get("code").String() != "REQUEST_NOT_FOUND" {
				t.Fatalf("unknown request answered %s", e.Raw)
			}
		})
	}
}

func TestAPWebSocketMissedPongsClose(t *testing.T) {
	a := refagent.New()
	base := serve(t, downstream.New(downstream.Options{Logger: quietLog(), KeepAlive: 30 * time.Millisecond},
		&downstream.Routing{Routes: []downstream.Route{{Name: "ref", Upstream: "ref", Agent: a}}}))
	c := apDial(t, base+"/ref")
	c.SetPingHandler(func(string) error { return nil }) // never answer
	start := time.Now()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	for {
		if _, _, err := c.ReadMessage(); err != nil {
			if !websocket.IsCloseError(err, websocket.CloseGoingAway) {
				t.Fatalf("read: %v", err)
			}
			break
		}
	}
	if d := time.Since(start); d < 60*time.Millisecond {
		t.Fatalf("closed after %v, before two pings went unanswered", d)
	}
	// A client that answers pings stays.
	c2 := apDial(t, base+"/ref")
	go func() {
		for {
			if _, _, err := c2.ReadMessage(); err != nil {
				return
			}
		}
	}()
	time.Sleep(200 * time.Millisecond)
	if err := c2.WriteMessage(websocket.TextMessage, []byte(apChatBody("", "hi"))); err != nil {
		t.Fatalf("answering client was closed: %v", err)
	}
}

func TestAPBadInput(t *testing.T) {
	agent := apBridges(t, downstream.Options{MaxBodyBytes: 4096})["inproc"]
	base := strings.TrimSuffix(agent, "/ref")
	st, h, raw := apDo(t, "POST", agent+"/process?wait=true&until=settled", apChatBody("done", "hi"), nil)
	apJSONOK(t, st, h, raw, 200)
	cases := []struct {
		name, method, url, body string
		hdr                     map[string]string
		status                  int
		mention                 string
	}{
		{"unknown agent", "GET", base + "/nobody/describe", "", nil, 404, "nobody"},
		{"unknown agent process", "POST", base + "/nobody/process", apChatBody("", "hi"), nil, 404, "nobody"},
		{"no known type", "POST", agent + "/process", `{"foo":1}`, nil, 400, "request_keys"},
		{"not json", "POST", agent + "/process", `{"input":`, nil, 400, "JSON"},
		{"input not a string", "POST", agent + "/process", `{"input":[1]}`, nil, 400, "input"},
		{"two kinds", "POST", agent + "/process", `{"input":"a","args":{}}`, nil, 400, "ambiguous"},
		{"since not a number", "GET", agent + "/getevents/done?since=abc", "", nil, 400, "since"},
		{"since negative", "GET", agent + "/getevents/done?stream=true&since=-1", "", nil, 400, "since"},
		{"Last-Event-ID not a number", "GET", agent + "/getevents/done?stream=true", "", map[string]string{"Last-Event-ID": "x"}, 400, "Last-Event-ID"},
		{"unknown request", "GET", agent + "/getevents/nope", "", nil, 404, "nope"},
		{"unknown request state", "GET", agent + "/request/nope", "", nil, 404, "nope"},
		{"resume unknown", "POST", agent + "/process", `{"request_id":"nope","request_keys":{"a":"b"}}`, nil, 404, "nope"},
		{"resume completed", "POST", agent + "/process", `{"request_id":"done","request_keys":{"a":"b"}}`, nil, 409, "completed"},
		{"taken id", "POST", agent + "/process", apChatBody("done", "again"), nil, 409, "done"},
		{"wrong method", "GET", agent + "/process", "", nil, 405, "POST"},
		{"ws without upgrade", "GET", agent + "/ws", "", nil, 400, "WebSocket"},
		{"too large", "POST", agent + "/process", apChatBody("", strings.Repeat("x", 5000)), nil, 413, "limit"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			st, h, raw := apDo(t, c.method, c.url, c.body, c.hdr)
			if st != c.status || !strings.HasPrefix(h.Get("Content-Type"), "application/json") || !gjson.ValidBytes(raw) {
				t.Fatalf("HTTP %d %s, want %d JSON: %s", st, h.Get("Content-Type"), c.status, raw)
			}
			if !strings.Contains(strings.ToLower(string(raw)), strings.ToLower(c.mention)) {
				t.Fatalf("error %s does not mention %q", raw, c.mention)
			}
		})
	}
	// Configure is acknowledged.
	st, h, raw = apDo(t, "POST", agent+"/configure", `{"args":{"temperature":0}}`, nil)
	if e := apJSONOK(t, st, h, raw, 200); e.Get("finish_reason").String() != "success" {
		t.Fatalf("configure answered %s", raw)
	}
}

// TestAPNoGoroutineLeftAfterShutdown leaves streams and sockets open (a
// paused request's stream, a socket following a [slow] request) and checks
// that Shutdown ends them all.
func TestAPNoGoroutineLeftAfterShutdown(t *testing.T) {
	http.DefaultClient.CloseIdleConnections()
	before := runtime.NumGoroutine()
	a := refagent.New()
	a.Delay = 20 * time.Millisecond
	srv := downstream.New(downstream.Options{Logger: quietLog(), KeepAlive: 50 * time.Millisecond},
		&downstream.Routing{Routes: []downstream.Route{{Name: "ref", Upstream: "ref", Agent: a}}})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	agent := "http://" + ln.Addr().String() + "/ref"
	for i := 0; i < 5; i++ {
		st, h, raw := apDo(t, "POST", agent+"/process?wait=true&until=settled", apChatBody("", "hi [tool]"), nil)
		apJSONOK(t, st, h, raw, 200)
		st, _, _ = apDo(t, "POST", agent+"/stream_request", apChatBody("", "hi [file]"), nil)
		if st != 200 {
			t.Fatal(st)
		}
		c := apDial(t, agent)
		apSend(t, c, apChatBody("", "ws"))
		apRead(t, c)
		c.Close() // gone mid-stream
	}
	st, h, raw := apDo(t, "POST", agent+"/process?until=settled", apChatBody("paused", "q [ask]"), nil)
	apJSONOK(t, st, h, raw, 200)
	_, stop := apOpenSSE(t, agent+"/getevents/paused?stream=true", nil)
	defer stop()
	c := apDial(t, agent)
	apSend(t, c, apChatBody("", "long [slow]"))
	apRead(t, c)

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	c.Close()
	stop()
	http.DefaultClient.CloseIdleConnections()
	waitGoroutines(t, before, "Shutdown")
}

// TestAPOwnClientEveryDialect: the bridge's Agent Protocol client
// (upstream.AgentProtocol) against its server, in each 2025 dialect the
// client can be configured for (the matrix test detects, which gives
// process): every reference behaviour, and an answer to [ask].
func TestAPOwnClientEveryDialect(t *testing.T) {
	ref := refagent.New()
	ref.Delay = 5 * time.Millisecond
	base := serve(t, downstream.New(downstream.Options{Logger: quietLog(), Accept: []string{translate.ProtoAgentProtocol}},
		&downstream.Routing{Routes: []downstream.Route{{Name: "ref", Upstream: "ref", Proto: translate.ProtoAgentAPI, Agent: ref}}}))
	for _, d := range []string{upstream.APDialectProcess, upstream.APDialectRun, upstream.APDialectAgentic} {
		t.Run(d, func(t *testing.T) {
			c, err := upstream.NewAgentProtocol(upstream.Config{Name: "ap-" + d, URL: base, AP: upstream.APOptions{Dialect: d, Agent: "ref"}})
			if err != nil {
				t.Fatal(err)
			}
			sess := func(s string) string { return d + "-" + s }
			if o := ask(t, c, sess("echo"), "hello"); o.state != translate.StateCompleted || o.text != "echo: hello" {
				t.Errorf("echo: %+v", o)
			}
			o := ask(t, c, sess("tool"), "weather [tool]")
			if want := refagent.ToolName + "(" + refagent.ToolArguments + ") -> " + refagent.ToolOutput; o.tool != want || o.text != "echo: weather [tool]" {
				t.Errorf("tool: %+v, want tool %q", o, want)
			}
			o = ask(t, c, sess("file"), "report [file]")
			if d != upstream.APDialectAgentic && !strings.Contains(o.artifact, refagent.FileURI) || o.state != translate.StateCompleted {
				t.Errorf("file: %+v", o) // agentic has no artifact event
			}
			o = ask(t, c, sess("fail"), "x [fail]")
			if o.state != translate.StateFailed || o.errCode == "" {
				t.Errorf("fail: %+v", o)
			}
			o = ask(t, c, sess("ask"), "x [ask]")
			if o.state != translate.StateInputRequired || o.question != refagent.AskPrompt {
				t.Errorf("ask: %+v", o)
			}
			o = ask(t, c, sess("ask"), "Paris")
			if o.state != translate.StateCompleted || o.text != "echo: Paris" {
				t.Errorf("continuation: %+v", o)
			}
		})
	}
}
