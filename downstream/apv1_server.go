package downstream

import (
	"bytes"

	"github.com/valyala/fasthttp"
)

// matchAPv1 reports whether the request is for the agentprotocol.ai v1
// API under /ap/v1/.
func (s *Server) matchAPv1(rest []byte) bool {
	return bytes.HasPrefix(rest, []byte("/ap/v1/"))
}

// serveAPv1 answers an agentprotocol.ai v1 request.
func (s *Server) serveAPv1(ctx *fasthttp.RequestCtx, route *Route, rest []byte) {
	writeJSONError(ctx, fasthttp.StatusNotImplemented, "NOT_IMPLEMENTED", "the agentprotocol.ai v1 API is not served yet")
}
