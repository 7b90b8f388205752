package downstream

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"net"
	"slices"
	"strconv"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/agentbridge/bridge/internal/sse"
	"github.com/agentbridge/bridge/internal/store"
	"github.com/agentbridge/bridge/translate"
	ap "github.com/agentbridge/bridge/translate/agentprotocol"
)

// apReplay encodes the request's log through one encoder and calls emit
// with the objects of each event whose id (offset+seq) is above since.
// With tail it goes on with the events logged later, until stop (nil: the
// request's end, see apStop) is the newest event or ctx ends; without, it
// stops at the end of the log. It encodes from the start of the log so
// that the encoder knows the turn; when the head of the log expired it
// starts at since, and it returns store.ErrExpired when that is gone too.
func (s *Server) apReplay(ctx context.Context, x *store.Exchange, offset, since uint64, tail bool, stop func(*translate.Event) bool, emit func(lines []byte, id uint64) error) error {
	from := uint64(0)
	if _, err := s.store.Events(x.ID, 0); errors.Is(err, store.ErrExpired) {
		if since <= offset {
			return err
		}
		from = since - offset
	} else if err != nil {
		return err
	}
	enc := apEncoder(x)
	var buf []byte
	fn := func(ev *translate.Event) error {
		id := offset + ev.Seq
		buf = enc.Encode(buf[:0], ev, id)
		if id > since && len(buf) > 0 {
			return emit(buf, id)
		}
		return nil
	}
	if tail {
		if stop == nil {
			stop = apStop(apDialectOf(x))
		}
		return s.follow(ctx, x.ID, from, stop, fn)
	}
	evs, err := s.store.Events(x.ID, from)
	if err != nil {
		return err
	}
	for _, ev := range evs {
		if err := fn(ev); err != nil {
			return err
		}
	}
	return nil
}

// apStop tells where a stream of a request ends: at its end event; in the
// agentic dialect also at a wait for input, as its clients expect.
func apStop(d ap.Dialect) func(*translate.Event) bool {
	if d == ap.DialectAgentic {
		return func(ev *translate.Event) bool { return ev.Kind == translate.KindState && ev.State.Settled() }
	}
	return func(ev *translate.Event) bool { return ev.Kind == translate.KindState && ev.State.Terminal() }
}

// apEncodeLog returns the encoded events of the request with ids above
// since, and the highest id written.
func (s *Server) apEncodeLog(x *store.Exchange, offset, since uint64) ([]byte, uint64, error) {
	var out []byte
	var last uint64
	err := s.apReplay(context.Background(), x, offset, since, false, nil, func(lines []byte, id uint64) error {
		out = append(out, lines...)
		last = id
		return nil
	})
	return out, last, err
}

// apFindRequest returns the request of the agent with that id.
func (s *Server) apFindRequest(a apAgent, id string) (*store.Exchange, bool) {
	x, err := s.store.Find(apRequestKey + id)
	if err != nil || x.Route != a.route.Name {
		return nil, false
	}
	return x, true
}

// apRun returns the requests of the agent's run id, oldest first, and the
// id offset of each in the run's event numbering.
func (s *Server) apRun(a apAgent, id string) ([]*store.Exchange, []uint64) {
	var xs []*store.Exchange
	for _, x := range s.store.List(0) {
		if x.Downstream == translate.ProtoAgentProtocol && x.Route == a.route.Name && x.Session == id {
			xs = append(xs, x)
		}
	}
	slices.SortStableFunc(xs, func(p, q *store.Exchange) int { return p.Created.Compare(q.Created) })
	offs := make([]uint64, len(xs))
	var off uint64
	for i, x := range xs {
		offs[i] = off
		off += x.LastSeq
	}
	return xs, offs
}

