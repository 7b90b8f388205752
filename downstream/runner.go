package downstream

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/agentbridge/bridge/internal/callctx"
	"github.com/agentbridge/bridge/internal/store"
	"github.com/agentbridge/bridge/internal/tracing"
	"github.com/agentbridge/bridge/translate"
)

// ErrTurnRunning is returned by runTurn when the exchange already has a
// turn in progress.
var ErrTurnRunning = errors.New("a turn of this exchange is already running")

// turns tracks the detached turns in progress, one at most per exchange.
//
// AIP tasks and Agent Protocol requests outlive the HTTP call that started
// them: the client may poll, stream, drop and re-stream. So their upstream
// calls run detached, in a goroutine of their own, and every event goes to
// the exchange log; clients read the log (follow) rather than the upstream.
type turns struct {
	mu      sync.Mutex
	running map[string]*turn
	wg      sync.WaitGroup
}

type turn struct {
	cancel context.CancelCauseFunc
	done   chan struct{}
}

// TurnHook sees every event of a detached turn after it was logged (with its
// Seq set), in order, on the turn's goroutine. Protocol layers fold events
// into their own state with it (an AIP Task, say). It must be quick.
type TurnHook func(ev *translate.Event)

// runTurn starts one upstream call for exchange x in the background. Its
// events are appended to x's log; when the upstream fails or ends without a
// settled state, a final state event says so, so a follower never hangs.
// The turn ends at the latest after maxLife (0: no bound).
func (s *Server) runTurn(xid string, route *Route, req *translate.Request, headers map[string]string, maxLife time.Duration, hook TurnHook) error {
	s.turns.mu.Lock()
	if s.turns.running == nil {
		s.turns.running = map[string]*turn{}
	}
	if _, busy := s.turns.running[xid]; busy {
		s.turns.mu.Unlock()
		return ErrTurnRunning
	}
	ctx, cancelCause := context.WithCancelCause(context.Background())
	stopTimer := func() bool { return false }
	if maxLife > 0 {
		stopTimer = time.AfterFunc(maxLife, func() { cancelCause(context.DeadlineExceeded) }).Stop
	}
	cancel := func() { stopTimer(); cancelCause(nil) }
	// The turn is a span of the bridge's, a child of the client's trace
	// context in headers, or the root of a new trace.
	ctx = callctx.WithHeaders(ctx, tracing.Continue(headers))
	t := &turn{cancel: cancelCause, done: make(chan struct{})}
	s.turns.running[xid] = t
	s.turns.wg.Add(1)
	s.turns.mu.Unlock()

	go func() {
		defer s.turns.wg.Done()
		defer close(t.done)
		defer func() {
			s.turns.mu.Lock()
			delete(s.turns.running, xid)
			s.turns.mu.Unlock()
			cancel()
		}()
		s.pumpTurn(ctx, xid, route, req, headers[tracing.HeaderTraceParent], hook)
	}()
	return nil
}

// pumpTurn reads the upstream into the log until the turn settles.
// traceIn is the client's traceparent ("" if none).
func (s *Server) pumpTurn(ctx context.Context, xid string, route *Route, req *translate.Request, traceIn string, hook TurnHook) {
	start := time.Now()
	outcome := "completed"
	down := ""
	if x, err := s.store.Get(xid); err == nil {
		down = x.Downstream
	}
	traceparent := callctx.Headers(ctx)[tracing.HeaderTraceParent]
	info := ExchangeInfo{ID: xid, Route: route.Name, Downstream: down, Upstream: route.Proto, Session: req.Session,
		TraceParent: traceparent, ClientTraceParent: traceIn}
	s.opts.Observer.ExchangeStarted(info)
	first := true
	defer func() {
		s.opts.Observer.ExchangeEnded(info, outcome, time.Since(start))
		s.log.LogAttrs(context.Background(), slog.LevelInfo, "exchange turn",
			slog.String("exchange", xid), slog.String("trace", tracing.TraceIDOf(traceparent)),
			slog.String("route", route.Name), slog.String("downstream", down),
			slog.String("upstream", route.Proto), slog.String("session", req.Session),
			slog.String("outcome", outcome), slog.Duration("duration", time.Since(start)))
	}()
	logEvent := func(ev *translate.Event) {
		if _, err := s.store.Append(xid, ev); err != nil {
			s.log.Warn("exchange log append failed", "exchange", xid, "error", err)
			return
		}
		s.opts.Observer.EventForwarded(info, ev, time.Since(start), first)
		first = false
		if hook != nil {
			hook(ev)
		}
	}
	settle := func(st translate.State, te *translate.Error) {
		ev := &translate.Event{Kind: translate.KindState, State: st, Err: te, Time: time.Now()}
		if te != nil {
			ev.Parts = []translate.Part{translate.TextPart(te.Message)}
			outcome = te.Code
		} else {
			outcome = string(st)
		}
		logEvent(ev)
	}
	logEvent(&translate.Event{Kind: translate.KindState, State: translate.StateWorking, Time: time.Now()})
	up, err := route.Agent.Open(ctx, req)
	if err != nil {
		settle(translate.StateFailed, s.turnError(ctx, err))
		return
	}
	defer up.Close()
	for {
		ev, err := up.Next()
		if errors.Is(err, io.EOF) {
			// An upstream that ends without saying how is a failure of
			// the upstream, not a success.
			settle(translate.StateFailed, &translate.Error{Code: translate.CodeStreamIncomplete,
				Message: "the upstream ended the turn without a final state"})
			return
		}
		if err != nil {
			settle(translate.StateFailed, s.turnError(ctx, err))
			return
		}
		if ev.Kind == translate.KindState && ev.State == translate.StateWorking {
			continue // already said when the turn began
		}
		logEvent(ev)
		if ev.Kind == translate.KindState && ev.State.Settled() {
			outcome = string(ev.State)
			return
		}
	}
}

