package upstream

import (
	"errors"
	"fmt"
	"time"

	"github.com/agentbridge/bridge/translate"
)

// ErrUnavailable is returned, wrapped, when an upstream's breaker is open or
// its concurrency bound is reached: the call was not attempted.
var ErrUnavailable = errors.New("upstream unavailable")

// ErrClosed is returned by Next after Close.
var ErrClosed = errors.New("upstream stream closed")

// Error is an upstream failure with the code the bridge reports to clients.
type Error struct {
	Code       string        // a translate.Code* value or the agent's own code
	Status     int           // the upstream HTTP status, when there was one
	RetryAfter time.Duration // from a Retry-After header or an open breaker
	Err        error
}

func (e *Error) Error() string {
	if e.Status != 0 {
		return fmt.Sprintf("upstream %s (HTTP %d): %v", e.Code, e.Status, e.Err)
	}
	return fmt.Sprintf("upstream %s: %v", e.Code, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

// Canonical returns the error as a canonical translate.Error, the form every
// downstream encoder reports in its own protocol.
func (e *Error) Canonical() *translate.Error {
	return &translate.Error{Code: e.Code, Message: e.Error(), Retryable: e.Code != translate.CodeBadRequest}
}

// RetryAfterHint returns how long the caller should wait before trying again.
func (e *Error) RetryAfterHint() time.Duration { return e.RetryAfter }
