package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"time"

	"github.com/agentbridge/bridge/downstream"
	"github.com/agentbridge/bridge/internal/refagent"
	"github.com/agentbridge/bridge/mapping"
	"github.com/agentbridge/bridge/translate"
)

func cmdAgent(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("agent", "agent [--protocol P] [--listen ADDR]", stderr)
	proto := fs.String("protocol", translate.ProtoAgentAPI, "protocol the reference agent speaks: agentapi, aip or agentprotocol (ap)")
	listen := fs.String("listen", "127.0.0.1:8090", "address to listen on")
	apiPath := fs.String("agentapi-path", "/process", "path of the Agent API endpoint")
	slow := fs.Duration("slow-delay", refagent.SlowDelay, "pause between events of a [slow] answer")
	var lf logFlags
	lf.register(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	log, err := lf.logger(stderr)
	if err != nil {
		return err
	}
	p, err := mapping.NormalizeProtocol(*proto)
	if err != nil {
		return fmt.Errorf("%w: --protocol: %w", errUsage, err)
	}
	srv, err := newReferenceAgent(p, *apiPath, *slow, log)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	log.Info("reference agent listening", "protocol", p, "addr", ln.Addr().String())
	return serveUntil(ctx, srv, ln, 5*time.Second, log)
}

// newReferenceAgent serves the reference agent in protocol p: the
// protocol's own downstream server, fronting the agent in-process.
func newReferenceAgent(p, apiPath string, slow time.Duration, log *slog.Logger) (*downstream.Server, error) {
	a := refagent.New()
	a.Delay = slow
	rt := &downstream.Routing{Routes: []downstream.Route{{Name: "reference", Upstream: "reference", Proto: p, Agent: a}}}
	return downstream.New(downstream.Options{Accept: []string{p}, AgentAPIPath: apiPath, Logger: log,
		AIP: downstream.AIPOptions{Name: "reference", Description: "the bridge's reference agent: echoes, and [tool] [file] [ask] [fail] [slow]"}}, rt), nil
}