// turnError is the error a turn ends with: a cancellation by the client
// reads as canceled, a lifetime bound as a timeout.
func (s *Server) turnError(ctx context.Context, err error) *translate.Error {
	switch {
	case errors.Is(context.Cause(ctx), errShuttingDown):
		return shuttingDown()
	case errors.Is(context.Cause(ctx), context.DeadlineExceeded):
		return &translate.Error{Code: translate.CodeUpstreamTimeout, Message: fmt.Sprintf("the turn ran out of time: %v", err)}
	case errors.Is(ctx.Err(), context.Canceled):
		return &translate.Error{Code: "CANCELED", Message: "canceled"}
	}
	return canonicalError(err)
}

// cancelTurn stops the exchange's running turn, if any, and waits until its
// final event is logged. It reports whether a turn was running.
func (s *Server) cancelTurn(xid string) bool {
	s.turns.mu.Lock()
	t := s.turns.running[xid]
	s.turns.mu.Unlock()
	if t == nil {
		return false
	}
	t.cancel(nil)
	<-t.done
	return true
}

// turnRunning reports whether the exchange has a turn in progress.
func (s *Server) turnRunning(xid string) bool {
	s.turns.mu.Lock()
	defer s.turns.mu.Unlock()
	_, ok := s.turns.running[xid]
	return ok
}

// follow calls fn for each logged event of the exchange after seq after, in
// order, and for each new one as it is logged, until fn returns an error,
// ctx ends, or an event for which stop reports true is the newest one (nil
// stop: any settled state).
// It returns store.ErrExpired when events after `after` were dropped.
func (s *Server) follow(ctx context.Context, xid string, after uint64, stop func(*translate.Event) bool, fn func(*translate.Event) error) error {
	if stop == nil {
		stop = func(ev *translate.Event) bool { return ev.Kind == translate.KindState && ev.State.Settled() }
	}
	for {
		evs, err := s.store.Events(xid, after)
		if err != nil {
			return err
		}
		if len(evs) == 0 {
			// Wait returns at once for a terminal exchange: with nothing
			// new to send, following is over (else this would spin).
			if x, err := s.store.Get(xid); err != nil || x.State.Terminal() {
				return err
			}
		}
		for _, ev := range evs {
			if err := fn(ev); err != nil {
				return err
			}
			after = ev.Seq
			if stop(ev) {
				// A turn ends right after its settled event; a later turn
				// starts only on a new command, which is a new follow.
				if more, _ := s.store.Events(xid, after); len(more) == 0 {
					return nil
				}
			}
		}
		if err := s.store.Wait(ctx, xid, after); err != nil {
			return err
		}
	}
}

// waitTurns waits for every detached turn to end, until ctx ends.
func (s *Server) waitTurns(ctx context.Context) error {
	done := make(chan struct{})
	go func() { s.turns.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		s.turns.mu.Lock()
		for _, t := range s.turns.running {
			t.cancel(errShuttingDown)
		}
		s.turns.mu.Unlock()
		<-done
		return ctx.Err()
	}
}

// exchangeFor returns the exchange of a client id under the alias key of a
// protocol ("aip:task:<id>").
func (s *Server) exchangeFor(key string) (*store.Exchange, error) {
	return s.store.Find(key)
}
