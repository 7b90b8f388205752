package downstream

import (
	"context"
	"errors"
	"time"

	"github.com/agentbridge/bridge/translate"
)

// canonicaler is implemented by upstream errors that know their canonical
// form; the interface keeps this package free of an import of upstream.
type canonicaler interface{ Canonical() *translate.Error }

// retryHinter is implemented by errors that carry a Retry-After hint.
type retryHinter interface{ RetryAfterHint() time.Duration }

// canonicalError turns any error met while calling an upstream into the
// canonical error reported to the client.
func canonicalError(err error) *translate.Error {
	var c canonicaler
	if errors.As(err, &c) {
		return c.Canonical()
	}
	var te *translate.Error
	if errors.As(err, &te) {
		return te
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return &translate.Error{Code: translate.CodeUpstreamTimeout, Message: err.Error(), Retryable: true}
	}
	return &translate.Error{Code: translate.CodeUpstreamError, Message: err.Error(), Retryable: true}
}

// retryAfter returns the wait an error suggests, or 0.
func retryAfter(err error) time.Duration {
	var h retryHinter
	if errors.As(err, &h) {
		return h.RetryAfterHint()
	}
	return 0
}

// errShuttingDown is the cause of the cancellation of exchanges still open
// when the server's drain time is over.
var errShuttingDown = errors.New("the bridge is shutting down")

// CodeShuttingDown is the error code of exchanges ended by a shutdown.
const CodeShuttingDown = "SHUTTING_DOWN"

// shuttingDown is the error reported to clients whose exchange a shutdown
// ended: retryable, against another replica or after the restart.
func shuttingDown() *translate.Error {
	return &translate.Error{Code: CodeShuttingDown, Message: errShuttingDown.Error(), Retryable: true}
}
