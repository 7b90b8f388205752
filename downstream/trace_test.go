package downstream_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentbridge/bridge/downstream"
	"github.com/agentbridge/bridge/internal/tracing"
	"github.com/agentbridge/bridge/translate"
	"github.com/agentbridge/bridge/upstream"
)

// traceHeaders is what one upstream call carried.
type traceHeaders struct{ parent, state string }

// traceRecorder is a fake Agent API upstream: it records the trace headers
// of each call and passes the call on to the reference agent.
type traceRecorder struct {
	mu    sync.Mutex
	calls []traceHeaders
	proxy *httputil.ReverseProxy
}

func (r *traceRecorder) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	r.mu.Lock()
	r.calls = append(r.calls, traceHeaders{req.Header.Get("traceparent"), req.Header.Get("tracestate")})
	r.mu.Unlock()
	r.proxy.ServeHTTP(w, req)
}

// waitCalls waits for n calls and returns them.
func (r *traceRecorder) waitCalls(t *testing.T, n int) []traceHeaders {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; {
		r.mu.Lock()
		calls := append([]traceHeaders(nil), r.calls...)
		r.mu.Unlock()
		if len(calls) >= n {
			return calls
		}
		if time.Now().After(deadline) {
			t.Fatalf("upstream got %d calls, want %d", len(calls), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// traceObserver records the ExchangeInfo of each ended exchange.
type traceObserver struct {
	mu    sync.Mutex
	ended []downstream.ExchangeInfo
}

func (o *traceObserver) ExchangeStarted(downstream.ExchangeInfo) {}
func (o *traceObserver) EventForwarded(downstream.ExchangeInfo, *translate.Event, time.Duration, bool) {
}
func (o *traceObserver) ExchangeEnded(x downstream.ExchangeInfo, _ string, _ time.Duration) {
	o.mu.Lock()
	o.ended = append(o.ended, x)
	o.mu.Unlock()
}
func (o *traceObserver) RequestRejected(string, int) {}

func (o *traceObserver) find(traceparent string) (downstream.ExchangeInfo, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, x := range o.ended {
		if x.TraceParent == traceparent {
			return x, true
		}
	}
	return downstream.ExchangeInfo{}, false
}

// tracedBridge starts a bridge in front of a recording Agent API upstream
// (the reference agent behind it) and returns the bridge's base URL.
func tracedBridge(t *testing.T) (string, *traceRecorder, *traceObserver) {
	t.Helper()
	agent, err := url.Parse(referenceAgent(t, 0))
	if err != nil {
		t.Fatal(err)
	}
	rec := &traceRecorder{proxy: httputil.NewSingleHostReverseProxy(agent)}
	rec.proxy.FlushInterval = -1
	hs := httptest.NewServer(rec)
	t.Cleanup(hs.Close)
	obs := &traceObserver{}
	base, _ := agentAPIBridge(t, hs.URL+"/process", upstream.Config{}, downstream.Options{Observer: obs})
	return base, rec, obs
}

// tracePost sends body with the given trace headers ("" for none) and
// reads the whole answer.
func tracePost(t *testing.T, url, body, traceparent, tracestate string) []byte {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if traceparent != "" {
		req.Header.Set("traceparent", traceparent)
	}
	if tracestate != "" {
		req.Header.Set("tracestate", tracestate)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST %s: HTTP %d %s", url, resp.StatusCode, raw)
	}
	return raw
}

const (
	clientTraceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	clientSpanID  = "00f067aa0ba902b7"
	clientParent  = "00-" + clientTraceID + "-" + clientSpanID + "-01"
	clientState   = "vendor=opaque,other=x"
)

// checkContinued asserts that got (what the upstream received) continues
// the client's trace with a span of the bridge's own.
func checkContinued(t *testing.T, got traceHeaders) tracing.SpanContext {
	t.Helper()
	sc, err := tracing.ParseTraceParent(got.parent)
	if err != nil {
		t.Fatalf("upstream traceparent %q: %v", got.parent, err)
	}
	if sc.TraceID.String() != clientTraceID {
		t.Fatalf("upstream trace id %s, want the client's %s", sc.TraceID, clientTraceID)
	}
	if sc.SpanID.String() == clientSpanID {
		t.Fatalf("upstream parent id is the client's span, want the bridge's own")
	}
	if !sc.Sampled() {
		t.Fatalf("sampled flag lost: %q", got.parent)
	}
	if got.state != clientState {
		t.Fatalf("upstream tracestate %q, want %q", got.state, clientState)
	}
	return sc
}

// checkNew asserts that got is a valid traceparent of a trace other than
// the client's, without tracestate.
func checkNew(t *testing.T, got traceHeaders) {
	t.Helper()
	sc, err := tracing.ParseTraceParent(got.parent)
	if err != nil {
		t.Fatalf("upstream traceparent %q: %v", got.parent, err)
	}
	if sc.TraceID.String() == clientTraceID || sc.TraceID.String() == "00000000000000000000000000000000" {
		t.Fatalf("upstream trace id %s is not a new one", sc.TraceID)
	}
	if got.state != "" {
		t.Fatalf("tracestate %q passed on without a valid traceparent", got.state)
	}
}

func TestTraceContextReachesAgentAPIUpstream(t *testing.T) {
	base, rec, obs := tracedBridge(t)

	tracePost(t, base+"/process", userRequest("s1", "hello"), clientParent, clientState)
	sc := checkContinued(t, rec.waitCalls(t, 1)[0])
	// The observer (the OpenTelemetry span) names the same span, and the
	// client's as its parent.
	var x downstream.ExchangeInfo
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		var ok bool
		if x, ok = obs.find(sc.TraceParent()); ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no exchange observed with traceparent %s", sc.TraceParent())
		}
	}
	if x.ClientTraceParent != clientParent || x.Downstream != translate.ProtoAgentAPI {
		t.Fatalf("observed %+v", x)
	}

	// No trace context: the bridge starts one.
	tracePost(t, base+"/process", userRequest("s2", "hello"), "", "")
	checkNew(t, rec.waitCalls(t, 2)[1])

	// An invalid one (all-zero trace id, upper case, garbage) is replaced,
	// and its tracestate dropped with it.
	for i, bad := range []string{
		"00-00000000000000000000000000000000-" + clientSpanID + "-01",
		"00-" + strings.ToUpper(clientTraceID) + "-" + clientSpanID + "-01",
		"not a traceparent",
	} {
		tracePost(t, base+"/process", userRequest(fmt.Sprint("s-bad-", i), "hello"), bad, clientState)
		checkNew(t, rec.waitCalls(t, 3+i)[2+i])
	}
}

func TestTraceContextReachesUpstreamThroughAIP(t *testing.T) {
	base, rec, _ := tracedBridge(t)
	start := func(task, traceparent string) {
		body := rpcBody("rpc", task, map[string]any{"message": aipMessage(task, "session-"+task, "start", "hello", nil)})
		raw := tracePost(t, base+"/rpc", body, traceparent, clientState)
		if !strings.Contains(string(raw), `"result"`) {
			t.Fatalf("start answered %s", raw)
		}
	}
	start("task-traced", clientParent)
	checkContinued(t, rec.waitCalls(t, 1)[0])
	start("task-untraced", "")
	checkNew(t, rec.waitCalls(t, 2)[1])
}

func TestTraceContextReachesUpstreamThroughAPv1(t *testing.T) {
	base, rec, _ := tracedBridge(t)
	task := apv1CreateTask(t, base, `{"input":"hello"}`)
	tracePost(t, base+apv1Tasks+"/"+task+"/steps", `{"input":"hello"}`, clientParent, clientState)
	checkContinued(t, rec.waitCalls(t, 1)[0])
	tracePost(t, base+apv1Tasks+"/"+task+"/steps", `{"input":"again"}`, "", "")
	checkNew(t, rec.waitCalls(t, 2)[1])
}
