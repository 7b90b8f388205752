package upstream

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

func (e *apSession) sessionKey() string { return e.key }
