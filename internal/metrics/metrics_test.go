package metrics_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentbridge/bridge/downstream"
	"github.com/agentbridge/bridge/internal/metrics"
	"github.com/agentbridge/bridge/internal/refagent"
	"github.com/agentbridge/bridge/translate"
)

// bridge serves a downstream server whose one route, "ref", fronts the
// reference agent in-process, observed by m. It returns the base URL.
func bridge(t *testing.T, m *metrics.Metrics) string {
	t.Helper()
	a := refagent.New()
	a.Delay = time.Millisecond
	srv := downstream.New(downstream.Options{Observer: m, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))},
		&downstream.Routing{Routes: []downstream.Route{{Name: "ref", Upstream: "ref", Proto: translate.ProtoAgentAPI, Agent: a}}})
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

// process sends one Agent API request with text and reads the reply whole.
func process(t *testing.T, base, body string) int {
	t.Helper()
	resp, err := http.Post(base+"/process", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode
}

func message(text string) string {
	return `{"input":[{"role":"user","type":"message","content":[{"type":"text","text":` + strconv.Quote(text) + `}]}]}`
}

// scrape GETs the metrics handler and returns every sample, keyed by its
// series as the text format prints it (name{labels in name order}).
func scrape(t *testing.T, h http.Handler) map[string]float64 {
	t.Helper()
	srv := httptest.NewServer(h)
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %s", resp.Status)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("bad sample line %q: %v", line, err)
		}
		out[line[:i]] = v
	}
	return out
}

