package tracing

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// SpanKind is the OTLP span kind.
type SpanKind int

// Span kinds (OTLP enum values).
const (
	KindInternal SpanKind = 1
	KindServer   SpanKind = 2
	KindClient   SpanKind = 3
)

// StatusCode is the OTLP span status code.
type StatusCode int

// Status codes (OTLP enum values).
const (
	StatusUnset StatusCode = 0
	StatusOK    StatusCode = 1
	StatusError StatusCode = 2
)

// Attr is one span attribute. Value is a string, bool, int, int64 or
// float64; anything else is sent as its fmt.Sprint string.
type Attr struct {
	Key   string
	Value any
}

// String, Int, Bool and Float make attributes.
func String(k, v string) Attr        { return Attr{k, v} }
func Int(k string, v int64) Attr     { return Attr{k, v} }
func Bool(k string, v bool) Attr     { return Attr{k, v} }
func Float(k string, v float64) Attr { return Attr{k, v} }

// SpanEvent is a timed annotation of a span.
type SpanEvent struct {
	Name  string
	Time  time.Time
	Attrs []Attr
}

// Span is one finished span, ready to export.
type Span struct {
	Context SpanContext // trace id, span id, tracestate
	Parent  SpanID      // zero for a root span
	Name    string
	Kind    SpanKind
	Start   time.Time
	End     time.Time
	Attrs   []Attr
	Events  []SpanEvent
	Status  StatusCode
	Message string // status message, for StatusError
}

// ExporterOptions configures an Exporter. Zero values give the defaults
// noted.
type ExporterOptions struct {
	// Endpoint is the collector's base URL (http://host:4318); spans go to
	// Endpoint + "/v1/traces", unless it already ends with that path.
	Endpoint string
	// Headers are sent with each export (an API key, say). They are never
	// logged.
	Headers map[string]string
	// ServiceName is the service.name resource attribute (default
	// "agent-bridge").
	ServiceName string
	// QueueSize bounds the spans waiting for export (default 4096); past
	// it, spans are dropped and counted.
	QueueSize int
	// BatchSize is the most spans per request (default 512).
	BatchSize int
	// Interval is the longest a span waits in a partial batch (default 2s).
	Interval time.Duration
	// Timeout bounds one export request (default 10s).
	Timeout time.Duration
	// Client sends the requests (default: a client of its own).
	Client *http.Client
	// Logger receives export failures (default slog.Default()).
	Logger *slog.Logger
}

// Exporter sends spans to an OTLP/HTTP collector as JSON. It is safe for
// concurrent use. Its one goroutine runs from NewExporter until Close.
type Exporter struct {
	opts    ExporterOptions
	url     string
	queue   chan *Span
	stop    chan struct{}
	done    chan struct{}
	base    context.Context // parent of export requests; abort cancels it
	abort   context.CancelFunc
	closeMu sync.RWMutex // held for reading by Export, for writing by Close
	closed  bool

	dropped  atomic.Uint64
	exported atomic.Uint64
	failed   atomic.Uint64
}

// NewExporter starts an exporter to opts.Endpoint. It fails when the
// endpoint is not an http(s) URL.
func NewExporter(opts ExporterOptions) (*Exporter, error) {
	u, err := url.Parse(opts.Endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("otlp endpoint %q is not an http(s) URL", redactURL(opts.Endpoint))
	}
	if !strings.HasSuffix(u.Path, "/v1/traces") {
		u.Path = strings.TrimSuffix(u.Path, "/") + "/v1/traces"
	}
	if opts.ServiceName == "" {
		opts.ServiceName = "agent-bridge"
	}
	if opts.QueueSize <= 0 {
		opts.QueueSize = 4096
	}
	if opts.BatchSize <= 0 {
		opts.BatchSize = 512
	}
	if opts.Interval <= 0 {
		opts.Interval = 2 * time.Second
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 10 * time.Second
	}
	if opts.Client == nil {
		opts.Client = &http.Client{}
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	base, abort := context.WithCancel(context.Background())
	e := &Exporter{
		base:  base,
		abort: abort,
		opts:  opts,
		url:   u.String(),
		queue: make(chan *Span, opts.QueueSize),
		stop:  make(chan struct{}),
		done:  make(chan struct{}),
	}
	go e.run()
	return e, nil
}

// ExporterOptionsFromEnv reads the standard OpenTelemetry variables:
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT (used as is) or
// OTEL_EXPORTER_OTLP_ENDPOINT (base URL), OTEL_EXPORTER_OTLP_HEADERS
// (k=v,k=v, values URL-encoded) and OTEL_SERVICE_NAME. Endpoint is "" when
// neither endpoint variable is set.
func ExporterOptionsFromEnv() ExporterOptions {
	var o ExporterOptions
	o.Endpoint = os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
	if o.Endpoint == "" {
		o.Endpoint = os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT")
	}
	hs := os.Getenv("OTEL_EXPORTER_OTLP_TRACES_HEADERS")
	if hs == "" {
		hs = os.Getenv("OTEL_EXPORTER_OTLP_HEADERS")
	}
	for kv := range strings.SplitSeq(hs, ",") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || strings.TrimSpace(k) == "" {
			continue
		}
		if dv, err := url.QueryUnescape(strings.TrimSpace(v)); err == nil {
			v = dv
		}
		if o.Headers == nil {
			o.Headers = map[string]string{}
		}
		o.Headers[strings.TrimSpace(k)] = v
	}
	o.ServiceName = os.Getenv("OTEL_SERVICE_NAME")
	return o
}

