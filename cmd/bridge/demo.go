package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"strings"
	"time"

	"github.com/agentbridge/bridge/downstream"
	"github.com/agentbridge/bridge/internal/refagent"
	"github.com/agentbridge/bridge/mapping"
	"github.com/agentbridge/bridge/translate"
)

// demoAgent is one reference agent the demo runs, in one protocol.
type demoAgent struct {
	proto  string
	listen string
	prefix string // the bridge's route prefix to this agent ("" for the default route)
	url    string // the upstream URL the bridge calls
	srv    *downstream.Server
	ln     net.Listener
}

func cmdDemo(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("demo", "demo [--listen ADDR] [--agent-listen ADDR] [--aip-agent-listen ADDR] [--ap-agent-listen ADDR] [--admin ADDR]", stderr)
	listen := fs.String("listen", "127.0.0.1:9000", "address of the bridge")
	agentListen := fs.String("agent-listen", "127.0.0.1:8090", "address of the reference agent speaking the Agent API")
	aipListen := fs.String("aip-agent-listen", "127.0.0.1:8091", "address of the reference agent speaking AIP")
	apListen := fs.String("ap-agent-listen", "127.0.0.1:8092", "address of the reference agent speaking the Agent Protocol")
	adminListen := fs.String("admin", "127.0.0.1:9001", "address of the admin listener: metrics, admin API and page (empty: off)")
	var lf logFlags
	lf.register(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	log, err := lf.logger(stderr)
	if err != nil {
		return err
	}
	agents := []*demoAgent{
		{proto: translate.ProtoAgentAPI, listen: *agentListen},
		{proto: translate.ProtoAIP, listen: *aipListen, prefix: "/to-aip"},
		{proto: translate.ProtoAgentProtocol, listen: *apListen, prefix: "/to-ap"},
	}
	cfg := &mapping.Config{Listen: *listen, Admin: *adminListen}
	for _, a := range agents {
		if a.srv, err = newReferenceAgent(a.proto, "/process", refagent.SlowDelay, log.With("component", "agent-"+a.proto)); err != nil {
			return err
		}
		if a.ln, err = net.Listen("tcp", a.listen); err != nil {
			return fmt.Errorf("reference agent (%s): %w (choose another address with the flags)", a.proto, err)
		}
		defer a.ln.Close()
		a.url = "http://" + a.ln.Addr().String()
		if a.proto == translate.ProtoAgentAPI {
			a.url += "/process"
		}
		name := "reference-" + a.proto
		cfg.Upstreams = append(cfg.Upstreams, mapping.Upstream{Name: name, URL: a.url, Protocol: a.proto})
		if a.prefix != "" {
			cfg.Routes = append(cfg.Routes, mapping.Route{Name: name, PathPrefix: a.prefix, Upstream: name})
		}
	}
	cfg.Routes = append(cfg.Routes, mapping.Route{Name: "default", Upstream: "reference-" + translate.ProtoAgentAPI})
	if err := cfg.Validate(); err != nil {
		return err
	}
	gw, err := newGateway(cfg, log.With("component", "bridge"))
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("bridge: %w (choose another with --listen)", err)
	}
	for _, a := range agents {
		go func() { _ = a.srv.Serve(a.ln) }()
		defer a.srv.Shutdown(context.Background())
	}
	adminURL, stopAdmin, err := startAdmin(ctx, gw, log)
	if err != nil { // the admin page is a nicety here: go on without it
		log.Warn("demo runs without the admin listener", "error", err)
		adminURL, stopAdmin = "", func() {}
	}
	defer stopAdmin()
	fmt.Fprint(stdout, demoBanner("http://"+ln.Addr().String(), agents))
	if adminURL != "" {
		fmt.Fprintf(stdout, "\nAdmin page (upstreams, breakers, exchanges): %[1]s/   metrics: %[1]s/metrics\n", adminURL)
	}
	return serveUntil(ctx, gw.server, ln, 5*time.Second, log)
}

// demoBanner tells a newcomer what runs where and what to paste.
func demoBanner(base string, agents []*demoAgent) string {
	var b strings.Builder
	fmt.Fprintf(&b, "bridge demo is running (Ctrl-C stops it)\n\nReference agents:\n")
	for _, a := range agents {
		fmt.Fprintf(&b, "  %-10s %s\n", a.proto, a.url)
	}
	fmt.Fprintf(&b, `
Bridge %[1]s (every protocol on one port; the path picks the agent):
  client speaks   agent speaks   endpoint
  Agent API       Agent API      POST %[1]s/process
  Agent API       AIP            POST %[1]s/to-aip/process
  AIP             Agent API      POST %[1]s/rpc, %[1]s/stream, %[1]s/notification/...
  AIP             AIP            POST %[1]s/to-aip/rpc, %[1]s/to-aip/stream
  Agent API       Agent Protocol POST %[1]s/to-ap/process
  AIP             Agent Protocol POST %[1]s/to-ap/rpc
  Agent Protocol  any            GET  %[1]s/ lists the agents; POST %[1]s/{agent}/stream_request,
                                 /{agent}/process then /{agent}/getevents/{id}?stream=true, /{agent}/ws
  agentprotocol.ai v1            %[1]s/ap/v1/agent/tasks (and /to-aip/ap/v1/..., /to-ap/ap/v1/...)
  health                         GET  %[1]s/health

Stream a reply through the bridge:

  curl -N %[1]s/process -H 'Content-Type: application/json' \
    -d '{"input":[{"role":"user","type":"message","content":[{"type":"text","text":"hello [tool] [file]"}]}]}'

The same, as an AIP Leader:

  curl -N %[1]s/stream -H 'Content-Type: application/json' \
    -d '{"jsonrpc":"2.0","id":"1","method":"stream","params":{"message":{"type":"message","id":"m1","sentAt":"2026-01-01T00:00:00.000+08:00","senderRole":"leader","senderId":"demo-leader","command":"start","taskId":"task-1","sessionId":"s1","dataItems":[{"type":"text","text":"hello [tool]"}]}}}'

or with the terminal client:

  go run ./cmd/bridge call --protocol agentapi --url %[1]s "hello [tool]"
  go run ./cmd/bridge call --protocol aip --url %[1]s/to-aip "hello [file]"
  go run ./cmd/bridge call --protocol ap --url %[1]s "hello [ask]"

Markers in the text choose the reference agent's behaviour: [tool] [file] [ask] [fail] [slow].
`, base)
	return b.String()
}
