package tracer

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/agentbridge/bridge/downstream"
	"github.com/agentbridge/bridge/internal/tracing"
	"github.com/agentbridge/bridge/translate"
)

// SpanName is the name of the span of an exchange (or of one detached turn
// of one: an AIP task's or an Agent Protocol run's upstream call).
const SpanName = "bridge.exchange"

// Span attribute keys, in the spirit of the A2A tracing conventions: the
// protocols on each side, the exchange and the ids the client knows it by,
// and how it ended.
const (
	AttrExchangeID       = "bridge.exchange.id"
	AttrRoute            = "bridge.route"
	AttrDownstream       = "bridge.downstream.protocol"
	AttrUpstream         = "bridge.upstream.protocol"
	AttrSession          = "bridge.session.id"
	AttrState            = "bridge.exchange.state"   // last state the upstream reported
	AttrOutcome          = "bridge.exchange.outcome" // state name, error code or client_gone
	AttrEvents           = "bridge.exchange.events"
	AttrTimeToFirstEvent = "bridge.exchange.ttfe_ms"
	AttrErrorType        = "error.type"
)

// maxLive bounds the exchanges tracked at once; past it new ones get no
// span (and count as dropped), so a missing ExchangeEnded cannot grow
// memory without bound.
const maxLive = 100_000

// Tracer is a downstream.Observer that exports a span per exchange. The
// span's ids are the ones the bridge sent upstream (ExchangeInfo
// .TraceParent), its parent the client's span (ExchangeInfo
// .ClientTraceParent). Methods are safe for concurrent use.
type Tracer struct {
	exp *tracing.Exporter

	mu      sync.Mutex
	live    map[string]*live
	dropped uint64
}

type live struct {
	sc     tracing.SpanContext
	parent tracing.SpanID
	start  time.Time
	events int64
	ttfe   time.Duration
	first  bool
	state  translate.State
}

var _ downstream.Observer = (*Tracer)(nil)

// New returns a tracer exporting to exp. A nil exp makes a tracer that
// tracks nothing and exports nothing.
func New(exp *tracing.Exporter) *Tracer {
	return &Tracer{exp: exp, live: map[string]*live{}}
}

// key identifies an exchange's current turn: at most one runs at a time.
func key(x downstream.ExchangeInfo) string { return x.ID + "/" + x.TraceParent }

// ExchangeStarted opens the exchange's span.
func (t *Tracer) ExchangeStarted(x downstream.ExchangeInfo) {
	if t.exp == nil {
		return
	}
	sc, ok := tracing.Inbound(x.TraceParent, "")
	if !ok {
		// Not expected: downstream always sends a traceparent upstream.
		sc = tracing.New()
	}
	l := &live{sc: sc, start: time.Now()}
	if p, ok := tracing.Inbound(x.ClientTraceParent, ""); ok && p.TraceID == sc.TraceID {
		l.parent = p.SpanID
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.live) >= maxLive {
		t.dropped++
		return
	}
	t.live[key(x)] = l
}

// EventForwarded counts the event and notes the time to the first one and
// the last state.
func (t *Tracer) EventForwarded(x downstream.ExchangeInfo, ev *translate.Event, sinceStart time.Duration, first bool) {
	if t.exp == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	l := t.live[key(x)]
	if l == nil {
		return
	}
	l.events++
	if !l.first {
		l.first, l.ttfe = true, sinceStart
	}
	if ev != nil && ev.Kind == translate.KindState && ev.State != "" {
		l.state = ev.State
	}
}

