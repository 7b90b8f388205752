package refagent

import (
	"context"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/agentbridge/bridge/internal/ids"
	"github.com/agentbridge/bridge/translate"
)

// Behaviour constants, exported so tests in other packages can assert them.
const (
	ToolName      = "get_weather"
	ToolArguments = `{"city":"Beijing"}`
	ToolOutput    = "sunny"
	AskPrompt     = "need more input"
	FailCode      = "AGENT_FAILED"
	FailMessage   = "failed on request"
	FileName      = "report.txt"
	FileMIME      = "text/plain"
	FileURI       = "https://example.com/report.txt"
	SlowDelay     = 200 * time.Millisecond
)

// maxPendingAsks bounds the sessions remembered as waiting for input.
const maxPendingAsks = 10000

// Agent is the reference agent. The zero value is not usable; call New.
type Agent struct {
	// Delay is the pause between events of a [slow] answer.
	Delay time.Duration

	mu      sync.Mutex
	pending map[string]struct{} // sessions that were asked for input
}

// New returns a reference agent.
func New() *Agent {
	return &Agent{Delay: SlowDelay, pending: make(map[string]struct{})}
}

// Open answers req as described in the package documentation.
func (a *Agent) Open(ctx context.Context, req *translate.Request) (translate.Stream, error) {
	in := req.LastInput()
	text := ""
	if in != nil {
		text = in.Text()
	}
	key := req.User + "\x00" + req.Session
	continuing := a.takePending(req.Session, key)

	evs := []*translate.Event{{Kind: translate.KindState, State: translate.StateWorking}}
	add := func(ev *translate.Event) { evs = append(evs, ev) }

	if !continuing && strings.Contains(text, "[ask]") {
		a.setPending(req.Session, key)
		add(&translate.Event{Kind: translate.KindInputRequest, Parts: []translate.Part{translate.TextPart(AskPrompt)}})
		add(&translate.Event{Kind: translate.KindState, State: translate.StateInputRequired,
			Parts: []translate.Part{translate.TextPart(AskPrompt)}})
		return a.stream(ctx, text, evs), nil
	}
	if strings.Contains(text, "[tool]") {
		callID := "call_" + ids.Hex(8)
		add(&translate.Event{Kind: translate.KindToolCall, Done: true, Tool: &translate.Tool{
			CallID: callID, Name: ToolName, Kind: translate.ToolPlugin, Arguments: ToolArguments}})
		add(&translate.Event{Kind: translate.KindToolResult, Done: true, Tool: &translate.Tool{
			CallID: callID, Name: ToolName, Kind: translate.ToolPlugin, Output: ToolOutput}})
	}
	if strings.Contains(text, "[fail]") {
		add(&translate.Event{Kind: translate.KindState, State: translate.StateFailed,
			Err:   &translate.Error{Code: FailCode, Message: FailMessage},
			Parts: []translate.Part{translate.TextPart(FailMessage)}})
		return a.stream(ctx, text, evs), nil
	}
	msgID := "msg_" + ids.UUID()
	reply := "echo: " + text
	add(&translate.Event{Kind: translate.KindMessageStart, MessageID: msgID,
		Message: &translate.Message{ID: msgID, Role: translate.RoleAssistant}})
	for _, chunk := range split3(reply) {
		p := translate.TextPart(chunk)
		add(&translate.Event{Kind: translate.KindContent, MessageID: msgID, Part: &p, Delta: true})
	}
	add(&translate.Event{Kind: translate.KindMessageEnd, MessageID: msgID, Message: &translate.Message{
		ID: msgID, Role: translate.RoleAssistant, Parts: []translate.Part{translate.TextPart(reply)}}})
	if strings.Contains(text, "[file]") {
		add(&translate.Event{Kind: translate.KindArtifact, Artifact: &translate.Artifact{
			ID: "artifact_" + ids.Hex(8), Name: FileName, Last: true,
			Parts: []translate.Part{{Kind: translate.PartFile, Name: FileName, MIME: FileMIME, URI: FileURI}}}})
	}
	add(&translate.Event{Kind: translate.KindUsage, Data: []byte(`{"input_tokens":` + strconv.Itoa(len(text)) + `,"output_tokens":` + strconv.Itoa(len(reply)) + `}`)})
	add(&translate.Event{Kind: translate.KindState, State: translate.StateCompleted})
	return a.stream(ctx, text, evs), nil
}

func (a *Agent) stream(ctx context.Context, text string, evs []*translate.Event) *stream {
	s := &stream{ctx: ctx, evs: evs}
	if strings.Contains(text, "[slow]") {
		s.delay = a.Delay
	}
	return s
}

// takePending reports whether the session was waiting for input, and clears it.
func (a *Agent) takePending(session, key string) bool {
	if session == "" {
		return false
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	_, ok := a.pending[key]
	delete(a.pending, key)
	return ok
}

func (a *Agent) setPending(session, key string) {
	if session == "" {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.pending) >= maxPendingAsks {
		for k := range a.pending { // drop an arbitrary old entry; the map is only a courtesy
			delete(a.pending, k)
			break
		}
	}
	a.pending[key] = struct{}{}
}

// stream yields precomputed events, pausing between them when delay is set.
type stream struct {
	ctx       context.Context
	evs       []*translate.Event
	next      int
	delay     time.Duration
	closed    chan struct{}
	once      sync.Once
	closeOnce sync.Once
}

func (s *stream) Next() (*translate.Event, error) {
	if s.next >= len(s.evs) {
		return nil, io.EOF
	}
	if err := s.ctx.Err(); err != nil {
		return nil, err
	}
	if s.delay > 0 && s.next > 0 {
		t := time.NewTimer(s.delay)
		defer t.Stop()
		select {
		case <-t.C:
		case <-s.ctx.Done():
			return nil, s.ctx.Err()
		case <-s.done():
			return nil, io.ErrClosedPipe
		}
	}
	ev := s.evs[s.next]
	s.next++
	ev.Time = time.Now()
	return ev, nil
}

func (s *stream) done() chan struct{} {
	s.once.Do(func() { s.closed = make(chan struct{}) })
	return s.closed
}

func (s *stream) Close() error {
	ch := s.done()
	s.closeOnce.Do(func() { close(ch) })
	return nil
}

// split3 cuts s into three pieces of roughly equal rune count.
func split3(s string) []string {
	r := []rune(s)
	if len(r) < 3 {
		return []string{s}
	}
	a, b := len(r)/3, 2*len(r)/3
	return []string{string(r[:a]), string(r[a:b]), string(r[b:])}
}
