package translate_test

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/agentbridge/bridge/translate"
)

// upper is a toy agent: it answers with the input in capitals, as a stream
// of canonical events. Every protocol package turns events like these into
// its own wire format, and upstream clients turn wire formats into them.
type upper struct{}

func (upper) Open(_ context.Context, req *translate.Request) (translate.Stream, error) {
	text := strings.ToUpper(req.LastInput().Text())
	part := translate.TextPart(text)
	return translate.NewSliceStream(
		&translate.Event{Kind: translate.KindState, State: translate.StateWorking},
		&translate.Event{Kind: translate.KindMessageStart, MessageID: "m1",
			Message: &translate.Message{ID: "m1", Role: translate.RoleAssistant}},
		&translate.Event{Kind: translate.KindContent, MessageID: "m1", Part: &part, Done: true},
		&translate.Event{Kind: translate.KindMessageEnd, MessageID: "m1"},
		&translate.Event{Kind: translate.KindState, State: translate.StateCompleted},
	), nil
}

// An Agent is anything that turns a Request into a Stream of Events; a
// consumer reads the stream until io.EOF.
func Example_agent() {
	var agent translate.Agent = upper{}
	req := &translate.Request{Command: translate.CommandStart, Session: "s1",
		Input: []translate.Message{{Role: translate.RoleUser, Parts: []translate.Part{translate.TextPart("hello")}}}}
	s, _ := agent.Open(context.Background(), req)
	defer s.Close()
	for {
		ev, err := s.Next()
		if err == io.EOF {
			break
		}
		switch ev.Kind {
		case translate.KindContent:
			fmt.Println("content:", ev.Part.Text)
		case translate.KindState:
			fmt.Println("state:", ev.State, "terminal:", ev.Terminal())
		}
	}
	// Output:
	// state: working terminal: false
	// content: HELLO
	// state: completed terminal: true
}
