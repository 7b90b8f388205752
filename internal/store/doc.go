// Package store keeps the bridge's exchanges: one record per unit of agent
// work (an AIP task, an Agent API response, an Agent Protocol request) with
// its state, message history and ordered event log. The log is what lets the
// bridge answer AIP re-stream with lastEventSeq, Agent Protocol
// getevents?since= and SSE Last-Event-ID, and settle commands (AIP get,
// complete) that the upstream protocol lacks.
//
// Store is the interface; Memory, from NewMemory, is the in-process
// implementation used by default.
//
// # Lifetime
//
// An exchange is made by Create, which assigns its id (NewID) when the caller
// gave none. Alias registers extra lookup keys for it ("aip:task:<id>",
// "agentapi:session:<s>") that Find resolves. While the exchange runs, every
// canonical event is logged with Append, which gives it the next sequence
// number (from 1, gapless, per exchange), moves the exchange's State on a
// KindState event and wakes whoever waits in Wait. Readers replay with Events
// and follow live with Wait then Events. Update changes the record itself
// (history, meta, a state the bridge settles).
//
// An exchange leaves the store in one of three ways, and is then simply not
// found (ErrNotFound): its aliases go with it and its waiters wake.
//
//   - Count: when Create would exceed Limits.MaxExchanges, the least recently
//     updated exchange is evicted, whatever its state.
//   - Age: an exchange not updated (Create, Update, Append) for more than
//     Limits.MaxAge is dropped. Memory does this lazily, on any access to it
//     and in a sweep on each Create and Len, so it runs no goroutine; a
//     running exchange keeps itself alive by appending.
//   - Close: the whole store goes, and every method returns ErrClosed.
//
// Within an exchange the log keeps the last Limits.MaxEventsPerExchange
// events and drops older ones; History is held to the same length. A reader
// asking for events that are gone gets ErrExpired rather than a silent gap,
// so that a resuming client can be told its position is lost.
//
// # Ownership
//
// Nothing crosses the interface by reference. Create, Update and Append store
// deep copies; Get, Find, List and Events return deep copies, so callers may
// change what they get and what they gave. The only writes back are the
// fields the store assigns: Create fills in x.ID, x.Created, x.Updated and
// x.LastSeq, and Append fills in ev.Seq, ev.Exchange and a zero ev.Time.
//
// # Why the interface looks like this
//
// A shared store for several replicas (Redis) comes later, and the interface
// is cut so that it can implement each method directly:
//
//   - Values, not pointers: an exchange is a JSON document (see the tags on
//     Exchange) and events are translate.Event, which is JSON already. No
//     method hands out something whose mutation would have to reach the
//     store.
//   - Sequence numbers are assigned by the store in Append, not by the
//     caller, so that replicas appending to one exchange cannot collide
//     (an INCR, or a Lua script that increments and XADDs at once).
//   - Update takes a function, not a value: a read-modify-write that Redis
//     runs as WATCH/MULTI, retrying on conflict, which is why fn may run more
//     than once and must have no side effects.
//   - Wait only says "something newer may be there", and the caller reads it
//     with Events: it maps onto a pub/sub notification or XREAD BLOCK without
//     the store having to push events to callers.
//   - Aliases are plain keys pointing at an id (SET with the exchange's TTL);
//     bounds are what Redis provides (EXPIRE for age, XADD MAXLEN for the log,
//     a sorted set by update time for count and List).
//   - Errors are the sentinels of errors.go, so callers need not know which
//     store they have.
//
// # Concurrency
//
// Every method is safe for concurrent use. Memory keeps one mutex per
// exchange, so Append — on the path of every streamed event — contends only
// with other work on the same exchange; the store-wide lock is taken by
// Create, Alias, Find, List, Len, Close and removals. Wait blocks on a
// channel that the next change closes: it neither polls nor starts a
// goroutine, and returns when its context ends.
package store
