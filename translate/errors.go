package translate

import "errors"

// Sentinel errors shared by the protocol packages. Wrap them with %w and
// test with errors.Is.
var (
	// ErrBadRequest marks input that is not a valid request of its protocol.
	ErrBadRequest = errors.New("bad request")
	// ErrMalformed marks an upstream frame that cannot be parsed.
	ErrMalformed = errors.New("malformed frame")
	// ErrUnsupported marks a request the protocol cannot express.
	ErrUnsupported = errors.New("unsupported")
)

// Standard error codes the bridge itself reports in Error.Code, besides the
// codes agents send.
const (
	CodeUpstreamUnavailable = "UPSTREAM_UNAVAILABLE" // breaker open, connect refused
	CodeUpstreamTimeout     = "UPSTREAM_TIMEOUT"
	CodeUpstreamError       = "UPSTREAM_ERROR"    // 5xx, garbage, a cut stream
	CodeStreamIncomplete    = "STREAM_INCOMPLETE" // EOF before a terminal event
	CodeBusy                = "BUSY"              // a concurrency limit
	CodeBadRequest          = "BAD_REQUEST"
	CodeInternal            = "INTERNAL_ERROR"
)
