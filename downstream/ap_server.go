package downstream

import "github.com/valyala/fasthttp"

// matchAP reports whether the request is for the Agent Protocol 2025
// endpoints (GET /, /{agent}/describe, /{agent}/process, …).
func (s *Server) matchAP(ctx *fasthttp.RequestCtx, rest []byte) bool {
	return false
}

// serveAP answers an Agent Protocol 2025 request.
func (s *Server) serveAP(ctx *fasthttp.RequestCtx, route *Route, rest []byte) {
	writeJSONError(ctx, fasthttp.StatusNotImplemented, "NOT_IMPLEMENTED", "the Agent Protocol is not served yet")
}
