package upstream

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/agentbridge/bridge/translate"
	ap "github.com/agentbridge/bridge/translate/agentprotocol"
)

// resolve returns the target of an exchange: the cached one, or what
// detection finds (cached when it succeeds). Detection calls are part of
// the exchange (they share its breaker ticket).
func (a *AgentProtocol) resolve(ctx context.Context, hdr map[string]string) (apTarget, error) {
	a.mu.Lock()
	t := a.target
	a.mu.Unlock()
	if t.known() {
		return t, nil
	}
	t, err := a.detect(ctx, t, hdr)
	if err != nil {
		return t, err
	}
	a.mu.Lock()
	if !a.target.known() {
		a.target = t
	}
	a.mu.Unlock()
	return t, nil
}

// learnEdition caches the README edition the first submit showed.
func (a *AgentProtocol) learnEdition(t apTarget) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.target.probe && a.target.agent == t.agent {
		a.target = t
	}
}

// detect finds what t leaves open: the dialect, the agent, or both.
func (a *AgentProtocol) detect(ctx context.Context, t apTarget, hdr map[string]string) (apTarget, error) {
	switch t.kind {
	case APDialectProcess, APDialectRun, APDialectAgentic:
		path := ap.DialectProcess.DiscoveryPath()
		if t.kind == APDialectAgentic {
			path = ap.DialectAgentic.DiscoveryPath()
		}
		body, ok, err := a.getList(ctx, path, hdr)
		if err != nil {
			return t, err
		}
		if !ok {
			return t, &Error{Code: translate.CodeUpstreamError,
				Err: fmt.Errorf("agentprotocol: no agent configured and GET %s lists none", path)}
		}
		t.agent, err = a.pickAgent(body, t.kind)
		return t, err
	}
	// The dialect is unknown.
	body, ok, err := a.getList(ctx, ap.DialectProcess.DiscoveryPath(), hdr)
	if err != nil {
		return t, err
	}
	if ok {
		if ap.DetectDialect(body) == ap.DialectAgentic {
			t.kind, t.d = APDialectAgentic, ap.DialectAgentic
			t.agent, err = a.pickAgent(body, t.kind)
			return t, err
		}
		t.kind, t.d = APDialectProcess, ap.DialectProcess
		if t.agent, err = a.pickAgent(body, t.kind); err != nil {
			return t, err
		}
		return a.describe(ctx, t, hdr)
	}
	body, ok, err = a.getList(ctx, ap.DialectAgentic.DiscoveryPath(), hdr)
	if err != nil {
		return t, err
	}
	if ok {
		t.kind, t.d = APDialectAgentic, ap.DialectAgentic
		t.agent, err = a.pickAgent(body, t.kind)
		return t, err
	}
	isV1, err := a.probeV1(ctx, hdr)
	if err != nil {
		return t, err
	}
	if isV1 {
		return apTarget{kind: APDialectV1}, nil
	}
	return t, &Error{Code: translate.CodeUpstreamError,
		Err: errors.New("agentprotocol: cannot tell the dialect: neither GET / nor GET /_discovery lists agents, and GET /ap/v1/agent/tasks lists no tasks")}
}

// getList GETs an agent list. ok is false when the agent answers 4xx or a
// body that is not a JSON array; transport errors and 5xx are errors.
func (a *AgentProtocol) getList(ctx context.Context, path string, hdr map[string]string) (body []byte, ok bool, err error) {
	body, err = a.unary(ctx, path, nil, hdr)
	if err != nil {
		if apOutcome(err) == nil && !errors.Is(err, ErrClientGone) && ctx.Err() == nil {
			return nil, false, nil // 4xx: not served here
		}
		return nil, false, err
	}
	if !gjson.ValidBytes(body) || !gjson.ParseBytes(body).IsArray() {
		return nil, false, nil
	}
	return body, true, nil
}

// pickAgent returns the configured agent's path (matched by name or path
// against the list when it is there), else the first agent listed.
func (a *AgentProtocol) pickAgent(list []byte, kind string) (string, error) {
	refs, err := ap.DecodeAgentList(list)
	if err != nil {
		return "", &Error{Code: translate.CodeUpstreamError, Err: err}
	}
	if want := a.opts.Agent; want != "" {
		for _, r := range refs {
			if r.Name == want || r.Path == want || strings.TrimPrefix(r.Path, "/") == strings.TrimPrefix(want, "/") {
				return apAgentPath(r.Path, kind), nil
			}
		}
		return apAgentPath(want, kind), nil
	}
	for _, r := range refs {
		if r.Path != "" {
			return apAgentPath(r.Path, kind), nil
		}
		if r.Name != "" {
			return apAgentPath(r.Name, kind), nil
		}
	}
	return "", &Error{Code: translate.CodeUpstreamError, Err: errors.New("agentprotocol: the agent list is empty")}
}

// describe reads {agent}/describe to tell the README editions apart; when
// it does not tell (or is not served), the first submit will.
func (a *AgentProtocol) describe(ctx context.Context, t apTarget, hdr map[string]string) (apTarget, error) {
	body, err := a.unary(ctx, t.d.DescribePath(t.agent), nil, hdr)
	if err != nil {
		if apOutcome(err) == nil && ctx.Err() == nil {
			t.probe = true
			return t, nil
		}
		return t, err
	}
	switch ap.DetectDialect(body) {
	case ap.DialectRun:
		t.kind, t.d = APDialectRun, ap.DialectRun
	case ap.DialectProcess:
	case ap.DialectAgentic:
		t.kind, t.d = APDialectAgentic, ap.DialectAgentic
	default:
		t.probe = true
	}
	return t, nil
}

// v1Root is the path of the v1 API under base.
func (a *AgentProtocol) v1Root() string {
	if strings.HasSuffix(a.base, "/ap/v1") {
		return ""
	}
	return "/ap/v1"
}

// probeV1 asks GET /ap/v1/agent/tasks?page_size=1: a v1 agent answers
// {tasks, pagination}.
func (a *AgentProtocol) probeV1(ctx context.Context, hdr map[string]string) (bool, error) {
	body, err := a.unary(ctx, a.v1Root()+"/agent/tasks?page_size=1", nil, hdr)
	if err != nil {
		if apOutcome(err) == nil && ctx.Err() == nil {
			return false, nil
		}
		return false, err
	}
	return gjson.ValidBytes(body) && gjson.GetBytes(body, "tasks").IsArray(), nil
}
