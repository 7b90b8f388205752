package tracing

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
)

// Header names of W3C Trace Context.
const (
	HeaderTraceParent = "traceparent"
	HeaderTraceState  = "tracestate"
)

// maxTraceState bounds the tracestate passed on; the W3C limit is 512
// characters for what a vendor must propagate.
const maxTraceState = 512

// Trace flags the bridge understands; others are cleared when it propagates.
const (
	FlagSampled byte = 0x01
	FlagRandom  byte = 0x02 // Trace Context level 2: the trace id is random
)

// TraceID is a W3C trace id.
type TraceID [16]byte

// SpanID is a W3C span id (the parent-id field of a traceparent).
type SpanID [8]byte

// String returns the id as 32 lowercase hex digits.
func (t TraceID) String() string { return hex.EncodeToString(t[:]) }

// IsValid reports whether the id is not all zero.
func (t TraceID) IsValid() bool { return t != TraceID{} }

// String returns the id as 16 lowercase hex digits.
func (s SpanID) String() string { return hex.EncodeToString(s[:]) }

// IsValid reports whether the id is not all zero.
func (s SpanID) IsValid() bool { return s != SpanID{} }

// SpanContext is the trace context of one span: what a traceparent header
// carries, and the tracestate that goes with it.
type SpanContext struct {
	TraceID TraceID
	SpanID  SpanID
	Flags   byte
	// State is the tracestate header, passed on unchanged ("" if none).
	State string
}

// IsValid reports whether both ids are set.
func (sc SpanContext) IsValid() bool { return sc.TraceID.IsValid() && sc.SpanID.IsValid() }

// Sampled reports whether the sampled flag is set.
func (sc SpanContext) Sampled() bool { return sc.Flags&FlagSampled != 0 }

// TraceParent formats the context as a version 00 traceparent value.
func (sc SpanContext) TraceParent() string {
	var b [55]byte
	b[0], b[1], b[2] = '0', '0', '-'
	hex.Encode(b[3:35], sc.TraceID[:])
	b[35] = '-'
	hex.Encode(b[36:52], sc.SpanID[:])
	b[52] = '-'
	hex.Encode(b[53:55], []byte{sc.Flags})
	return string(b[:])
}

// Headers returns the context as the headers to send: traceparent, and
// tracestate when there is one. It returns nil for an invalid context.
func (sc SpanContext) Headers() map[string]string {
	if !sc.IsValid() {
		return nil
	}
	h := make(map[string]string, 2)
	h[HeaderTraceParent] = sc.TraceParent()
	if sc.State != "" {
		h[HeaderTraceState] = sc.State
	}
	return h
}

// Errors of ParseTraceParent.
var (
	ErrTraceParentFormat = errors.New("traceparent: malformed")
	ErrTraceParentZero   = errors.New("traceparent: all-zero trace id or parent id")
)

// ParseTraceParent parses a traceparent header value. Version 00 must be
// exactly version-traceid-parentid-flags in lowercase hex; a later version
// may carry more fields after a dash, which are ignored (the context is
// re-emitted as version 00); version ff is invalid. The flags kept are the
// ones the bridge knows (FlagSampled, FlagRandom).
func ParseTraceParent(s string) (SpanContext, error) {
	var sc SpanContext
	if len(s) < 55 || s[2] != '-' || s[35] != '-' || s[52] != '-' {
		return sc, ErrTraceParentFormat
	}
	var ver [1]byte
	if !lowerHex(s[0:2]) || decodeHex(ver[:], s[0:2]) != nil || ver[0] == 0xff {
		return sc, ErrTraceParentFormat
	}
	if ver[0] == 0 && len(s) != 55 {
		return sc, ErrTraceParentFormat
	}
	if len(s) > 55 && s[55] != '-' {
		return sc, ErrTraceParentFormat
	}
	var flags [1]byte
	if !lowerHex(s[3:35]) || !lowerHex(s[36:52]) || !lowerHex(s[53:55]) ||
		decodeHex(sc.TraceID[:], s[3:35]) != nil || decodeHex(sc.SpanID[:], s[36:52]) != nil ||
		decodeHex(flags[:], s[53:55]) != nil {
		return SpanContext{}, ErrTraceParentFormat
	}
	if !sc.IsValid() {
		return SpanContext{}, ErrTraceParentZero
	}
	sc.Flags = flags[0] & (FlagSampled | FlagRandom)
	return sc, nil
}

// FromHeaders returns the trace context carried by h (traceparent and
// tracestate), and whether there was a valid one. An invalid traceparent
// makes the tracestate void too, as the W3C recommendation says; a
// tracestate too long or with control characters is dropped alone.
func FromHeaders(h map[string]string) (SpanContext, bool) {
	return Inbound(h[HeaderTraceParent], h[HeaderTraceState])
}

// Inbound returns the trace context of a request's traceparent and
// tracestate header values, and whether it is valid (see FromHeaders).
func Inbound(traceparent, tracestate string) (SpanContext, bool) {
	if traceparent == "" {
		return SpanContext{}, false
	}
	sc, err := ParseTraceParent(traceparent)
	if err != nil {
		return SpanContext{}, false
	}
	if validTraceState(tracestate) {
		sc.State = tracestate
	}
	return sc, true
}

// New starts a trace: a new trace id and span id, sampled.
func New() SpanContext {
	var sc SpanContext
	for !sc.TraceID.IsValid() {
		_, _ = rand.Read(sc.TraceID[:])
	}
	sc.SpanID = newSpanID()
	sc.Flags = FlagSampled | FlagRandom
	return sc
}

// NewChild returns a new span in parent's trace, with parent's flags and
// tracestate. An invalid parent gives New().
func NewChild(parent SpanContext) SpanContext {
	if !parent.IsValid() {
		return New()
	}
	child := parent
	child.SpanID = newSpanID()
	return child
}

// Continue returns the headers an upstream call sends for a new span of
// the bridge: a child of the context in h (the client's), or a new trace
// when h carries none. The result always holds a traceparent.
func Continue(h map[string]string) map[string]string {
	parent, _ := FromHeaders(h)
	return NewChild(parent).Headers()
}

// TraceIDOf returns the trace id of a traceparent value, or "" when it is
// not valid. It is for log lines.
func TraceIDOf(traceparent string) string {
	sc, err := ParseTraceParent(traceparent)
	if err != nil {
		return ""
	}
	return sc.TraceID.String()
}

func newSpanID() SpanID {
	var id SpanID
	for !id.IsValid() {
		_, _ = rand.Read(id[:])
	}
	return id
}

func lowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

func decodeHex(dst []byte, s string) error {
	if hex.DecodedLen(len(s)) != len(dst) {
		return fmt.Errorf("hex length %d", len(s))
	}
	_, err := hex.Decode(dst, []byte(s))
	return err
}

// validTraceState reports whether a tracestate value may be passed on:
// bounded, printable ASCII. Its list members are not parsed: the bridge
// adds no entry of its own and passes the value on as it came.
func validTraceState(s string) bool {
	if s == "" || len(s) > maxTraceState {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}
