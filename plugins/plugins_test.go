package plugins

import (
	"context"
	"errors"
	"testing"

	"github.com/agentbridge/bridge/translate"
)

// recorder is an agent that remembers what it was sent and answers with
// fixed events.
type recorder struct {
	got *translate.Request
	evs []*translate.Event
}

func (r *recorder) Open(_ context.Context, req *translate.Request) (translate.Stream, error) {
	r.got = req
	return translate.NewSliceStream(r.evs...), nil
}

func TestRedactBothWays(t *testing.T) {
	card := "4111 1111 1111 1111"
	p := translate.TextPart("your card " + card + " is fine")
	agent := &recorder{evs: []*translate.Event{
		{Kind: translate.KindContent, Part: &p, Delta: true},
		{Kind: translate.KindToolCall, Tool: &translate.Tool{Name: "pay", Arguments: `{"card":"` + card + `"}`}},
		{Kind: translate.KindState, State: translate.StateCompleted},
	}}
	h, err := Redact("[card]", `\b(?:\d{4} ?){3}\d{4}\b`)
	if err != nil {
		t.Fatal(err)
	}
	w := Wrap(agent, h)
	req := &translate.Request{Input: []translate.Message{{Role: translate.RoleUser, Parts: []translate.Part{translate.TextPart("pay with " + card)}}}}
	s, err := w.Open(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	evs, err := translate.Collect(s)
	if err != nil {
		t.Fatal(err)
	}
	if got := agent.got.Input[0].Parts[0].Text; got != "pay with [card]" {
		t.Errorf("agent was sent %q", got)
	}
	if req.Input[0].Parts[0].Text != "pay with "+card {
		t.Errorf("the caller's request was changed in place")
	}
	if got := evs[0].Part.Text; got != "your card [card] is fine" {
		t.Errorf("client got %q", got)
	}
	if got := evs[1].Tool.Arguments; got != `{"card":"[card]"}` {
		t.Errorf("tool arguments %q", got)
	}
}

func TestWrapWithoutHooksIsTheAgent(t *testing.T) {
	a := &recorder{}
	if Wrap(a) != translate.Agent(a) || Wrap(a, Hooks{}) != translate.Agent(a) {
		t.Fatal("empty hooks wrapped the agent")
	}
	none, _ := Redact("x")
	if Wrap(a, none) != translate.Agent(a) {
		t.Fatal("a redaction with no patterns wrapped the agent")
	}
}

func TestRequestHookCanRefuse(t *testing.T) {
	deny := errors.New("not allowed")
	w := Wrap(&recorder{}, Hooks{Request: func(context.Context, *translate.Request) error { return deny }})
	if _, err := w.Open(context.Background(), &translate.Request{}); !errors.Is(err, deny) {
		t.Fatalf("%v", err)
	}
}

func TestBadPattern(t *testing.T) {
	if _, err := Redact("x", "("); err == nil {
		t.Fatal("bad pattern accepted")
	}
}
