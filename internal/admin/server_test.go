package admin_test

import (
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/agentbridge/bridge/internal/admin"
	"github.com/agentbridge/bridge/internal/framelog"
	"github.com/agentbridge/bridge/internal/store"
	"github.com/agentbridge/bridge/mapping"
	"github.com/agentbridge/bridge/translate"
)

func TestExchangeAPIReturnsEventsAndFrames(t *testing.T) {
	r := newRig(t)
	reply := r.send(t, "hello [tool]")
	if !strings.Contains(reply, "echo: ") {
		t.Fatalf("reply has no echo: %s", reply)
	}
	r.settle(t, 1)

	var list []admin.ExchangeSummary
	getJSON(t, r.admin+"/api/exchanges", &list)
	if len(list) != 1 {
		t.Fatalf("got %d exchanges, want 1: %+v", len(list), list)
	}
	x := list[0]
	if x.Downstream != translate.ProtoAgentAPI || x.Upstream != translate.ProtoAgentAPI || x.Route != "default" ||
		x.State != translate.StateCompleted || x.Events == 0 {
		t.Errorf("summary = %+v", x)
	}

	var v struct {
		Exchange store.Exchange    `json:"exchange"`
		Events   []translate.Event `json:"events"`
		Frames   []admin.Frame     `json:"frames"`
		Timeline []admin.Entry     `json:"timeline"`
	}
	getJSON(t, r.admin+"/api/exchanges/"+x.ID, &v)
	if v.Exchange.ID != x.ID {
		t.Errorf("exchange id = %q, want %q", v.Exchange.ID, x.ID)
	}
	var kinds []string
	var text strings.Builder
	for _, ev := range v.Events {
		kinds = append(kinds, ev.Kind.String())
		if ev.Kind == translate.KindContent && ev.Delta && ev.Part != nil {
			text.WriteString(ev.Part.Text)
		}
	}
	for _, k := range []string{"state", "tool_call", "tool_result", "message_start", "content", "message_end", "usage"} {
		if !slices.Contains(kinds, k) {
			t.Errorf("events lack kind %s: %v", k, kinds)
		}
	}
	if text.String() != "echo: hello [tool]" {
		t.Errorf("content deltas spell %q, want %q", text.String(), "echo: hello [tool]")
	}
	if uint64(len(v.Events)) != v.Exchange.LastSeq {
		t.Errorf("%d events, LastSeq %d", len(v.Events), v.Exchange.LastSeq)
	}

	dirs := map[string]int{}
	for _, f := range v.Frames {
		dirs[f.Dir]++
	}
	for _, d := range []string{"down-in", "down-out", "up-out", "up-in"} {
		if dirs[d] == 0 {
			t.Errorf("no %s frame among %v", d, dirs)
		}
	}
	if in := v.Frames[0]; in.Dir != "down-in" || !strings.Contains(in.Data, "hello [tool]") {
		t.Errorf("first frame = %+v, want the client's request", in)
	}

	if len(v.Timeline) != len(v.Events)+len(v.Frames) {
		t.Errorf("timeline has %d entries, want %d events + %d frames", len(v.Timeline), len(v.Events), len(v.Frames))
	}
	lanes := map[string]bool{}
	for i, e := range v.Timeline {
		lanes[e.Lane] = true
		if i > 0 && e.Time.Before(v.Timeline[i-1].Time) {
			t.Errorf("timeline entry %d (%s) is before entry %d", i, e.Time, i-1)
		}
	}
	if !lanes[admin.LaneDownstream] || !lanes[admin.LaneCanonical] || !lanes[admin.LaneUpstream] {
		t.Errorf("timeline lanes = %v, want all three", lanes)
	}
	// The request came in before the bridge called the agent, and the
	// agent's first frame came before the first canonical event.
	first := map[string]int{}
	for i, e := range v.Timeline {
		key := e.Lane + "/" + e.Dir
		if _, ok := first[key]; !ok {
			first[key] = i
		}
	}
	if !(first["downstream/down-in"] < first["upstream/up-out"] && first["upstream/up-out"] < first["upstream/up-in"] &&
		first["upstream/up-in"] < first["canonical/"] && first["canonical/"] < first["downstream/down-out"]) {
		t.Errorf("timeline order: first entries at %v", first)
	}
}

