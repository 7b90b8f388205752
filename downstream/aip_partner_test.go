package downstream_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tidwall/gjson"
	"golang.org/x/tools/txtar"

	"github.com/agentbridge/bridge/downstream"
	"github.com/agentbridge/bridge/internal/refagent"
	"github.com/agentbridge/bridge/internal/store"
	"github.com/agentbridge/bridge/translate"
	"github.com/agentbridge/bridge/upstream"
)

// aipInProc serves a bridge fronting agent in-process as an AIP Partner.
func aipInProc(t *testing.T, opts downstream.Options, agent translate.Agent) string {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = quietLog()
	}
	srv := downstream.New(opts, &downstream.Routing{Routes: []downstream.Route{
		{Name: "ref", Upstream: "ref", Proto: translate.ProtoAgentAPI, Agent: agent}}})
	return serve(t, srv)
}

// aipBridges returns the two set-ups every behaviour runs on: the
// reference agent in-process, and the reference agent over the Agent API.
func aipBridges(t *testing.T, opts downstream.Options) map[string]string {
	t.Helper()
	a := refagent.New()
	a.Delay = 20 * time.Millisecond
	agent := referenceAgent(t, 20*time.Millisecond)
	viaAPI, _ := agentAPIBridge(t, agent+"/process", upstream.Config{}, opts)
	return map[string]string{"inproc": aipInProc(t, opts, a), "agentapi": viaAPI}
}

var rpcIDs atomic.Int64

// aipMessage builds params.message of a Leader's command.
func aipMessage(task, session, command, text string, params map[string]any) map[string]any {
	m := map[string]any{
		"type": "message", "id": fmt.Sprintf("msg-%d", rpcIDs.Add(1)), "sentAt": time.Now().Format(time.RFC3339Nano),
		"senderRole": "leader", "senderId": "leader-aic", "command": command,
		"dataItems": []any{}, "taskId": task, "sessionId": session,
	}
	if text != "" {
		m["dataItems"] = []any{map[string]any{"type": "text", "text": text}}
	}
	if params != nil {
		m["commandParams"] = params
	}
	return m
}

func rpcBody(method string, id any, params any) string {
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "method": method, "id": id, "params": params})
	return string(b)
}

// rpcPost posts body and returns the JSON-RPC response; it checks the
// transport rules (HTTP 200, JSON).
func rpcPost(t *testing.T, url, body string) gjson.Result {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") || !gjson.ValidBytes(raw) {
		t.Fatalf("POST %s: HTTP %d %s %s", url, resp.StatusCode, resp.Header.Get("Content-Type"), raw)
	}
	r := gjson.ParseBytes(raw)
	if r.Get("jsonrpc").String() != "2.0" {
		t.Fatalf("not a JSON-RPC response: %s", raw)
	}
	return r
}

func rpcCommand(t *testing.T, base, task, session, command, text string, params map[string]any) gjson.Result {
	t.Helper()
	id := fmt.Sprint(rpcIDs.Add(1))
	r := rpcPost(t, base+"/rpc", rpcBody("rpc", id, map[string]any{"message": aipMessage(task, session, command, text, params)}))
	if r.Get("id").String() != id {
		t.Fatalf("response id %s, want %s", r.Get("id").Raw, id)
	}
	if r.Get("error").Exists() {
		t.Fatalf("%s: error %s", command, r.Get("error").Raw)
	}
	return r.Get("result")
}

