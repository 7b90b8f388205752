package metrics

import (
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/agentbridge/bridge/downstream"
	"github.com/agentbridge/bridge/translate"
)

// MaxLabelValues bounds the distinct outcome and error-code label values
// taken from outside; past it they are reported as "other".
const MaxLabelValues = 100

// Options are the values a Metrics reads at scrape time. Each nil func
// leaves its series out.
type Options struct {
	// Breakers returns the state of each upstream's breaker, by upstream
	// name: "closed", "half-open" or "open" (gobreaker.State.String()).
	Breakers func() map[string]string
	// StoreSize returns the number of exchanges the store holds.
	StoreSize func() int
	// NoRuntime leaves out the Go runtime and process collectors.
	NoRuntime bool
}

// Metrics is the bridge's Prometheus instrumentation. It implements
// downstream.Observer; every method is safe for concurrent use.
type Metrics struct {
	reg *prometheus.Registry

	requests    *prometheus.CounterVec
	exchanges   *prometheus.CounterVec
	duration    *prometheus.HistogramVec
	firstEvent  *prometheus.HistogramVec
	events      *prometheus.CounterVec
	active      *prometheus.GaugeVec
	errors      *prometheus.CounterVec
	transitions *prometheus.CounterVec
	retries     *prometheus.CounterVec
	resumes     *prometheus.CounterVec

	outcomes labelSet // bounded outcome values
	codes    labelSet // bounded error-code values

	// failed holds the error code of exchanges whose failed or rejected
	// state event carried one, until the exchange ends: the code is counted
	// once, at the end, whichever way it was reported.
	failed sync.Map // exchange id → code
}

var _ downstream.Observer = (*Metrics)(nil)

// Buckets of the histograms, in seconds. Exchanges stream for long; the
// first event should come fast.
var (
	durationBuckets   = []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300}
	firstEventBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}
)

// New returns a Metrics with its collectors registered on a fresh registry.
func New(opts Options) *Metrics {
	route := []string{"downstream", "upstream", "route"}
	withOutcome := []string{"downstream", "upstream", "route", "outcome"}
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "bridge_requests_total",
			Help: "Requests answered: exchange turns by outcome, and requests rejected before an exchange began (outcome http_<status>)."}, withOutcome),
		exchanges: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "bridge_exchanges_total",
			Help: "Exchange turns ended, by outcome: a state name, an error code, or client_gone."}, withOutcome),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "bridge_exchange_duration_seconds",
			Help: "How long exchange turns took, from start to end.", Buckets: durationBuckets}, route),
		firstEvent: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "bridge_time_to_first_event_seconds",
			Help: "Time from the start of an exchange turn to its first canonical event.", Buckets: firstEventBuckets}, route),
		events: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "bridge_events_forwarded_total",
			Help: "Canonical events forwarded, by kind."}, append(route, "kind")),
		active: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "bridge_active_streams",
			Help: "Exchange turns in flight."}, route),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "bridge_errors_total",
			Help: "Errors by protocol error code; requests rejected before an exchange as HTTP_<status>."}, []string{"downstream", "code"}),
		transitions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "bridge_upstream_breaker_transitions_total",
			Help: "Circuit breaker state changes per upstream."}, []string{"upstream", "from", "to"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "bridge_upstream_retries_total",
			Help: "Upstream calls retried."}, []string{"upstream"}),
		resumes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "bridge_resumes_total",
			Help: "Event streams resumed after a cut: side upstream (the bridge resumed an agent's stream) or downstream (a client resumed the bridge's)."}, []string{"side", "protocol"}),
		outcomes: labelSet{max: MaxLabelValues},
		codes:    labelSet{max: MaxLabelValues},
	}
	m.reg.MustRegister(m.requests, m.exchanges, m.duration, m.firstEvent, m.events, m.active,
		m.errors, m.transitions, m.retries, m.resumes)
	if opts.Breakers != nil {
		m.reg.MustRegister(breakerCollector(opts.Breakers))
	}
	if opts.StoreSize != nil {
		m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "bridge_exchange_store_size",
			Help: "Exchanges held by the exchange store."}, func() float64 { return float64(opts.StoreSize()) }))
	}
	if !opts.NoRuntime {
		m.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	return m
}

// Registry returns the registry the collectors are on, to add more or to
// gather in tests.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Handler serves the registry in the Prometheus exposition formats.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// ExchangeStarted counts an exchange turn as active.
func (m *Metrics) ExchangeStarted(x downstream.ExchangeInfo) {
	m.active.WithLabelValues(labels(x)...).Inc()
}

