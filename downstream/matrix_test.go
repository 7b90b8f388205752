package downstream_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/agentbridge/bridge/downstream"
	"github.com/agentbridge/bridge/internal/refagent"
	"github.com/agentbridge/bridge/translate"
	"github.com/agentbridge/bridge/upstream"
)

// matrixProtocols are the protocols the matrix test crosses, as client
// (downstream) and as agent (upstream). Each needs a reference agent server
// and a client.
var matrixProtocols = []string{translate.ProtoAgentAPI, translate.ProtoAIP, translate.ProtoAgentProtocol}

// protocolServer serves the reference agent natively in protocol p.
func protocolServer(t *testing.T, p string, delay time.Duration) string {
	t.Helper()
	a := refagent.New()
	a.Delay = delay
	srv := downstream.New(downstream.Options{Accept: []string{p}, Logger: quietLog(),
		AIP: downstream.AIPOptions{CompleteDirectly: false}},
		&downstream.Routing{Routes: []downstream.Route{{Name: "ref-" + p, Upstream: "ref-" + p, Proto: translate.ProtoAgentAPI, Agent: a}}})
	return serve(t, srv)
}

// protocolClient returns the client of protocol p for the server at base;
// the bridge's own upstream clients double as test clients, since they
// decode any peer of their protocol into canonical events.
func protocolClient(t *testing.T, p, base string) translate.Agent {
	t.Helper()
	cfg := upstream.Config{Name: "client-" + p, Protocol: p, URL: base}
	var (
		a   translate.Agent
		err error
	)
	switch p {
	case translate.ProtoAgentAPI:
		cfg.URL = base + "/process"
		a, err = upstream.NewAgentAPI(cfg)
	case translate.ProtoAIP:
		a, err = upstream.NewAIP(cfg)
	case translate.ProtoAgentProtocol:
		a, err = upstream.NewAgentProtocol(cfg)
	default:
		t.Fatalf("no client for %s", p)
	}
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// outcome is what a person would read off a reply, in any protocol.
type outcome struct {
	state    translate.State
	text     string
	tool     string // name(arguments) -> output
	artifact string // name uri
	question string
	errCode  string
}

func ask(t *testing.T, agent translate.Agent, session, text string) outcome {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s, err := agent.Open(ctx, &translate.Request{Command: translate.CommandStart, Session: session, Stream: true,
		Input: []translate.Message{{Role: translate.RoleUser, Parts: []translate.Part{translate.TextPart(text)}}}})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	evs, err := translate.Collect(s)
	if err != nil {
		t.Fatalf("stream: %v", err)
	}
	var o outcome
	var deltas, finals strings.Builder
	for _, ev := range evs {
		switch ev.Kind {
		case translate.KindState:
			o.state = ev.State
			if ev.Err != nil {
				o.errCode = ev.Err.Code
			}
		case translate.KindContent:
			if ev.Part != nil && ev.Part.Kind == translate.PartText {
				if ev.Delta {
					deltas.WriteString(ev.Part.Text)
				} else if ev.Done {
					finals.WriteString(ev.Part.Text)
				}
			}
		case translate.KindMessageEnd:
			if ev.Message != nil && ev.Message.Role == translate.RoleAssistant && deltas.Len() == 0 && finals.Len() == 0 {
				finals.WriteString(ev.Message.Text())
			}
		case translate.KindToolCall:
			if ev.Done {
				o.tool = ev.Tool.Name + "(" + ev.Tool.Arguments + ")" + o.tool
			}
		case translate.KindToolResult:
			if ev.Done {
				o.tool += " -> " + ev.Tool.Output
			}
		case translate.KindArtifact:
			for _, p := range ev.Artifact.Parts {
				if p.Kind == translate.PartFile {
					o.artifact = strings.TrimSpace(p.Name + " " + p.URI)
				}
			}
		case translate.KindInputRequest:
			o.question = translate.PartsText(ev.Parts)
		case translate.KindError:
			if ev.Err != nil && o.errCode == "" {
				o.errCode = ev.Err.Code
			}
		}
	}
	o.text = deltas.String()
	if o.text == "" {
		o.text = finals.String()
	}
	return o
}

// TestProtocolMatrix runs every reference behaviour through the bridge for
// each client protocol against each agent protocol, and checks the reply in
// the client's own protocol.
func TestProtocolMatrix(t *testing.T) {
	for _, up := range matrixProtocols {
		agentURL := protocolServer(t, up, 10*time.Millisecond)
		for _, down := range matrixProtocols {
			t.Run(down+"_to_"+up, func(t *testing.T) {
				upClient := protocolClient(t, up, agentURL)
				bridge := serve(t, downstream.New(downstream.Options{Logger: quietLog()},
					&downstream.Routing{Routes: []downstream.Route{{Name: "agent", Upstream: "agent", Proto: up, Agent: upClient}}}))
				client := protocolClient(t, down, bridge)
				session := func(name string) string { return fmt.Sprintf("%s-%s-%s", down, up, name) }

				if o := ask(t, client, session("echo"), "hello"); o.state != translate.StateCompleted || o.text != "echo: hello" {
					t.Errorf("echo: %+v", o)
				}
				o := ask(t, client, session("tool"), "weather [tool]")
				if want := refagent.ToolName + "(" + refagent.ToolArguments + ") -> " + refagent.ToolOutput; o.tool != want || o.text != "echo: weather [tool]" {
					t.Errorf("tool: %+v, want tool %q", o, want)
				}
				o = ask(t, client, session("file"), "report [file]")
				if !strings.Contains(o.artifact, refagent.FileURI) || o.state != translate.StateCompleted {
					t.Errorf("file: %+v", o)
				}
				o = ask(t, client, session("fail"), "x [fail]")
				if o.state != translate.StateFailed || o.errCode != refagent.FailCode {
					t.Errorf("fail: %+v", o)
				}
				o = ask(t, client, session("slow"), "x [slow]")
				if o.text != "echo: x [slow]" {
					t.Errorf("slow: %+v", o)
				}
				o = ask(t, client, session("ask"), "x [ask]")
				if o.state != translate.StateInputRequired || o.question != refagent.AskPrompt {
					t.Errorf("ask: %+v", o)
				}
				o = ask(t, client, session("ask"), "Paris")
				if o.state != translate.StateCompleted || o.text != "echo: Paris" {
					t.Errorf("continuation: %+v", o)
				}
			})
		}
	}
}