func TestMetricsAfterKnownTraffic(t *testing.T) {
	states := map[string]string{"ref": "closed", "flaky": "open", "probing": "half-open"}
	stored := 0
	m := metrics.New(metrics.Options{
		Breakers:  func() map[string]string { return states },
		StoreSize: func() int { return stored },
	})
	base := bridge(t, m)

	for range 3 {
		if st := process(t, base, message("hello")); st != http.StatusOK {
			t.Fatalf("status %d", st)
		}
	}
	if st := process(t, base, message("please [fail]")); st != http.StatusOK {
		t.Fatalf("status %d", st)
	}
	if st := process(t, base, `{not json`); st != http.StatusBadRequest {
		t.Fatalf("bad JSON: status %d, want 400", st)
	}
	m.BreakerChanged("flaky", "closed", "open")
	m.BreakerChanged("flaky", "open", "half-open")
	m.BreakerChanged("flaky", "half-open", "open")
	m.Retried("flaky")
	m.Resumed("upstream", translate.ProtoAIP)
	stored = 4

	want := map[string]float64{
		ref("bridge_exchanges_total", `outcome="completed"`):                                   3,
		ref("bridge_exchanges_total", `outcome="failed"`):                                      1,
		ref("bridge_requests_total", `outcome="completed"`):                                    3,
		ref("bridge_requests_total", `outcome="failed"`):                                       1,
		`bridge_requests_total{downstream="agentapi",outcome="http_400",route="",upstream=""}`: 1,
		`bridge_errors_total{code="AGENT_FAILED",downstream="agentapi"}`:                       1,
		`bridge_errors_total{code="HTTP_400",downstream="agentapi"}`:                           1,
		ref("bridge_active_streams", ""):                                                       0,
		ref("bridge_exchange_duration_seconds_count", ""):                                      4,
		ref("bridge_time_to_first_event_seconds_count", ""):                                    4,
		// Each echo: working, message start, three deltas, message end,
		// usage, completed. The failure: working, failed.
		ref("bridge_events_forwarded_total", `kind="content"`):                                   9,
		ref("bridge_events_forwarded_total", `kind="message_start"`):                             3,
		ref("bridge_events_forwarded_total", `kind="usage"`):                                     3,
		ref("bridge_events_forwarded_total", `kind="state"`):                                     8,
		`bridge_upstream_breaker_state{upstream="ref"}`:                                          0,
		`bridge_upstream_breaker_state{upstream="probing"}`:                                      1,
		`bridge_upstream_breaker_state{upstream="flaky"}`:                                        2,
		`bridge_upstream_breaker_transitions_total{from="closed",to="open",upstream="flaky"}`:    1,
		`bridge_upstream_breaker_transitions_total{from="half-open",to="open",upstream="flaky"}`: 1,
		`bridge_upstream_retries_total{upstream="flaky"}`:                                        1,
		`bridge_resumes_total{protocol="aip",side="upstream"}`:                                   1,
		`bridge_exchange_store_size`:                                                             4,
	}
	// The server reports an exchange's end after its last byte is written:
	// wait until all four have ended.
	var got map[string]float64
	deadline := time.Now().Add(5 * time.Second)
	for {
		got = scrape(t, m.Handler())
		if got[ref("bridge_exchange_duration_seconds_count", "")] == 4 || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	for series, v := range want {
		g, ok := got[series]
		if !ok {
			t.Errorf("missing series %s", series)
			continue
		}
		if g != v {
			t.Errorf("%s = %v, want %v", series, g, v)
		}
	}
	if _, ok := got["go_goroutines"]; !ok {
		t.Error("missing the Go runtime series go_goroutines")
	}
	if t.Failed() {
		t.Log(dump(got, "bridge_"))
	}
}

func TestErrorCodeOutcomeCountedOnce(t *testing.T) {
	m := metrics.New(metrics.Options{NoRuntime: true})
	x := downstream.ExchangeInfo{ID: "x1", Route: "r", Downstream: "aip", Upstream: "agentapi"}
	m.ExchangeStarted(x)
	m.EventForwarded(x, &translate.Event{Kind: translate.KindState, State: translate.StateFailed,
		Err: &translate.Error{Code: "UPSTREAM_TIMEOUT"}}, time.Millisecond, true)
	m.ExchangeEnded(x, "UPSTREAM_TIMEOUT", time.Second)
	x.ID = "x2"
	m.ExchangeStarted(x)
	m.ExchangeEnded(x, "client_gone", time.Second)

	got := scrape(t, m.Handler())
	if v := got[`bridge_errors_total{code="UPSTREAM_TIMEOUT",downstream="aip"}`]; v != 1 {
		t.Errorf("UPSTREAM_TIMEOUT counted %v times, want 1", v)
	}
	for series := range got {
		if strings.Contains(series, `code="client_gone"`) {
			t.Errorf("client_gone counted as an error: %s", series)
		}
	}
	if v := got[`bridge_exchanges_total{downstream="aip",outcome="client_gone",route="r",upstream="agentapi"}`]; v != 1 {
		t.Errorf("client_gone exchanges = %v, want 1", v)
	}
}

func TestOutcomeLabelValuesAreBounded(t *testing.T) {
	m := metrics.New(metrics.Options{NoRuntime: true})
	x := downstream.ExchangeInfo{ID: "x", Route: "r", Downstream: "agentapi", Upstream: "agentapi"}
	for i := range metrics.MaxLabelValues + 50 {
		m.ExchangeStarted(x)
		m.ExchangeEnded(x, fmt.Sprintf("CODE_%d", i), time.Millisecond)
	}
	got := scrape(t, m.Handler())
	n := 0
	for series := range got {
		if strings.HasPrefix(series, "bridge_exchanges_total{") {
			n++
		}
	}
	if n > metrics.MaxLabelValues+1 {
		t.Errorf("%d outcome series, want at most %d", n, metrics.MaxLabelValues+1)
	}
	if v := got[`bridge_exchanges_total{downstream="agentapi",outcome="other",route="r",upstream="agentapi"}`]; v != 50 {
		t.Errorf("outcome other = %v, want 50", v)
	}
}

func TestRegistriesAreIndependent(t *testing.T) {
	a := metrics.New(metrics.Options{})
	b := metrics.New(metrics.Options{}) // would panic on a shared registry
	a.RequestRejected("", http.StatusNotFound)
	if v := scrape(t, a.Handler())[`bridge_requests_total{downstream="unknown",outcome="http_404",route="",upstream=""}`]; v != 1 {
		t.Errorf("a: 404 requests = %v, want 1", v)
	}
	if _, ok := scrape(t, b.Handler())[`bridge_requests_total{downstream="unknown",outcome="http_404",route="",upstream=""}`]; ok {
		t.Error("b sees a's request")
	}
}

// ref names a series of the "ref" route with one more label, extra, in
// the order the text format prints labels (sorted by name).
func ref(name, extra string) string {
	ls := []string{`downstream="agentapi"`, `route="ref"`, `upstream="agentapi"`}
	if extra != "" {
		ls = append(ls, extra)
	}
	slices.Sort(ls)
	return name + "{" + strings.Join(ls, ",") + "}"
}

func dump(got map[string]float64, prefix string) string {
	var b strings.Builder
	for k, v := range got {
		if strings.HasPrefix(k, prefix) && !strings.Contains(k, "_bucket") {
			fmt.Fprintf(&b, "%s %v\n", k, v)
		}
	}
	return b.String()
}
