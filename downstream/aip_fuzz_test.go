package downstream

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/agentbridge/bridge/internal/refagent"
	"github.com/agentbridge/bridge/translate"
)

// FuzzAIPPartner feeds arbitrary bodies to the AIP handler on every AIP
// path, with no network: it must never panic, and must always answer valid
// JSON (a JSON-RPC object, or SSE frames whose data are JSON).
func FuzzAIPPartner(f *testing.F) {
	files, _ := filepath.Glob("../translate/aip/testdata/samples/v1-*request*.json")
	for _, file := range files {
		if b, err := os.ReadFile(file); err == nil {
			f.Add(b)
		}
	}
	for _, s := range []string{
		``, `{`, `[]`, `null`, `{"jsonrpc":"2.0"}`, `{"jsonrpc":"2.0","id":{},"method":"rpc"}`,
		`{"jsonrpc":"2.0","id":1,"method":"rpc","params":{"message":{"type":"message","id":"m","sentAt":"2025-09-01T11:58:00+08:00","senderRole":"leader","senderId":"l","command":"start","dataItems":[{"type":"text","text":"[ask]"}],"taskId":"t","sessionId":"s"}}}`,
		`{"jsonrpc":"2.0","id":2,"method":"stream","params":{"message":{"type":"message","id":"m","sentAt":"2025-09-01T11:58:00+08:00","senderRole":"leader","senderId":"l","command":"re-stream","commandParams":{"lastEventSeq":1},"dataItems":[],"taskId":"t","sessionId":"s"}}}`,
	} {
		f.Add([]byte(s))
	}
	a := refagent.New()
	a.Delay = 0
	s := New(Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), KeepAlive: -1, AIP: AIPOptions{CompleteDirectly: true,
		MaxResponseTimeout: 200 * time.Millisecond, AwaitingInputTimeout: 50 * time.Millisecond, NotifyAttempts: 1}},
		&Routing{Routes: []Route{{Name: "ref", Upstream: "ref", Proto: translate.ProtoAgentAPI, Agent: a}}})
	defer s.aipShutdown()
	paths := []string{"/rpc", "/stream", "/notification/set", "/notification/get", "/notification/delete", "/notification/start", "/group", "/"}
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, path := range paths {
			var req fasthttp.Request
			req.Header.SetMethod("POST")
			req.SetRequestURI("http://bridge" + path)
			req.Header.SetContentType("application/json")
			req.SetBody(body)
			var ctx fasthttp.RequestCtx
			ctx.Init(&req, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)}, nil)
			s.handle(&ctx)
			out := ctx.Response.Body() // runs a stream writer to its end
			ct := string(ctx.Response.Header.ContentType())
			switch {
			case path == "/" && ctx.Response.StatusCode() == fasthttp.StatusNotFound:
				// not JSON-RPC: not AIP's
			case strings.HasPrefix(ct, "text/event-stream"):
				for _, block := range bytes.Split(out, []byte("\n\n")) {
					if len(block) == 0 || block[0] == ':' {
						continue
					}
					data, ok := bytes.CutPrefix(block, []byte("data: "))
					if !ok || !json.Valid(data) {
						t.Fatalf("%s: bad frame %q", path, block)
					}
				}
			default:
				if !json.Valid(out) {
					t.Fatalf("%s: answer is not JSON: %q", path, out)
				}
			}
		}
	})
}
