// Package tracing is the bridge's W3C Trace Context and its OpenTelemetry
// span export, without the OpenTelemetry SDK.
//
// Trace context (traceparent.go): a client's traceparent is parsed and
// validated (ParseTraceParent); the bridge answers each exchange, or each
// detached turn of one, with a span of its own, a child of the client's
// span in the client's trace (NewChild), or the root of a new trace when the
// client sent none or an invalid one (New). The child's traceparent, and the
// client's tracestate unchanged, travel on every upstream call (Continue).
//
// Export (otlp.go): an Exporter sends finished spans to an OTLP/HTTP
// collector as JSON (POST {endpoint}/v1/traces), in batches, from a bounded
// queue drained by one goroutine. Export never blocks: when the queue is
// full the span is dropped and counted. Close stops the goroutine after a
// last flush. With no endpoint configured there is no Exporter and nothing
// is exported; the trace context is still continued upstream.
//
// The span per exchange is made by the observer in the tracing/exchange
// sub-package, which watches the downstream server.
package tracing
