package downstream_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/agentbridge/bridge/downstream"
	"github.com/agentbridge/bridge/internal/refagent"
	"github.com/agentbridge/bridge/translate"
	"github.com/agentbridge/bridge/upstream"
)

// quietLog keeps test output readable; set BRIDGE_TEST_LOG=1 to see logs.
func quietLog() *slog.Logger {
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// serve runs srv on a loopback port until the test ends and returns its base URL.
func serve(t *testing.T, srv *downstream.Server) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	})
	return "http://" + ln.Addr().String()
}

// agentAPIBridge starts a bridge whose one route calls the Agent API agent
// at upstreamURL, and returns the bridge's base URL and the upstream client.
func agentAPIBridge(t *testing.T, upstreamURL string, cfg upstream.Config, opts downstream.Options) (string, *upstream.AgentAPI) {
	t.Helper()
	cfg.Name = "up"
	cfg.URL = upstreamURL
	up, err := upstream.NewAgentAPI(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if opts.Logger == nil {
		opts.Logger = quietLog()
	}
	srv := downstream.New(opts, &downstream.Routing{Routes: []downstream.Route{
		{Name: "default", Upstream: "up", Proto: translate.ProtoAgentAPI, Agent: up}}})
	return serve(t, srv), up
}

// referenceAgent serves the reference agent over the Agent API.
func referenceAgent(t *testing.T, delay time.Duration) string {
	t.Helper()
	a := refagent.New()
	a.Delay = delay
	srv := downstream.New(downstream.Options{Logger: quietLog()}, &downstream.Routing{Routes: []downstream.Route{
		{Name: "ref", Upstream: "ref", Proto: translate.ProtoAgentAPI, Agent: a}}})
	return serve(t, srv)
}

// frame is one decoded SSE data frame of an Agent API reply.
type frame = gjson.Result

// post sends body to url and returns the HTTP status and the data frames.
func post(t *testing.T, url, body string) (int, []frame, []byte) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, dataFrames(t, raw), raw
}

func dataFrames(t *testing.T, raw []byte) []frame {
	t.Helper()
	var out []frame
	for _, block := range strings.Split(string(raw), "\n\n") {
		if block == "" || strings.HasPrefix(block, ":") {
			continue
		}
		if !strings.HasPrefix(block, "data: ") || strings.Contains(block, "\n") {
			t.Fatalf("frame is not exactly one 'data: ' line: %q", block)
		}
		js := strings.TrimPrefix(block, "data: ")
		if !gjson.Valid(js) {
			t.Fatalf("frame is not JSON: %q", js)
		}
		out = append(out, gjson.Parse(js))
	}
	return out
}

// checkAgentAPIStream asserts what every Agent API client relies on, and
// returns the final response frame.
func checkAgentAPIStream(t *testing.T, frames []frame) frame {
	t.Helper()
	if len(frames) == 0 {
		t.Fatal("no frames")
	}
	announced := map[string]bool{}
	for i, f := range frames {
		if got := f.Get("sequence_number").Int(); got != int64(i) || f.Get("sequence_number").Type != gjson.Number {
			t.Fatalf("frame %d: sequence_number %s, want %d", i, f.Get("sequence_number").Raw, i)
		}
		switch obj := f.Get("object").String(); obj {
		case "response":
		case "message":
			announced[f.Get("id").String()] = true
		case "content":
			if !announced[f.Get("msg_id").String()] {
				t.Fatalf("frame %d: content for message %s before the message was announced", i, f.Get("msg_id"))
			}
		default:
			t.Fatalf("frame %d: object %q", i, obj)
		}
	}
	last := frames[len(frames)-1]
	if last.Get("object").String() != "response" {
		t.Fatalf("last frame is not a response: %s", last.Raw)
	}
	switch last.Get("status").String() {
	case "completed", "failed", "canceled", "rejected", "incomplete":
	default:
		t.Fatalf("last response status %q is not terminal", last.Get("status"))
	}
	if frames[0].Get("object").String() != "response" || frames[0].Get("status").String() != "created" {
		t.Fatalf("first frame is not response created: %s", frames[0].Raw)
	}
	return last
}

