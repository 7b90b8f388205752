// Package callctx carries per-exchange values from the downstream handler to
// the upstream client through a context.Context: the headers to forward
// (W3C trace context, forwarded ids).
package callctx
