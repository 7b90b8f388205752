package upstream

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tidwall/gjson"

	"github.com/agentbridge/bridge/internal/sse"
	"github.com/agentbridge/bridge/translate"
	ap "github.com/agentbridge/bridge/translate/agentprotocol"
)

// apStream is one exchange (one turn) with an Agent Protocol agent: the
// turn it drives and the events decoded but not yet handed out. Next does
// the I/O (reads the SSE, reopens it after a cut, posts v1 steps); a mutex
// lets Close run from another goroutine: Close cancels the context, which
// wakes a blocked read, then waits for Next to let go.
type apStream struct {
	a       *AgentProtocol
	parent  context.Context // the caller's: its values outlive the exchange
	ctx     context.Context
	cancel  context.CancelFunc
	release func(error)
	hdr     map[string]string

	mu      sync.Mutex
	t       apTarget
	sess    *apSession // the session entry this exchange holds (put back at the end)
	started bool       // a turn was submitted: it may be live
	queue   []*translate.Event

	// 2025 dialects
	turn     string
	dec      *ap.EventDecoder
	resp     *response
	body     *aipBody
	rd       *sse.Reader
	skipTo   uint64 // drop events with an id at or below this on this connection
	last     uint64 // the highest event id delivered
	noIDs    bool   // an event without an id was delivered: no resuming
	attempts int    // reconnections since the last event

	// v1
	task     string
	stepBody []byte
	steps    int
	working  bool

	settled bool // a settled state is queued: the stream ends after it
	done    bool
	endErr  error
}

func newAPStream(a *AgentProtocol, ctx context.Context, release func(error)) *apStream {
	cctx, cancel := context.WithCancel(ctx)
	return &apStream{a: a, parent: ctx, ctx: cctx, cancel: cancel, release: release, hdr: apHeaders(ctx)}
}

// openTurn submits a start or continue: a new turn, or the answer to the
// session's turn waiting for input.
func (s *apStream) openTurn(req *translate.Request) (translate.Stream, error) {
	t, err := s.a.resolve(s.ctx, s.hdr)
	if err != nil {
		return nil, s.fail(err)
	}
	s.t = t
	s.sess = s.a.sessions.take(req.Session)
	if s.sess == nil || s.sess.kind != t.kind {
		s.sess = &apSession{key: req.Session, kind: t.kind}
	}
	if t.kind == APDialectV1 {
		err = s.openV1(req)
	} else {
		err = s.open2025(req)
	}
	if err != nil {
		return nil, s.fail(err)
	}
	return s, nil
}

// open2025 submits the turn (process, run, agentic) and opens its events.
func (s *apStream) open2025(req *translate.Request) error {
	s.dec = ap.NewEventDecoder(ap.DecoderOptions{Dialect: s.t.d})
	r := translate.Request{Command: translate.CommandStart, Session: s.sess.remote, User: req.User, Input: req.Input, Ext: req.Ext}
	var since uint64
	if s.sess.turn != "" {
		r.Command, r.ID, since = translate.CommandContinue, s.sess.turn, s.sess.lastID
		s.sess.turn, s.sess.lastID = "", 0 // taken: a waiting turn is answered once
	}
	if err := s.submit(&r, since); err != nil {
		return err
	}
	s.last = since
	return s.openEvents(since)
}

