package downstream

import (
	"github.com/valyala/fasthttp"
)

// AIPOptions configures the AIP Partner side of the listener.
type AIPOptions struct {
	// Prefix is put before every AIP path ("/acps-aip-v1" serves
	// /acps-aip-v1/rpc, …); empty serves /rpc, /stream, /notification/….
	Prefix string
}

// matchAIP reports whether the request is for the AIP Partner endpoints.
func (s *Server) matchAIP(ctx *fasthttp.RequestCtx, rest []byte) bool {
	return false
}

// serveAIP answers an AIP request.
func (s *Server) serveAIP(ctx *fasthttp.RequestCtx, route *Route, rest []byte) {
	writeJSONError(ctx, fasthttp.StatusNotImplemented, "NOT_IMPLEMENTED", "AIP is not served yet")
}
