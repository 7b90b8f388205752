package downstream

import (
	"time"

	"github.com/agentbridge/bridge/translate"
)

// ExchangeInfo names an exchange for observers.
type ExchangeInfo struct {
	ID         string
	Route      string
	Downstream string // the client's protocol
	Upstream   string // the agent's protocol
	Session    string
	// TraceParent is the W3C traceparent sent upstream (the bridge's span
	// for this exchange or turn); ClientTraceParent the one the client sent,
	// its parent ("" if none or invalid).
	TraceParent, ClientTraceParent string
}

// Observer sees the server's work, for metrics, traces and the admin page.
// Every method must be quick and safe for concurrent use. Options.Observer
// nil means nobody watches.
type Observer interface {
	// ExchangeStarted is called when an exchange, or one detached turn of
	// it, begins.
	ExchangeStarted(x ExchangeInfo)
	// EventForwarded is called for each canonical event of an exchange, in
	// order; first marks its first event, sinceStart the time since it
	// began (time to first event when first).
	EventForwarded(x ExchangeInfo, ev *translate.Event, sinceStart time.Duration, first bool)
	// ExchangeEnded is called once for each ExchangeStarted, with the
	// outcome: a state name (completed, input-required, …), an error code,
	// or client_gone.
	ExchangeEnded(x ExchangeInfo, outcome string, d time.Duration)
	// RequestRejected is called when a request is refused before any
	// exchange began: bad input, unknown endpoint or agent, a body too
	// large. status is the HTTP status of the answer.
	RequestRejected(proto string, status int)
}

// FrameRecorder keeps the raw frames of exchanges, for the admin page's
// side-by-side view. dir is "down-in" (client request), "down-out" (bytes
// sent to the client), "up-out" (request to the agent) or "up-in" (a frame
// from the agent). Record must copy frame if it keeps it.
type FrameRecorder interface {
	Record(exchange, dir string, frame []byte)
}

// Frame directions.
const (
	FrameDownIn  = "down-in"
	FrameDownOut = "down-out"
	FrameUpOut   = "up-out"
	FrameUpIn    = "up-in"
)

// nopObserver is used when Options.Observer is nil.
type nopObserver struct{}

func (nopObserver) ExchangeStarted(ExchangeInfo)                                       {}
func (nopObserver) EventForwarded(ExchangeInfo, *translate.Event, time.Duration, bool) {}
func (nopObserver) ExchangeEnded(ExchangeInfo, string, time.Duration)                  {}
func (nopObserver) RequestRejected(string, int)                                        {}

// frame records one raw frame of exchange xid when a recorder is set.
func (s *Server) frame(xid, dir string, b []byte) {
	if s.opts.Frames != nil && len(b) > 0 {
		s.opts.Frames.Record(xid, dir, b)
	}
}
