package upstream

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/agentbridge/bridge/translate"
	"github.com/agentbridge/bridge/translate/aip"
)

// aipStream is one exchange with an AIP Partner: the task it drives and the
// events it has decoded but not yet handed out. Next does the I/O (reads
// the SSE, re-streams after a cut, polls with get, sends complete); a mutex
// lets Close run from another goroutine: Close cancels the context, which
// wakes a blocked read or a poll wait, then waits for Next to let go.
type aipStream struct {
	a       *AIP
	parent  context.Context // the caller's: its values outlive the exchange
	ctx     context.Context
	cancel  context.CancelFunc
	release func(error)
	hdr     map[string]string

	mu           sync.Mutex
	mode         string
	task         *aipTask
	started      bool // start or continue was sent: the task may be live
	autoComplete bool
	oneShot      bool // a single rpc command: end when its events are out

	queue []*translate.Event

	// stream mode
	resp     *response
	body     *aipBody
	dec      *aip.StreamDecoder
	resumed  bool // reading a re-stream: an error frame means it cannot resume
	attempts int  // re-stream attempts since the last event

	// rpc mode
	nextPoll time.Time

	completeSent bool
	settled      bool // a settled state is queued: the stream ends after it
	done         bool
	endErr       error
}

func newAIPStream(a *AIP, ctx context.Context, release func(error)) *aipStream {
	cctx, cancel := context.WithCancel(ctx)
	return &aipStream{a: a, parent: ctx, ctx: cctx, cancel: cancel, release: release,
		hdr: aipHeaders(ctx), autoComplete: a.autoComplete()}
}

// aipBody remembers the error its reader last returned, so that a broken
// connection (resume) can be told from a malformed stream (fatal): the
// decoder reports both as translate.ErrMalformed.
type aipBody struct {
	r   io.Reader
	err error
}

func (b *aipBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if err != nil {
		b.err = err
	}
	return n, err
}

// openTask sends start, or continue to the session's task waiting for
// input, in the exchange's mode.
func (s *aipStream) openTask(r *translate.Request) (translate.Stream, error) {
	s.mode = s.a.mode(s.ctx, s.hdr)
	if t := s.a.sessions.take(r.Session, inState(translate.StateInputRequired)); t != nil {
		r.Command, r.ID = translate.CommandContinue, t.id
		s.task = t
	} else {
		r.Command, r.ID = translate.CommandStart, aip.NewID("task")
		s.task = &aipTask{session: r.Session, id: r.ID, tracker: aip.NewTracker()}
	}
	m, err := aip.MessageFromRequest(r, s.a.opts.LeaderID)
	if err != nil {
		return nil, s.fail(&Error{Code: translate.CodeBadRequest, Err: err})
	}
	s.started = true
	if s.mode == AIPModeStream {
		err = s.openSSE(m)
	} else {
		var evs []*translate.Event
		if evs, err = s.rpc(m); err == nil {
			s.nextPoll = time.Now().Add(s.a.opts.PollInterval)
			err = s.push(evs...)
		}
	}
	if err != nil {
		return nil, s.fail(err)
	}
	return s, nil
}

// openCommand sends one rpc cancel, complete or get to Request.ID, or to the
// session's waiting task, and streams what the partner answers.
func (s *aipStream) openCommand(r *translate.Request) (translate.Stream, error) {
	s.mode, s.oneShot, s.autoComplete = AIPModeRPC, true, false
	if r.ID != "" {
		s.task = &aipTask{session: r.Session, id: r.ID, tracker: aip.NewTracker()}
	} else if s.task = s.a.sessions.take(r.Session); s.task == nil {
		return nil, s.fail(&Error{Code: translate.CodeBadRequest,
			Err: fmt.Errorf("aip: %w: %v needs a task id or a waiting task in session %q", translate.ErrBadRequest, r.Command, r.Session)})
	}
	r.ID = s.task.id
	m, err := aip.MessageFromRequest(r, s.a.opts.LeaderID)
	if err != nil {
		return nil, s.fail(&Error{Code: translate.CodeBadRequest, Err: err})
	}
	evs, err := s.rpc(m)
	if err == nil {
		err = s.push(evs...)
	}
	if err != nil {
		return nil, s.fail(err)
	}
	return s, nil
}

