package downstream

import (
	"context"
	"errors"
	"io"

	"github.com/agentbridge/bridge/translate"
	"github.com/agentbridge/bridge/translate/aip"
)

// aipAgent wraps the upstream agent of an AIP task's turn:
//   - the upstream's completed becomes awaiting-completion (the Leader
//     completes the task; the bridge settles that itself), unless direct;
//   - when the Leader's cancel stops the turn, the turn ends canceled rather
//     than failed;
//   - the upstream's own submitted state is dropped (the task is already
//     working when its turn runs);
//   - a tool message (the Agent API's *_call_output, role tool) is a partner
//     message in AIP, and the complete parts a tool message's end repeats
//     are dropped, so each call and result is one tool data item;
//   - events the AIP task builder would have to name itself (a message
//     without an id, a tool call outside any message) get an id here, before
//     they are logged, so every replay of the log yields the same ids.
type aipAgent struct {
	inner  translate.Agent
	t      *aipTask
	direct bool
}

func (a *aipAgent) Open(ctx context.Context, req *translate.Request) (translate.Stream, error) {
	st, err := a.inner.Open(ctx, req)
	if err != nil {
		if a.t.canceling.Load() {
			return translate.NewSliceStream(canceledEvent()), nil
		}
		return nil, err
	}
	return &aipStream{inner: st, a: a}, nil
}

func canceledEvent() *translate.Event {
	return &translate.Event{Kind: translate.KindState, State: translate.StateCanceled}
}

type aipStream struct {
	inner translate.Stream
	a     *aipAgent
	cur   string          // the open message
	tools map[string]bool // messages that carried tool events
	ev    translate.Event
	msg   translate.Message
	done  bool
}

func (s *aipStream) Next() (*translate.Event, error) {
	if s.done {
		return nil, io.EOF
	}
	ev, err := s.inner.Next()
	for err == nil && ev.Kind == translate.KindState && ev.State == translate.StateSubmitted {
		ev, err = s.inner.Next()
	}
	if err != nil {
		if s.a.t.canceling.Load() {
			s.done = true
			return canceledEvent(), nil
		}
		if errors.Is(err, io.EOF) {
			return nil, io.EOF
		}
		return nil, err
	}
	s.ev = *ev
	e := &s.ev
	switch e.Kind {
	case translate.KindState:
		if e.State == translate.StateCompleted && !s.a.direct {
			e.State = translate.StateAwaitingCompletion
		}
	case translate.KindMessageStart:
		if e.Message != nil && e.Message.Role == translate.RoleTool {
			s.msg = *e.Message
			s.msg.Role = translate.RoleAssistant
			e.Message = &s.msg
		}
		if e.Message != nil && (e.Message.Role == "" || e.Message.Role == translate.RoleAssistant) {
			if e.Message.ID == "" && e.MessageID == "" {
				s.msg = *e.Message
				s.msg.ID = aip.NewID("msg")
				e.Message, e.MessageID = &s.msg, s.msg.ID
			}
			if e.MessageID == "" {
				e.MessageID = e.Message.ID
			}
			s.cur = e.MessageID
		}
	case translate.KindContent:
		if e.MessageID == "" && s.cur == "" {
			s.cur = aip.NewID("msg")
			e.MessageID = s.cur
		}
	case translate.KindToolCall, translate.KindToolResult:
		if e.MessageID == "" && s.cur == "" {
			e.MessageID = aip.NewID("msg")
		}
		id := e.MessageID
		if id == "" {
			id = s.cur
		}
		if s.tools == nil {
			s.tools = map[string]bool{}
		}
		s.tools[id] = true
	case translate.KindMessageEnd:
		id := e.MessageID
		if id == "" && e.Message != nil {
			id = e.Message.ID
		}
		if id == "" {
			id = s.cur
		}
		if e.Message != nil && (s.tools[id] || e.Message.Role == translate.RoleTool) {
			s.msg = *e.Message
			if s.msg.Role == translate.RoleTool {
				s.msg.Role = translate.RoleAssistant
			}
			if s.tools[id] {
				s.msg.Parts = nil
			}
			e.Message = &s.msg
			delete(s.tools, id)
		}
		if id == "" || id == s.cur {
			s.cur = ""
		}
	}
	return e, nil
}

func (s *aipStream) Close() error { return s.inner.Close() }
