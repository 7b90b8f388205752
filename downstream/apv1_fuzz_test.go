package downstream

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/agentbridge/bridge/internal/refagent"
	"github.com/agentbridge/bridge/translate"
)

// FuzzAPv1 feeds arbitrary bodies and path segments to the agentprotocol.ai
// v1 handler, with no network: it must never panic, and every answer but a
// download must be JSON with a status the API documents or the bridge
// chose (200, 302, 400, 404, 405, 409, 413, 503).
func FuzzAPv1(f *testing.F) {
	files, _ := filepath.Glob("../translate/agentprotocol/v1/testdata/*.json")
	for _, file := range files {
		if b, err := os.ReadFile(file); err == nil {
			f.Add(b, "steps")
		}
	}
	for _, s := range []string{``, `{`, `[]`, `null`, `{"input":null}`, `{"input":"hi [tool] [file]","additional_input":{"a":1}}`,
		`{"input":"x [ask]"}`, `{"input":"x [fail]"}`, `{"input":3}`, `{"additional_input":[]}`} {
		f.Add([]byte(s), "steps")
		f.Add([]byte(s), "artifacts")
	}
	f.Add([]byte("--b\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.txt\"\r\n\r\nhi\r\n--b--\r\n"), "artifacts")
	f.Add([]byte(""), "steps/x")
	f.Add([]byte(""), "artifacts/%00")

	a := refagent.New()
	a.Delay = 0
	s := New(Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), APv1: APv1Options{StepTimeout: time.Second, MaxTasks: 100}},
		&Routing{Routes: []Route{{Name: "ref", Upstream: "ref", Proto: translate.ProtoAgentAPI, Agent: a}}})
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = s.waitTurns(ctx)
	}()
	do := func(method, uri, ct string, body []byte) *fasthttp.RequestCtx {
		var req fasthttp.Request
		req.Header.SetMethod(method)
		req.SetRequestURI(uri)
		if ct != "" {
			req.Header.SetContentType(ct)
		}
		req.SetBody(body)
		var ctx fasthttp.RequestCtx
		ctx.Init(&req, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)}, nil)
		s.handle(&ctx)
		return &ctx
	}
	f.Fuzz(func(t *testing.T, body []byte, seg string) {
		created := do("POST", "http://bridge/ap/v1/agent/tasks", "application/json", body)
		task := "unknown"
		if created.Response.StatusCode() == fasthttp.StatusOK {
			var v struct {
				TaskID string `json:"task_id"`
			}
			if err := json.Unmarshal(created.Response.Body(), &v); err != nil || v.TaskID == "" {
				t.Fatalf("created task %q", created.Response.Body())
			}
			task = v.TaskID
		}
		base := "http://bridge/ap/v1/agent/tasks/" + task + "/"
		calls := []*fasthttp.RequestCtx{
			created,
			do("POST", base+seg, "application/json", body),
			do("POST", base+seg, "multipart/form-data; boundary=b", body),
			do("GET", base+seg+"?current_page=1&page_size=2", "", nil),
			do("GET", "http://bridge/ap/v1/agent/tasks?page_size="+seg, "", nil),
		}
		for i, c := range calls {
			code := c.Response.StatusCode()
			switch code {
			case 200, 302, 400, 404, 405, 409, 413, 503:
			default:
				t.Fatalf("call %d (%s): status %d: %q", i, seg, code, c.Response.Body())
			}
			if string(c.Response.Header.ContentType()) == "application/octet-stream" {
				continue
			}
			if !json.Valid(c.Response.Body()) {
				t.Fatalf("call %d (%s): answer is not JSON: %q", i, seg, c.Response.Body())
			}
		}
	})
}