// deltaText joins the text deltas of the stream.
func deltaText(frames []frame) string {
	var b strings.Builder
	for _, f := range frames {
		if f.Get("object").String() == "content" && f.Get("delta").Bool() && f.Get("type").String() == "text" {
			b.WriteString(f.Get("text").String())
		}
	}
	return b.String()
}

func userRequest(session, text string) string {
	b, _ := json.Marshal(map[string]any{
		"session_id": session,
		"input": []any{map[string]any{"role": "user", "type": "message",
			"content": []any{map[string]any{"type": "text", "text": text}}}},
	})
	return string(b)
}

func TestReferenceBehavioursThroughBridge(t *testing.T) {
	agent := referenceAgent(t, 20*time.Millisecond)
	bridge, _ := agentAPIBridge(t, agent+"/process", upstream.Config{}, downstream.Options{})

	t.Run("echo", func(t *testing.T) {
		_, frames, _ := post(t, bridge+"/process", userRequest("s-echo", "hello"))
		last := checkAgentAPIStream(t, frames)
		if got := deltaText(frames); got != "echo: hello" {
			t.Fatalf("deltas %q", got)
		}
		n := 0
		for _, f := range frames {
			if f.Get("object").String() == "content" && f.Get("delta").Bool() {
				n++
			}
		}
		if n < 3 {
			t.Fatalf("%d deltas, want at least 3", n)
		}
		if last.Get("status").String() != "completed" || last.Get("output.0.content.0.text").String() != "echo: hello" {
			t.Fatalf("final response %s", last.Raw)
		}
		if !last.Get("usage").IsObject() || last.Get("session_id").String() != "s-echo" {
			t.Fatalf("final response lacks usage or session: %s", last.Raw)
		}
	})
	t.Run("tool", func(t *testing.T) {
		_, frames, _ := post(t, bridge+"/process", userRequest("s-tool", "weather [tool]"))
		last := checkAgentAPIStream(t, frames)
		var types []string
		for _, m := range last.Get("output").Array() {
			types = append(types, m.Get("type").String())
		}
		if strings.Join(types, ",") != "plugin_call,plugin_call_output,message" {
			t.Fatalf("output message types %v", types)
		}
		call := last.Get("output.0.content.0.data")
		if call.Get("name").String() != refagent.ToolName || call.Get("arguments").String() != refagent.ToolArguments {
			t.Fatalf("call %s", call.Raw)
		}
		res := last.Get("output.1")
		if res.Get("role").String() != "tool" || res.Get("content.0.data.output").String() != refagent.ToolOutput ||
			res.Get("content.0.data.call_id").String() != call.Get("call_id").String() {
			t.Fatalf("result %s", res.Raw)
		}
	})
	t.Run("file", func(t *testing.T) {
		_, frames, _ := post(t, bridge+"/process", userRequest("s-file", "report [file]"))
		last := checkAgentAPIStream(t, frames)
		found := false
		for _, m := range last.Get("output").Array() {
			for _, c := range m.Get("content").Array() {
				if c.Get("type").String() == "file" && c.Get("file_url").String() == refagent.FileURI &&
					c.Get("filename").String() == refagent.FileName {
					found = true
				}
			}
		}
		if !found || last.Get("status").String() != "completed" {
			t.Fatalf("no file content in output: %s", last.Raw)
		}
	})
	t.Run("fail", func(t *testing.T) {
		_, frames, _ := post(t, bridge+"/process", userRequest("s-fail", "x [fail]"))
		last := checkAgentAPIStream(t, frames)
		if last.Get("status").String() != "failed" || last.Get("error.code").String() != refagent.FailCode ||
			last.Get("error.message").String() != refagent.FailMessage {
			t.Fatalf("final response %s", last.Raw)
		}
	})
	t.Run("slow", func(t *testing.T) {
		start := time.Now()
		_, frames, _ := post(t, bridge+"/process", userRequest("s-slow", "x [slow]"))
		checkAgentAPIStream(t, frames)
		if deltaText(frames) != "echo: x [slow]" {
			t.Fatalf("deltas %q", deltaText(frames))
		}
		if time.Since(start) < 5*20*time.Millisecond {
			t.Fatalf("slow answer came in %v: the delays were lost", time.Since(start))
		}
	})
	t.Run("ask", func(t *testing.T) {
		_, frames, _ := post(t, bridge+"/process", userRequest("s-ask", "x [ask]"))
		last := checkAgentAPIStream(t, frames)
		if last.Get("status").String() != "incomplete" {
			t.Fatalf("want incomplete, got %s", last.Raw)
		}
		q := last.Get("output.#(role==\"assistant\").content.0.text").String()
		if q != refagent.AskPrompt {
			t.Fatalf("question %q in %s", q, last.Raw)
		}
		_, frames, _ = post(t, bridge+"/process", userRequest("s-ask", "Paris"))
		last = checkAgentAPIStream(t, frames)
		if last.Get("status").String() != "completed" || deltaText(frames) != "echo: Paris" {
			t.Fatalf("continuation: %q %s", deltaText(frames), last.Raw)
		}
	})
}

