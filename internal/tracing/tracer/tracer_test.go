package tracer

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/agentbridge/bridge/downstream"
	"github.com/agentbridge/bridge/internal/tracing"
	"github.com/agentbridge/bridge/translate"
)

func TestOneSpanPerExchange(t *testing.T) {
	var mu sync.Mutex
	var bodies []string
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		bodies = append(bodies, string(b))
		mu.Unlock()
	}))
	defer hs.Close()
	exp, err := tracing.NewExporter(tracing.ExporterOptions{Endpoint: hs.URL, Interval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	tr := New(exp)

	client := "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	parent, _ := tracing.ParseTraceParent(client)
	ours := tracing.NewChild(parent)
	x := downstream.ExchangeInfo{ID: "x1", Route: "weather", Downstream: "aip", Upstream: "agentapi", Session: "s1",
		TraceParent: ours.TraceParent(), ClientTraceParent: client}
	tr.ExchangeStarted(x)
	tr.EventForwarded(x, &translate.Event{Kind: translate.KindState, State: translate.StateWorking}, 5*time.Millisecond, true)
	tr.EventForwarded(x, &translate.Event{Kind: translate.KindContent}, 6*time.Millisecond, false)
	tr.EventForwarded(x, &translate.Event{Kind: translate.KindState, State: translate.StateFailed}, 7*time.Millisecond, false)
	tr.ExchangeEnded(x, "AGENT_FAILED", 10*time.Millisecond)

	// A turn without a client trace: a root span.
	y := downstream.ExchangeInfo{ID: "x2", Route: "r", Downstream: "agentapi", Upstream: "agentapi", TraceParent: tracing.New().TraceParent()}
	tr.ExchangeStarted(y)
	tr.ExchangeEnded(y, "client_gone", time.Millisecond)
	tr.RequestRejected("aip", 400)

	if err := exp.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(bodies) != 1 {
		t.Fatalf("%d requests", len(bodies))
	}
	spans := gjson.Get(bodies[0], "resourceSpans.0.scopeSpans.0.spans").Array()
	if len(spans) != 2 {
		t.Fatalf("spans: %s", bodies[0])
	}
	s := spans[0]
	attr := func(s gjson.Result, k string) gjson.Result {
		return s.Get(`attributes.#(key=="` + k + `").value`)
	}
	if s.Get("name").String() != SpanName || s.Get("traceId").String() != parent.TraceID.String() ||
		s.Get("spanId").String() != ours.SpanID.String() || s.Get("parentSpanId").String() != parent.SpanID.String() ||
		s.Get("kind").Int() != 2 || s.Get("status.code").Int() != 2 {
		t.Fatalf("span %s", s.Raw)
	}
	for k, want := range map[string]string{
		AttrExchangeID: "x1", AttrRoute: "weather", AttrDownstream: "aip", AttrUpstream: "agentapi", AttrSession: "s1",
		AttrState: "failed", AttrOutcome: "AGENT_FAILED", AttrErrorType: "AGENT_FAILED",
	} {
		if got := attr(s, k).Get("stringValue").String(); got != want {
			t.Errorf("%s = %q, want %q", k, got, want)
		}
	}
	if attr(s, AttrEvents).Get("intValue").String() != "3" || attr(s, AttrTimeToFirstEvent).Get("doubleValue").Float() != 5 {
		t.Errorf("counts: %s", s.Raw)
	}
	if r := spans[1]; r.Get("parentSpanId").Exists() || r.Get("status.code").Exists() || strings.Contains(r.Raw, AttrSession) {
		t.Errorf("root span %s", r.Raw)
	}
}

func TestNoExporterNoWork(t *testing.T) {
	tr := New(nil)
	x := downstream.ExchangeInfo{ID: "x"}
	tr.ExchangeStarted(x)
	tr.EventForwarded(x, &translate.Event{}, 0, true)
	tr.ExchangeEnded(x, "completed", 0)
	if len(tr.live) != 0 {
		t.Fatal("a tracer without exporter tracks exchanges")
	}
}
