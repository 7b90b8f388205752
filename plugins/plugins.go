package plugins

import (
	"context"
	"fmt"
	"regexp"

	"github.com/agentbridge/bridge/translate"
)

// Hooks see one exchange's traffic. Nil fields do nothing.
type Hooks struct {
	// Request may change the request before it goes to the agent, or
	// refuse it with an error (the client gets it as the upstream's error).
	Request func(ctx context.Context, req *translate.Request) error
	// Event may change an event before it goes to the client.
	Event func(ev *translate.Event)
}

// Wrap returns an agent that runs the hooks around a. With no hooks set it
// returns a unchanged.
func Wrap(a translate.Agent, hooks ...Hooks) translate.Agent {
	var hs []Hooks
	for _, h := range hooks {
		if h.Request != nil || h.Event != nil {
			hs = append(hs, h)
		}
	}
	if len(hs) == 0 {
		return a
	}
	return &wrapped{inner: a, hooks: hs}
}

type wrapped struct {
	inner translate.Agent
	hooks []Hooks
}

func (w *wrapped) Open(ctx context.Context, req *translate.Request) (translate.Stream, error) {
	r := *req
	r.Input = append([]translate.Message(nil), req.Input...)
	for i := range r.Input {
		r.Input[i].Parts = append([]translate.Part(nil), r.Input[i].Parts...)
	}
	for _, h := range w.hooks {
		if h.Request != nil {
			if err := h.Request(ctx, &r); err != nil {
				return nil, fmt.Errorf("plugin refused the request: %w", err)
			}
		}
	}
	s, err := w.inner.Open(ctx, &r)
	if err != nil {
		return nil, err
	}
	return &hookedStream{Stream: s, hooks: w.hooks}, nil
}

// Unwrap returns the wrapped agent.
func (w *wrapped) Unwrap() translate.Agent { return w.inner }

type hookedStream struct {
	translate.Stream
	hooks []Hooks
}

func (s *hookedStream) Next() (*translate.Event, error) {
	ev, err := s.Stream.Next()
	if err != nil {
		return ev, err
	}
	for _, h := range s.hooks {
		if h.Event != nil {
			h.Event(ev)
		}
	}
	return ev, nil
}

// Redact masks every match of the patterns with mask in the text of the
// client's input and of the agent's content, messages, tool calls and
// results, and artifacts' text parts.
func Redact(mask string, patterns ...string) (Hooks, error) {
	var res []*regexp.Regexp
	for _, p := range patterns {
		re, err := regexp.Compile(p)
		if err != nil {
			return Hooks{}, fmt.Errorf("redact pattern %q: %w", p, err)
		}
		res = append(res, re)
	}
	if len(res) == 0 {
		return Hooks{}, nil
	}
	clean := func(s string) string {
		for _, re := range res {
			s = re.ReplaceAllLiteralString(s, mask)
		}
		return s
	}
	parts := func(ps []translate.Part) {
		for i := range ps {
			if ps[i].Kind == translate.PartText {
				ps[i].Text = clean(ps[i].Text)
			}
		}
	}
	return Hooks{
		Request: func(_ context.Context, req *translate.Request) error {
			for i := range req.Input {
				parts(req.Input[i].Parts)
			}
			return nil
		},
		Event: func(ev *translate.Event) {
			parts(ev.Parts)
			if ev.Part != nil && ev.Part.Kind == translate.PartText {
				ev.Part.Text = clean(ev.Part.Text)
			}
			if ev.Message != nil {
				parts(ev.Message.Parts)
			}
			if ev.Tool != nil {
				ev.Tool.Arguments = clean(ev.Tool.Arguments)
				ev.Tool.Output = clean(ev.Tool.Output)
			}
			if ev.Artifact != nil {
				parts(ev.Artifact.Parts)
			}
		},
	}, nil
}
