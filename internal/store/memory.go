package store

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentbridge/bridge/translate"
)

// Memory is the in-process Store. The zero value is not usable; call
// NewMemory.
//
// Locking: an index of exchanges (a sync.Map) is read without locks; every
// exchange has its own mutex guarding its fields and log, so Appends to
// different exchanges never contend. One store-wide lock (mu) guards the
// alias table and the recency list and is taken by Create, Alias, Find, List,
// Len, Close and the removal of an exchange — never by Append, Events, Get,
// Update or Wait on a live exchange. Lock order: mu, then an exchange's mu.
//
// Recency: Append and Update stamp the exchange with a store-wide counter
// without touching the list. The list is kept in the order of the stamp each
// exchange had when it was (re)queued; an exchange found at the front with a
// newer stamp is moved to the back instead of being evicted. Since a stamp
// only grows, the first exchange found at the front with an unchanged stamp
// is exactly the least recently updated one, at amortised O(1) per update.
type Memory struct {
	lim    Limits
	now    func() time.Time
	closed atomic.Bool
	tick   atomic.Uint64 // recency stamps

	// index maps id to *entry. Stored to and deleted from only with mu held,
	// loaded freely.
	index sync.Map

	mu      sync.RWMutex
	aliases map[string]*entry
	lru     entry // sentinel of the recency list: lru.next is the oldest
	n       int   // exchanges stored
}

var _ Store = (*Memory)(nil)

// entry is one stored exchange with its log.
type entry struct {
	id string // immutable

	mu     sync.Mutex
	x      Exchange           // owned, deep copy; LastSeq is authoritative
	log    []*translate.Event // a ring once it holds MaxEventsPerExchange
	head   int                // index in log of the oldest event
	notify chan struct{}      // closed and cleared on change; made by waiters
	dead   bool               // removed from the store

	stamp   atomic.Uint64 // recency stamp of the last change (written under mu)
	updated atomic.Int64  // x.Updated in Unix ns, for lock-free age checks

	// Guarded by Memory.mu.
	listed     uint64 // stamp when queued in the recency list
	prev, next *entry
	keys       []string // alias keys registered to this entry
	removed    bool
}

// NewMemory returns an empty in-memory store bounded by lim (zero fields take
// their defaults). now is the clock, time.Now when nil; tests inject one to
// drive the age bound. The store starts no goroutine: age expiry happens on
// access and on Create.
func NewMemory(lim Limits, now func() time.Time) *Memory {
	if now == nil {
		now = time.Now
	}
	m := &Memory{
		lim:     lim.withDefaults(),
		now:     now,
		aliases: make(map[string]*entry),
	}
	m.lru.next, m.lru.prev = &m.lru, &m.lru
	return m
}

// Limits returns the bounds in force, defaults filled in.
func (m *Memory) Limits() Limits { return m.lim }

var (
	errNilExchange = errors.New("store: nil exchange")
	errNilEvent    = errors.New("store: nil event")
	errNilFunc     = errors.New("store: nil update func")
	errEmptyKey    = errors.New("store: empty alias key")
)

// Create implements Store.
func (m *Memory) Create(x *Exchange) error {
	if x == nil {
		return errNilExchange
	}
	if m.closed.Load() {
		return ErrClosed
	}
	now := m.now()
	e := &entry{x: m.own(x)}
	if e.x.ID == "" {
		e.x.ID = NewID()
	}
	if e.x.Created.IsZero() {
		e.x.Created = now
	}
	e.x.Updated = now
	e.x.LastSeq = 0
	e.id = e.x.ID
	e.updated.Store(now.UnixNano())

	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed.Load() {
		return ErrClosed
	}
	m.sweep(now)
	if v, ok := m.index.Load(e.id); ok {
		old := v.(*entry)
		if !m.removeIf(old, m.expired, now) {
			return ErrExists
		}
	}
	s := m.tick.Add(1)
	e.stamp.Store(s)
	e.listed = s
	m.index.Store(e.id, e)
	m.pushBack(e)
	m.n++
	for m.n > m.lim.MaxExchanges {
		m.removeIf(m.front(), unchanged, now)
	}

	x.ID, x.Created, x.Updated, x.LastSeq = e.x.ID, e.x.Created, e.x.Updated, 0
	return nil
}

// Get implements Store.
func (m *Memory) Get(id string) (*Exchange, error) {
	e, err := m.lookup(id, m.now())
	if err != nil {
		return nil, err
	}
	return m.snapshot(e)
}

// Find implements Store.
func (m *Memory) Find(key string) (*Exchange, error) {
	if m.closed.Load() {
		return nil, ErrClosed
	}
	m.mu.RLock()
	e := m.aliases[key]
	m.mu.RUnlock()
	if e == nil {
		return nil, m.gone()
	}
	if now := m.now(); m.expired(e, now) {
		m.expire(e, now)
		return nil, ErrNotFound
	}
	return m.snapshot(e)
}