// Export queues s for export. It never blocks: when the queue is full, or
// the exporter is closed, s is dropped and counted. A nil Exporter drops
// silently, so callers need not check whether export is configured.
func (e *Exporter) Export(s *Span) {
	if e == nil {
		return
	}
	e.closeMu.RLock()
	defer e.closeMu.RUnlock()
	if e.closed {
		e.dropped.Add(1)
		return
	}
	select {
	case e.queue <- s:
	default:
		e.dropped.Add(1)
	}
}

// ServiceName returns the service.name the spans are exported under.
func (e *Exporter) ServiceName() string { return e.opts.ServiceName }

// Dropped returns how many spans were dropped (queue full, or closed).
func (e *Exporter) Dropped() uint64 { return e.dropped.Load() }

// Exported returns how many spans the collector accepted.
func (e *Exporter) Exported() uint64 { return e.exported.Load() }

// Failed returns how many spans were lost to failed requests.
func (e *Exporter) Failed() uint64 { return e.failed.Load() }

// Close stops accepting spans, sends what is queued (until ctx ends), and
// stops the exporter's goroutine. It returns ctx's error if the last flush
// was cut short. Calling it again does nothing.
func (e *Exporter) Close(ctx context.Context) error {
	e.closeMu.Lock()
	if e.closed {
		e.closeMu.Unlock()
		<-e.done
		return nil
	}
	e.closed = true
	e.closeMu.Unlock()
	close(e.stop)
	select {
	case <-e.done:
		e.abort()
		return nil
	case <-ctx.Done():
		// Abandon the last flush: requests in flight fail at once, so the
		// goroutine ends promptly.
		e.abort()
		<-e.done
		return ctx.Err()
	}
}

// run batches the queue and sends the batches, until stop.
func (e *Exporter) run() {
	defer close(e.done)
	t := time.NewTicker(e.opts.Interval)
	defer t.Stop()
	batch := make([]*Span, 0, e.opts.BatchSize)
	flush := func() {
		if len(batch) > 0 {
			e.send(batch)
			clear(batch)
			batch = batch[:0]
		}
	}
	for {
		select {
		case s := <-e.queue:
			batch = append(batch, s)
			if len(batch) >= e.opts.BatchSize {
				flush()
			}
		case <-t.C:
			flush()
		case <-e.stop:
			// Export no longer adds after closed is set, so the queue
			// only shrinks now.
			for {
				select {
				case s := <-e.queue:
					batch = append(batch, s)
					if len(batch) >= e.opts.BatchSize {
						flush()
					}
					continue
				default:
				}
				break
			}
			flush()
			return
		}
	}
}

// send posts one batch. A failure is logged (the endpoint without its
// credentials; never the headers) and the batch is counted as lost: the
// bridge does not retry, so a down collector costs nothing but spans.
func (e *Exporter) send(batch []*Span) {
	body, err := json.Marshal(e.request(batch))
	if err != nil {
		e.failed.Add(uint64(len(batch)))
		e.opts.Logger.Warn("otlp export: encoding failed", "error", err, "spans", len(batch))
		return
	}
	ctx, cancel := context.WithTimeout(e.base, e.opts.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.url, bytes.NewReader(body))
	if err != nil {
		e.failed.Add(uint64(len(batch)))
		return
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range e.opts.Headers {
		req.Header.Set(k, v)
	}
	resp, err := e.opts.Client.Do(req)
	if err != nil {
		e.failed.Add(uint64(len(batch)))
		e.opts.Logger.Warn("otlp export failed", "endpoint", redactURL(e.url), "spans", len(batch), "error", redactErr(err))
		return
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		e.failed.Add(uint64(len(batch)))
		e.opts.Logger.Warn("otlp export rejected", "endpoint", redactURL(e.url), "spans", len(batch), "status", resp.StatusCode)
		return
	}
	e.exported.Add(uint64(len(batch)))
}

// redactURL drops user info and the query from a URL for logging.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable URL)"
	}
	u.User = nil
	u.RawQuery = ""
	return u.String()
}