// ExchangeEnded finishes the span and queues it for export.
func (t *Tracer) ExchangeEnded(x downstream.ExchangeInfo, outcome string, d time.Duration) {
	if t.exp == nil {
		return
	}
	t.mu.Lock()
	l := t.live[key(x)]
	delete(t.live, key(x))
	t.mu.Unlock()
	if l == nil {
		return
	}
	s := &tracing.Span{
		Context: l.sc,
		Parent:  l.parent,
		Name:    SpanName,
		Kind:    tracing.KindServer,
		Start:   l.start,
		End:     l.start.Add(d),
		Attrs: []tracing.Attr{
			tracing.String(AttrExchangeID, x.ID),
			tracing.String(AttrRoute, x.Route),
			tracing.String(AttrDownstream, x.Downstream),
			tracing.String(AttrUpstream, x.Upstream),
			tracing.String(AttrOutcome, outcome),
			tracing.Int(AttrEvents, l.events),
		},
	}
	if x.Session != "" {
		s.Attrs = append(s.Attrs, tracing.String(AttrSession, x.Session))
	}
	if l.state != "" {
		s.Attrs = append(s.Attrs, tracing.String(AttrState, string(l.state)))
	}
	if l.first {
		s.Attrs = append(s.Attrs, tracing.Float(AttrTimeToFirstEvent, float64(l.ttfe)/float64(time.Millisecond)))
		s.Events = []tracing.SpanEvent{{Name: "first_event", Time: l.start.Add(l.ttfe)}}
	}
	if failed(outcome) {
		s.Status, s.Message = tracing.StatusError, outcome
		s.Attrs = append(s.Attrs, tracing.String(AttrErrorType, outcome))
	}
	t.exp.Export(s)
}

// RequestRejected makes no span: no exchange began.
func (t *Tracer) RequestRejected(string, int) {}

// Dropped returns how many exchanges got no span because too many were
// open at once. Spans dropped by a full export queue are the Exporter's
// Dropped.
func (t *Tracer) Dropped() uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.dropped
}

// failed reports whether an exchange outcome is an error for the span
// status: a failed or rejected state, an unfinished stream, or an error
// code. A client that left, or a cancellation, is not the bridge's error.
func failed(outcome string) bool {
	switch translate.State(outcome) {
	case translate.StateCompleted, translate.StateInputRequired, translate.StateAwaitingCompletion,
		translate.StateCanceled, translate.StateSubmitted, translate.StateWorking:
		return false
	case translate.StateFailed, translate.StateRejected:
		return true
	}
	return outcome != "client_gone" && outcome != "CANCELED"
}

// FromEnv returns a tracer exporting to the OTLP endpoint of the standard
// OpenTelemetry environment (see tracing.ExporterOptionsFromEnv), or nil
// when no endpoint is set: then nothing is exported.
func FromEnv(log *slog.Logger) (*Tracer, error) {
	opts := tracing.ExporterOptionsFromEnv()
	if opts.Endpoint == "" {
		return nil, nil
	}
	opts.Logger = log
	exp, err := tracing.NewExporter(opts)
	if err != nil {
		return nil, err
	}
	if log != nil {
		log.Info("exporting spans over OTLP/HTTP", "service", exp.ServiceName())
	}
	return New(exp), nil
}

// Observer returns t as a downstream.Observer, or nil for a nil t.
func (t *Tracer) Observer() downstream.Observer {
	if t == nil {
		return nil
	}
	return t
}

// Close flushes and stops the exporter (see tracing.Exporter.Close). A nil
// tracer has nothing to close.
func (t *Tracer) Close(ctx context.Context) error {
	if t == nil || t.exp == nil {
		return nil
	}
	return t.exp.Close(ctx)
}

// Join returns an observer that calls each non-nil one of obs in turn, or
// nil when there is none.
func Join(obs ...downstream.Observer) downstream.Observer {
	var all multi
	for _, o := range obs {
		if o != nil {
			all = append(all, o)
		}
	}
	switch len(all) {
	case 0:
		return nil
	case 1:
		return all[0]
	}
	return all
}

type multi []downstream.Observer

func (m multi) ExchangeStarted(x downstream.ExchangeInfo) {
	for _, o := range m {
		o.ExchangeStarted(x)
	}
}

func (m multi) EventForwarded(x downstream.ExchangeInfo, ev *translate.Event, since time.Duration, first bool) {
	for _, o := range m {
		o.EventForwarded(x, ev, since, first)
	}
}

func (m multi) ExchangeEnded(x downstream.ExchangeInfo, outcome string, d time.Duration) {
	for _, o := range m {
		o.ExchangeEnded(x, outcome, d)
	}
}

func (m multi) RequestRejected(proto string, status int) {
	for _, o := range m {
		o.RequestRejected(proto, status)
	}
}
