package upstream

import (
	"container/list"
	"sync"

	"github.com/agentbridge/bridge/translate"
	"github.com/agentbridge/bridge/translate/aip"
)

// aipTask is a task an Open left waiting on the client: its id, the state
// it settled in, and the Tracker that already turned its history into
// events, so that the next Open of the session emits only what is new.
type aipTask struct {
	session string
	id      string
	state   translate.State
	tracker *aip.Tracker
}

// aipSessions maps a session to the task its last Open left waiting
// (input-required or awaiting-completion). It is bounded: past max entries
// the oldest is dropped, and the next request of that session starts a new
// task. Taking an entry removes it, so two concurrent Opens of one session
// never drive one task (or share its Tracker): the first continues it, the
// second starts a new task. It is safe for concurrent use.
type aipSessions struct {
	mu    sync.Mutex
	max   int
	order *list.List // of *aipTask, oldest first
	byKey map[string]*list.Element
}

func newAIPSessions(max int) *aipSessions {
	return &aipSessions{max: max, order: list.New(), byKey: make(map[string]*list.Element)}
}

// put records t as the session's waiting task, replacing any other.
func (m *aipSessions) put(t *aipTask) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if el, ok := m.byKey[t.session]; ok {
		m.order.Remove(el)
	}
	m.byKey[t.session] = m.order.PushBack(t)
	for m.order.Len() > m.max {
		old := m.order.Remove(m.order.Front()).(*aipTask)
		delete(m.byKey, old.session)
	}
}

// take removes and returns the session's waiting task when it is in one of
// states (any state when none are given), else nil; a task in another state
// stays.
func (m *aipSessions) take(session string, states ...translate.State) *aipTask {
	m.mu.Lock()
	defer m.mu.Unlock()
	el, ok := m.byKey[session]
	if !ok {
		return nil
	}
	t := el.Value.(*aipTask)
	if len(states) > 0 {
		match := false
		for _, s := range states {
			match = match || t.state == s
		}
		if !match {
			return nil
		}
	}
	m.order.Remove(el)
	delete(m.byKey, session)
	return t
}

// len returns the number of waiting tasks.
func (m *aipSessions) len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.order.Len()
}
