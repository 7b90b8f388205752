package store

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"maps"
	"time"

	"github.com/agentbridge/bridge/translate"
)

// Exchange is one unit of agent work as the store keeps it: an AIP task, an
// Agent API response, an Agent Protocol request. Its event log is kept beside
// it and read with Store.Events; the struct itself holds only what is small
// enough to copy on every read.
//
// Values of Exchange handed to or returned by a Store are never shared with
// it: the store keeps its own deep copy, and callers may mutate what they get.
// The JSON tags are the shape a shared store persists.
type Exchange struct {
	// ID is the bridge's id of the exchange ("x_" + 16 hex digits, see
	// NewID). Create assigns one when it is empty.
	ID string `json:"id"`
	// Downstream and Upstream are the protocol names of the client side and
	// of the agent side (translate.ProtoAIP, …).
	Downstream string `json:"downstream,omitempty"`
	Upstream   string `json:"upstream,omitempty"`
	// Route names the route of the config that served the exchange.
	Route string `json:"route,omitempty"`
	// ClientID is the id the client knows the exchange by: an Agent API
	// response id, an AIP task id, an Agent Protocol request id.
	ClientID string `json:"client_id,omitempty"`
	// Session and User key the conversation the exchange belongs to.
	Session string `json:"session,omitempty"`
	User    string `json:"user,omitempty"`
	// State is the exchange's lifecycle state. Append keeps it in step with
	// the KindState events logged; Update may set it directly.
	State translate.State `json:"state,omitempty"`
	// Created is when the exchange was created; Updated when it last
	// changed (Create, Update or Append). The age bound counts from Updated.
	Created time.Time `json:"created"`
	Updated time.Time `json:"updated"`
	// Request is the request that started the exchange.
	Request *translate.Request `json:"request,omitempty"`
	// History is the conversation so far, oldest first. The store keeps at
	// most Limits.MaxEventsPerExchange messages, dropping the oldest.
	History []translate.Message `json:"history,omitempty"`
	// LastSeq is the sequence number of the last event appended, 0 before
	// the first. Only Append changes it.
	LastSeq uint64 `json:"last_seq,omitempty"`
	// Meta holds small free-form values: the upstream's task id, a stop
	// endpoint, and so on.
	Meta map[string]string `json:"meta,omitempty"`
}

// Clone returns a deep copy of x that shares no memory with it.
func (x *Exchange) Clone() *Exchange {
	c := *x
	c.Request = cloneRequest(x.Request)
	c.History = cloneMessages(x.History)
	c.Meta = maps.Clone(x.Meta)
	return &c
}

// NewID returns a fresh exchange id: "x_" followed by 16 random hex digits.
func NewID() string {
	var b [8]byte
	rand.Read(b[:]) // never fails (crypto/rand, Go 1.24+)
	var s [2 + 2*len(b)]byte
	s[0], s[1] = 'x', '_'
	hex.Encode(s[2:], b[:])
	return string(s[:])
}

// The defaults of Limits, used for every field left zero (or negative).
const (
	DefaultMaxExchanges         = 10000
	DefaultMaxAge               = time.Hour
	DefaultMaxEventsPerExchange = 10000
)

// Limits bounds a store. A zero or negative field takes its default.
type Limits struct {
	// MaxExchanges is how many exchanges the store holds at most; creating
	// one more evicts the least recently updated.
	MaxExchanges int
	// MaxAge is how long an exchange is kept after its last update.
	MaxAge time.Duration
	// MaxEventsPerExchange is how many events an exchange's log keeps, the
	// oldest being dropped first; it bounds History too.
	MaxEventsPerExchange int
}

// withDefaults returns l with every unset field at its default.
func (l Limits) withDefaults() Limits {
	if l.MaxExchanges <= 0 {
		l.MaxExchanges = DefaultMaxExchanges
	}
	if l.MaxAge <= 0 {
		l.MaxAge = DefaultMaxAge
	}
	if l.MaxEventsPerExchange <= 0 {
		l.MaxEventsPerExchange = DefaultMaxEventsPerExchange
	}
	return l
}