// EventForwarded counts ev and, for the first event, observes the time to
// it.
func (m *Metrics) EventForwarded(x downstream.ExchangeInfo, ev *translate.Event, sinceStart time.Duration, first bool) {
	l := labels(x)
	m.events.WithLabelValues(append(l, ev.Kind.String())...).Inc()
	if first {
		m.firstEvent.WithLabelValues(l...).Observe(sinceStart.Seconds())
	}
	if ev.Kind == translate.KindState && ev.Err != nil && ev.Err.Code != "" &&
		(ev.State == translate.StateFailed || ev.State == translate.StateRejected) {
		m.failed.Store(x.ID, ev.Err.Code)
	}
}

// ExchangeEnded counts the turn by outcome, observes its duration and, when
// it failed with an error code, counts the code.
func (m *Metrics) ExchangeEnded(x downstream.ExchangeInfo, outcome string, d time.Duration) {
	l := labels(x)
	m.active.WithLabelValues(l...).Dec()
	m.duration.WithLabelValues(l...).Observe(d.Seconds())
	out := m.outcomes.bound(outcome)
	m.exchanges.WithLabelValues(append(l, out)...).Inc()
	m.requests.WithLabelValues(append(l, out)...).Inc()
	code, _ := m.failed.LoadAndDelete(x.ID)
	if isErrorCode(outcome) {
		code = outcome
	}
	if c, ok := code.(string); ok {
		m.errors.WithLabelValues(l[0], m.codes.bound(c)).Inc()
	}
}

// RequestRejected counts a request refused before an exchange began, as a
// request with outcome http_<status> and as an error HTTP_<status>. proto
// is empty when no protocol claimed the request (an unknown endpoint).
func (m *Metrics) RequestRejected(proto string, status int) {
	if proto == "" {
		proto = "unknown"
	}
	st := strconv.Itoa(status)
	m.requests.WithLabelValues(proto, "", "", "http_"+st).Inc()
	m.errors.WithLabelValues(proto, "HTTP_"+st).Inc()
}

// BreakerChanged counts one state change of upstream name's breaker. Its
// signature is upstream.Config.OnBreakerChange's.
func (m *Metrics) BreakerChanged(name, from, to string) {
	m.transitions.WithLabelValues(name, from, to).Inc()
}

// Retried counts one retried call to upstream name.
func (m *Metrics) Retried(name string) { m.retries.WithLabelValues(name).Inc() }

// Resumed counts one resumed event stream: side is "upstream" when the
// bridge resumed an agent's stream, "downstream" when a client resumed the
// bridge's; proto is that side's protocol.
func (m *Metrics) Resumed(side, proto string) { m.resumes.WithLabelValues(side, proto).Inc() }

func labels(x downstream.ExchangeInfo) []string {
	return []string{x.Downstream, x.Upstream, x.Route}
}

// nonErrorOutcomes are the outcomes that are not error codes.
var nonErrorOutcomes = map[string]bool{
	string(translate.StateSubmitted): true, string(translate.StateWorking): true,
	string(translate.StateInputRequired): true, string(translate.StateAwaitingCompletion): true,
	string(translate.StateCompleted): true, string(translate.StateFailed): true,
	string(translate.StateCanceled): true, string(translate.StateRejected): true,
	"client_gone": true, "incomplete": true, "": true,
}

// isErrorCode reports whether an exchange outcome is an error code rather
// than a state or the client's departure.
func isErrorCode(outcome string) bool { return !nonErrorOutcomes[outcome] }

// breakerStates maps breaker state names to the gauge's values.
var breakerStates = map[string]float64{"closed": 0, "half-open": 1, "open": 2}

// breakerCollector reports each upstream's breaker state as read at scrape
// time from states.
func breakerCollector(states func() map[string]string) prometheus.Collector {
	return &stateCollector{
		desc: prometheus.NewDesc("bridge_upstream_breaker_state",
			"Circuit breaker state per upstream: 0 closed, 1 half-open, 2 open.", []string{"upstream"}, nil),
		states: states,
	}
}

type stateCollector struct {
	desc   *prometheus.Desc
	states func() map[string]string
}

func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	for name, st := range c.states() {
		v, ok := breakerStates[st]
		if !ok {
			continue // a state this package does not know: leave it out rather than lie
		}
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, v, name)
	}
}

// labelSet bounds the distinct values of a label that come from outside.
type labelSet struct {
	max  int
	mu   sync.RWMutex
	seen map[string]struct{}
}

// bound returns v while fewer than max distinct values were seen (or v is
// one of them), and "other" after.
func (s *labelSet) bound(v string) string {
	s.mu.RLock()
	_, ok := s.seen[v]
	s.mu.RUnlock()
	if ok {
		return v
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.seen[v]; ok {
		return v
	}
	if len(s.seen) >= s.max {
		return "other"
	}
	if s.seen == nil {
		s.seen = map[string]struct{}{}
	}
	s.seen[v] = struct{}{}
	return v
}
