package upstream

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/agentbridge/bridge/internal/callctx"
	"github.com/agentbridge/bridge/translate"
	"github.com/agentbridge/bridge/translate/agentapi"
)

// AgentAPI calls an agentscope-runtime Agent API agent: POST the
// AgentRequest to its /process URL and decode the SSE reply.
type AgentAPI struct {
	c *client
}

// NewAgentAPI returns a client for the Agent API agent at cfg.URL (the full
// /process URL; deployments may serve it under a prefix).
func NewAgentAPI(cfg Config) (*AgentAPI, error) {
	cfg.Protocol = translate.ProtoAgentAPI
	c, err := newClient(cfg)
	if err != nil {
		return nil, err
	}
	return &AgentAPI{c: c}, nil
}

// Breaker returns the upstream's breaker.
func (a *AgentAPI) Breaker() *Breaker { return a.c.breaker }

// Open sends req and returns the agent's event stream. The agent rejects a
// second concurrent run of one (user_id, session_id), and two requests that
// both omit them collide, so Open always sends both: the client's when
// given, else a fresh session id (and the session id as user id, as the
// runtime itself defaults it).
func (a *AgentAPI) Open(ctx context.Context, req *translate.Request) (translate.Stream, error) {
	r := *req
	if r.Session == "" {
		r.Session = NewSessionID()
	}
	if r.User == "" {
		r.User = r.Session
	}
	body := agentapi.EncodeRequest(nil, &r)
	ctx, cancel := context.WithCancel(ctx)
	resp, err := a.c.do(ctx, request{
		body:        body,
		contentType: "application/json",
		accept:      "text/event-stream",
		header:      callctx.Headers(ctx),
	}, true)
	if err != nil {
		cancel()
		return nil, err
	}
	if ct := resp.ContentType(); ct != "text/event-stream" {
		b, _ := resp.readAll(1024)
		e := &Error{Code: translate.CodeUpstreamError, Status: resp.Status,
			Err: fmt.Errorf("%w: answered %q, not text/event-stream: %.200s", translate.ErrMalformed, ct, b)}
		resp.finish(e)
		cancel()
		return nil, e
	}
	return &agentAPIStream{
		ctx:    ctx,
		cancel: cancel,
		resp:   resp,
		dec:    agentapi.NewDecoder(resp.Stream, agentapi.DecoderOptions{MaxEventSize: a.c.cfg.MaxEventBytes}),
	}, nil
}

// agentAPIStream decodes one streamed reply. A mutex lets Close run from
// another goroutine: Close cancels the context, which wakes a blocked read,
// and then waits for Next to let go before freeing the connection.
type agentAPIStream struct {
	ctx    context.Context
	cancel context.CancelFunc

	mu      sync.Mutex
	resp    *response
	dec     *agentapi.Decoder
	settled bool // a terminal or waiting state was seen
	done    bool
}

func (s *agentAPIStream) Next() (*translate.Event, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done {
		return nil, ErrClosed
	}
	ev, err := s.dec.Next()
	if err == nil {
		if ev.Kind == translate.KindState && ev.State.Settled() &&
			(ev.Err == nil || ev.Err.Code != translate.CodeStreamIncomplete) {
			s.settled = true
		}
		return ev, nil
	}
	if errors.Is(err, io.EOF) {
		var outcome error
		if !s.settled {
			outcome = &Error{Code: translate.CodeStreamIncomplete, Err: errors.New("stream ended before a terminal response")}
		}
		s.end(outcome)
		return nil, io.EOF
	}
	if s.ctx.Err() != nil {
		s.end(ErrClientGone)
		return nil, fmt.Errorf("%w: %w", ErrClientGone, s.ctx.Err())
	}
	e := streamError(err)
	s.end(e)
	return nil, e
}

func (s *agentAPIStream) end(outcome error) {
	if s.done {
		return
	}
	s.done = true
	s.resp.finish(outcome)
	s.cancel()
}

// Close ends the stream. When it ends before its terminal event, the
// connection is closed and the breaker is told the client went away.
func (s *agentAPIStream) Close() error {
	// With no Next in progress the stream is ended before its context is
	// cancelled, so a finished body can be drained and its connection go
	// back to the pool; cancelling first would spend the connection's read
	// deadline. A Next in progress is woken by the cancel.
	if !s.mu.TryLock() {
		s.cancel()
		s.mu.Lock()
	}
	defer s.cancel()
	defer s.mu.Unlock()
	if !s.settled {
		s.end(ErrClientGone)
	}
	s.end(nil)
	return nil
}

// streamError classifies an error met while reading a stream.
func streamError(err error) *Error {
	var ue *Error
	if errors.As(err, &ue) {
		return ue
	}
	if errors.Is(err, translate.ErrMalformed) {
		return &Error{Code: translate.CodeUpstreamError, Err: err}
	}
	if e := transportError(err); e.Code == translate.CodeUpstreamTimeout {
		e.Err = fmt.Errorf("no data for longer than the idle timeout: %w", err)
		return e
	}
	return &Error{Code: translate.CodeUpstreamError, Err: fmt.Errorf("stream broken: %w", err)}
}

// NewSessionID returns a fresh session id for a client that sent none.
func NewSessionID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return "session_" + hex.EncodeToString(b[:])
}