// apGetEvents answers GET {agent}/getevents/{id} and its aliases.
func (s *Server) apGetEvents(ctx *fasthttp.RequestCtx, a apAgent, p apPath) {
	args := ctx.QueryArgs()
	id := p.id
	for _, k := range []string{"request_id", "run_id", "thread_id"} {
		if id == "" {
			id = string(args.Peek(k))
		}
	}
	if id == "" {
		apError(ctx, fasthttp.StatusBadRequest, translate.CodeBadRequest, "name the request: getevents/{request_id} or getevents?request_id=…")
		return
	}
	stream := apBool(args.Peek("stream"))
	since, ok := apUint(args.Peek("since"))
	if !ok {
		apError(ctx, fasthttp.StatusBadRequest, translate.CodeBadRequest, "since must be an event id: a non-negative integer, got "+strconv.Quote(string(args.Peek("since"))))
		return
	}
	sinceGiven := args.Has("since")
	if stream && !sinceGiven {
		if h := ctx.Request.Header.Peek("Last-Event-ID"); len(h) > 0 {
			if since, ok = apUint(h); !ok {
				apError(ctx, fasthttp.StatusBadRequest, translate.CodeBadRequest, "Last-Event-ID must be an event id: a non-negative integer")
				return
			}
			sinceGiven = true
		}
	}
	var xs []*store.Exchange
	var offs []uint64
	run := false
	if x, ok := s.apFindRequest(a, id); ok {
		xs, offs = []*store.Exchange{x}, []uint64{0}
	} else if xs, offs = s.apRun(a, id); len(xs) > 0 {
		run = true
	} else {
		apError(ctx, fasthttp.StatusNotFound, "REQUEST_NOT_FOUND", "no request or run "+id+" at agent "+a.name+", or it expired")
		return
	}
	if stream {
		s.apStreamSSE(ctx, xs, offs, since)
		return
	}
	x := xs[0]
	if !run && apDialectOf(x) == ap.DialectAgentic {
		// The agentic server's poll blocks until the turn settles.
		wctx, stop := apContext(ctx, context.Background())
		wctx, cancel := context.WithTimeout(wctx, apMaxWait)
		_ = s.follow(wctx, x.ID, 0, nil, func(*translate.Event) error { return nil })
		cancel()
		stop()
	}
	if !run && !sinceGiven {
		since, _ = apUint([]byte(x.Meta[apMetaPolled]))
	}
	var out []byte
	var last uint64
	for i, x := range xs {
		lines, l, err := s.apEncodeLog(x, offs[i], since)
		if err != nil {
			apStoreError(ctx, err)
			return
		}
		out = append(out, lines...)
		last = max(last, l)
	}
	if !run && last > 0 {
		_ = s.store.Update(x.ID, func(x *store.Exchange) error {
			if n, _ := apUint([]byte(x.Meta[apMetaPolled])); last > n {
				if x.Meta == nil {
					x.Meta = map[string]string{}
				}
				x.Meta[apMetaPolled] = strconv.FormatUint(last, 10)
			}
			return nil
		})
	}
	apJSON(ctx, fasthttp.StatusOK, ap.AppendArray(nil, out))
}

// apStreamRequest answers POST {agent}/stream_request: the request is
// carried out as process would, and its events stream back as SSE until
// it ends.
func (s *Server) apStreamRequest(ctx *fasthttp.RequestCtx, a apAgent) {
	sub, e := apParse(ctx.PostBody(), "stream_request", ap.DialectUnknown)
	if e != nil {
		apError(ctx, e.status, e.code, e.msg)
		return
	}
	if sub.p.Kind == ap.KindConfigure {
		apJSON(ctx, fasthttp.StatusOK, apConfigured(a, sub.dialect))
		return
	}
	x, after, e := s.apCommand(a, sub, forwardHeaders(ctx))
	if e != nil {
		apError(ctx, e.status, e.code, e.msg)
		return
	}
	s.apStreamSSE(ctx, []*store.Exchange{x}, []uint64{0}, after)
}

// apStreamSSE answers with the events of xs (replayed, the last one
// followed) as Server-Sent Events.
func (s *Server) apStreamSSE(ctx *fasthttp.RequestCtx, xs []*store.Exchange, offs []uint64, since uint64) {
	job := &apSSEJob{s: s, xs: xs, offs: offs, since: since, conn: ctx.Conn()}
	setSSEHeaders(ctx)
	ctx.SetBodyStreamWriter(job.run)
}

// apSSEJob is what an SSE stream needs once its handler has returned.
type apSSEJob struct {
	s     *Server
	xs    []*store.Exchange
	offs  []uint64
	since uint64
	conn  net.Conn
}