// openResume re-streams task Request.ID after Request.After.
func (s *aipStream) openResume(r *translate.Request) (translate.Stream, error) {
	s.mode = AIPModeStream
	if r.ID == "" {
		return nil, s.fail(&Error{Code: translate.CodeBadRequest, Err: fmt.Errorf("aip: %w: resume needs a task id", translate.ErrBadRequest)})
	}
	s.task = &aipTask{session: r.Session, id: r.ID, tracker: aip.NewTracker()}
	m, err := aip.MessageFromRequest(r, s.a.opts.LeaderID)
	if err != nil {
		return nil, s.fail(&Error{Code: translate.CodeBadRequest, Err: err})
	}
	s.started = true
	if err := s.openSSE(m); err != nil {
		return nil, s.fail(err)
	}
	s.dec.SetLastSeq(r.After)
	s.resumed = true
	return s, nil
}

// Next returns the next event, or io.EOF after the settled state.
func (s *aipStream) Next() (*translate.Event, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for {
		if s.done {
			return nil, s.endErr
		}
		if len(s.queue) > 0 {
			ev := s.queue[0]
			s.queue[0] = nil
			s.queue = s.queue[1:]
			return ev, nil
		}
		if s.settled || s.oneShot {
			s.end(nil, io.EOF)
			return nil, io.EOF
		}
		if s.ctx.Err() != nil {
			return nil, s.gone(nil)
		}
		var err error
		if s.mode == AIPModeStream {
			err = s.readStream()
		} else {
			err = s.poll()
		}
		if err != nil {
			if s.ctx.Err() != nil {
				return nil, s.gone(nil)
			}
			s.end(aipOutcome(err), err)
			return nil, err
		}
	}
}

// Close ends the stream. Before a settled state it cancels the task (best
// effort, in the background) and tells the breaker the client went away.
func (s *aipStream) Close() error {
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
	if !s.done {
		if s.settled || s.oneShot {
			s.end(nil, ErrClosed)
		} else {
			s.gone(ErrClosed)
		}
	}
	return nil
}

// fail ends an exchange that could not open, and returns the error Open
// reports.
func (s *aipStream) fail(err error) error {
	if s.ctx.Err() != nil {
		return s.gone(nil)
	}
	s.end(aipOutcome(err), err)
	return err
}

// gone ends an exchange the client left: the task is cancelled when it may
// be live, and the breaker is told ErrClientGone. It returns the error Next
// reports (endErr when given).
func (s *aipStream) gone(endErr error) error {
	if s.started && !s.settled && s.task != nil {
		s.a.cancelTask(s.parent, s.task.id, s.task.session, s.hdr)
	}
	err := fmt.Errorf("%w: %w", ErrClientGone, context.Cause(s.ctx))
	if endErr == nil {
		endErr = err
	}
	s.end(ErrClientGone, endErr)
	return err
}

// end finishes the exchange once: the connection is freed and the breaker
// told outcome.
func (s *aipStream) end(outcome, endErr error) {
	if s.done {
		return
	}
	s.done, s.endErr = true, endErr
	s.queue = nil
	s.closeResp(outcome)
	s.release(outcome)
	s.cancel()
}

func (s *aipStream) closeResp(outcome error) {
	if s.resp != nil {
		s.resp.finish(outcome)
		s.resp, s.body, s.dec = nil, nil, nil
	}
}