func TestBadInputGetsJSONErrors(t *testing.T) {
	agent := referenceAgent(t, 0)
	bridge, _ := agentAPIBridge(t, agent+"/process", upstream.Config{}, downstream.Options{MaxBodyBytes: 1024})
	cases := []struct {
		name, body string
		status     int
		mention    string
	}{
		{"not json", `{"input": [`, 400, "JSON"},
		{"no input", `{"session_id":"a"}`, 400, "input"},
		{"input not a list", `{"input":"hello"}`, 400, "input"},
		{"role casing", `{"input":[{"role":"USER","content":[{"type":"text","text":"hi"}]}]}`, 400, "USER"},
		{"too large", `{"input":[{"role":"user","content":[{"type":"text","text":"` + strings.Repeat("x", 2000) + `"}]}]}`, 413, "limit"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			resp, err := http.Post(bridge+"/process", "application/json", strings.NewReader(c.body))
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != c.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, c.status, body)
			}
			if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
				t.Fatalf("content type %q", ct)
			}
			msg := gjson.GetBytes(body, "error.message").String()
			if gjson.GetBytes(body, "error.code").String() == "" || !strings.Contains(strings.ToLower(msg), strings.ToLower(c.mention)) {
				t.Fatalf("error body %s does not mention %q", body, c.mention)
			}
		})
	}
	// The bridge keeps serving after all of that.
	_, frames, _ := post(t, bridge+"/process", userRequest("after", "still here"))
	if deltaText(frames) != "echo: still here" {
		t.Fatalf("after bad input: %q", deltaText(frames))
	}
}

func TestUpstreamDownFailsFastAndBreakerOpens(t *testing.T) {
	// A port nothing listens on: connects are refused.
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	dead := "http://" + ln.Addr().String() + "/process"
	ln.Close()
	bridge, up := agentAPIBridge(t, dead, upstream.Config{Breaker: upstream.BreakerConfig{ConsecutiveFailures: 2, OpenFor: time.Minute}}, downstream.Options{})
	for i := 0; i < 3; i++ {
		_, frames, _ := post(t, bridge+"/process", userRequest(fmt.Sprint("down", i), "hi"))
		last := checkAgentAPIStream(t, frames)
		if last.Get("status").String() != "failed" || last.Get("error.code").String() != translate.CodeUpstreamUnavailable {
			t.Fatalf("request %d: %s", i, last.Raw)
		}
	}
	if st := up.Breaker().State().String(); st != "open" {
		t.Fatalf("breaker %s after refused connects, want open", st)
	}
}