// submit POSTs r and reads the turn and session ids from the answer. A
// README agent of unknown edition is sent process first, run after a 404
// or 405. An event the answer carries (the README's wait=true
// RequestStarted) is decoded unless its id is at or below since: the answer
// to a ResumeWithInput may name the request with its start event, which
// the turn that waited for input delivered already.
func (s *apStream) submit(r *translate.Request, since uint64) error {
	if r.Command == translate.CommandStart {
		r.ID = ""
	}
	for {
		d := s.t.d
		rr := *r
		if rr.Command == translate.CommandStart && d == ap.DialectProcess {
			rr.ID = "req_" + apNewID() // the bridge names the turn: the answer may be only a status
		}
		body, err := ap.EncodeRequest(nil, &rr, d)
		if err != nil {
			return &Error{Code: translate.CodeBadRequest, Err: err}
		}
		path, err := d.SubmitPath(s.t.agent, rr.Command)
		if err != nil {
			return &Error{Code: translate.CodeBadRequest, Err: err}
		}
		if d != ap.DialectAgentic {
			path += "?wait=true"
		}
		s.started = true
		ans, err := s.a.unary(s.ctx, path, body, s.hdr)
		if err != nil {
			var e *Error
			if s.t.probe && d == ap.DialectProcess && errors.As(err, &e) && (e.Status == 404 || e.Status == 405) {
				s.t.kind, s.t.d = APDialectRun, ap.DialectRun
				continue
			}
			return err
		}
		res, err := ap.DecodeSubmitResponse(ans)
		if err != nil {
			return &Error{Code: translate.CodeUpstreamError, Err: err}
		}
		s.turn = res.Turn
		if s.turn == "" {
			s.turn = rr.ID
		}
		if s.turn == "" {
			return malformedError(0, "the answer to POST %s names no turn", path)
		}
		if res.Session != "" {
			s.sess.remote = res.Session
		}
		if s.t.probe {
			s.t.probe = false
			s.a.learnEdition(s.t)
		}
		s.sess.kind = s.t.kind
		if res.Event != nil {
			if id := gjson.GetBytes(res.Event, "id"); since == 0 || id.Type != gjson.Number || id.Uint() > since {
				s.queue, _ = s.dec.Decode(s.queue, res.Event)
			}
		}
		return nil
	}
}

// openEvents GETs the turn's events after since.
func (s *apStream) openEvents(since uint64) error {
	rel := s.t.d.EventsPath(s.t.agent, s.turn, true, since)
	resp, err := s.a.call(s.ctx, rel, nil, "text/event-stream", s.hdr)
	if err != nil {
		return err
	}
	s.skipTo = since
	switch ct := resp.ContentType(); {
	case ct == "text/event-stream":
		var r io.Reader = resp.Stream
		if r == nil {
			r = bytes.NewReader(bytes.Clone(resp.resp.Body()))
		}
		s.resp, s.body = resp, &aipBody{r: r}
		s.rd = sse.NewReader(s.body, s.a.c.cfg.MaxEventBytes)
		return nil
	case ct == "application/json" || strings.HasSuffix(ct, "+json"):
		// An agent that answers the list despite stream=true.
		status := resp.Status
		body, err := s.a.readWhole(resp)
		if err != nil {
			return err
		}
		s.rd = nil
		root := gjson.ParseBytes(body)
		if !gjson.ValidBytes(body) || !root.IsArray() {
			return malformedError(status, "getevents answered JSON that is not an event list: %.200s", body)
		}
		for _, v := range root.Array() {
			if err := s.decode([]byte(v.Raw), 0, false); err != nil || s.settled {
				return err
			}
		}
		return nil
	default:
		status := resp.Status
		b, _ := resp.readAll(200)
		e := malformedError(status, "getevents answered %q, not text/event-stream: %.200s", ct, b)
		resp.finish(e)
		return e
	}
}

// decode delivers one event object: dropped when its id shows it was
// delivered already, else decoded and queued.
func (s *apStream) decode(data []byte, sseID uint64, hasSSEID bool) error {
	data = bytes.TrimSpace(data)
	if len(data) == 0 || string(data) == "[DONE]" {
		return nil
	}
	var id uint64
	has := false
	if v := gjson.GetBytes(data, "id"); v.Type == gjson.Number {
		id, has = v.Uint(), true
	} else if hasSSEID {
		id, has = sseID, true
	}
	if has && s.skipTo > 0 && id <= s.skipTo {
		return nil // delivered before the reconnection: the agent ignored since
	}
	var err error
	if s.queue, err = s.dec.Decode(s.queue, data); err != nil {
		return &Error{Code: translate.CodeUpstreamError, Err: err}
	}
	if has {
		s.last = max(s.last, id)
	} else {
		s.noIDs = true
	}
	s.attempts = 0
	if s.dec.Settled() {
		st := translate.StateInputRequired
		if s.dec.Done() {
			st = translate.StateCompleted // any terminal state: the session keeps no turn
		}
		s.settle(st)
	}
	return nil
}

