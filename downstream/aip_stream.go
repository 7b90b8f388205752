package downstream

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"net"

	"github.com/valyala/fasthttp"

	"github.com/agentbridge/bridge/internal/store"
	"github.com/agentbridge/bridge/translate"
	"github.com/agentbridge/bridge/translate/aip"
)

// aipStreamHandle lets Shutdown end a stream that waits on its task.
type aipStreamHandle struct{ cancel context.CancelFunc }

func (p *aipPartner) addStream(cancel context.CancelFunc) (remove func()) {
	h := &aipStreamHandle{cancel: cancel}
	p.smu.Lock()
	defer p.smu.Unlock()
	if p.sclosed {
		cancel()
		return func() {}
	}
	if p.streams == nil {
		p.streams = map[*aipStreamHandle]struct{}{}
	}
	p.streams[h] = struct{}{}
	return func() {
		p.smu.Lock()
		delete(p.streams, h)
		p.smu.Unlock()
	}
}

func (p *aipPartner) closeStreams() {
	p.smu.Lock()
	defer p.smu.Unlock()
	p.sclosed = true
	for h := range p.streams {
		h.cancel()
	}
}

// errStreamOver ends a follow without an error to report.
var errStreamOver = errors.New("stream over")

// aipStreamJob is what a stream needs once its handler has returned.
type aipStreamJob struct {
	s      *Server
	t      *aipTask
	id     json.RawMessage
	after  uint64 // frames for events after this seq only
	gen    uint64 // the stream's generation (aipTask.streamGen)
	single bool   // one Task frame, then close (an ignored command)
	expire bool   // the events after `after` expired: one error frame
	conn   net.Conn
}

// aipStream serves the stream method: start, continue and re-stream.
func (s *Server) aipStream(ctx *fasthttp.RequestCtx, route *Route, req *aip.Request, id json.RawMessage) {
	m := req.Message
	job := &aipStreamJob{s: s, id: id, conn: ctx.Conn()}
	switch m.Command {
	case aip.CommandStart:
		t, seq, started, aerr := s.aipStart(ctx, route, req.Method, m, nil)
		if aerr != nil {
			rpcError(ctx, id, aerr)
			return
		}
		job.t, job.single = t, !started
		_ = seq // a new task's stream starts at the beginning of its log
		job.gen = t.streamGen.Add(1)
	case aip.CommandContinue:
		t, err := s.aipLookup(m.TaskID)
		if err != nil {
			rpcError(ctx, id, lookupError(m.TaskID, err))
			return
		}
		// A newer stream supersedes the one held open in
		// awaiting-completion, before the new turn's events are logged.
		job.t, job.gen = t, t.streamGen.Add(1)
		seq, began, aerr := s.aipContinue(ctx, route, req.Method, t, m)
		if aerr != nil {
			rpcError(ctx, id, aerr)
			return
		}
		job.after, job.single = seq, !began
	case aip.CommandReStream:
		t, err := s.aipLookup(m.TaskID)
		if err != nil {
			rpcError(ctx, id, lookupError(m.TaskID, err))
			return
		}
		rp, _ := m.ReStreamParams()
		job.t, job.after, job.gen = t, rp.LastEventSeq, t.streamGen.Add(1)
		if _, err := s.store.Events(t.xid, rp.LastEventSeq); errors.Is(err, store.ErrExpired) {
			job.expire = true
		}
	default:
		rpcError(ctx, id, aip.NewError(aip.CodeInvalidParams, "stream takes start, continue and re-stream"))
		return
	}
	setSSEHeaders(ctx)
	ctx.SetBodyStreamWriter(job.run)
}

func lookupError(taskID string, err error) *aip.Error {
	if errors.Is(err, store.ErrNotFound) {
		return taskNotFound(taskID)
	}
	return aip.NewError(aip.CodeInternalError, err.Error())
}

// run writes the stream. It touches no RequestCtx.
func (j *aipStreamJob) run(w *bufio.Writer) {
	s, t := j.s, j.t
	s.active.Add(1)
	defer s.active.Add(-1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	defer s.aip.addStream(cancel)()
	stopWatch := watchDisconnect(j.conn, cancel)
	defer stopWatch()

	write := syncWrite(w)

	if j.expire {
		e := aip.NewError(aip.CodeInternalError, "")
		e.Data, _ = json.Marshal(map[string]any{"taskId": t.taskID, "lastEventSeq": j.after,
			"details": "the events after lastEventSeq have expired; get the task instead"})
		_ = write(aip.AppendErrorFrame(nil, j.id, e))
		return
	}
	if j.single {
		s.aipSync(t)
		t.mu.Lock()
		b := aip.AppendFrame(nil, j.id, t.seq, t.b.Task())
		t.mu.Unlock()
		_ = write(b)
		return
	}

	defer keepAlive(ctx, s.opts.KeepAlive, write, cancel)()

	enc := aip.NewStreamEncoder(j.id, t.taskID, t.session)
	enc.After = j.after
	enc.Builder().SenderID = s.opts.AIP.AIC
	// Replay from the start of the log so that the encoder knows the task;
	// frames go out only for events after j.after. When the head of the log
	// has expired, start where the client asked.
	from := uint64(0)
	if _, err := s.store.Events(t.xid, 0); errors.Is(err, store.ErrExpired) {
		from = j.after
	}
	stop := func(ev *translate.Event) bool {
		return ev.Kind == translate.KindState && (ev.State.Terminal() || ev.State == translate.StateInputRequired)
	}
	var buf []byte
	err := s.follow(ctx, t.xid, from, stop, func(ev *translate.Event) error {
		if ev.Seq > j.after && t.streamGen.Load() != j.gen {
			return errStreamOver // a newer stream of this task took over
		}
		msTime(ev)
		if m, ok := leaderMessage(ev); ok {
			enc.Builder().AddMessage(m)
			return nil
		}
		if ev.Kind == translate.KindState && ev.State == translate.StateSubmitted {
			// accepted is folded silently: the first frame is the Task
			// at work, as the spec's example shows.
			enc.Builder().Apply(ev)
			return nil
		}
		buf = enc.AppendEvent(buf[:0], ev, ev.Seq)
		if len(buf) == 0 {
			return nil
		}
		return write(buf)
	})
	if errors.Is(err, store.ErrExpired) {
		e := aip.NewError(aip.CodeInternalError, "")
		e.Data, _ = json.Marshal(map[string]any{"taskId": t.taskID, "lastEventSeq": j.after,
			"details": "the events of this stream have expired; get the task instead"})
		_ = write(aip.AppendErrorFrame(nil, j.id, e))
	}
}
