// Package tracer makes one OpenTelemetry span per bridge exchange: a
// downstream.Observer that turns what the server reports into spans for a
// tracing.Exporter.
//
// It lives apart from package tracing because it depends on downstream,
// which itself uses tracing for the trace context.
package tracer
