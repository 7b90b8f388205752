package tracing

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// collector is a fake OTLP/HTTP collector.
type collector struct {
	mu      sync.Mutex
	bodies  [][]byte
	paths   []string
	headers []http.Header
	block   chan struct{} // when set, requests wait for it to close
}

func (c *collector) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if c.block != nil {
		<-c.block
	}
	b, _ := io.ReadAll(r.Body)
	c.mu.Lock()
	c.bodies = append(c.bodies, b)
	c.paths = append(c.paths, r.URL.Path)
	c.headers = append(c.headers, r.Header.Clone())
	c.mu.Unlock()
	w.WriteHeader(http.StatusOK)
}

func testSpan(name string) *Span {
	parent, _ := ParseTraceParent("00-" + tid + "-" + sid + "-01")
	start := time.Unix(1700000000, 123)
	return &Span{
		Context: NewChild(parent), Parent: parent.SpanID, Name: name, Kind: KindServer,
		Start: start, End: start.Add(time.Second),
		Attrs:  []Attr{String("s", "v"), Int("n", 42), Bool("b", true), Float("f", 1.5)},
		Events: []SpanEvent{{Name: "first_event", Time: start.Add(time.Millisecond)}},
		Status: StatusError, Message: "UPSTREAM_TIMEOUT",
	}
}

func TestExporterSendsOTLPJSON(t *testing.T) {
	c := &collector{}
	hs := httptest.NewServer(c)
	defer hs.Close()
	e, err := NewExporter(ExporterOptions{Endpoint: hs.URL, Headers: map[string]string{"Authorization": "Bearer secret"},
		ServiceName: "bridge-test", Interval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	e.Export(testSpan("bridge.exchange"))
	e.Export(testSpan("bridge.exchange"))
	if err := e.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if e.Exported() != 2 || e.Dropped() != 0 || e.Failed() != 0 {
		t.Fatalf("exported %d dropped %d failed %d", e.Exported(), e.Dropped(), e.Failed())
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.paths[0] != "/v1/traces" || c.headers[0].Get("Content-Type") != "application/json" || c.headers[0].Get("Authorization") != "Bearer secret" {
		t.Fatalf("request %s %v", c.paths[0], c.headers[0])
	}
	var req struct {
		ResourceSpans []struct {
			Resource struct {
				Attributes []struct {
					Key   string
					Value map[string]any
				}
			}
			ScopeSpans []struct {
				Scope struct{ Name string }
				Spans []map[string]any
			}
		}
	}
	var spans []map[string]any
	for _, b := range c.bodies {
		if err := json.Unmarshal(b, &req); err != nil {
			t.Fatalf("%v: %s", err, b)
		}
		rs := req.ResourceSpans[0]
		if a := rs.Resource.Attributes[0]; a.Key != "service.name" || a.Value["stringValue"] != "bridge-test" {
			t.Fatalf("resource %+v", rs.Resource)
		}
		spans = append(spans, rs.ScopeSpans[0].Spans...)
	}
	if len(spans) != 2 {
		t.Fatalf("%d spans", len(spans))
	}
	s := spans[0]
	for k, want := range map[string]any{
		"traceId": tid, "parentSpanId": sid, "name": "bridge.exchange", "kind": 2.0,
		"startTimeUnixNano": "1700000000000000123", "endTimeUnixNano": "1700000001000000123",
	} {
		if s[k] != want {
			t.Errorf("%s = %v, want %v", k, s[k], want)
		}
	}
	if id, _ := s["spanId"].(string); len(id) != 16 || id == sid {
		t.Errorf("spanId %v", s["spanId"])
	}
	raw, _ := json.Marshal(s)
	for _, want := range []string{`{"key":"n","value":{"intValue":"42"}}`, `{"key":"b","value":{"boolValue":true}}`,
		`{"key":"f","value":{"doubleValue":1.5}}`, `"status":{"code":2,"message":"UPSTREAM_TIMEOUT"}`, `"name":"first_event"`} {
		if !strings.Contains(string(raw), want) {
			t.Errorf("span lacks %s: %s", want, raw)
		}
	}
}

func TestExporterDropsWhenFullAndCloseStopsIt(t *testing.T) {
	before := runtime.NumGoroutine()
	c := &collector{block: make(chan struct{})}
	hs := httptest.NewServer(c)
	defer hs.Close()
	e, err := NewExporter(ExporterOptions{Endpoint: hs.URL + "/otlp/v1/traces", QueueSize: 4, BatchSize: 1, Interval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	// The first span's request blocks in the collector; four more fill the
	// queue; the rest are dropped, without blocking the caller.
	for range 20 {
		e.Export(testSpan("x"))
	}
	if d := e.Dropped(); d < 15 || d > 16 {
		t.Fatalf("dropped %d of 20 with a queue of 4", d)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := e.Close(ctx); err == nil {
		t.Fatal("Close with a stuck collector returned no error")
	}
	close(c.block)
	e.Export(testSpan("late")) // after Close: dropped, no panic
	_ = e.Close(context.Background())
	c.mu.Lock()
	if len(c.paths) > 0 && c.paths[0] != "/otlp/v1/traces" {
		t.Errorf("path %s", c.paths[0])
	}
	c.mu.Unlock()
	hs.Close()
	http.DefaultClient.CloseIdleConnections()
	for deadline := time.Now().Add(2 * time.Second); runtime.NumGoroutine() > before; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<16)
			t.Fatalf("goroutines: %d before, %d after\n%s", before, runtime.NumGoroutine(), buf[:runtime.Stack(buf, true)])
		}
	}
}

func TestExporterWithoutEndpoint(t *testing.T) {
	if _, err := NewExporter(ExporterOptions{}); err == nil {
		t.Fatal("no endpoint: want an error")
	}
	if _, err := NewExporter(ExporterOptions{Endpoint: "ftp://x"}); err == nil {
		t.Fatal("ftp endpoint: want an error")
	}
	var e *Exporter
	e.Export(testSpan("x")) // a nil exporter drops silently
}

func TestExporterOptionsFromEnv(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
	t.Setenv("OTEL_EXPORTER_OTLP_HEADERS", "api-key=a%20b, x=y")
	t.Setenv("OTEL_SERVICE_NAME", "edge")
	o := ExporterOptionsFromEnv()
	if o.Endpoint != "http://collector:4318" || o.Headers["api-key"] != "a b" || o.Headers["x"] != "y" || o.ServiceName != "edge" {
		t.Fatalf("%+v", o)
	}
}