// push queues decoded events, handling the states that end a turn: an
// input-required state is preceded by a KindInputRequest with its question;
// awaiting-completion is completed by the bridge when AutoComplete is on
// (the events of the partner's answer are queued instead); any settled
// state is the stream's last event. A KindError (a JSON-RPC error frame) is
// returned as an error.
func (s *aipStream) push(evs ...*translate.Event) error {
	for _, ev := range evs {
		if s.settled {
			return nil
		}
		switch {
		case ev.Kind == translate.KindError:
			ce := ev.Err
			if ce == nil {
				ce = &translate.Error{Code: translate.CodeUpstreamError, Message: "error frame"}
			}
			if s.resumed {
				return &Error{Code: translate.CodeStreamIncomplete,
					Err: fmt.Errorf("re-stream of task %s refused: %s: %s", s.task.id, ce.Code, ce.Message)}
			}
			return rpcError(ce)
		case ev.Kind != translate.KindState:
		case ev.State == translate.StateAwaitingCompletion && s.autoComplete:
			if s.completeSent {
				continue
			}
			s.completeSent = true
			m, err := aip.MessageFromRequest(&translate.Request{Command: translate.CommandComplete,
				ID: s.task.id, Session: s.task.session}, s.a.opts.LeaderID)
			if err != nil {
				return &Error{Code: translate.CodeInternal, Err: err}
			}
			done, err := s.rpc(m)
			if err != nil {
				return fmt.Errorf("aip: complete: %w", err)
			}
			if err := s.push(done...); err != nil {
				return err
			}
			continue
		case ev.State == translate.StateInputRequired:
			s.queue = append(s.queue, &translate.Event{Kind: translate.KindInputRequest,
				Parts: ev.Parts, Time: ev.Time, Seq: ev.Seq})
		}
		s.queue = append(s.queue, ev)
		if ev.Kind == translate.KindState && ev.State.Settled() {
			s.settle(ev.State)
		}
	}
	return nil
}

// settle marks the turn over; a task left waiting on the client is
// remembered for the session's next request.
func (s *aipStream) settle(st translate.State) {
	s.settled = true
	if st == translate.StateInputRequired || st == translate.StateAwaitingCompletion {
		s.task.state = st
		s.a.sessions.put(s.task)
	}
}

// rpc sends m with method rpc and returns the events of the answer, diffed
// with the task's Tracker. A JSON-RPC error answer is an *Error.
func (s *aipStream) rpc(m *aip.Message) ([]*translate.Event, error) {
	ctx, cancel := context.WithTimeout(s.ctx, s.a.c.cfg.Timeouts.Total)
	defer cancel()
	resp, err := s.a.post(ctx, s.a.paths[aip.MethodRPC], "application/json",
		aip.AppendMessageRequest(nil, aip.MethodRPC, newRPCID(), m), s.hdr)
	if err != nil {
		return nil, err
	}
	status := resp.Status
	body, err := s.readBody(resp)
	if err != nil {
		return nil, err
	}
	evs, err := aip.DecodeRPCResponse(status, body, s.task.tracker)
	if err != nil {
		return nil, &Error{Code: translate.CodeUpstreamError, Status: status, Err: err}
	}
	if len(evs) == 1 && evs[0].Kind == translate.KindError && evs[0].Err != nil {
		return nil, rpcError(evs[0].Err)
	}
	return evs, nil
}

// readBody reads a unary answer whole and frees its connection.
func (s *aipStream) readBody(resp *response) ([]byte, error) {
	body, err := resp.readAll(s.a.c.cfg.MaxBodyBytes)
	if err != nil {
		e := streamError(err)
		resp.finish(e)
		return nil, e
	}
	if resp.Stream == nil {
		body = bytes.Clone(body) // resp's buffer is reused after finish
		resp.eof = true
	}
	resp.finish(nil)
	return body, nil
}