// redactErr keeps a transport error's message without the URL it quotes.
func redactErr(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Op + ": " + ue.Err.Error()
	}
	return err.Error()
}

// The OTLP/JSON request, as the protobuf JSON mapping writes it: ids in
// hex, 64-bit integers and nanosecond times as decimal strings, enums as
// numbers.
type (
	otlpRequest struct {
		ResourceSpans []otlpResourceSpans `json:"resourceSpans"`
	}
	otlpResourceSpans struct {
		Resource   otlpResource     `json:"resource"`
		ScopeSpans []otlpScopeSpans `json:"scopeSpans"`
	}
	otlpResource struct {
		Attributes []otlpKeyValue `json:"attributes"`
	}
	otlpScopeSpans struct {
		Scope otlpScope  `json:"scope"`
		Spans []otlpSpan `json:"spans"`
	}
	otlpScope struct {
		Name string `json:"name"`
	}
	otlpSpan struct {
		TraceID           string         `json:"traceId"`
		SpanID            string         `json:"spanId"`
		TraceState        string         `json:"traceState,omitempty"`
		ParentSpanID      string         `json:"parentSpanId,omitempty"`
		Flags             uint32         `json:"flags,omitempty"`
		Name              string         `json:"name"`
		Kind              SpanKind       `json:"kind"`
		StartTimeUnixNano string         `json:"startTimeUnixNano"`
		EndTimeUnixNano   string         `json:"endTimeUnixNano"`
		Attributes        []otlpKeyValue `json:"attributes,omitempty"`
		Events            []otlpEvent    `json:"events,omitempty"`
		Status            otlpStatus     `json:"status"`
	}
	otlpEvent struct {
		TimeUnixNano string         `json:"timeUnixNano"`
		Name         string         `json:"name"`
		Attributes   []otlpKeyValue `json:"attributes,omitempty"`
	}
	otlpStatus struct {
		Code    StatusCode `json:"code,omitempty"`
		Message string     `json:"message,omitempty"`
	}
	otlpKeyValue struct {
		Key   string    `json:"key"`
		Value otlpValue `json:"value"`
	}
	otlpValue struct {
		StringValue *string  `json:"stringValue,omitempty"`
		BoolValue   *bool    `json:"boolValue,omitempty"`
		IntValue    *string  `json:"intValue,omitempty"`
		DoubleValue *float64 `json:"doubleValue,omitempty"`
	}
)

// scopeName is the instrumentation scope of the bridge's spans.
const scopeName = "github.com/agentbridge/bridge"

func (e *Exporter) request(batch []*Span) otlpRequest {
	spans := make([]otlpSpan, 0, len(batch))
	for _, s := range batch {
		sp := otlpSpan{
			TraceID:           s.Context.TraceID.String(),
			SpanID:            s.Context.SpanID.String(),
			TraceState:        s.Context.State,
			Flags:             uint32(s.Context.Flags),
			Name:              s.Name,
			Kind:              s.Kind,
			StartTimeUnixNano: unixNano(s.Start),
			EndTimeUnixNano:   unixNano(s.End),
			Attributes:        keyValues(s.Attrs),
			Status:            otlpStatus{Code: s.Status, Message: s.Message},
		}
		if s.Parent.IsValid() {
			sp.ParentSpanID = s.Parent.String()
		}
		for _, ev := range s.Events {
			sp.Events = append(sp.Events, otlpEvent{TimeUnixNano: unixNano(ev.Time), Name: ev.Name, Attributes: keyValues(ev.Attrs)})
		}
		spans = append(spans, sp)
	}
	return otlpRequest{ResourceSpans: []otlpResourceSpans{{
		Resource:   otlpResource{Attributes: keyValues([]Attr{String("service.name", e.opts.ServiceName)})},
		ScopeSpans: []otlpScopeSpans{{Scope: otlpScope{Name: scopeName}, Spans: spans}},
	}}}
}

func unixNano(t time.Time) string {
	if t.IsZero() {
		return "0"
	}
	return strconv.FormatInt(t.UnixNano(), 10)
}

func keyValues(attrs []Attr) []otlpKeyValue {
	if len(attrs) == 0 {
		return nil
	}
	kvs := make([]otlpKeyValue, 0, len(attrs))
	for _, a := range attrs {
		var v otlpValue
		switch x := a.Value.(type) {
		case string:
			v.StringValue = &x
		case bool:
			v.BoolValue = &x
		case int:
			s := strconv.Itoa(x)
			v.IntValue = &s
		case int64:
			s := strconv.FormatInt(x, 10)
			v.IntValue = &s
		case float64:
			v.DoubleValue = &x
		default:
			s := fmt.Sprint(x)
			v.StringValue = &s
		}
		kvs = append(kvs, otlpKeyValue{Key: a.Key, Value: v})
	}
	return kvs
}