// readStream decodes the next SSE event, reopening the stream when it
// ended or broke before the turn settled.
func (s *apStream) readStream() error {
	if s.rd == nil {
		return s.resume(io.EOF) // a list answer that did not settle: ask again
	}
	sev, err := s.rd.Next()
	if err == nil {
		var id uint64
		if sev.HasID {
			id, _ = strconv.ParseUint(string(sev.ID), 10, 64)
		}
		return s.decode(sev.Data, id, sev.HasID && id > 0)
	}
	if s.ctx.Err() != nil {
		return err
	}
	readErr := s.body.err
	eof := errors.Is(err, io.EOF)
	if !eof && (readErr == nil || errors.Is(readErr, io.EOF)) {
		return &Error{Code: translate.CodeUpstreamError, Err: err} // the bytes arrived but are not an event stream
	}
	if eof {
		s.resp.eof = true // read to its end: the connection may be reused
	}
	return s.resume(err)
}

// resume reopens the events after the last id delivered, up to
// ResumeRetries times with doubling backoff. agentic turns (no ids, a
// draining queue) and turns whose events carried no id cannot be resumed
// without a gap or a repeat: their cut is final.
func (s *apStream) resume(cause error) error {
	s.closeResp(nil)
	last := max(s.last, s.dec.LastID())
	if s.t.kind == APDialectAgentic || s.noIDs {
		return &Error{Code: translate.CodeStreamIncomplete,
			Err: fmt.Errorf("agent protocol (%s) event stream of turn %s ended before the turn settled and cannot be resumed: %v", s.t.kind, s.turn, cause)}
	}
	lastErr := cause
	for s.attempts < s.a.opts.ResumeRetries {
		wait := s.a.opts.ResumeBackoff << s.attempts
		s.attempts++
		if err := sleepCtx(s.ctx, wait); err != nil {
			return err
		}
		err := s.openEvents(last)
		if err == nil {
			return nil
		}
		if s.ctx.Err() != nil {
			return err
		}
		lastErr = err
		if apOutcome(err) == nil {
			break // refused (404 turn not found): retrying will not help
		}
	}
	return &Error{Code: translate.CodeStreamIncomplete,
		Err: fmt.Errorf("agent protocol event stream of turn %s broke after event %d and could not be resumed: %v", s.turn, last, lastErr)}
}

// openCancel sends a CancelRequest for Request.ID or the session's waiting
// turn and answers canceled.
func (s *apStream) openCancel(req *translate.Request) (translate.Stream, error) {
	t, err := s.a.resolve(s.ctx, s.hdr)
	if err != nil {
		return nil, s.fail(err)
	}
	s.t = t
	s.sess = s.a.sessions.take(req.Session)
	turn, remote := req.ID, ""
	if s.sess != nil {
		remote = s.sess.remote
		if turn == "" {
			turn = s.sess.turn
		}
		s.sess.turn, s.sess.lastID = "", 0
		if t.kind == APDialectV1 {
			s.sess.remote = "" // the task waiting for input is given up
		}
	}
	if t.kind == APDialectProcess || t.kind == APDialectRun {
		if turn == "" {
			return nil, s.fail(&Error{Code: translate.CodeBadRequest,
				Err: fmt.Errorf("agentprotocol: %w: cancel needs a turn id or a waiting turn in session %q", translate.ErrBadRequest, req.Session)})
		}
		body, err := ap.EncodeRequest(nil, &translate.Request{Command: translate.CommandCancel, ID: turn, Session: remote}, t.d)
		if err != nil {
			return nil, s.fail(&Error{Code: translate.CodeBadRequest, Err: err})
		}
		path, _ := t.d.SubmitPath(t.agent, translate.CommandCancel)
		if _, err := s.a.unary(s.ctx, path+"?wait=true", body, s.hdr); err != nil {
			return nil, s.fail(err)
		}
	}
	s.queue = append(s.queue, &translate.Event{Kind: translate.KindState, State: translate.StateCanceled})
	s.settled = true
	return s, nil
}

