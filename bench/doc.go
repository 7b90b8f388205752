// Command bench is the bridge's benchmark harness (issue 7).
//
//	go run ./bench run --scenario all [--duration 10s] [--runs 3] [--rate 1000] [--out bench/results/DATE]
//
// It starts, on loopback only, the load-test agent (package loadagent), the
// bridge and the comparison proxies, drives each scenario with the load
// generator (package load) in open loop at a fixed offered rate and in
// closed loop for saturation throughput, and writes report.md, results.json
// and SVG plots to --out.
//
// # Processes and pinning
//
// Every server runs as its own process, so that the CPU seconds and peak RSS
// of the proxy can be read from /proc/PID/stat and /proc/PID/status, and so
// that each can be pinned to a core. They are this same binary re-executed
// in a role ("bench agent", "bench bridge", "bench revproxy"), except nginx.
// The bridge role builds the gateway in-process from the bridge's packages
// exactly as cmd/bridge's newGateway does (downstream.New in front of
// upstream.NewAgentAPI, or upstream.NewAIP in stream mode, or
// upstream.NewAgentProtocol, by --upstream-proto), with logging at warn (no
// access line per exchange), so the harness does not depend on cmd/bridge's
// flags. "bench agent --proto aip|agentprotocol" serves the load agent's
// reply (loadagent.Canonical) in that protocol through downstream.New.
//
// With taskset and at least two cores, the harness re-executes itself under
// "taskset -c 0" (the load generator), the agent runs on core 0 too, and
// the proxy under test on core 1: the load generator and the agent share
// one core, the proxy has one to itself. Go processes pinned to one core
// run with GOMAXPROCS=1, nginx with one worker. Without taskset (or with
// --no-pin) nothing is pinned and the report says so.
//
// # Scenarios and workloads
//
// A scenario is a path from the load generator to the agent: direct (the
// baseline), bridge (Agent API -> Agent API passthrough), httputil
// (net/http/httputil.ReverseProxy, FlushInterval -1), nginx (proxy_pass,
// proxy_buffering off, HTTP/1.1 keepalive upstream; skipped with install
// instructions when nginx is absent), and the translation scenarios
// bridge-aip and bridge-ap (Agent API -> bridge -> an AIP or Agent
// Protocol agent of its own, on the load generator's core). A workload is
// a request size and a stream length. Both are tables in scenarios.go: a
// new protocol path is one line there.
//
// # Extras
//
// --profile DIR saves a CPU profile of the bridge over each of its
// closed-loop phases (go tool pprof DIR/bridge-1KB-10ev.pprof, or
// DIR/bridge-aip-1KB-10ev.pprof for a translation scenario). The agent
// counts the connections it accepts, so the report shows how well each path
// keeps its upstream connections alive; the bridge counts its heap
// allocations, so the report can estimate allocations per event.
//
// go test ./bench/... runs a tiny in-process version of the direct, bridge,
// bridge-aip and bridge-ap scenarios to check the harness itself; it
// asserts no timing.
package main