// Store keeps exchanges and their event logs. Implementations are safe for
// concurrent use. Nothing passed in is retained and nothing returned is
// shared: every Exchange and Event crosses the interface as a copy, so an
// implementation may keep them in another process.
//
// Methods that take an id return ErrNotFound when no live exchange has it,
// and every method returns ErrClosed after Close.
type Store interface {
	// Create stores a copy of x. It assigns x.ID with NewID when empty, sets
	// x.Created (when zero) and x.Updated to the store's clock and x.LastSeq
	// to 0 (the log starts empty), writing these back to x. It returns
	// ErrExists when an exchange with that id is stored.
	Create(x *Exchange) error
	// Get returns a copy of the exchange with that id.
	Get(id string) (*Exchange, error)
	// Find returns a copy of the exchange that alias key points at.
	Find(key string) (*Exchange, error)
	// Alias makes key ("aip:task:<id>", "agentapi:session:<s>") find the
	// exchange id. A key points at one exchange: aliasing a key again moves
	// it, so a session key follows the latest exchange of the session. Keys
	// go with their exchange when it is evicted or expires.
	Alias(id, key string) error
	// Update runs fn on a copy of the exchange and stores the copy if fn
	// returns nil; fn's error is returned as is. It is an atomic
	// read-modify-write: no other change to the exchange falls in between.
	// fn must be quick, must not call the store, and must be free of side
	// effects besides changing x: a shared store may run it more than once
	// (optimistic concurrency). ID and LastSeq cannot be changed by fn;
	// Updated is set by the store. Update wakes waiters.
	Update(id string, fn func(x *Exchange) error) error
	// Append logs a copy of ev as the exchange's next event and returns its
	// sequence number. It sets ev.Seq (LastSeq+1), ev.Exchange and, when
	// zero, ev.Time on the caller's ev as on the stored copy; moves the
	// exchange to ev.State when ev is a KindState event; sets Updated; drops
	// the oldest event when the log is full; and wakes waiters.
	Append(id string, ev *translate.Event) (uint64, error)
	// Events returns copies of the logged events with Seq > after, oldest
	// first (nil when there are none). It returns ErrExpired when some of
	// them were already dropped by the per-exchange bound.
	Events(id string, after uint64) ([]*translate.Event, error)
	// Wait blocks until the exchange has an event with Seq > after, or is in
	// a terminal state (so that nothing newer will come), and then returns
	// nil. It returns ctx.Err() when ctx ends first (or has ended when Wait
	// is called), and ErrNotFound when the exchange goes away meanwhile. It
	// is meant to be followed by Events.
	Wait(ctx context.Context, id string, after uint64) error
	// List returns copies of at most limit exchanges (all when limit <= 0),
	// the most recently updated first. Event logs are not included.
	List(limit int) []*Exchange
	// Len returns the number of exchanges stored.
	Len() int
	// Close releases the store and wakes every waiter. It is safe to call
	// more than once.
	Close() error
}

func cloneRequest(r *translate.Request) *translate.Request {
	if r == nil {
		return nil
	}
	c := *r
	c.Input = cloneMessages(r.Input)
	c.Ext.Raw = cloneBytes(r.Ext.Raw)
	return &c
}

func cloneMessages(ms []translate.Message) []translate.Message {
	if ms == nil {
		return nil
	}
	out := make([]translate.Message, len(ms))
	for i := range ms {
		out[i] = ms[i]
		out[i].Parts = cloneParts(ms[i].Parts)
		out[i].Ext.Raw = cloneBytes(ms[i].Ext.Raw)
	}
	return out
}

func cloneParts(ps []translate.Part) []translate.Part {
	if ps == nil {
		return nil
	}
	out := make([]translate.Part, len(ps))
	for i := range ps {
		out[i] = ps[i]
		out[i].Data = cloneBytes(ps[i].Data)
		out[i].Meta = cloneBytes(ps[i].Meta)
	}
	return out
}

func cloneBytes(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append([]byte(nil), b...)
}
