package refagent

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/agentbridge/bridge/translate"
)

func run(t *testing.T, a *Agent, session, text string) []*translate.Event {
	t.Helper()
	s, err := a.Open(context.Background(), &translate.Request{Command: translate.CommandStart, Session: session,
		Input: []translate.Message{{Role: translate.RoleUser, Parts: []translate.Part{translate.TextPart(text)}}}})
	if err != nil {
		t.Fatal(err)
	}
	evs, err := translate.Collect(s)
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

func kinds(evs []*translate.Event) string {
	var k []string
	for _, e := range evs {
		k = append(k, e.Kind.String())
	}
	return strings.Join(k, ",")
}

func last(evs []*translate.Event) *translate.Event { return evs[len(evs)-1] }

func TestEcho(t *testing.T) {
	evs := run(t, New(), "s", "hello")
	var text string
	deltas := 0
	for _, e := range evs {
		if e.Kind == translate.KindContent && e.Delta {
			text += e.Part.Text
			deltas++
		}
	}
	if text != "echo: hello" || deltas < 3 {
		t.Fatalf("%d deltas %q", deltas, text)
	}
	if st := last(evs); st.Kind != translate.KindState || st.State != translate.StateCompleted {
		t.Fatalf("last event %+v", st)
	}
}

func TestTool(t *testing.T) {
	evs := run(t, New(), "s", "[tool] weather")
	if !strings.HasPrefix(kinds(evs), "state,tool_call,tool_result,message_start") {
		t.Fatalf("order %s", kinds(evs))
	}
	call, res := evs[1].Tool, evs[2].Tool
	if call.Name != ToolName || call.Arguments != ToolArguments || res.Output != ToolOutput || res.CallID != call.CallID {
		t.Fatalf("call %+v result %+v", call, res)
	}
}

func TestFile(t *testing.T) {
	evs := run(t, New(), "s", "[file]")
	for _, e := range evs {
		if e.Kind == translate.KindArtifact {
			p := e.Artifact.Parts[0]
			if p.Name != FileName || p.MIME != FileMIME || p.URI != FileURI {
				t.Fatalf("artifact %+v", p)
			}
			return
		}
	}
	t.Fatal("no artifact")
}

func TestFail(t *testing.T) {
	st := last(run(t, New(), "s", "[fail]"))
	if st.State != translate.StateFailed || st.Err.Code != FailCode || st.Err.Message != FailMessage {
		t.Fatalf("%+v", st)
	}
}

func TestAskThenContinue(t *testing.T) {
	a := New()
	evs := run(t, a, "s1", "[ask]")
	if st := last(evs); st.State != translate.StateInputRequired || translate.PartsText(evs[1].Parts) != AskPrompt {
		t.Fatalf("%s", kinds(evs))
	}
	// Another session is not affected by s1's pending question.
	if st := last(run(t, a, "s2", "[ask]")); st.State != translate.StateInputRequired {
		t.Fatal("s2 was not asked")
	}
	evs = run(t, a, "s1", "Paris [ask]")
	if st := last(evs); st.State != translate.StateCompleted {
		t.Fatalf("continuation ended %s", st.State)
	}
}

func TestSlowHonoursDelayAndCancel(t *testing.T) {
	a := New()
	a.Delay = 30 * time.Millisecond
	start := time.Now()
	run(t, a, "s", "[slow]")
	if time.Since(start) < 5*a.Delay {
		t.Fatalf("slow answer took %v", time.Since(start))
	}
	ctx, cancel := context.WithCancel(context.Background())
	s, _ := a.Open(ctx, &translate.Request{Input: []translate.Message{{Parts: []translate.Part{translate.TextPart("[slow]")}}}})
	if _, err := s.Next(); err != nil {
		t.Fatal(err)
	}
	cancel()
	if _, err := s.Next(); err == nil {
		t.Fatal("Next went on after cancel")
	}
}
