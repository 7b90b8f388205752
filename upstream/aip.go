package upstream

import (
	"context"
	"errors"
	"time"

	"github.com/agentbridge/bridge/translate"
)

// AIPOptions configures an AIP upstream (the bridge as AIP Leader).
type AIPOptions struct {
	// Mode is how tasks are driven: "stream" (SSE with re-stream), "rpc"
	// (rpc plus get polling), or "" to use stream when the partner
	// advertises streaming and rpc otherwise.
	Mode string
	// AutoComplete sends `complete` when a task reaches awaiting-completion
	// and the downstream protocol has no such step. Nil means true.
	AutoComplete *bool
	// PollInterval is the get polling interval in rpc mode (default 500ms).
	PollInterval time.Duration
	// Paths overrides the derived sibling URLs by method name
	// ("stream" -> URL).
	Paths map[string]string
	// LeaderID is the AIC the bridge uses as senderId.
	LeaderID string
}

// AIP calls an AIP Partner.
type AIP struct {
	c *client
}

// NewAIP returns a client for the AIP Partner at cfg.URL.
func NewAIP(cfg Config) (*AIP, error) {
	cfg.Protocol = translate.ProtoAIP
	c, err := newClient(cfg)
	if err != nil {
		return nil, err
	}
	return &AIP{c: c}, nil
}

// Breaker returns the upstream's breaker.
func (a *AIP) Breaker() *Breaker { return a.c.breaker }

// Open is not implemented yet.
func (a *AIP) Open(ctx context.Context, req *translate.Request) (translate.Stream, error) {
	return nil, errors.New("the AIP upstream client is not built yet")
}
