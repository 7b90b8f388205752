package loadagent

import (
	"context"
	"io"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/agentbridge/bridge/translate"
)

// textString is text as a string, so that deltas are substrings of it
// and cost no copy.
var textString = string(text)

// Canonical is the load-test agent as a translate.Agent: the same reply as
// the Agent API agent (working, one assistant message, N text content
// deltas of S bytes, the message end, completed), as canonical events.
// Served by downstream.New with Accept set to one protocol, it is the load
// agent of that protocol: the benchmark's translation scenarios put it
// behind the bridge's AIP or Agent Protocol upstream client.
//
// N and S come from the same marker as the Agent API agent's, in the last
// input's text, else from Options.
type Canonical struct {
	opts  Options
	reqs  atomic.Uint64
	nextN atomic.Uint64
}

// NewCanonical returns a canonical agent with opts' defaults (FlushEvery
// does not apply: the server that serves it decides when to flush).
func NewCanonical(opts Options) *Canonical {
	if opts.Events <= 0 {
		opts.Events = 10
	}
	if opts.EventSize <= 0 {
		opts.EventSize = 64
	}
	return &Canonical{opts: opts}
}

// Requests is the number of exchanges opened.
func (a *Canonical) Requests() uint64 { return a.reqs.Load() }

// Open answers req with the reply the marker asks for.
func (a *Canonical) Open(ctx context.Context, req *translate.Request) (translate.Stream, error) {
	a.reqs.Add(1)
	var n, size int
	if in := req.LastInput(); in != nil {
		n, size = parseMarkerString(in.Text())
	}
	if n <= 0 {
		n = a.opts.Events
	}
	if size <= 0 {
		size = a.opts.EventSize
	}
	id := a.nextN.Add(1)
	return &canonStream{ctx: ctx, n: n, size: min(size, len(textString)),
		msgID: "msg_bench_" + strconv.FormatUint(id, 10)}, nil
}

// parseMarkerString is parseMarker on a string, copying only the marker.
func parseMarkerString(s string) (n, size int) {
	i := strings.Index(s, string(marker))
	if i < 0 {
		return 0, 0
	}
	return parseMarker([]byte(s[i:min(len(s), i+64)]))
}

// canonStream yields the reply one event at a time, reusing one Event (the
// Stream contract: an event is valid until the next call to Next).
type canonStream struct {
	ctx    context.Context
	n      int // content deltas
	size   int
	msgID  string
	step   int // events yielded so far
	closed atomic.Bool
	ev     translate.Event
	part   translate.Part
	msg    translate.Message
}

func (s *canonStream) Next() (*translate.Event, error) {
	if s.closed.Load() {
		return nil, io.ErrClosedPipe
	}
	if err := s.ctx.Err(); err != nil {
		return nil, err
	}
	i := s.step
	ev := &s.ev
	*ev = translate.Event{MessageID: s.msgID, Time: time.Now()}
	switch {
	case i == 0:
		ev.Kind, ev.MessageID, ev.State = translate.KindState, "", translate.StateWorking
	case i == 1:
		s.msg = translate.Message{ID: s.msgID, Role: translate.RoleAssistant}
		ev.Kind, ev.Message = translate.KindMessageStart, &s.msg
	case i < 2+s.n:
		k := i - 2
		off := (k * 7) % (len(textString) - s.size + 1)
		s.part = translate.Part{Kind: translate.PartText, Text: textString[off : off+s.size]}
		ev.Kind, ev.Part, ev.Delta = translate.KindContent, &s.part, true
	case i == 2+s.n:
		s.msg = translate.Message{ID: s.msgID, Role: translate.RoleAssistant}
		ev.Kind, ev.Message = translate.KindMessageEnd, &s.msg
	case i == 3+s.n:
		ev.Kind, ev.MessageID, ev.State = translate.KindState, "", translate.StateCompleted
	default:
		return nil, io.EOF
	}
	s.step++
	return ev, nil
}

func (s *canonStream) Close() error {
	s.closed.Store(true)
	return nil
}
