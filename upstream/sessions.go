package upstream

import (
	"container/list"
	"sync"
)

// keyed is what a sessionMap holds: something that knows its session.
type keyed interface {
	comparable
	sessionKey() string
}

// sessionMap maps a canonical session to what a client left waiting for
// that session's next request: an AIP task awaiting input, an Agent
// Protocol turn. It is bounded (past max entries the oldest is dropped, and
// that session's next request starts afresh), and taking an entry removes
// it, so two concurrent requests of one session never continue one waiting
// exchange twice. It is safe for concurrent use.
type sessionMap[T keyed] struct {
	mu    sync.Mutex
	max   int
	order *list.List // of T, oldest first
	byKey map[string]*list.Element
}

func newSessionMap[T keyed](max int) *sessionMap[T] {
	return &sessionMap[T]{max: max, order: list.New(), byKey: make(map[string]*list.Element)}
}

// put records v for its session, replacing any other entry. Entries without
// a session are not kept: nothing could find them.
func (m *sessionMap[T]) put(v T) {
	var zero T
	if v == zero || v.sessionKey() == "" {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if el, ok := m.byKey[v.sessionKey()]; ok {
		m.order.Remove(el)
	}
	m.byKey[v.sessionKey()] = m.order.PushBack(v)
	for m.order.Len() > m.max {
		old := m.order.Remove(m.order.Front()).(T)
		delete(m.byKey, old.sessionKey())
	}
}

// take removes and returns the session's entry, or the zero T when there is
// none or when keep (if given) refuses it; a refused entry stays.
func (m *sessionMap[T]) take(session string, keep ...func(T) bool) T {
	var zero T
	if session == "" {
		return zero
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	el, ok := m.byKey[session]
	if !ok {
		return zero
	}
	v := el.Value.(T)
	for _, k := range keep {
		if !k(v) {
			return zero
		}
	}
	m.order.Remove(el)
	delete(m.byKey, session)
	return v
}

// len returns the number of sessions remembered.
func (m *sessionMap[T]) len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.order.Len()
}