// run writes the stream. It touches no RequestCtx.
func (j *apSSEJob) run(w *bufio.Writer) {
	s := j.s
	s.active.Add(1)
	defer s.active.Add(-1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	defer s.ap.track(cancel)()
	stopWatch := watchDisconnect(j.conn, cancel)
	defer stopWatch()

	write := syncWrite(w)
	defer keepAlive(ctx, s.opts.KeepAlive, write, cancel)()

	var frame []byte
	var err error
	for i, x := range j.xs {
		d := apDialectOf(x)
		emit := func(lines []byte, id uint64) error {
			frame = ap.AppendSSE(frame[:0], lines, id, d)
			return write(frame)
		}
		err = s.apReplay(ctx, x, j.offs[i], j.since, i == len(j.xs)-1, nil, emit)
		if err != nil {
			break
		}
	}
	var msg []byte
	switch {
	case errors.Is(err, store.ErrExpired):
		msg = ap.AppendHTTPError(nil, "EVENTS_EXPIRED", "the events after since have expired from the log")
	case errors.Is(err, store.ErrNotFound):
		msg = ap.AppendHTTPError(nil, "REQUEST_NOT_FOUND", "the request expired")
	}
	if msg != nil {
		_ = write(sse.AppendNamed(nil, 0, "error", msg))
	}
}

// apStateObject describes a request: its ids under the names of its
// dialect, the agent, its canonical state, the finish_reason once it is
// over, the id of its last event, the chat text that started it, and when
// it was created and last updated.
func apStateObject(x *store.Exchange) map[string]any {
	d := apDialectOf(x)
	turnKey, sessKey := "request_id", "run_id"
	switch d {
	case ap.DialectRun:
		turnKey, sessKey = "run_id", "thread_id"
	case ap.DialectAgentic:
		sessKey = "thread_id"
	}
	o := map[string]any{
		turnKey:         x.ClientID,
		sessKey:         x.Session,
		"agent":         x.Meta[apMetaAgent],
		"state":         string(x.State),
		"last_event_id": x.LastSeq,
		"created":       x.Created.UTC().Format(time.RFC3339Nano),
		"updated":       x.Updated.UTC().Format(time.RFC3339Nano),
	}
	switch x.State {
	case translate.StateCompleted, translate.StateAwaitingCompletion:
		o["finish_reason"] = string(ap.FinishSuccess)
	case translate.StateFailed, translate.StateRejected:
		o["finish_reason"] = string(ap.FinishError)
	case translate.StateCanceled:
		o["finish_reason"] = string(ap.FinishCanceled)
	}
	if x.Request != nil {
		if m := x.Request.LastInput(); m != nil {
			o["input"] = m.Text()
		}
	}
	return o
}

// apRequestState answers GET {agent}/request/{id} (and /runs/{id}).
func (s *Server) apRequestState(ctx *fasthttp.RequestCtx, a apAgent, id string) {
	x, ok := s.apFindRequest(a, id)
	if !ok {
		apError(ctx, fasthttp.StatusNotFound, "REQUEST_NOT_FOUND", "no request "+id+" at agent "+a.name+", or it expired")
		return
	}
	b, _ := json.Marshal(apStateObject(x))
	apJSON(ctx, fasthttp.StatusOK, b)
}

// apList answers GET {agent}/runs (and /threads): the agent's requests,
// the most recently updated first, at most ?limit= (default 100).
func (s *Server) apList(ctx *fasthttp.RequestCtx, a apAgent) {
	limit := 100
	if v := ctx.QueryArgs().Peek("limit"); len(v) > 0 {
		n, err := strconv.Atoi(string(v))
		if err != nil || n <= 0 {
			apError(ctx, fasthttp.StatusBadRequest, translate.CodeBadRequest, "limit must be a positive integer")
			return
		}
		limit = n
	}
	out := []map[string]any{}
	for _, x := range s.store.List(0) {
		if len(out) >= limit {
			break
		}
		if x.Downstream == translate.ProtoAgentProtocol && x.Route == a.route.Name {
			out = append(out, apStateObject(x))
		}
	}
	b, _ := json.Marshal(out)
	apJSON(ctx, fasthttp.StatusOK, b)
}