func TestOpenBreakerAnswersWithoutWaitingForTimeout(t *testing.T) {
	// An upstream that accepts and never answers: each call costs the
	// first-byte timeout until the breaker opens.
	hang, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer hang.Close()
	go func() {
		for {
			c, err := hang.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	const firstByte = 1500 * time.Millisecond
	bridge, up := agentAPIBridge(t, "http://"+hang.Addr().String()+"/process", upstream.Config{
		Timeouts: upstream.Timeouts{FirstByte: firstByte},
		Breaker:  upstream.BreakerConfig{ConsecutiveFailures: 2, OpenFor: time.Minute},
	}, downstream.Options{})
	for i := 0; i < 2; i++ {
		_, frames, _ := post(t, bridge+"/process", userRequest(fmt.Sprint("hang", i), "hi"))
		if last := checkAgentAPIStream(t, frames); last.Get("error.code").String() != translate.CodeUpstreamTimeout {
			t.Fatalf("request %d: %s", i, last.Raw)
		}
	}
	if up.Breaker().State().String() != "open" {
		t.Fatalf("breaker %s, want open", up.Breaker().State())
	}
	start := time.Now()
	_, frames, _ := post(t, bridge+"/process", userRequest("hang-open", "hi"))
	took := time.Since(start)
	last := checkAgentAPIStream(t, frames)
	if last.Get("error.code").String() != translate.CodeUpstreamUnavailable {
		t.Fatalf("with the breaker open: %s", last.Raw)
	}
	if took >= firstByte {
		t.Fatalf("open breaker answered after %v, no faster than the %v timeout", took, firstByte)
	}
}

func TestClientDisconnectCancelsUpstream(t *testing.T) {
	// The upstream sends one event, then waits; it reports when its client
	// (the bridge) goes away.
	upstreamGone := make(chan time.Time, 1)
	mux := http.NewServeMux()
	mux.HandleFunc("/process", func(w http.ResponseWriter, r *http.Request) {
		// Read the body first: net/http watches for the client going away
		// (and cancels r.Context) only once the body was read.
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, `data: {"sequence_number":0,"object":"response","status":"created","id":"r1"}`+"\n\n")
		w.(http.Flusher).Flush()
		<-r.Context().Done()
		upstreamGone <- time.Now()
	})
	hs := &http.Server{Handler: mux}
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	go hs.Serve(ln)
	defer hs.Close()

	bridge, _ := agentAPIBridge(t, "http://"+ln.Addr().String()+"/process", upstream.Config{}, downstream.Options{})
	conn, err := net.Dial("tcp", strings.TrimPrefix(bridge, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	body := userRequest("gone", "hi")
	fmt.Fprintf(conn, "POST /process HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	br := bufio.NewReader(conn)
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(line, "data: ") || strings.Contains(line, "data: ") {
			break
		}
	}
	closed := time.Now()
	conn.Close()
	select {
	case at := <-upstreamGone:
		if d := at.Sub(closed); d > time.Second {
			t.Fatalf("upstream call cancelled %v after the client left, want within 1s", d)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("upstream call still running 3s after the client left")
	}
}

func TestNoGoroutineOutlivesExchanges(t *testing.T) {
	agent := referenceAgent(t, 0)
	bridge, _ := agentAPIBridge(t, agent+"/process", upstream.Config{}, downstream.Options{})
	_, _, _ = post(t, bridge+"/process", userRequest("warm", "hi"))
	http.DefaultClient.CloseIdleConnections()
	before := runtime.NumGoroutine()
	for i := 0; i < 20; i++ {
		_, frames, _ := post(t, bridge+"/process", userRequest(fmt.Sprint("leak", i), "hi [tool]"))
		checkAgentAPIStream(t, frames)
	}
	http.DefaultClient.CloseIdleConnections()
	waitGoroutines(t, before, "20 exchanges")
}

// waitGoroutines fails the test unless the goroutine count comes back to
// before (with a slack of 2 for runtime goroutines that come and go; a leak
// per exchange would show as many more) within 3 s; after names the moment
// for the message.
func waitGoroutines(t *testing.T, before int, after string) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Second)
	for {
		n := runtime.NumGoroutine()
		if n <= before+2 {
			return
		}
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<16)
			k := runtime.Stack(buf, true)
			t.Fatalf("%d goroutines before, %d after %s:\n%s", before, n, after, bytes.TrimSpace(buf[:k]))
		}
		time.Sleep(20 * time.Millisecond)
	}
}