// settle marks the turn over and records what the session's next request
// needs: the waiting turn (2025) or task (v1).
func (s *apStream) settle(st translate.State) {
	s.settled = true
	if s.t.kind == APDialectV1 {
		if st == translate.StateInputRequired {
			s.sess.remote = s.task
		} else {
			s.sess.remote = ""
		}
		return
	}
	if st == translate.StateInputRequired {
		s.sess.turn, s.sess.lastID = s.turn, max(s.last, s.dec.LastID())
	}
}

// Next returns the next event, or io.EOF after the settled state.
func (s *apStream) Next() (*translate.Event, error) {
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
		if s.settled {
			s.end(nil, io.EOF)
			return nil, io.EOF
		}
		if s.ctx.Err() != nil {
			return nil, s.gone(nil)
		}
		var err error
		if s.t.kind == APDialectV1 {
			err = s.nextStep()
		} else {
			err = s.readStream()
		}
		if err != nil {
			if ctxDone(s.ctx) {
				return nil, s.gone(nil)
			}
			s.end(apOutcome(err), err)
			return nil, err
		}
	}
}

// ctxDone reports whether ctx is cancelled or past its deadline: a call
// bounded by the caller's deadline may fail with a timeout an instant
// before the context itself says so.
func ctxDone(ctx context.Context) bool {
	if ctx.Err() != nil {
		return true
	}
	d, ok := ctx.Deadline()
	return ok && !time.Now().Before(d)
}

// Close ends the stream. Before a settled state it cancels the turn (best
// effort, in the background) and tells the breaker the client went away.
func (s *apStream) Close() error {
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
		if s.settled {
			s.end(nil, ErrClosed)
		} else {
			s.gone(ErrClosed)
		}
	}
	return nil
}

// fail ends an exchange that could not open, and returns the error Open
// reports.
func (s *apStream) fail(err error) error {
	if ctxDone(s.ctx) {
		return s.gone(nil)
	}
	s.end(apOutcome(err), err)
	return err
}

// gone ends an exchange the client left: the turn is cancelled when it may
// be live, and the breaker is told ErrClientGone. It returns the error Next
// reports (endErr when given).
func (s *apStream) gone(endErr error) error {
	if s.started && !s.settled && s.turn != "" {
		remote := ""
		if s.sess != nil {
			remote = s.sess.remote
		}
		s.a.cancelTurn(s.parent, s.t, s.turn, remote, s.hdr)
	}
	cause := context.Cause(s.ctx)
	if cause == nil {
		cause = context.DeadlineExceeded
	}
	err := fmt.Errorf("%w: %w", ErrClientGone, cause)
	if endErr == nil {
		endErr = err
	}
	s.end(ErrClientGone, endErr)
	return err
}

// end finishes the exchange once: the connection is freed, the session
// entry put back, and the breaker told outcome.
func (s *apStream) end(outcome, endErr error) {
	if s.done {
		return
	}
	s.done, s.endErr = true, endErr
	s.queue = nil
	s.closeResp(outcome)
	if e := s.sess; e != nil && e.key != "" && (e.remote != "" || e.turn != "") {
		s.a.sessions.put(e)
	}
	s.release(outcome)
	s.cancel()
}

func (s *apStream) closeResp(outcome error) {
	if s.resp != nil {
		s.resp.finish(outcome)
		s.resp, s.body, s.rd = nil, nil, nil
	}
}

// apNewID returns a random hex id.
func apNewID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
