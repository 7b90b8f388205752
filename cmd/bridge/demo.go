package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/agentbridge/bridge/internal/refagent"
	"github.com/agentbridge/bridge/mapping"
	"github.com/agentbridge/bridge/translate"
)

func cmdDemo(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("demo", "demo [--listen ADDR] [--agent-listen ADDR]", stderr)
	listen := fs.String("listen", "127.0.0.1:9000", "address of the bridge")
	agentListen := fs.String("agent-listen", "127.0.0.1:8090", "address of the reference agent")
	var lf logFlags
	lf.register(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	log, err := lf.logger(stderr)
	if err != nil {
		return err
	}
	agentSrv, err := newReferenceAgent(translate.ProtoAgentAPI, "/process", refagent.SlowDelay, log.With("component", "agent"))
	if err != nil {
		return err
	}
	agentLn, err := net.Listen("tcp", *agentListen)
	if err != nil {
		return fmt.Errorf("reference agent: %w (choose another with --agent-listen)", err)
	}
	defer agentLn.Close()
	agentURL := "http://" + agentLn.Addr().String() + "/process"
	cfg := &mapping.Config{
		Listen:    *listen,
		Upstreams: []mapping.Upstream{{Name: "reference-agentapi", URL: agentURL, Protocol: translate.ProtoAgentAPI}},
		Routes:    []mapping.Route{{Name: "default", Upstream: "reference-agentapi"}},
	}
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
	go func() { _ = agentSrv.Serve(agentLn) }()
	defer agentSrv.Shutdown(context.Background())

	base := "http://" + ln.Addr().String()
	fmt.Fprintf(stdout, `bridge demo is running (Ctrl-C stops it)

  reference agent   Agent API   %[1]s
  bridge            Agent API   %[2]s/process   -> reference agent (Agent API)
  bridge health                 %[2]s/health

Stream a reply through the bridge:

  curl -N %[2]s/process -H 'Content-Type: application/json' \
    -d '{"input":[{"role":"user","type":"message","content":[{"type":"text","text":"hello [tool] [file]"}]}]}'

or with the terminal client:

  go run ./cmd/bridge call --protocol agentapi --url %[2]s "hello [tool]"

Markers in the text choose the reference agent's behaviour: [tool] [file] [ask] [fail] [slow].
`, agentURL, base)
	return serveUntil(ctx, gw.server, ln, 5*time.Second, log)
}
