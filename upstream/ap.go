package upstream

import (
	"context"
	"errors"

	"github.com/agentbridge/bridge/translate"
)

// APOptions configures an Agent Protocol upstream.
type APOptions struct {
	// Dialect is "process" (2025 README, PR #1), "run" (2025 README main),
	// "agentic" (the reference server), "v1" (agentprotocol.ai tasks/steps),
	// or "" to detect it.
	Dialect string
	// Agent names the agent under the base URL; "" takes the first that
	// GET / (or /_discovery) lists.
	Agent string
}

// AgentProtocol calls an Agent Protocol agent.
type AgentProtocol struct {
	c *client
}

// NewAgentProtocol returns a client for the Agent Protocol agent at cfg.URL
// (its base URL).
func NewAgentProtocol(cfg Config) (*AgentProtocol, error) {
	cfg.Protocol = translate.ProtoAgentProtocol
	c, err := newClient(cfg)
	if err != nil {
		return nil, err
	}
	return &AgentProtocol{c: c}, nil
}

// Breaker returns the upstream's breaker.
func (a *AgentProtocol) Breaker() *Breaker { return a.c.breaker }

// Open is not implemented yet.
func (a *AgentProtocol) Open(ctx context.Context, req *translate.Request) (translate.Stream, error) {
	return nil, errors.New("the Agent Protocol upstream client is not built yet")
}
