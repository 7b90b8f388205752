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

type framesKey struct{}

// FrameFunc records one raw frame of an exchange; dir says which way it
// went ("up-out": to the agent, "up-in": from it). It must copy b to keep it.
type FrameFunc func(dir string, b []byte)

// WithFrames returns a context whose upstream calls record their raw frames
// with fn.
func WithFrames(ctx context.Context, fn FrameFunc) context.Context {
	return context.WithValue(ctx, framesKey{}, fn)
}

// Frames returns the frame recorder carried by ctx, or nil.
func Frames(ctx context.Context) FrameFunc {
	fn, _ := ctx.Value(framesKey{}).(FrameFunc)
	return fn
}
