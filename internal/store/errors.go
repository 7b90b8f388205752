package store

import "errors"

// Sentinel errors of the store. They are returned as they are, never
// wrapped, so both errors.Is and == work.
var (
	// ErrNotFound means no exchange has that id or alias key: it never
	// existed, or it was evicted by the count bound, dropped by the age
	// bound, or lost with a closed store.
	ErrNotFound = errors.New("store: exchange not found")
	// ErrExpired means the events a caller asked for (those after a given
	// sequence number) were already dropped by the per-exchange event bound;
	// the exchange itself still exists. A client resuming a stream from that
	// point cannot be served losslessly.
	ErrExpired = errors.New("store: events expired")
	// ErrExists means Create was given the id of an exchange already stored.
	ErrExists = errors.New("store: exchange exists")
	// ErrClosed is returned by every method of a store after Close.
	ErrClosed = errors.New("store: closed")
)
