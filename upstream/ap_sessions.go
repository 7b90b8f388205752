package upstream

import (
	"container/list"
	"sync"
)

// apSession is what a canonical session maps to on an Agent Protocol
// agent: the dialect's session (run_id in process, thread_id in run and
// agentic, the task in v1) and, while a turn waits for input, that turn
// and the last event id read of it.
type apSession struct {
	key    string // the canonical session
	kind   string // the dialect it belongs to
	remote string // run_id, thread_id, or the v1 task id
	turn   string // the turn waiting for input ("" when none)
	lastID uint64 // the last event id read of turn
}

// apSessions maps canonical sessions to apSession entries. It is bounded:
// past max entries the oldest is dropped, and the next request of that
// session starts afresh. Taking an entry removes it, so two concurrent
// Opens of one session never answer one waiting turn twice. It is safe for
// concurrent use.
type apSessions struct {
	mu    sync.Mutex
	max   int
	order *list.List // of *apSession, oldest first
	byKey map[string]*list.Element
}

func newAPSessions(max int) *apSessions {
	return &apSessions{max: max, order: list.New(), byKey: make(map[string]*list.Element)}
}

// put records e for its session, replacing any other entry.
func (m *apSessions) put(e *apSession) {
	if e == nil || e.key == "" {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if el, ok := m.byKey[e.key]; ok {
		m.order.Remove(el)
	}
	m.byKey[e.key] = m.order.PushBack(e)
	for m.order.Len() > m.max {
		old := m.order.Remove(m.order.Front()).(*apSession)
		delete(m.byKey, old.key)
	}
}

// take removes and returns the session's entry, or nil.
func (m *apSessions) take(key string) *apSession {
	if key == "" {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	el, ok := m.byKey[key]
	if !ok {
		return nil
	}
	m.order.Remove(el)
	delete(m.byKey, key)
	return el.Value.(*apSession)
}

// len returns the number of sessions remembered.
func (m *apSessions) len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.order.Len()
}
