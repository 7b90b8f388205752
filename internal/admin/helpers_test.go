package admin_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentbridge/bridge/downstream"
	"github.com/agentbridge/bridge/internal/admin"
	"github.com/agentbridge/bridge/internal/framelog"
	"github.com/agentbridge/bridge/internal/metrics"
	"github.com/agentbridge/bridge/internal/refagent"
	"github.com/agentbridge/bridge/internal/store"
	"github.com/agentbridge/bridge/translate"
	"github.com/agentbridge/bridge/upstream"
)

func quietLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// listen returns a loopback listener closed when the test ends.
func listen(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

// serveDownstream runs srv until the test ends and returns its base URL.
func serveDownstream(t *testing.T, srv *downstream.Server) string {
	t.Helper()
	ln := listen(t)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	})
	return "http://" + ln.Addr().String()
}

// rig is a bridge with its admin listener: a client speaks the Agent API to
// the bridge, which calls the reference agent over the Agent API (so every
// kind of frame is recorded), observed by metrics and a frame log.
type rig struct {
	bridge  string // the bridge's base URL
	admin   string // the admin listener's base URL
	up      *upstream.AgentAPI
	store   store.Store
	frames  *framelog.Log
	metrics *metrics.Metrics
	ready   bool
}

func newRig(t *testing.T) *rig {
	t.Helper()
	agent := refagent.New()
	agent.Delay = time.Millisecond
	agentURL := serveDownstream(t, downstream.New(downstream.Options{Logger: quietLog()},
		&downstream.Routing{Routes: []downstream.Route{{Name: "ref", Upstream: "ref", Proto: translate.ProtoAgentAPI, Agent: agent}}}))

	r := &rig{store: store.NewMemory(store.Limits{}, nil), frames: framelog.New(framelog.Limits{}), ready: true}
	up, err := upstream.NewAgentAPI(upstream.Config{Name: "reference", URL: agentURL + "/process", Protocol: translate.ProtoAgentAPI,
		OnBreakerChange: func(name, from, to string) { r.metrics.BreakerChanged(name, from, to) }})
	if err != nil {
		t.Fatal(err)
	}
	r.up = up
	r.metrics = metrics.New(metrics.Options{
		Breakers:  func() map[string]string { return map[string]string{"reference": up.Breaker().State().String()} },
		StoreSize: r.store.Len,
	})
	r.bridge = serveDownstream(t, downstream.New(downstream.Options{Logger: quietLog(), Store: r.store, RecordStreams: true,
		Observer: r.metrics, Frames: r.frames},
		&downstream.Routing{Routes: []downstream.Route{{Name: "default", Upstream: "reference", Proto: translate.ProtoAgentAPI, Agent: up}}}))

	srv := admin.New(admin.Options{
		Metrics: r.metrics.Handler(),
		Store:   r.store,
		Frames:  r.frames,
		Upstreams: func() []admin.Upstream {
			c := up.Breaker().Counts()
			return []admin.Upstream{{Name: "reference", Protocol: translate.ProtoAgentAPI, URL: agentURL + "/process",
				Breaker: up.Breaker().State().String(), Counts: admin.BreakerCounts{Requests: c.Requests, TotalFailures: c.TotalFailures}}}
		},
		Config: func() any {
			return map[string]any{"listen": strings.TrimPrefix(r.bridge, "http://"),
				"upstreams": []map[string]any{{"name": "reference", "url": agentURL + "/process", "headers": map[string]string{"Authorization": "Bearer s3cret"}}}}
		},
		Ready:  func() bool { return r.ready },
		Logger: quietLog(),
	})
	ln := listen(t)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	})
	r.admin = "http://" + ln.Addr().String()
	return r
}

// send posts text to the bridge's Agent API endpoint and returns the reply.
func (r *rig) send(t *testing.T, text string) string {
	t.Helper()
	body := `{"input":[{"role":"user","type":"message","content":[{"type":"text","text":` + strconv.Quote(text) + `}]}]}`
	resp, err := http.Post(r.bridge+"/process", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST /process: %s: %s", resp.Status, b)
	}
	return string(b)
}

// settle waits until the bridge has reported every exchange it served as
// ended (the report follows the last byte sent).
func (r *rig) settle(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		xs := r.store.List(0)
		done := len(xs) >= n
		for _, x := range xs {
			done = done && x.State.Settled()
		}
		if done && !strings.Contains(get(t, r.admin+"/metrics", http.StatusOK), `bridge_active_streams{downstream="agentapi",route="default",upstream="agentapi"} 1`) {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("exchanges did not settle")
}

// get fetches url, checks the status and returns the body.
func get(t *testing.T, url string, status int) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != status {
		t.Fatalf("GET %s: %s, want %d: %s", url, resp.Status, status, b)
	}
	return string(b)
}

func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(get(t, url, http.StatusOK)), v); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
}