// Alias implements Store.
func (m *Memory) Alias(id, key string) error {
	if key == "" {
		return errEmptyKey
	}
	e, err := m.lookup(id, m.now())
	if err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if e.removed {
		return m.gone()
	}
	m.aliases[key] = e
	if !slices.Contains(e.keys, key) {
		e.keys = append(e.keys, key)
	}
	return nil
}

// Update implements Store. fn runs with the exchange locked: Appends to the
// same exchange wait for it.
func (m *Memory) Update(id string, fn func(x *Exchange) error) error {
	if fn == nil {
		return errNilFunc
	}
	now := m.now()
	e, err := m.lookup(id, now)
	if err != nil {
		return err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.dead {
		return m.gone()
	}
	c := e.x.Clone()
	if err := fn(c); err != nil {
		return err
	}
	// fn may have kept c: store a copy of our own.
	nx := m.own(c)
	nx.ID, nx.LastSeq, nx.Updated = e.x.ID, e.x.LastSeq, now
	e.x = nx
	e.touch(m.tick.Add(1), now)
	return nil
}

// Append implements Store. It is the hot path: no store-wide lock, one
// allocation for the copy of a simple event.
func (m *Memory) Append(id string, ev *translate.Event) (uint64, error) {
	if ev == nil {
		return 0, errNilEvent
	}
	now := m.now()
	e, err := m.lookup(id, now)
	if err != nil {
		return 0, err
	}
	c := ev.Clone()
	if c.Time.IsZero() {
		c.Time = now
	}
	c.Exchange = e.id

	e.mu.Lock()
	if e.dead {
		e.mu.Unlock()
		return 0, m.gone()
	}
	seq := e.x.LastSeq + 1
	c.Seq = seq
	if max := m.lim.MaxEventsPerExchange; len(e.log) < max {
		e.log = append(e.log, c)
	} else {
		e.log[e.head] = c
		if e.head++; e.head == len(e.log) {
			e.head = 0
		}
	}
	e.x.LastSeq = seq
	if c.Kind == translate.KindState && c.State != "" {
		e.x.State = c.State
	}
	e.x.Updated = now
	e.touch(m.tick.Add(1), now)
	e.mu.Unlock()

	ev.Seq, ev.Exchange, ev.Time = seq, c.Exchange, c.Time
	return seq, nil
}

// touch records a change made under e.mu: new recency stamp and update time,
// and wakes waiters.
func (e *entry) touch(stamp uint64, now time.Time) {
	e.updated.Store(now.UnixNano())
	e.stamp.Store(stamp)
	if e.notify != nil {
		close(e.notify)
		e.notify = nil
	}
}

// Events implements Store. Logged events are never modified, so they are
// picked under the lock and copied after it.
func (m *Memory) Events(id string, after uint64) ([]*translate.Event, error) {
	e, err := m.lookup(id, m.now())
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	if e.dead {
		e.mu.Unlock()
		return nil, m.gone()
	}
	n, last := len(e.log), e.x.LastSeq
	if after >= last {
		e.mu.Unlock()
		return nil, nil
	}
	first := last - uint64(n) + 1 // seq of the oldest retained event
	if after+1 < first {
		e.mu.Unlock()
		return nil, ErrExpired
	}
	k := int(after + 1 - first)
	out := make([]*translate.Event, 0, n-k)
	for i := k; i < n; i++ {
		j := e.head + i
		if j >= n {
			j -= n
		}
		out = append(out, e.log[j])
	}
	e.mu.Unlock()
	for i, ev := range out {
		out[i] = ev.Clone()
	}
	return out, nil
}

// Wait implements Store. It blocks on a channel that the next change of the
// exchange closes; it starts no goroutine and never polls.
func (m *Memory) Wait(ctx context.Context, id string, after uint64) error {
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		e, err := m.lookup(id, m.now())
		if err != nil {
			return err
		}
		e.mu.Lock()
		if e.dead {
			e.mu.Unlock()
			return m.gone()
		}
		if e.x.LastSeq > after || e.x.State.Terminal() {
			e.mu.Unlock()
			return nil
		}
		if e.notify == nil {
			e.notify = make(chan struct{})
		}
		ch := e.notify
		e.mu.Unlock()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ch:
		}
	}
}