// openSSE sends m with method stream and starts decoding the answer with
// the task's Tracker.
func (s *aipStream) openSSE(m *aip.Message) error {
	resp, err := s.a.post(s.ctx, s.a.paths[aip.MethodStream], "text/event-stream",
		aip.AppendMessageRequest(nil, aip.MethodStream, newRPCID(), m), s.hdr)
	if err != nil {
		return err
	}
	if ct := resp.ContentType(); ct != "text/event-stream" {
		status := resp.Status
		body, err := s.readBody(resp)
		if err != nil {
			return err
		}
		// A JSON-RPC error answered as JSON rather than as an error frame.
		if evs, derr := aip.DecodeRPCResponse(status, body, aip.NewTracker()); derr == nil &&
			len(evs) == 1 && evs[0].Kind == translate.KindError && evs[0].Err != nil {
			return rpcError(evs[0].Err)
		}
		if len(body) > 200 {
			body = body[:200]
		}
		return &Error{Code: translate.CodeUpstreamError, Status: status,
			Err: fmt.Errorf("%w: stream answered %q, not text/event-stream: %s", translate.ErrMalformed, ct, body)}
	}
	var r io.Reader = resp.Stream
	if r == nil {
		r = bytes.NewReader(bytes.Clone(resp.resp.Body()))
	}
	s.resp, s.body = resp, &aipBody{r: r}
	s.dec = aip.NewStreamDecoder(s.body, s.task.tracker, s.a.c.cfg.MaxEventBytes)
	return nil
}

// readStream decodes the next event of the SSE, re-streaming when the
// connection ended before the turn settled.
func (s *aipStream) readStream() error {
	ev, err := s.dec.Next()
	if err == nil {
		s.attempts = 0
		return s.push(ev)
	}
	if s.ctx.Err() != nil {
		return err
	}
	readErr := s.body.err
	eof := errors.Is(err, io.EOF)
	if !eof && (readErr == nil || errors.Is(readErr, io.EOF)) {
		return &Error{Code: translate.CodeUpstreamError, Err: err} // the bytes arrived but are not AIP
	}
	if eof {
		s.resp.eof = true // read to its end: the connection may be reused
	}
	return s.resume(err)
}

// resume re-streams the task after the last event seen, up to ResumeRetries
// times with doubling backoff; the new decoder skips what was already seen.
func (s *aipStream) resume(cause error) error {
	last := s.dec.LastSeq()
	s.closeResp(nil)
	lastErr := cause
	for s.attempts < s.a.opts.ResumeRetries {
		wait := s.a.opts.ResumeBackoff << s.attempts
		s.attempts++
		if err := sleepCtx(s.ctx, wait); err != nil {
			return err
		}
		m, err := aip.MessageFromRequest(&translate.Request{Command: translate.CommandResume,
			ID: s.task.id, Session: s.task.session, After: last}, s.a.opts.LeaderID)
		if err != nil {
			return &Error{Code: translate.CodeInternal, Err: err}
		}
		err = s.openSSE(m)
		if err == nil {
			s.dec.SetLastSeq(last)
			s.resumed = true
			return nil
		}
		if s.ctx.Err() != nil {
			return err
		}
		lastErr = err
		if aipOutcome(err) == nil {
			break // refused (404 stream not found, a JSON-RPC error): retrying will not help
		}
	}
	return &Error{Code: translate.CodeStreamIncomplete,
		Err: fmt.Errorf("aip stream of task %s broke after event %d and could not be resumed: %w", s.task.id, last, lastErr)}
}

// poll waits for the poll interval and asks the task's state with get.
func (s *aipStream) poll() error {
	if err := sleepCtx(s.ctx, time.Until(s.nextPoll)); err != nil {
		return err
	}
	m, err := aip.MessageFromRequest(&translate.Request{Command: translate.CommandGet,
		ID: s.task.id, Session: s.task.session}, s.a.opts.LeaderID)
	if err != nil {
		return &Error{Code: translate.CodeInternal, Err: err}
	}
	evs, err := s.rpc(m)
	s.nextPoll = time.Now().Add(s.a.opts.PollInterval)
	if err != nil {
		return err
	}
	return s.push(evs...)
}

// sleepCtx waits d or until ctx is done.
func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