func TestMetricsEndpointAfterTraffic(t *testing.T) {
	r := newRig(t)
	r.send(t, "one")
	r.send(t, "two")
	r.send(t, "three [fail]")
	r.settle(t, 3)
	body := get(t, r.admin+"/metrics", http.StatusOK)
	for _, want := range []string{
		`bridge_exchanges_total{downstream="agentapi",outcome="completed",route="default",upstream="agentapi"} 2`,
		`bridge_exchanges_total{downstream="agentapi",outcome="failed",route="default",upstream="agentapi"} 1`,
		`bridge_errors_total{code="AGENT_FAILED",downstream="agentapi"} 1`,
		`bridge_upstream_breaker_state{upstream="reference"} 0`,
		`bridge_exchange_store_size 3`,
		`bridge_active_streams{downstream="agentapi",route="default",upstream="agentapi"} 0`,
		`bridge_time_to_first_event_seconds_count{downstream="agentapi",route="default",upstream="agentapi"} 3`,
	} {
		if !strings.Contains(body, want+"\n") {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

func TestHealthReadyUpstreams(t *testing.T) {
	r := newRig(t)
	get(t, r.admin+"/healthz", http.StatusOK)
	get(t, r.admin+"/readyz", http.StatusOK)
	r.ready = false
	if body := get(t, r.admin+"/readyz", http.StatusServiceUnavailable); !strings.Contains(body, "draining") {
		t.Errorf("readyz while draining: %s", body)
	}
	get(t, r.admin+"/healthz", http.StatusOK) // still alive

	var ups []admin.Upstream
	getJSON(t, r.admin+"/api/upstreams", &ups)
	if len(ups) != 1 || ups[0].Name != "reference" || ups[0].Breaker != "closed" || ups[0].Protocol != translate.ProtoAgentAPI {
		t.Errorf("upstreams = %+v", ups)
	}
	get(t, r.admin+"/api/exchanges/x_0000000000000000", http.StatusNotFound)
	get(t, r.admin+"/exchanges/x_0000000000000000", http.StatusNotFound)
	get(t, r.admin+"/nothing-here", http.StatusNotFound)
	resp, err := http.Post(r.admin+"/api/config", "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST: %s, want 405", resp.Status)
	}
}

func TestConfigIsRedacted(t *testing.T) {
	cfg, err := mapping.Parse([]byte(`
listen: 127.0.0.1:9000
admin: 127.0.0.1:9001
upstreams:
  - name: weather
    url: https://bot:hunter2@agents.example/process
    protocol: agentapi
    timeouts: {connect: 5s}
    headers: {Authorization: "Bearer tok-123", X-Custom: "also-secret"}
  - name: plain
    url: http://127.0.0.1:8090/process
    protocol: agentapi
`))
	if err != nil {
		t.Fatal(err)
	}
	srv := admin.New(admin.Options{Config: func() any {
		return struct {
			*mapping.Config `yaml:",inline"`
			APIKey          string `yaml:"api_key"`
			Auth            struct {
				Token    string `yaml:"token"`
				Password string `yaml:"password"`
				User     string `yaml:"user"`
			} `yaml:"auth"`
		}{Config: cfg, APIKey: "k-999", Auth: struct {
			Token    string `yaml:"token"`
			Password string `yaml:"password"`
			User     string `yaml:"user"`
		}{Token: "t-777", Password: "p-555", User: "alice"}}
	}, Logger: quietLog()})
	body := call(t, srv, "/api/config", http.StatusOK)
	for _, secret := range []string{"tok-123", "also-secret", "hunter2", "k-999", "t-777", "p-555"} {
		if strings.Contains(body, secret) {
			t.Errorf("config shows the secret %q: %s", secret, body)
		}
	}
	for _, shown := range []string{`"listen":"127.0.0.1:9000"`, `"admin":"127.0.0.1:9001"`, `"Authorization":"[redacted]"`,
		`"X-Custom":"[redacted]"`, `"url":"http://127.0.0.1:8090/process"`, `"user":"alice"`, `"connect":"5s"`, `bot:xxxxx@agents.example`} {
		if !strings.Contains(body, shown) {
			t.Errorf("config lacks %s: %s", shown, body)
		}
	}
}

func TestPageEscapesUntrustedContent(t *testing.T) {
	st := store.NewMemory(store.Limits{}, nil)
	x := &store.Exchange{Downstream: "agentapi", Upstream: "agentapi", Route: `<b>route</b>`, Session: `"><script>alert(1)</script>`}
	if err := st.Create(x); err != nil {
		t.Fatal(err)
	}
	p := translate.TextPart(`<img src=x onerror=alert(2)>`)
	if _, err := st.Append(x.ID, &translate.Event{Kind: translate.KindContent, Part: &p, Delta: true}); err != nil {
		t.Fatal(err)
	}
	fl := framelog.New(framelog.Limits{})
	fl.Record(x.ID, "up-in", []byte(`data: {"text":"</pre><script>alert(3)</script>"}`))
	srv := admin.New(admin.Options{Store: st, Frames: fl, Logger: quietLog(),
		Upstreams: func() []admin.Upstream {
			return []admin.Upstream{{Name: "<i>up</i>", URL: "http://u:pw@h/", Breaker: `open" onclick="x`}}
		}})

	for _, path := range []string{"/", "/exchanges/" + x.ID} {
		body := call(t, srv, path, http.StatusOK)
		for _, bad := range []string{"<script>alert", "<img src=x", "<b>route", "<i>up", `" onclick="x`, ":pw@"} {
			if strings.Contains(body, bad) {
				t.Errorf("%s contains unescaped %q", path, bad)
			}
		}
	}
	page := call(t, srv, "/exchanges/"+x.ID, http.StatusOK)
	if !strings.Contains(page, "&lt;img src=x onerror=alert(2)&gt;") || !strings.Contains(page, "&lt;/pre&gt;&lt;script&gt;alert(3)") {
		t.Errorf("exchange page does not show the escaped content:\n%s", page)
	}
}

func TestExchangeViewWithDroppedEvents(t *testing.T) {
	st := store.NewMemory(store.Limits{MaxEventsPerExchange: 5}, nil)
	x := &store.Exchange{}
	if err := st.Create(x); err != nil {
		t.Fatal(err)
	}
	for range 12 {
		if _, err := st.Append(x.ID, &translate.Event{Kind: translate.KindHeartbeat, Time: time.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	srv := admin.New(admin.Options{Store: st, Logger: quietLog()})
	body := call(t, srv, "/api/exchanges/"+x.ID, http.StatusOK)
	if !strings.Contains(body, `"events_dropped":true`) || !strings.Contains(body, `"seq":8,`) || strings.Contains(body, `"seq":7,`) {
		t.Errorf("want events 8..12 and events_dropped: %s", body)
	}
}

// call runs one GET through srv's handler in-process.
func call(t *testing.T, srv *admin.Server, path string, status int) string {
	t.Helper()
	var ctx fasthttp.RequestCtx
	ctx.Request.SetRequestURI(path)
	ctx.Request.Header.SetMethod(fasthttp.MethodGet)
	srv.Handler()(&ctx)
	if got := ctx.Response.StatusCode(); got != status {
		t.Fatalf("GET %s: %d, want %d: %s", path, got, status, ctx.Response.Body())
	}
	if strings.HasPrefix(string(ctx.Response.Header.ContentType()), "text/html") &&
		!strings.Contains(string(ctx.Response.Header.Peek("Content-Security-Policy")), "script-src 'nonce-") {
		t.Errorf("GET %s: no nonce CSP", path)
	}
	return string(ctx.Response.Body())
}
