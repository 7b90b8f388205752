package downstream

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/agentbridge/bridge/internal/refagent"
	"github.com/agentbridge/bridge/translate"
)

// apSubmitOps are the operations whose answer is the README's "Event|None".
var apSubmitOps = map[string]bool{"process": true, "run": true, "resume": true, "configure": true}

// FuzzAPServer feeds arbitrary paths and bodies to the Agent Protocol
// handler through a fasthttp RequestCtx, with no network: it must never
// panic, and must always answer JSON, or SSE whose data are JSON. A submit
// (process, run, resume, configure) that succeeds answers one JSON object
// (the README's "-> Event"; the agentic dialect's {request_id, thread_id}),
// unless until=settled asked for the whole turn.
//
// The agent behind it is the reference agent with [ask] and [slow] taken
// out of the text: a stream follows a request to its end, and with no
// connection to lose, a request waiting for input would hold it for ever.
func FuzzAPServer(f *testing.F) {
	for _, s := range []struct{ path, body string }{
		{"/", ""}, {"/_discovery", ""}, {"/ref/describe", ""},
		{"/ref/process", `{"input":"hi [tool] [file]","request_id":"f1"}`},
		{"/ref/process?wait=true", `{"input":"x [fail]"}`},
		{"/ref/process?wait=true&until=settled", `{"input":"hi [tool]","request_id":"f2"}`},
		{"/ref/process?until=settled", `{"request_id":"f2"}`},
		{"/ref/run?wait=true", `{"input":"r","thread_id":"t2"}`},
		{"/process?wait=true", `{"args":{"a":1}}`},
		{"/ref/run", `{"input":"hi","thread_id":"t1"}`},
		{"/ref/process", `{"prompt":"agentic"}`},
		{"/ref/process", `{"request_id":"f1"}`},
		{"/ref/process", `{"request_id":"f1","request_keys":{"input":"y"}}`},
		{"/ref/configure", `{"args":{}}`},
		{"/ref/stream_request", `{"input":"s"}`},
		{"/ref/getevents/f1?stream=true&since=2", ""},
		{"/ref/getevents?request_id=f1&since=x", ""},
		{"/ref/get_events/t1?stream=true", ""},
		{"/ref/request/f1", ""}, {"/ref/runs", ""}, {"/ref/threads/t1", ""},
		{"/ref/ws", ""}, {"/nobody/describe", ""}, {"/ref/process", `{`}, {"/ref/process", `[]`},
	} {
		f.Add(s.path, []byte(s.body))
	}
	a := refagent.New()
	a.Delay = 0
	tame := translate.AgentFunc(func(ctx context.Context, req *translate.Request) (translate.Stream, error) {
		r := *req
		r.Input = nil
		for _, m := range req.Input {
			m.Parts = append([]translate.Part(nil), m.Parts...)
			for i := range m.Parts {
				m.Parts[i].Text = strings.NewReplacer("[ask]", "", "[slow]", "").Replace(m.Parts[i].Text)
			}
			r.Input = append(r.Input, m)
		}
		return a.Open(ctx, &r)
	})
	s := New(Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), KeepAlive: -1},
		&Routing{Routes: []Route{{Name: "ref", Upstream: "ref", Proto: translate.ProtoAgentAPI, Agent: tame}}})
	defer s.Shutdown(context.Background())
	f.Fuzz(func(t *testing.T, path string, body []byte) {
		if !strings.HasPrefix(path, "/") {
			path = "/" + path
		}
		for _, method := range []string{"GET", "POST"} {
			var req fasthttp.Request
			req.Header.SetMethod(method)
			req.SetRequestURI("http://bridge" + path)
			req.Header.SetContentType("application/json")
			if method == "POST" {
				req.SetBody(body)
			}
			var ctx fasthttp.RequestCtx
			ctx.Init(&req, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)}, nil)
			rest := ctx.Path()
			if !s.matchAP(&ctx, rest) {
				continue
			}
			s.serveAP(&ctx, nil, rest)
			out := ctx.Response.Body() // runs a stream writer to its end
			ct := string(ctx.Response.Header.ContentType())
			switch {
			case strings.HasPrefix(ct, "text/event-stream"):
				for _, block := range bytes.Split(out, []byte("\n\n")) {
					if len(block) == 0 || block[0] == ':' {
						continue
					}
					var data []byte
					for _, line := range bytes.Split(block, []byte("\n")) {
						if d, ok := bytes.CutPrefix(line, []byte("data: ")); ok {
							data = d
						} else if !bytes.HasPrefix(line, []byte("id: ")) && !bytes.HasPrefix(line, []byte("event: ")) {
							t.Fatalf("%s %s: bad SSE line %q", method, path, line)
						}
					}
					if !json.Valid(data) {
						t.Fatalf("%s %s: bad frame %q", method, path, block)
					}
				}
			case strings.HasPrefix(ct, "application/json"):
				if !json.Valid(out) {
					t.Fatalf("%s %s: answer is not JSON: %q", method, path, out)
				}
				p, _ := parseAPPath(rest)
				if method == "POST" && ctx.Response.StatusCode() < 300 && apSubmitOps[p.op] && !ctx.QueryArgs().Has("until") {
					if first := bytes.TrimLeft(out, " \t\r\n"); len(first) == 0 || first[0] != '{' {
						t.Fatalf("%s %s: HTTP %d: a submit answered %q, not one event object", method, path, ctx.Response.StatusCode(), out)
					}
				}
			default:
				t.Fatalf("%s %s: HTTP %d %q: %q", method, path, ctx.Response.StatusCode(), ct, out)
			}
		}
	})
}
