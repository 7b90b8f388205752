package main

import (
	"fmt"
	"log/slog"

	"github.com/agentbridge/bridge/downstream"
	"github.com/agentbridge/bridge/translate"
	"github.com/agentbridge/bridge/upstream"
)

// newBridge builds the gateway the way cmd/bridge's newGateway does for one
// upstream and the default route: downstream.New in front of the upstream
// client of proto, default limits, the in-memory exchange store. The load
// generator speaks the Agent API to it, so only the Agent API is accepted.
//
//   - agentapi: upstream.NewAgentAPI, upstreamURL the agent's /process URL
//     (the passthrough scenario);
//   - aip: upstream.NewAIP in stream mode (POST stream, SSE), upstreamURL
//     the agent's base URL;
//   - agentprotocol: upstream.NewAgentProtocol, dialect detected as the
//     default config does, upstreamURL the agent's base URL.
//
// The zero breaker config is the default breaker, which the benchmark
// uses; the harness's own test turns it off (see bench_test.go).
func newBridge(upstreamURL, proto string, breaker upstream.BreakerConfig, log *slog.Logger) (*downstream.Server, error) {
	cfg := upstream.Config{Name: "bench-agent", URL: upstreamURL, Protocol: proto, Breaker: breaker}
	var (
		up  translate.Agent
		err error
	)
	switch proto {
	case translate.ProtoAgentAPI:
		up, err = upstream.NewAgentAPI(cfg)
	case translate.ProtoAIP:
		cfg.AIP = upstream.AIPOptions{Mode: upstream.AIPModeStream}
		up, err = upstream.NewAIP(cfg)
	case translate.ProtoAgentProtocol:
		up, err = upstream.NewAgentProtocol(cfg)
	default:
		err = fmt.Errorf("protocol %q: want %s, %s or %s", proto, translate.ProtoAgentAPI, translate.ProtoAIP, translate.ProtoAgentProtocol)
	}
	if err != nil {
		return nil, fmt.Errorf("bridge upstream: %w", err)
	}
	rt := &downstream.Routing{Routes: []downstream.Route{{
		Name: "default", Upstream: "bench-agent", Proto: proto, Agent: up,
	}}}
	return downstream.New(downstream.Options{
		Accept:       []string{translate.ProtoAgentAPI},
		AgentAPIPath: "/process",
		Logger:       log,
	}, rt), nil
}
