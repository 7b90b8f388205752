// Package callctx carries per-exchange values from the downstream handler to
// the upstream client through a context.Context: the headers to forward
// (W3C trace context, forwarded ids).
package callctx

import "context"

type headersKey struct{}

// WithHeaders returns a context that carries headers to send on upstream
// calls made with it. The map must not be modified afterwards.
func WithHeaders(ctx context.Context, h map[string]string) context.Context {
	if len(h) == 0 {
		return ctx
	}
	return context.WithValue(ctx, headersKey{}, h)
}

// Headers returns the headers carried by ctx, or nil.
func Headers(ctx context.Context) map[string]string {
	h, _ := ctx.Value(headersKey{}).(map[string]string)
	return h
}
