package downstream

import (
	"bufio"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/agentbridge/bridge/internal/callctx"
	"github.com/agentbridge/bridge/internal/sse"
	"github.com/agentbridge/bridge/internal/store"
	"github.com/agentbridge/bridge/internal/tracing"
	"github.com/agentbridge/bridge/translate"
)

// frameEncoder writes canonical events in one protocol's stream framing.
type frameEncoder interface {
	// Encode appends the frames for ev to dst.
	Encode(dst []byte, ev *translate.Event) []byte
	// Finish appends a terminal frame if none was written: a failure with
	// err, or a cancellation when err is nil.
	Finish(dst []byte, err *translate.Error) []byte
	// Done reports whether a terminal frame was written.
	Done() bool
}

// exchange is everything a stream needs once its handler has returned.
type exchange struct {
	s      *Server
	id     string
	route  string
	down   string
	up     string
	agent  translate.Agent
	req    *translate.Request
	ctx    context.Context
	cancel context.CancelFunc
	conn   net.Conn
	start  time.Time
	parent string // the client's traceparent ("" if none); ours is in ctx
}

// step is one result of the upstream's Next.
type step struct {
	ev  *translate.Event
	err error
}

// stream pumps the upstream's events to w through enc until a terminal
// frame, the upstream's end, or the client's departure. It runs inside
// fasthttp's body stream writer and touches no RequestCtx.
func (x *exchange) stream(w *bufio.Writer, enc frameEncoder) {
	defer x.cancel()
	x.s.active.Add(1)
	defer x.s.active.Add(-1)
	stopWatch := watchDisconnect(x.conn, x.cancel)
	defer stopWatch()

	var buf []byte
	var sent int64 // bytes written to the client
	outcome := "completed"
	info := x.info()
	x.s.opts.Observer.ExchangeStarted(info)
	defer func() {
		x.s.opts.Observer.ExchangeEnded(info, outcome, time.Since(x.start))
		x.finish(outcome, sent)
	}()
	write := func(b []byte) error {
		x.s.frame(x.id, FrameDownOut, b)
		sent += int64(len(b))
		if _, err := w.Write(b); err != nil {
			return err
		}
		return w.Flush()
	}
	first := true
	settled := false

	if x.s.active.Load() > int64(x.s.opts.MaxStreams) {
		outcome = translate.CodeBusy
		_ = write(enc.Finish(buf, &translate.Error{Code: translate.CodeBusy, Retryable: true,
			Message: "the bridge is at its limit of " + strconv.Itoa(x.s.opts.MaxStreams) + " open streams; try again shortly"}))
		return
	}
	up, err := x.agent.Open(x.ctx, x.req)
	if err != nil {
		te := canonicalError(err)
		outcome = te.Code
		x.log(slog.LevelWarn, "upstream call failed", "error", err)
		buf = enc.Finish(buf, te)
		_ = write(buf)
		return
	}

	// A reader goroutine lets the pump send keep-alives while the upstream
	// is quiet. It hands over one event at a time and waits for the ack,
	// so the event stays valid while it is encoded.
	steps := make(chan step, 1)
	ack := make(chan struct{})
	quit := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			ev, err := up.Next()
			select {
			case steps <- step{ev, err}:
			case <-quit:
				return
			}
			if err != nil {
				return
			}
			select {
			case <-ack:
			case <-quit:
				return
			}
		}
	}()
	defer func() {
		// After a terminal event the reader waits for its ack, not in
		// Next: release it and close the upstream before cancelling, so
		// that its connection can be reused. Otherwise the cancel must
		// come first, to wake a Next that may be blocked.
		if !enc.Done() {
			x.cancel()
		}
		close(quit)
		wg.Wait()
		_ = up.Close()
		x.cancel()
	}()

	var tick <-chan time.Time
	if ka := x.s.opts.KeepAlive; ka > 0 {
		t := time.NewTicker(ka)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-x.ctx.Done():
			if errors.Is(context.Cause(x.ctx), errShuttingDown) {
				outcome = CodeShuttingDown
				_ = write(enc.Finish(buf[:0], shuttingDown()))
				return
			}
			outcome = "client_gone"
			return
		case <-tick:
			if _, err := w.Write(sse.KeepAlive); err != nil || w.Flush() != nil {
				outcome = "client_gone"
				return
			}
			continue
		case st := <-steps:
			if st.err != nil {
				var te *translate.Error
				if errors.Is(st.err, io.EOF) && !settled {
					// An upstream that ends without saying how the exchange
					// ended has failed it; the client must not read that as
					// a quiet cancel.
					te = &translate.Error{Code: translate.CodeStreamIncomplete,
						Message: "the upstream ended the stream without a final state"}
				}
				if !errors.Is(st.err, io.EOF) {
					if errors.Is(context.Cause(x.ctx), errShuttingDown) {
						outcome = CodeShuttingDown
						_ = write(enc.Finish(buf[:0], shuttingDown()))
						return
					}
					if x.ctx.Err() != nil {
						outcome = "client_gone"
						return
					}
					te = canonicalError(st.err)
					x.log(slog.LevelWarn, "upstream stream failed", "error", st.err)
				}
				buf = enc.Finish(buf[:0], te)
				if te != nil {
					outcome = te.Code
				} else if len(buf) > 0 {
					outcome = "incomplete"
				}
				if len(buf) > 0 {
					_ = write(buf)
				}
				return
			}
			ev := st.ev
			if !x.s.opts.RecordStreams {
				// not logged: see Options.RecordStreams
			} else if _, err := x.s.store.Append(x.id, ev); err != nil && !errors.Is(err, store.ErrNotFound) {
				x.log(slog.LevelWarn, "exchange log append failed", "error", err)
			}
			if ev.Kind == translate.KindState && ev.State.Settled() {
				outcome = string(ev.State)
				settled = true
			}
			x.s.opts.Observer.EventForwarded(info, ev, time.Since(x.start), first)
			first = false
			buf = enc.Encode(buf[:0], ev)
			if len(buf) > 0 {
				if write(buf) != nil {
					outcome = "client_gone"
					return
				}
			}
			if enc.Done() {
				return
			}
			ack <- struct{}{}
		}
	}
}

func (x *exchange) info() ExchangeInfo {
	return ExchangeInfo{ID: x.id, Route: x.route, Downstream: x.down, Upstream: x.up, Session: x.req.Session,
		TraceParent: callctx.Headers(x.ctx)[tracing.HeaderTraceParent], ClientTraceParent: x.parent}
}

// finish records the exchange's end and writes its access line: ids,
// protocols, outcome, duration and the event bytes sent to the client
// (keep-alives not counted). No header value is logged, only the trace id.
func (x *exchange) finish(outcome string, sent int64) {
	x.s.log.LogAttrs(context.Background(), slog.LevelInfo, "exchange",
		slog.String("exchange", x.id),
		slog.String("trace", tracing.TraceIDOf(callctx.Headers(x.ctx)[tracing.HeaderTraceParent])),
		slog.String("route", x.route),
		slog.String("downstream", x.down),
		slog.String("upstream", x.up),
		slog.String("session", x.req.Session),
		slog.String("client_id", x.req.ID),
		slog.String("outcome", outcome),
		slog.Duration("duration", time.Since(x.start)),
		slog.Int64("bytes", sent),
	)
}

func (x *exchange) log(level slog.Level, msg string, args ...any) {
	args = append(args, "exchange", x.id, "route", x.route)
	x.s.log.Log(context.Background(), level, msg, args...)
}
