package main

import (
	"fmt"
	"log/slog"

	"github.com/agentbridge/bridge/downstream"
	"github.com/agentbridge/bridge/translate"
	"github.com/agentbridge/bridge/upstream"
)

// newBridge builds the gateway the way cmd/bridge's newGateway does for one
// Agent API upstream and the default route: downstream.New in front of
// upstream.NewAgentAPI, default limits, the in-memory exchange store.
// The zero breaker config is the default breaker, which the benchmark
// uses; the harness's own test turns it off (see bench_test.go).
func newBridge(upstreamURL string, breaker upstream.BreakerConfig, log *slog.Logger) (*downstream.Server, error) {
	up, err := upstream.NewAgentAPI(upstream.Config{
		Name:     "bench-agent",
		URL:      upstreamURL,
		Protocol: translate.ProtoAgentAPI,
		Breaker:  breaker,
	})
	if err != nil {
		return nil, fmt.Errorf("bridge upstream: %w", err)
	}
	rt := &downstream.Routing{Routes: []downstream.Route{{
		Name: "default", Upstream: "bench-agent", Proto: translate.ProtoAgentAPI, Agent: up,
	}}}
	return downstream.New(downstream.Options{
		Accept:       []string{translate.ProtoAgentAPI},
		AgentAPIPath: "/process",
		Logger:       log,
	}, rt), nil
}