// settle polls get until the task leaves accepted/working.
func settle(t *testing.T, base, task, session string) gjson.Result {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		task := rpcCommand(t, base, task, session, "get", "", nil)
		switch task.Get("status.state").String() {
		case "accepted", "working":
		default:
			return task
		}
		if time.Now().After(deadline) {
			t.Fatalf("task never settled: %s", task.Raw)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// behaviour is what one reference behaviour must produce.
type behaviour struct {
	name, text string
	state      string             // settled state after the start
	check      func(gjson.Result) // on the settled task (from get)
}

func hasItem(task gjson.Result, path, want string) bool {
	found := false
	task.Get(path).ForEach(func(_, v gjson.Result) bool {
		if strings.Contains(v.Raw, want) {
			found = true
		}
		return !found
	})
	return found
}

func behaviours(t *testing.T) []behaviour {
	return []behaviour{
		{"echo", "hello", "awaiting-completion", func(task gjson.Result) {
			if !hasItem(task, "products.#.dataItems", `"echo: hello"`) {
				t.Errorf("no reply product: %s", task.Raw)
			}
		}},
		{"tool", "weather [tool]", "awaiting-completion", func(task gjson.Result) {
			if !hasItem(task, "messageHistory.#.dataItems", `"toolCall"`) || !hasItem(task, "messageHistory.#.dataItems", `"sunny"`) {
				t.Errorf("no tool call and result: %s", task.Raw)
			}
		}},
		{"file", "report [file]", "awaiting-completion", func(task gjson.Result) {
			if !hasItem(task, "products.#.dataItems", refagent.FileURI) {
				t.Errorf("no file product: %s", task.Raw)
			}
		}},
		{"slow", "take it easy [slow]", "awaiting-completion", func(task gjson.Result) {
			if !hasItem(task, "products.#.dataItems", `"echo: take it easy [slow]"`) {
				t.Errorf("no reply product: %s", task.Raw)
			}
		}},
		{"fail", "break [fail]", "failed", func(task gjson.Result) {
			if !strings.Contains(task.Get("status.dataItems").Raw, refagent.FailMessage) {
				t.Errorf("failure not in status: %s", task.Raw)
			}
		}},
		{"ask", "plan [ask]", "awaiting-input", func(task gjson.Result) {
			if !strings.Contains(task.Get("status.dataItems").Raw, refagent.AskPrompt) {
				t.Errorf("question not in status: %s", task.Raw)
			}
		}},
	}
}

func TestAIPBehavioursViaRPC(t *testing.T) {
	for setup, base := range aipBridges(t, downstream.Options{}) {
		for _, b := range behaviours(t) {
			t.Run(setup+"/"+b.name, func(t *testing.T) {
				task, session := "task-rpc-"+setup+"-"+b.name, "session-"+setup+"-"+b.name
				res := rpcCommand(t, base, task, session, "start", b.text, nil)
				if res.Get("type").String() != "task" || res.Get("id").String() != task || res.Get("sessionId").String() != session {
					t.Fatalf("start answered %s", res.Raw)
				}
				got := settle(t, base, task, session)
				if got.Get("status.state").String() != b.state {
					t.Fatalf("state %s, want %s: %s", got.Get("status.state"), b.state, got.Raw)
				}
				b.check(got)
				if b.name == "ask" {
					res := rpcCommand(t, base, task, session, "continue", "Beijing", nil)
					if s := res.Get("status.state").String(); s != "awaiting-completion" {
						t.Fatalf("continue answered %s", res.Raw)
					}
					if !hasItem(res, "products.#.dataItems", `"echo: Beijing"`) {
						t.Fatalf("continue reply missing: %s", res.Raw)
					}
				}
				// A start of an existing task is answered with it.
				if again := rpcCommand(t, base, task, session, "start", "again", nil); again.Get("status.state").String() == "working" {
					t.Fatalf("second start ran again: %s", again.Raw)
				}
				final := rpcCommand(t, base, task, session, "complete", "", nil)
				want := "completed"
				if b.state == "failed" {
					want = "failed" // complete is ignored outside awaiting-completion
				}
				if final.Get("status.state").String() != want {
					t.Fatalf("after complete: %s", final.Raw)
				}
				// Terminal states are final: cancel and continue are ignored.
				if c := rpcCommand(t, base, task, session, "cancel", "", nil); c.Get("status.state").String() != want {
					t.Fatalf("cancel changed a terminal task: %s", c.Raw)
				}
				h := rpcCommand(t, base, task, session, "get", "", nil)
				if !h.Get("statusHistory").IsArray() || !h.Get("messageHistory").IsArray() {
					t.Fatalf("get without histories: %s", h.Raw)
				}
			})
		}
	}
}

// sseStream reads an AIP stream frame by frame.
type sseStream struct {
	t    *testing.T
	resp *http.Response
	r    *bufio.Reader
}

func openStream(t *testing.T, url, body string) *sseStream {
	t.Helper()
	req, _ := http.NewRequest("POST", url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") ||
		resp.Header.Get("Cache-Control") != "no-cache" || resp.Header.Get("X-Accel-Buffering") != "no" {
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		t.Fatalf("stream answered %d %v: %s", resp.StatusCode, resp.Header, raw)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return &sseStream{t: t, resp: resp, r: bufio.NewReader(resp.Body)}
}

// next returns the next data frame, or false at the end of the stream.
func (s *sseStream) next() (gjson.Result, bool) {
	s.t.Helper()
	var block []string
	for {
		line, err := s.r.ReadString('\n')
		if err != nil {
			if len(block) > 0 {
				s.t.Fatalf("stream ended inside a frame: %q", block)
			}
			return gjson.Result{}, false
		}
		line = strings.TrimSuffix(line, "\n")
		if line == "" {
			if len(block) == 0 {
				continue
			}
			if len(block) != 1 || !strings.HasPrefix(block[0], "data: ") {
				s.t.Fatalf("frame is not one data line: %q", block)
			}
			js := strings.TrimPrefix(block[0], "data: ")
			if !gjson.Valid(js) {
				s.t.Fatalf("frame is not JSON: %s", js)
			}
			return gjson.Parse(js), true
		}
		if strings.HasPrefix(line, ":") {
			continue
		}
		block = append(block, line)
	}
}

// frameState is the task state a frame reports, if any.
func frameState(f gjson.Result) string {
	d := f.Get("result.eventData")
	switch d.Get("type").String() {
	case "task", "status-update":
		return d.Get("status.state").String()
	}
	return ""
}

// readUntil reads frames until one reports a state in states (returned)
// or the stream ends ("").
func (s *sseStream) readUntil(frames *[]gjson.Result, states ...string) string {
	s.t.Helper()
	for {
		f, ok := s.next()
		if !ok {
			return ""
		}
		*frames = append(*frames, f)
		if f.Get("error").Exists() {
			s.t.Fatalf("error frame: %s", f.Raw)
		}
		for _, st := range states {
			if frameState(f) == st {
				return st
			}
		}
	}
}

// drain reads the stream to its end and returns the last state reported.
func (s *sseStream) drain(frames *[]gjson.Result) string {
	s.t.Helper()
	last := ""
	for _, f := range *frames {
		if st := frameState(f); st != "" {
			last = st
		}
	}
	s.readUntil(frames)
	for _, f := range *frames {
		if st := frameState(f); st != "" {
			last = st
		}
	}
	return last
}

func (s *sseStream) expectEnd() {
	s.t.Helper()
	done := make(chan gjson.Result, 1)
	go func() {
		f, ok := s.next()
		if ok {
			done <- f
		}
		close(done)
	}()
	select {
	case f, ok := <-done:
		if ok {
			s.t.Fatalf("frame after the end: %s", f.Raw)
		}
	case <-time.After(5 * time.Second):
		s.t.Fatal("stream not closed")
	}
}

func checkSeqs(t *testing.T, frames []gjson.Result, id string) {
	t.Helper()
	var last int64
	for _, f := range frames {
		if f.Get("id").String() != id {
			t.Fatalf("frame id %s, want %s", f.Get("id").Raw, id)
		}
		seq := f.Get("result.eventSeq").Int()
		if seq <= last {
			t.Fatalf("eventSeq %d after %d", seq, last)
		}
		last = seq
	}
}

func TestAIPBehavioursViaStream(t *testing.T) {
	for setup, base := range aipBridges(t, downstream.Options{KeepAlive: 50 * time.Millisecond}) {
		for _, b := range behaviours(t) {
			t.Run(setup+"/"+b.name, func(t *testing.T) {
				task, session := "task-stream-"+setup+"-"+b.name, "session-s-"+setup+"-"+b.name
				id := "s-" + b.name
				st := openStream(t, base+"/stream", rpcBody("stream", id, map[string]any{"message": aipMessage(task, session, "start", b.text, nil)}))
				var frames []gjson.Result
				got := st.readUntil(&frames, b.state)
				if got != b.state {
					t.Fatalf("stream ended without %s: %v", b.state, frames)
				}
				checkSeqs(t, frames, id)
				if first := frames[0].Get("result.eventData"); first.Get("type").String() != "task" || first.Get("status.state").String() != "working" {
					t.Fatalf("first frame %s", frames[0].Raw)
				}
				b.check(settle(t, base, task, session))
				switch b.state {
				case "failed", "awaiting-input":
					if last := st.drain(&frames); last != b.state {
						t.Fatalf("stream ended in %s: %v", last, frames)
					}
					checkSeqs(t, frames, id)
				case "awaiting-completion":
					// The stream stays open until the Leader completes.
					rpcCommand(t, base, task, session, "complete", "", nil)
					if st.readUntil(&frames, "completed") != "completed" {
						t.Fatal("no completed frame")
					}
					st.expectEnd()
					checkSeqs(t, frames, id)
				}
				if b.name != "ask" {
					return
				}
				// The answer to the question opens the next stream.
				st2 := openStream(t, base+"/stream", rpcBody("stream", "c", map[string]any{"message": aipMessage(task, session, "continue", "Beijing", nil)}))
				var more []gjson.Result
				if st2.readUntil(&more, "awaiting-completion") != "awaiting-completion" {
					t.Fatalf("continue stream: %v", more)
				}
				if more[0].Get("result.eventSeq").Int() <= frames[len(frames)-1].Get("result.eventSeq").Int() {
					t.Fatal("continue stream reuses event numbers")
				}
				if !strings.Contains(fmt.Sprint(more), "echo: Beijing") {
					t.Fatalf("no answer to the continue: %v", more)
				}
				rpcCommand(t, base, task, session, "cancel", "", nil)
				if st2.readUntil(&more, "canceled") != "canceled" {
					t.Fatal("no canceled frame")
				}
				st2.expectEnd()
			})
		}
	}
}

// callbacks receives notifications.
type callbacks struct {
	mu     sync.Mutex
	states []string
	tokens []string
	trace  []string
	bodies []gjson.Result
	fail   int // answer 500 to this many first calls
}

func (c *callbacks) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fail > 0 {
		c.fail--
		w.WriteHeader(500)
		return
	}
	c.tokens = append(c.tokens, r.Header.Get("X-ACPS-AIP-Notification-Token"))
	c.trace = append(c.trace, r.Header.Get("traceparent"))
	task := gjson.ParseBytes(b)
	c.states = append(c.states, task.Get("status.state").String())
	c.bodies = append(c.bodies, task)
}

func (c *callbacks) waitFor(t *testing.T, state string) []string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		c.mu.Lock()
		states := append([]string(nil), c.states...)
		c.mu.Unlock()
		for _, s := range states {
			if s == state {
				return states
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s callback; got %v", state, states)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestAIPBehavioursViaNotification(t *testing.T) {
	opts := downstream.Options{AIP: downstream.AIPOptions{NotifyBackoff: 10 * time.Millisecond}}
	for setup, base := range aipBridges(t, opts) {
		for _, b := range behaviours(t) {
			t.Run(setup+"/"+b.name, func(t *testing.T) {
				cb := &callbacks{fail: 1} // the first callback is retried
				hs := httptest.NewServer(cb)
				defer hs.Close()
				task, session := "task-n-"+setup+"-"+b.name, "session-n-"+setup+"-"+b.name
				set := rpcPost(t, base+"/notification/set", rpcBody("notification/set", 7,
					map[string]any{"url": hs.URL + "/cb", "token": "tok-" + b.name, "taskId": task}))
				cfgID := set.Get("result.id").String()
				if set.Get("id").Int() != 7 || cfgID == "" || set.Get("result.url").String() != hs.URL+"/cb" {
					t.Fatalf("set answered %s", set.Raw)
				}
				if got := rpcPost(t, base+"/notification/get", rpcBody("notification/get", 8, map[string]any{"taskId": task})); got.Get("result.#").Int() != 1 || got.Get("result.0.id").String() != cfgID {
					t.Fatalf("get answered %s", got.Raw)
				}
				states := []any{"working", b.state, "completed", "canceled"}
				req, _ := http.NewRequest("POST", base+"/notification/start", strings.NewReader(rpcBody("notification/start", 9,
					map[string]any{"message": aipMessage(task, session, "start", b.text, map[string]any{"notificationConfigId": cfgID, "notifyOnStates": states})})))
				req.Header.Set("traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				raw, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if st := gjson.GetBytes(raw, "result.status.state").String(); st == "" || st == "accepted" {
					t.Fatalf("notification/start answered %s", raw)
				}
				got := cb.waitFor(t, b.state)
				switch b.state {
				case "awaiting-completion":
					rpcCommand(t, base, task, session, "complete", "", nil)
					got = cb.waitFor(t, "completed")
				case "awaiting-input":
					rpcCommand(t, base, task, session, "cancel", "", nil)
					got = cb.waitFor(t, "canceled")
				}
				cb.mu.Lock()
				defer cb.mu.Unlock()
				for i, tok := range cb.tokens {
					if tok != "tok-"+b.name {
						t.Fatalf("callback %d token %q", i, tok)
					}
					if !strings.HasPrefix(cb.trace[i], "00-0af7651916cd43dd8448eb211c80319c-") {
						t.Fatalf("callback %d traceparent %q", i, cb.trace[i])
					}
					if cb.bodies[i].Get("type").String() != "task" || cb.bodies[i].Get("id").String() != task {
						t.Fatalf("callback body %s", cb.bodies[i].Raw)
					}
				}
				for _, s := range got {
					if s == "accepted" {
						t.Fatalf("a state not asked for was notified: %v", got)
					}
				}
				if del := rpcPost(t, base+"/notification/delete", rpcBody("notification/delete", 10, map[string]any{"taskId": task, "notificationConfigId": cfgID})); !del.Get("result.success").Bool() {
					t.Fatalf("delete answered %s", del.Raw)
				}
			})
		}
	}
}

func TestAIPReStreamResumesExactly(t *testing.T) {
	a := refagent.New()
	a.Delay = 30 * time.Millisecond
	base := aipInProc(t, downstream.Options{}, a)
	task, session := "task-restream", "session-restream"
	st := openStream(t, base+"/stream", rpcBody("stream", "a", map[string]any{"message": aipMessage(task, session, "start", "go [tool] [file] [slow]", nil)}))
	var first []gjson.Result
	for len(first) < 2 {
		f, ok := st.next()
		if !ok {
			t.Fatal("stream ended early")
		}
		first = append(first, f)
	}
	st.resp.Body.Close() // cut after event N
	n := first[len(first)-1].Get("result.eventSeq").Int()

	re := openStream(t, base+"/stream", rpcBody("stream", "b", map[string]any{"message": aipMessage(task, session, "re-stream", "", map[string]any{"lastEventSeq": n})}))
	var rest []gjson.Result
	if re.readUntil(&rest, "awaiting-completion") == "" {
		t.Fatal("re-stream ended before awaiting-completion")
	}
	checkSeqs(t, rest, "b")
	if rest[0].Get("result.eventSeq").Int() <= n {
		t.Fatalf("re-stream after %d began at %d", n, rest[0].Get("result.eventSeq").Int())
	}
	rpcCommand(t, base, task, session, "complete", "", nil)
	re.readUntil(&rest, "completed")
	re.expectEnd()

	// A full replay holds exactly the cut stream's frames followed by the
	// resumed ones.
	all := openStream(t, base+"/stream", rpcBody("stream", "c", map[string]any{"message": aipMessage(task, session, "re-stream", "", nil)}))
	var full []gjson.Result
	all.readUntil(&full, "completed")
	all.expectEnd()
	var want, got []string
	for _, f := range append(first, rest...) {
		want = append(want, fmt.Sprint(f.Get("result.eventSeq").Int(), f.Get("result.eventData.type").String()))
	}
	for _, f := range full {
		got = append(got, fmt.Sprint(f.Get("result.eventSeq").Int(), f.Get("result.eventData.type").String()))
	}
	if strings.Join(want, ",") != strings.Join(got, ",") {
		t.Fatalf("cut+resumed frames %v, full replay %v", want, got)
	}
	// Unknown task: -32001 with the request id.
	r := rpcPost(t, base+"/stream", rpcBody("stream", "x", map[string]any{"message": aipMessage("nope", "s", "re-stream", "", nil)}))
	if r.Get("error.code").Int() != -32001 || r.Get("id").String() != "x" {
		t.Fatalf("re-stream of an unknown task: %s", r.Raw)
	}
}

func TestAIPReStreamOfExpiredEventsIsAnErrorFrame(t *testing.T) {
	st := storeWithSmallLogs()
	a := refagent.New()
	base := aipInProc(t, downstream.Options{Store: st}, a)
	rpcCommand(t, base, "task-exp", "s", "start", "a long answer [tool] [file]", nil)
	settle(t, base, "task-exp", "s")
	s := openStream(t, base+"/stream", rpcBody("stream", 5, map[string]any{"message": aipMessage("task-exp", "s", "re-stream", "", map[string]any{"lastEventSeq": 1})}))
	f, ok := s.next()
	if !ok || f.Get("error.code").Int() == 0 || f.Get("id").Int() != 5 {
		t.Fatalf("want an error frame, got %s", f.Raw)
	}
	s.expectEnd()
}

// timeoutAgent completes at once: start → awaiting-completion.
func TestAIPAwaitingTimeouts(t *testing.T) {
	base := aipInProc(t, downstream.Options{}, refagent.New())
	t.Run("input cancels", func(t *testing.T) {
		res := rpcCommand(t, base, "task-ti", "s-ti", "start", "[ask]", map[string]any{"awaitingInputTimeout": 100})
		if res.Get("status.state").String() != "awaiting-input" {
			t.Fatalf("%s", res.Raw)
		}
		time.Sleep(400 * time.Millisecond)
		if got := rpcCommand(t, base, "task-ti", "s-ti", "get", "", nil); got.Get("status.state").String() != "canceled" {
			t.Fatalf("after the awaiting-input timeout: %s", got.Raw)
		}
	})
	t.Run("completion completes", func(t *testing.T) {
		res := rpcCommand(t, base, "task-tc", "s-tc", "start", "hi", map[string]any{"awaitingCompletionTimeout": 100})
		if res.Get("status.state").String() != "awaiting-completion" {
			t.Fatalf("%s", res.Raw)
		}
		time.Sleep(400 * time.Millisecond)
		if got := rpcCommand(t, base, "task-tc", "s-tc", "get", "", nil); got.Get("status.state").String() != "completed" {
			t.Fatalf("after the awaiting-completion timeout: %s", got.Raw)
		}
	})
	t.Run("continue disarms", func(t *testing.T) {
		rpcCommand(t, base, "task-td", "s-td", "start", "[ask]", map[string]any{"awaitingInputTimeout": 150})
		res := rpcCommand(t, base, "task-td", "s-td", "continue", "here", nil)
		if res.Get("status.state").String() != "awaiting-completion" {
			t.Fatalf("%s", res.Raw)
		}
		time.Sleep(300 * time.Millisecond)
		if got := rpcCommand(t, base, "task-td", "s-td", "get", "", nil); got.Get("status.state").String() != "awaiting-completion" {
			t.Fatalf("a stale timer changed the task: %s", got.Raw)
		}
	})
}

func TestAIPGetFiltersHistoryByTime(t *testing.T) {
	base := aipInProc(t, downstream.Options{}, refagent.New())
	rpcCommand(t, base, "task-f", "s-f", "start", "hi", nil)
	all := rpcCommand(t, base, "task-f", "s-f", "get", "", nil)
	n := all.Get("statusHistory.#").Int()
	if n < 3 {
		t.Fatalf("statusHistory %s", all.Get("statusHistory").Raw)
	}
	// The same instant in another zone: only later entries are returned.
	at, err := time.Parse(time.RFC3339Nano, all.Get("statusHistory.0.stateChangedAt").String())
	if err != nil {
		t.Fatal(err)
	}
	in8 := at.In(time.FixedZone("", 8*3600)).Format("2006-01-02T15:04:05.000000-07:00")
	got := rpcCommand(t, base, "task-f", "s-f", "get", "", map[string]any{"lastStateChangedAt": in8, "lastMessageSentAt": "2100-01-01T00:00:00+08:00"})
	if got.Get("statusHistory.#").Int() >= n || got.Get("messageHistory.#").Int() != 0 {
		t.Fatalf("filtered get: %s", got.Raw)
	}
}

func TestAIPBadInput(t *testing.T) {
	base := aipInProc(t, downstream.Options{}, refagent.New())
	for _, c := range []struct {
		name, path, body string
		code             int64
		id               string
	}{
		{"invalid JSON", "/rpc", `{"jsonrpc":"2.0","id":1,`, -32700, "null"},
		{"not JSON-RPC", "/rpc", `{"id":"a","hello":"world"}`, -32600, `"a"`},
		{"unknown method", "/rpc", `{"jsonrpc":"2.0","id":"b","method":"tasks/send","params":{}}`, -32601, `"b"`},
		{"no taskId", "/rpc", rpcBody("rpc", "c", map[string]any{"message": aipMessage("", "s", "start", "x", nil)}), -32602, `"c"`},
		{"unknown task", "/rpc", rpcBody("rpc", 4, map[string]any{"message": aipMessage("no-such-task", "s", "get", "", nil)}), -32001, "4"},
		{"bad notification url", "/notification/set", rpcBody("notification/set", "e", map[string]any{"url": "ftp://x/y", "token": "t", "taskId": "t1"}), -32602, `"e"`},
		{"group", "/group/rpc", `{"jsonrpc":"2.0","id":"g","method":"group","params":{"protocol":"rabbitmq:4.0"}}`, -32007, `"g"`},
		{"unknown config", "/notification/start", rpcBody("notification/start", "h", map[string]any{"message": aipMessage("t9", "s", "start", "x", map[string]any{"notificationConfigId": "nope"})}), -32001, `"h"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := rpcPost(t, base+c.path, c.body)
			if r.Get("error.code").Int() != c.code || r.Get("id").Raw != c.id || r.Get("result").Exists() {
				t.Fatalf("got %s, want code %d id %s", r.Raw, c.code, c.id)
			}
			if r.Get("error.message").String() == "" {
				t.Fatalf("no message: %s", r.Raw)
			}
		})
	}
	// Still serving, on every path, and on the root by body.
	for _, path := range []string{"/rpc", "/stream", "/notification/get", "/"} {
		res := rpcPost(t, base+path, rpcBody("rpc", 1, map[string]any{"message": aipMessage("task-alive", "s", "get", "", nil)}))
		if res.Get("error.code").Int() != -32001 {
			t.Fatalf("%s: %s", path, res.Raw)
		}
	}
	res := rpcCommand(t, base, "task-alive", "s", "start", "hi", nil)
	if res.Get("status.state").String() != "awaiting-completion" {
		t.Fatalf("after bad input: %s", res.Raw)
	}
	// Notifications can be turned off.
	off := aipInProc(t, downstream.Options{AIP: downstream.AIPOptions{DisableNotifications: true}}, refagent.New())
	r := rpcPost(t, off+"/notification/set", rpcBody("notification/set", 1, map[string]any{"url": "http://x/y", "token": "t", "taskId": "t1"}))
	if r.Get("error.code").Int() != -32003 {
		t.Fatalf("notifications off: %s", r.Raw)
	}
}

func TestAIPACSDocument(t *testing.T) {
	base := aipInProc(t, downstream.Options{AIP: downstream.AIPOptions{Prefix: "/acps-aip-v1", Name: "ref agent",
		Skills: []downstream.ACSSkill{{ID: "ref.echo", Name: "echo", Description: "echoes", Tags: []string{"test"}}}}}, refagent.New())
	resp, err := http.Get(base + "/.well-known/acs.json")
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	doc := gjson.ParseBytes(raw)
	if resp.StatusCode != 200 || doc.Get("protocolVersion").String() != "01.00" || doc.Get("name").String() != "ref agent" ||
		doc.Get("endPoints.0.url").String() != base+"/acps-aip-v1/rpc" || doc.Get("endPoints.0.transport").String() != "JSONRPC" ||
		!doc.Get("capabilities.streaming").Bool() || !doc.Get("capabilities.notification").Bool() ||
		!doc.Get("capabilities.messageQueue").IsArray() || doc.Get("skills.0.id").String() != "ref.echo" {
		t.Fatalf("ACS %d %s", resp.StatusCode, raw)
	}
	res := rpcCommand(t, base+"/acps-aip-v1", "task-prefixed", "s", "start", "hi", nil)
	if res.Get("status.state").String() != "awaiting-completion" {
		t.Fatalf("prefixed rpc: %s", res.Raw)
	}
}

// specAgent plays the spec's example: a start delivers a product at once;
// a continue works for a while and then fails.
func specAgent() translate.Agent {
	return translate.AgentFunc(func(ctx context.Context, req *translate.Request) (translate.Stream, error) {
		if req.Command == translate.CommandContinue || req.ID == "task-5678" {
			select {
			case <-time.After(300 * time.Millisecond):
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		if req.Command == translate.CommandContinue {
			return translate.NewSliceStream(&translate.Event{Kind: translate.KindState, State: translate.StateFailed,
				Err: &translate.Error{Code: "UPSTREAM", Message: "处理任务时发生错误：无法连接到外部数据源。"}}), nil
		}
		return translate.NewSliceStream(
			&translate.Event{Kind: translate.KindArtifact, Artifact: &translate.Artifact{ID: "product-1", Name: "北京文化游行程安排.pdf",
				Description: "3天北京文化主体游的详细行程安排", Last: true,
				Parts: []translate.Part{{Kind: translate.PartFile, Name: "beijing_cultural_tour.pdf", MIME: "application/pdf",
					URI: "https://example.com/files/beijing_cultural_tour.pdf"}}}},
			&translate.Event{Kind: translate.KindState, State: translate.StateCompleted}), nil
	})
}

const samples = "../translate/aip/testdata/samples/"

func sample(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(samples + name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// sameShape checks that got has the keys and state of the spec's example.
func sameShape(t *testing.T, what string, got gjson.Result, wantRaw string) {
	t.Helper()
	want := gjson.Parse(wantRaw)
	keys := func(r gjson.Result) string {
		var ks []string
		r.ForEach(func(k, _ gjson.Result) bool { ks = append(ks, k.String()); return true })
		return strings.Join(ks, ",")
	}
	if g, w := got.Get("id").Raw, want.Get("id").Raw; g != w {
		t.Errorf("%s: id %s, want %s", what, g, w)
	}
	if w := want.Get("error"); w.Exists() {
		if got.Get("error.code").Int() != w.Get("code").Int() {
			t.Errorf("%s: %s, want %s", what, got.Raw, want.Raw)
		}
		return
	}
	g, w := got.Get("result"), want.Get("result")
	if w.IsArray() {
		if !g.IsArray() || len(g.Array()) != len(w.Array()) {
			t.Errorf("%s: result %s, want %s", what, g.Raw, w.Raw)
		}
		return
	}
	if keys(g) != keys(w) {
		t.Errorf("%s: result keys %s, want %s", what, keys(g), keys(w))
	}
	for _, p := range []string{"type", "status.state", "sessionId", "success", "token", "taskId"} {
		if w.Get(p).Exists() && g.Get(p).String() != w.Get(p).String() {
			t.Errorf("%s: %s = %s, want %s", what, p, g.Get(p).Raw, w.Get(p).Raw)
		}
	}
	if w.Get("products.#").Int() > 0 && g.Get("products.#").Int() == 0 {
		t.Errorf("%s: no products: %s", what, g.Raw)
	}
}

func TestAIPSpecExamples(t *testing.T) {
	base := aipInProc(t, downstream.Options{AIP: downstream.AIPOptions{ResponseTimeout: 100 * time.Millisecond}}, specAgent())
	call := func(path, req, resp string) gjson.Result {
		t.Helper()
		got := rpcPost(t, base+path, req)
		sameShape(t, resp, got, sample(t, resp))
		return got
	}
	// rpc: start (awaiting-completion with products), continue (working),
	// get (failed, with histories), then complete and cancel on tasks of
	// their own (the examples show one state each).
	call("/rpc", sample(t, "v1-spec-rpc-start-request.json"), "v1-spec-rpc-start-response-awaiting-completion.json")
	call("/rpc", sample(t, "v1-spec-rpc-continue-request.json"), "v1-spec-rpc-continue-response-working.json")
	time.Sleep(500 * time.Millisecond)
	got := call("/rpc", sample(t, "v1-spec-rpc-get-request.json"), "v1-spec-rpc-get-response-failed-with-histories.json")
	if got.Get("result.statusHistory.#").Int() < 4 || got.Get("result.messageHistory.#").Int() < 2 {
		t.Errorf("get histories: %s", got.Raw)
	}
	for _, c := range []struct{ task, req, resp string }{
		{"task-complete", "v1-spec-rpc-complete-request.json", "v1-spec-rpc-complete-response-completed.json"},
		{"task-cancel", "v1-spec-rpc-cancel-request.json", "v1-spec-rpc-cancel-response-canceled.json"},
	} {
		rpcCommand(t, base, c.task, "session-91011", "start", "x", nil)
		call("/rpc", strings.ReplaceAll(sample(t, c.req), "task-1234", c.task), c.resp)
	}

	// notification: set, get, start, callback, delete. The example's URL
	// is replaced by a local receiver, its config id by the one the
	// Partner made.
	cb := &callbacks{}
	hs := httptest.NewServer(cb)
	defer hs.Close()
	set := call("/notification/set", strings.ReplaceAll(sample(t, "v1-spec-notification-set-request.json"),
		"https://example.com/notifications", hs.URL+"/notifications"), "v1-spec-notification-set-response.json")
	cfg := set.Get("result.id").String()
	call("/notification/get", sample(t, "v1-spec-notification-get-request.json"), "v1-spec-notification-get-response.json")
	call("/notification/start", strings.ReplaceAll(sample(t, "v1-spec-notification-start-request.json"), "notification-1", cfg),
		"v1-spec-notification-start-response.json")
	cb.waitFor(t, "awaiting-completion")
	cb.mu.Lock()
	if cb.tokens[0] != "your_token" {
		t.Errorf("token %q", cb.tokens[0])
	}
	// The example shows a later state; the body has the same members.
	cbBody := cb.bodies[len(cb.bodies)-1]
	want := sample(t, "v1-spec-notification-callback-request-body.json")
	sameShape(t, "callback", gjson.Parse(`{"result":`+cbBody.Raw+`}`),
		`{"result":`+strings.Replace(want, `"completed"`, `"awaiting-completion"`, 1)+`}`)
	cb.mu.Unlock()
	call("/notification/delete", strings.ReplaceAll(sample(t, "v1-spec-notification-delete-request.json"), "notification-1", cfg),
		"v1-spec-notification-delete-response.json")

	// stream: start, then re-stream after event 2.
	body := strings.ReplaceAll(sample(t, "v1-spec-stream-start-request.json"), "task-5678", "task-stream")
	st := openStream(t, base+"/stream", body)
	var frames []gjson.Result
	if st.readUntil(&frames, "awaiting-completion") == "" {
		t.Fatalf("stream: %v", frames)
	}
	checkSeqs(t, frames, "1")
	if d := frames[0].Get("result.eventData"); d.Get("type").String() != "task" || d.Get("status.state").String() != "working" {
		t.Errorf("first frame %s", frames[0].Raw)
	}
	kinds := map[string]bool{}
	for _, f := range frames {
		kinds[f.Get("result.eventData.type").String()] = true
	}
	if !kinds["product-chunk"] {
		t.Errorf("no product-chunk frame: %v", frames)
	}
	st.resp.Body.Close()
	re := openStream(t, base+"/stream", strings.ReplaceAll(sample(t, "v1-spec-stream-restream-request.json"), "task-5678", "task-stream"))
	var again []gjson.Result
	re.readUntil(&again, "awaiting-completion")
	checkSeqs(t, again, "2")
	for _, f := range again {
		if f.Get("result.eventSeq").Int() <= 2 {
			t.Errorf("re-stream after 2 sent %s", f.Raw)
		}
	}
}

var (
	normTime = regexp.MustCompile(`"(sentAt|stateChangedAt)":"[^"]*"`)
	normIDs  = regexp.MustCompile(`(msg_|msg-|call_|artifact_)[0-9a-f]{8}[0-9a-f-]*`)
)

func normalizeAIP(b []byte) []byte {
	b = normTime.ReplaceAll(b, []byte(`"$1":"<time>"`))
	return normIDs.ReplaceAll(b, []byte(`${1}<id>`))
}

// TestAIPTranscripts plays each testdata/transcripts/aip-*.txtar: its
// downstream.request goes to a bridge fronting the reference agent, and the
// normalized SSE reply must equal want.downstream (-update rewrites it).
func TestAIPTranscripts(t *testing.T) {
	files, _ := filepath.Glob("../testdata/transcripts/aip-*.txtar")
	if len(files) == 0 {
		t.Fatal("no AIP transcripts")
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".txtar"), func(t *testing.T) {
			a, err := txtar.ParseFile(file)
			if err != nil {
				t.Fatal(err)
			}
			base := aipInProc(t, downstream.Options{KeepAlive: -1}, refagent.New())
			resp, err := http.Post(base+"/stream", "application/json", bytes.NewReader(section(a, "downstream.request")))
			if err != nil {
				t.Fatal(err)
			}
			got, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			got = normalizeAIP(got)
			if *update {
				setSection(a, "want.downstream", got)
				if err := os.WriteFile(file, txtar.Format(a), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			if want := section(a, "want.downstream"); !bytes.Equal(got, want) {
				t.Errorf("downstream bytes:\n got: %s\nwant: %s", got, want)
			}
		})
	}
}

func TestAIPNoGoroutineLeft(t *testing.T) {
	a := refagent.New()
	srv := downstream.New(downstream.Options{Logger: quietLog(), KeepAlive: 10 * time.Millisecond,
		AIP: downstream.AIPOptions{NotifyBackoff: 5 * time.Millisecond}},
		&downstream.Routing{Routes: []downstream.Route{{Name: "ref", Upstream: "ref", Proto: translate.ProtoAgentAPI, Agent: a}}})
	cb := &callbacks{}
	hs := httptest.NewServer(cb)
	base := serveUntil(t, srv)
	// Warm up the HTTP machinery.
	rpcCommand(t, base, "warm", "s", "start", "hi", nil)
	http.DefaultClient.CloseIdleConnections()
	before := runtime.NumGoroutine()

	for i := 0; i < 10; i++ {
		task := fmt.Sprint("leak-", i)
		set := rpcPost(t, base+"/rpc", rpcBody("notification/set", 1, map[string]any{"url": hs.URL, "token": "t", "taskId": task}))
		rpcPost(t, base+"/rpc", rpcBody("notification/start", 2, map[string]any{"message": aipMessage(task, "s", "start", "hi [tool]",
			map[string]any{"notificationConfigId": set.Get("result.id").String()})}))
		st := openStream(t, base+"/stream", rpcBody("stream", 3, map[string]any{"message": aipMessage(task+"-s", "s", "start", "[ask]",
			map[string]any{"awaitingInputTimeout": 20})}))
		var frames []gjson.Result
		if st.drain(&frames) != "awaiting-input" {
			t.Fatalf("stream: %v", frames)
		}
		rpcCommand(t, base, task, "s", "complete", "", nil)
		rpcCommand(t, base, task+"-r", "s", "start", "[ask]", map[string]any{"awaitingInputTimeout": 10000})
	}
	cb.waitFor(t, "completed")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	hs.Close()
	http.DefaultClient.CloseIdleConnections()
	deadline := time.Now().Add(5 * time.Second)
	for {
		after := runtime.NumGoroutine()
		// The listener's goroutines are gone after Shutdown too.
		if after <= before {
			return
		}
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<16)
			n := runtime.Stack(buf, true)
			t.Fatalf("%d goroutines before, %d after tasks and Shutdown:\n%s", before, after, bytes.TrimSpace(buf[:n]))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func storeWithSmallLogs() store.Store {
	return store.NewMemory(store.Limits{MaxEventsPerExchange: 4}, nil)
}

func netListen() (net.Listener, error) { return net.Listen("tcp", "127.0.0.1:0") }

// serveUntil runs srv on a loopback port; the test shuts it down itself.
func serveUntil(t *testing.T, srv *downstream.Server) string {
	t.Helper()
	ln, err := netListen()
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	return "http://" + ln.Addr().String()
}
