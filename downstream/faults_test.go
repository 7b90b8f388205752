package downstream_test

import (
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentbridge/bridge/downstream"
	"github.com/agentbridge/bridge/internal/faultproxy"
	"github.com/agentbridge/bridge/translate"
	"github.com/agentbridge/bridge/upstream"
)

// faultyUpstream puts a fault proxy in front of the reference agent in
// protocol up. Faults of a stream (invalid JSON, cut, drip) apply to the
// first request only, so that a resume goes through clean; the others
// apply to every request, as an agent that is down stays down.
func faultyUpstream(t *testing.T, up string, f faultproxy.Fault) *faultproxy.Proxy {
	t.Helper()
	var n atomic.Int32
	p, err := faultproxy.Start(protocolServer(t, up, 0), func(r *http.Request) faultproxy.Fault {
		if r.Method == http.MethodGet { // AIP's capability document, discovery
			return faultproxy.Fault{}
		}
		if n.Add(1) == 1 || !streamFault[f.Kind] {
			return f
		}
		return faultproxy.Fault{}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

var streamFault = map[faultproxy.Kind]bool{faultproxy.InvalidJSON: true, faultproxy.Cut: true, faultproxy.Drip: true}

func upstreamClient(t *testing.T, up, base string, cfg upstream.Config) translate.Agent {
	t.Helper()
	cfg.Name, cfg.Protocol, cfg.URL = "faulty-"+up, up, base
	var (
		a   translate.Agent
		err error
	)
	switch up {
	case translate.ProtoAgentAPI:
		cfg.URL += "/process"
		a, err = upstream.NewAgentAPI(cfg)
	case translate.ProtoAIP:
		cfg.AIP.Mode = upstream.AIPModeStream
		a, err = upstream.NewAIP(cfg)
	case translate.ProtoAgentProtocol:
		a, err = upstream.NewAgentProtocol(cfg)
	}
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// TestFaultsReachTheClientAsProtocolErrors: for each upstream protocol and
// each fault, an Agent API client gets a terminal answer in its own
// protocol, quickly, and never a hang.
func TestFaultsReachTheClientAsProtocolErrors(t *testing.T) {
	timeouts := upstream.Timeouts{FirstByte: 700 * time.Millisecond, Idle: 700 * time.Millisecond}
	type want struct {
		status string // final Agent API response status
		code   string // its error code, "" when it succeeds
	}
	cases := []struct {
		fault faultproxy.Fault
		want  map[string]want // by upstream protocol
	}{
		{faultproxy.Fault{Kind: faultproxy.Refuse}, map[string]want{
			"agentapi": {"failed", translate.CodeUpstreamUnavailable}, "aip": {"failed", translate.CodeUpstreamUnavailable},
			"agentprotocol": {"failed", translate.CodeUpstreamUnavailable}}},
		{faultproxy.Fault{Kind: faultproxy.Hang}, map[string]want{
			"agentapi": {"failed", translate.CodeUpstreamTimeout}, "aip": {"failed", translate.CodeUpstreamTimeout},
			"agentprotocol": {"failed", translate.CodeUpstreamTimeout}}},
		{faultproxy.Fault{Kind: faultproxy.Delay, Delay: 200 * time.Millisecond}, map[string]want{
			"agentapi": {"completed", ""}, "aip": {"completed", ""}, "agentprotocol": {"completed", ""}}},
		{faultproxy.Fault{Kind: faultproxy.Status5xx, Status: 502}, map[string]want{
			"agentapi": {"failed", translate.CodeUpstreamError}, "aip": {"failed", translate.CodeUpstreamError},
			"agentprotocol": {"failed", translate.CodeUpstreamError}}},
		{faultproxy.Fault{Kind: faultproxy.TooMany, RetryAfter: time.Second}, map[string]want{
			"agentapi": {"failed", translate.CodeUpstreamUnavailable}, "aip": {"failed", translate.CodeUpstreamUnavailable},
			"agentprotocol": {"failed", translate.CodeUpstreamUnavailable}}},
		// Garbage makes no event: the Agent API stream ends without a
		// terminal response (canceled, as the protocol reads an
		// interrupted run); the AIP client tries to resume the task, which
		// the partner never saw.
		{faultproxy.Fault{Kind: faultproxy.Garbage}, map[string]want{
			"agentapi": {"canceled", translate.CodeStreamIncomplete}, "aip": {"failed", translate.CodeStreamIncomplete},
			"agentprotocol": {"failed", translate.CodeUpstreamError}}},
		// The Agent API's own clients skip lines that are not JSON, and so
		// does the bridge; AIP frames must parse; the Agent Protocol client
		// reads a data line that is not a JSON object as plain text (the
		// agentic dialect sends some), and its stream goes on.
		{faultproxy.Fault{Kind: faultproxy.InvalidJSON, After: 2}, map[string]want{
			"agentapi": {"completed", ""}, "aip": {"failed", translate.CodeUpstreamError},
			"agentprotocol": {"completed", ""}}},
		// A cut AIP stream is resumed with re-stream; an Agent API stream
		// cannot be, and ends canceled with the incomplete-stream code.
		{faultproxy.Fault{Kind: faultproxy.Cut, After: 3}, map[string]want{
			"agentapi": {"canceled", translate.CodeStreamIncomplete}, "aip": {"completed", ""},
			"agentprotocol": {"completed", ""}}},
		{faultproxy.Fault{Kind: faultproxy.Drip, Delay: 100 * time.Microsecond}, map[string]want{
			"agentapi": {"completed", ""}, "aip": {"completed", ""}, "agentprotocol": {"completed", ""}}},
	}
	for _, up := range matrixProtocols {
		for _, c := range cases {
			w, ok := c.want[up]
			if !ok {
				continue
			}
			t.Run(up+"/"+string(c.fault.Kind), func(t *testing.T) {
				p := faultyUpstream(t, up, c.fault)
				tm := timeouts
				if c.fault.Kind == faultproxy.Drip {
					// A drip is slow on purpose; under -race on a loaded
					// machine a gap can pass the short idle bound the hang
					// case needs.
					tm.Idle = 10 * time.Second
				}
				bridge := serve(t, downstream.New(downstream.Options{Logger: quietLog()}, &downstream.Routing{Routes: []downstream.Route{
					{Name: "r", Upstream: "u", Proto: up, Agent: upstreamClient(t, up, p.URL(), upstream.Config{Timeouts: tm})}}}))
				start := time.Now()
				_, frames, raw := post(t, bridge+"/process", userRequest("fault-"+string(c.fault.Kind), "hello [tool]"))
				took := time.Since(start)
				last := checkAgentAPIStream(t, frames)
				if got := last.Get("status").String(); got != w.status {
					t.Fatalf("status %q, want %q:\n%s", got, w.status, raw)
				}
				if got := last.Get("error.code").String(); w.code != "" && got != w.code {
					t.Fatalf("error code %q, want %q: %s", got, w.code, last.Raw)
				}
				if got := replyText(last); w.status == "completed" && got != "echo: hello [tool]" {
					t.Fatalf("reply %q after %s", got, c.fault.Kind)
				}
				if took > 5*time.Second {
					t.Fatalf("answer took %v", took)
				}
				if p.Injected()[c.fault.Kind] == 0 {
					t.Fatalf("fault %s was never injected", c.fault.Kind)
				}
			})
		}
	}
}

// TestBreakerCycleUnderFaults: consecutive upstream failures open the
// breaker, callers then fail fast, and after the open period a healthy
// probe closes it again.
func TestBreakerCycleUnderFaults(t *testing.T) {
	for _, up := range matrixProtocols {
		t.Run(up, func(t *testing.T) {
			var healthy atomic.Bool
			var n atomic.Int32
			p, err := faultproxy.Start(protocolServer(t, up, 0), func(r *http.Request) faultproxy.Fault {
				if r.Method == http.MethodGet || healthy.Load() {
					return faultproxy.Fault{}
				}
				n.Add(1)
				return faultproxy.Fault{Kind: faultproxy.Status5xx}
			})
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			client := upstreamClient(t, up, p.URL(), upstream.Config{
				Breaker: upstream.BreakerConfig{ConsecutiveFailures: 3, OpenFor: 300 * time.Millisecond}})
			br := client.(interface{ Breaker() *upstream.Breaker }).Breaker()
			bridge := serve(t, downstream.New(downstream.Options{Logger: quietLog()}, &downstream.Routing{Routes: []downstream.Route{
				{Name: "r", Upstream: "u", Proto: up, Agent: client}}}))
			for i := 0; i < 3; i++ {
				_, frames, _ := post(t, bridge+"/process", userRequest("b", "hi"))
				if last := checkAgentAPIStream(t, frames); last.Get("status").String() != "failed" {
					t.Fatalf("call %d: %s", i, last.Raw)
				}
			}
			if br.State().String() != "open" {
				t.Fatalf("breaker %s after 3 failures", br.State())
			}
			calls := n.Load()
			_, frames, _ := post(t, bridge+"/process", userRequest("b", "hi"))
			last := checkAgentAPIStream(t, frames)
			if last.Get("error.code").String() != translate.CodeUpstreamUnavailable || n.Load() != calls {
				t.Fatalf("open breaker: %s, upstream calls %d -> %d", last.Raw, calls, n.Load())
			}
			healthy.Store(true)
			time.Sleep(350 * time.Millisecond)
			_, frames, _ = post(t, bridge+"/process", userRequest("b2", "hi"))
			if last := checkAgentAPIStream(t, frames); last.Get("status").String() != "completed" {
				t.Fatalf("half-open probe: %s", last.Raw)
			}
			if br.State().String() != "closed" {
				t.Fatalf("breaker %s after a good probe", br.State())
			}
		})
	}
}

// replyText is the assistant's text in a final Agent API response's output.
func replyText(final frame) string {
	var b []string
	for _, m := range final.Get("output").Array() {
		if m.Get("type").String() == "message" && m.Get("role").String() == "assistant" {
			for _, c := range m.Get("content").Array() {
				if c.Get("type").String() == "text" {
					b = append(b, c.Get("text").String())
				}
			}
		}
	}
	return strings.Join(b, "")
}

// TestFaultsReachEveryClientProtocol: the same faults, seen by an AIP and an
// Agent Protocol client: each gets a terminal answer in its own protocol
// carrying the same error code, or the whole reply where the fault is
// survivable.
func TestFaultsReachEveryClientProtocol(t *testing.T) {
	faults := []struct {
		fault faultproxy.Fault
		code  string // "" = the reply completes
	}{
		{faultproxy.Fault{Kind: faultproxy.Refuse}, translate.CodeUpstreamUnavailable},
		{faultproxy.Fault{Kind: faultproxy.Hang}, translate.CodeUpstreamTimeout},
		{faultproxy.Fault{Kind: faultproxy.Status5xx, Status: 502}, translate.CodeUpstreamError},
		{faultproxy.Fault{Kind: faultproxy.TooMany, RetryAfter: time.Second}, translate.CodeUpstreamUnavailable},
		{faultproxy.Fault{Kind: faultproxy.Cut, After: 3}, ""}, // the AIP agent's stream is resumed
		{faultproxy.Fault{Kind: faultproxy.Drip, Delay: 100 * time.Microsecond}, ""},
	}
	for _, down := range []string{translate.ProtoAIP, translate.ProtoAgentProtocol} {
		for _, f := range faults {
			t.Run(down+"/"+string(f.fault.Kind), func(t *testing.T) {
				p := faultyUpstream(t, translate.ProtoAIP, f.fault)
				tm := upstream.Timeouts{FirstByte: 700 * time.Millisecond, Idle: 10 * time.Second}
				bridge := serve(t, downstream.New(downstream.Options{Logger: quietLog()}, &downstream.Routing{Routes: []downstream.Route{
					{Name: "r", Upstream: "u", Proto: translate.ProtoAIP, Agent: upstreamClient(t, translate.ProtoAIP, p.URL(), upstream.Config{Timeouts: tm})}}}))
				start := time.Now()
				o := ask(t, protocolClient(t, down, bridge), "fault-"+down+"-"+string(f.fault.Kind), "hello [tool]")
				if took := time.Since(start); took > 5*time.Second {
					t.Fatalf("answer took %v", took)
				}
				if f.code == "" {
					if o.state != translate.StateCompleted || o.text != "echo: hello [tool]" {
						t.Fatalf("after %s: %+v", f.fault.Kind, o)
					}
					return
				}
				if o.state != translate.StateFailed || o.errCode != f.code {
					t.Fatalf("after %s: %+v, want failed with %s", f.fault.Kind, o, f.code)
				}
			})
		}
	}
}