// List implements Store. It expires no exchange but skips expired ones.
func (m *Memory) List(limit int) []*Exchange {
	if m.closed.Load() {
		return nil
	}
	type item struct {
		e     *entry
		stamp uint64
	}
	m.mu.RLock()
	items := make([]item, 0, m.n)
	for e := m.lru.next; e != &m.lru; e = e.next {
		items = append(items, item{e, e.stamp.Load()})
	}
	m.mu.RUnlock()
	slices.SortFunc(items, func(a, b item) int {
		switch {
		case a.stamp > b.stamp:
			return -1
		case a.stamp < b.stamp:
			return 1
		}
		return 0
	})
	if limit <= 0 || limit > len(items) {
		limit = len(items)
	}
	now := m.now()
	var out []*Exchange
	for _, it := range items {
		if len(out) == limit {
			break
		}
		if m.expired(it.e, now) {
			continue
		}
		if x, err := m.snapshot(it.e); err == nil {
			out = append(out, x)
		}
	}
	return out
}

// Len implements Store; it drops expired exchanges first.
func (m *Memory) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.sweep(m.now())
	return m.n
}

// Close implements Store: it drops every exchange and wakes every waiter,
// whose Wait returns ErrClosed.
func (m *Memory) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.closed.Store(true)
	for e := m.lru.next; e != &m.lru; e = m.lru.next {
		e.mu.Lock()
		m.drop(e)
		e.mu.Unlock()
	}
	return nil
}

// own returns a deep copy of x for the store to keep, History bounded.
func (m *Memory) own(x *Exchange) Exchange {
	h := x.History
	if max := m.lim.MaxEventsPerExchange; len(h) > max {
		h = h[len(h)-max:]
	}
	c := *x
	c.History = nil
	c = *c.Clone()
	c.History = cloneMessages(h)
	return c
}

// lookup returns the live exchange id, dropping it when it has expired.
func (m *Memory) lookup(id string, now time.Time) (*entry, error) {
	v, ok := m.index.Load(id)
	if !ok {
		return nil, m.gone()
	}
	e := v.(*entry)
	if m.expired(e, now) {
		m.expire(e, now)
		return nil, ErrNotFound
	}
	return e, nil
}

// snapshot returns a copy of e's exchange.
func (m *Memory) snapshot(e *entry) (*Exchange, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.dead {
		return nil, m.gone()
	}
	return e.x.Clone(), nil
}

// gone is the error for an exchange that is not there.
func (m *Memory) gone() error {
	if m.closed.Load() {
		return ErrClosed
	}
	return ErrNotFound
}

// expired reports whether e was last updated more than MaxAge before now.
func (m *Memory) expired(e *entry, now time.Time) bool {
	return now.UnixNano()-e.updated.Load() > int64(m.lim.MaxAge)
}

// expire removes e if it is still stored and still expired.
func (m *Memory) expire(e *entry, now time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !e.removed {
		m.removeIf(e, m.expired, now)
	}
}

// sweep removes expired exchanges from the front of the recency list. The
// front is the least recently updated, so it stops at the first live one.
// mu must be held.
func (m *Memory) sweep(now time.Time) {
	for e := m.front(); e != nil && m.expired(e, now); e = m.front() {
		m.removeIf(e, m.expired, now)
	}
}

// front returns the least recently updated exchange, nil when there is none,
// requeueing the ones changed since they were queued. mu must be held.
func (m *Memory) front() *entry {
	for {
		e := m.lru.next
		if e == &m.lru {
			return nil
		}
		s := e.stamp.Load()
		if s == e.listed {
			return e
		}
		e.listed = s
		m.unlink(e)
		m.pushBack(e)
	}
}

// removeIf removes e when cond holds, checked under e's lock so that a
// concurrent Append either lands before the check or finds the exchange gone.
// It reports whether e was removed. mu must be held.
func (m *Memory) removeIf(e *entry, cond func(*entry, time.Time) bool, now time.Time) bool {
	if e == nil {
		return false
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if !cond(e, now) {
		return false
	}
	m.drop(e)
	return true
}

// unchanged reports whether e was not updated since it was queued in the
// recency list, so that it is still the least recently updated when found at
// the front. mu must be held.
func unchanged(e *entry, _ time.Time) bool { return e.stamp.Load() == e.listed }

// drop removes e, its aliases and its log, and wakes its waiters. mu and e.mu
// must be held.
func (m *Memory) drop(e *entry) {
	m.index.Delete(e.id)
	m.unlink(e)
	for _, k := range e.keys {
		if m.aliases[k] == e {
			delete(m.aliases, k)
		}
	}
	e.keys = nil
	e.removed = true
	m.n--

	e.dead = true
	e.log = nil
	if e.notify != nil {
		close(e.notify)
		e.notify = nil
	}
}

func (m *Memory) pushBack(e *entry) {
	e.prev, e.next = m.lru.prev, &m.lru
	m.lru.prev.next = e
	m.lru.prev = e
}

func (m *Memory) unlink(e *entry) {
	e.prev.next, e.next.prev = e.next, e.prev
	e.prev, e.next = nil, nil
}
