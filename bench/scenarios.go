package main

import (
	"fmt"
	"strings"

	"github.com/agentbridge/bridge/translate"
)

// scenario is one path from the load generator to the agent.
type scenario struct {
	Name string
	Desc string
	// Kind: "baseline", "passthrough" (the bridge, same protocol both
	// sides), "comparison" (another proxy) or "translation" (the bridge
	// between two protocols).
	Kind string
	// Proto is the protocol the load generator speaks to the scenario's
	// front; the load package speaks the Agent API only, today.
	Proto string
	// NoDeltas: the agent's protocol carries no text deltas (AIP v01.00
	// sends a message once it is complete), so each reply's N deltas of S
	// bytes reach the load generator as one whole content event of N×S
	// bytes, which is what is checked and counted for it.
	NoDeltas bool
	// start starts what sits between the load generator and the agent
	// (nothing, for direct). skip, when it returns a non-empty reason,
	// means the scenario cannot run here and is reported as skipped.
	start func(h *host, agent *proc) (*front, error)
	skip  func() string
}

// front is where the load generator sends a scenario's requests.
type front struct {
	base  string // http://127.0.0.1:PORT
	proc  *proc  // the proxy process, measured; nil for direct
	stats string // the bridge's /memstats URL, "" elsewhere
	// agent is the scenario's own agent, when it does not use the shared
	// Agent API one (translation scenarios); agentStats is its /stats URL.
	agent      *proc
	agentStats string
	name       string // the scenario's, set by the runner: names profiles
	noDeltas   bool   // the scenario's NoDeltas, set by the runner
}

func (f *front) profileName() string {
	if f.name == "" {
		return "bridge"
	}
	return f.name
}

// scenarios is the table of paths. Adding a protocol path, when its
// upstream and downstream land, is one line here (plus, for a new client
// protocol, its request and stream reader in package load).
var scenarios = []scenario{
	{Name: "direct", Kind: "baseline", Proto: "agentapi", Desc: "load generator → agent, no proxy", start: startDirect},
	{Name: "bridge", Kind: "passthrough", Proto: "agentapi", Desc: "bridge, Agent API → Agent API (decode to canonical events, re-encode)", start: startBridgeRole},
	{Name: "httputil", Kind: "comparison", Proto: "agentapi", Desc: "Go net/http/httputil.ReverseProxy, FlushInterval -1", start: startRevProxyRole},
	{Name: "nginx", Kind: "comparison", Proto: "agentapi", Desc: "nginx proxy_pass, proxy_buffering off, HTTP/1.1 keepalive upstream", start: startNginx, skip: nginxMissing},
	{Name: "bridge-aip", Kind: "translation", Proto: "agentapi", NoDeltas: true, Desc: "bridge, Agent API → AIP (stream mode) agent: the load agent's reply served in AIP by downstream.New; AIP has no deltas, so the reply's text arrives as one message", start: startTranslation(translate.ProtoAIP)},
	{Name: "bridge-ap", Kind: "translation", Proto: "agentapi", Desc: "bridge, Agent API → Agent Protocol agent (submit, then the SSE event stream): the load agent's reply served in the Agent Protocol by downstream.New", start: startTranslation(translate.ProtoAgentProtocol)},
	// An AIP or Agent Protocol client in front of the bridge needs its request and stream reader in package load first.
}

// workload is a request size and a stream length.
type workload struct {
	Name     string
	ReqBytes int // request body size
	Events   int // content deltas in each reply
	// RateDiv divides --rate for the open-loop phase: long streams at the
	// full request rate would ask for rate*events events/s, far beyond a
	// 2-core box, so they are offered rate/RateDiv requests/s.
	RateDiv int
}

var workloads = []workload{
	{Name: "1KB-10ev", ReqBytes: 1 << 10, Events: 10, RateDiv: 1},
	{Name: "16KB-10ev", ReqBytes: 16 << 10, Events: 10, RateDiv: 1},
	{Name: "1KB-1000ev", ReqBytes: 1 << 10, Events: 1000, RateDiv: 20},
	{Name: "16KB-1000ev", ReqBytes: 16 << 10, Events: 1000, RateDiv: 20},
}

func startDirect(_ *host, agent *proc) (*front, error) {
	return &front{base: "http://" + agent.addr}, nil
}

func startBridgeRole(h *host, agent *proc) (*front, error) {
	return startBridge(h, "bridge", translate.ProtoAgentAPI, "http://"+agent.addr+"/process")
}

// startBridge starts the bridge role in front of the agent at upstreamURL,
// which speaks proto.
func startBridge(h *host, name, proto, upstreamURL string) (*front, error) {
	stats, err := freePort()
	if err != nil {
		return nil, err
	}
	p, err := h.startRole(name, coreProxy, "bridge", "--listen", "127.0.0.1:0",
		"--upstream", upstreamURL, "--upstream-proto", proto, "--stats", stats)
	if err != nil {
		return nil, err
	}
	return &front{base: "http://" + p.addr, proc: p, stats: "http://" + stats + "/memstats"}, nil
}

// startTranslation returns the start of a translation scenario: its own
// agent serving the load agent's reply in proto (on the load generator's
// core, like the Agent API agent), and the bridge in front of it speaking
// proto upstream and the Agent API to the load generator.
func startTranslation(proto string) func(*host, *proc) (*front, error) {
	return func(h *host, _ *proc) (*front, error) {
		stats, err := freePort()
		if err != nil {
			return nil, err
		}
		agent, err := h.startRole("agent-"+proto, coreLoad, "agent", "--proto", proto, "--listen", "127.0.0.1:0", "--stats", stats)
		if err != nil {
			return nil, err
		}
		f, err := startBridge(h, "bridge-"+proto, proto, "http://"+agent.addr)
		if err != nil {
			agent.stop()
			return nil, err
		}
		f.agent, f.agentStats = agent, "http://"+stats+"/stats"
		return f, nil
	}
}

func startRevProxyRole(h *host, agent *proc) (*front, error) {
	p, err := h.startRole("httputil", coreProxy, "revproxy", "--listen", "127.0.0.1:0", "--upstream", "http://"+agent.addr)
	if err != nil {
		return nil, err
	}
	return &front{base: "http://" + p.addr, proc: p}, nil
}

// pick selects table entries by a comma-separated list of names, or "all".
func pick[T any](all []T, name func(T) string, list, what string) ([]T, error) {
	if list == "" || list == "all" {
		return all, nil
	}
	var out []T
	for want := range strings.SplitSeq(list, ",") {
		found := false
		for _, x := range all {
			if name(x) == strings.TrimSpace(want) {
				out = append(out, x)
				found = true
			}
		}
		if !found {
			var names []string
			for _, x := range all {
				names = append(names, name(x))
			}
			return nil, fmt.Errorf("unknown %s %q: want all or some of %s", what, want, strings.Join(names, ", "))
		}
	}
	return out, nil
}
